"""`SELECT * FROM lapras.linear_regression(...)`: parse the call, charge the ledger, run, store, replay.

A released regression is stored with its epoch; the same call again in that epoch replays the stored
coefficients instead of drawing new noise (a released quantity is never re-noised).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg

from lapras.engine import Engine
from lapras.regression.service import COLUMNS, run_regression_call
from lapras.regression.sqlcall import RegressionCall, parse_regression_call

from ..ops.config import Config
from .service_api import ColumnDesc, QueryResult

# Share of the epoch's regression budget one call takes when it names no epsilon/delta.
DEFAULT_CALL_SHARE = 0.5

_DDL = """
CREATE SCHEMA IF NOT EXISTS lapras;
CREATE TABLE IF NOT EXISTS lapras.regression_answers (
    epoch_id bigint NOT NULL,
    call_key text NOT NULL,
    rows jsonb NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (epoch_id, call_key)
);
"""


def _key(call: RegressionCall) -> str:
    return json.dumps([call.schema or "", call.table, call.y, list(call.xs), call.method, call.epsilon,
                       call.delta], separators=(",", ":"))


class RegressionEndpoint:
    """Answers lapras.linear_regression calls for the DP service (synchronous; run in a thread)."""

    def __init__(self, cfg: Config, upstream_dsn: str, engine: Engine) -> None:
        self.cfg = cfg
        self.dsn = upstream_dsn
        self.engine = engine
        self._parsed: dict[str, RegressionCall | None] = {}
        # One transaction under a lock timeout: a session stuck holding the set-up lock gives a clear error
        # at start-up instead of a proxy that hangs (the lock lives in the upstream database, which the
        # catalog reader role cannot connect to).
        with psycopg.connect(upstream_dsn) as conn:
            conn.execute("SET LOCAL lock_timeout = '60s'")
            try:
                conn.execute("SELECT pg_advisory_xact_lock(74737302)")
            except psycopg.errors.LockNotAvailable:
                raise psycopg.errors.LockNotAvailable(
                    "the regression set-up lock (advisory lock 74737302 in the upstream database) was held by "
                    "another session for more than 60 s; end that session or wait, then start again") from None
            conn.execute(_DDL)

    def call_of(self, sql: str) -> RegressionCall | None:
        if sql not in self._parsed:
            if len(self._parsed) > 1024:
                self._parsed.clear()
            self._parsed[sql] = parse_regression_call(sql)
        return self._parsed[sql]

    def matches(self, sql: str) -> bool:
        return "linear_regression" in sql.lower() and self.call_of(sql) is not None

    def describe(self, sql: str) -> tuple[list[int], list[ColumnDesc]]:
        self.call_of(sql)  # raises the call's own errors (42601/22023) at Describe time
        return [], [ColumnDesc(n, oid) for n, oid in COLUMNS]

    @contextmanager
    def _conn(self) -> Iterator[psycopg.Connection[Any]]:
        with psycopg.connect(self.dsn) as conn:
            yield conn

    def execute(self, sql: str, user: str) -> QueryResult:
        call = self.call_of(sql)
        assert call is not None
        epoch = self.engine.ledger.current_epoch()
        if epoch is None:
            epoch = self.engine.new_epoch(expected_current=None)
        key = _key(call)
        cols = [ColumnDesc(n, oid) for n, oid in COLUMNS]
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            row = conn.execute("SELECT rows FROM lapras.regression_answers WHERE epoch_id = %s AND call_key = %s",
                               (epoch.id, key)).fetchone()
        if row is not None:
            return QueryResult(cols, [tuple(r) for r in row[0]], f"SELECT {len(row[0])}",
                               ["lapras: replayed the regression released earlier in this epoch"])
        eps_r, delta_r = epoch.spec.regression_epsilon, epoch.spec.regression_delta

        def charge(cost: Any) -> None:
            self.engine.ledger.spend_regression(epoch.id, cost.eps, cost.delta, note=call.method)

        result = run_regression_call(call, self.cfg.catalog, self._conn, charge=charge,
                                     default_epsilon=eps_r * DEFAULT_CALL_SHARE,
                                     default_delta=delta_r * DEFAULT_CALL_SHARE)
        rows = [list(r) for r in result.rows]
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute("INSERT INTO lapras.regression_answers (epoch_id, call_key, rows) VALUES (%s, %s, %s) "
                         "ON CONFLICT DO NOTHING", (epoch.id, key, json.dumps(rows)))
            stored = conn.execute("SELECT rows FROM lapras.regression_answers WHERE epoch_id = %s AND "
                                  "call_key = %s", (epoch.id, key)).fetchone()
        # A concurrent identical call may have stored first: serve what is stored, never two releases.
        final = stored[0] if stored is not None else rows
        return QueryResult(cols, [tuple(r) for r in final], f"SELECT {len(final)}",
                           [f"lapras: regression ({call.method}) cost epsilon={result.cost.eps:.4g} "
                            f"delta={result.cost.delta:.3g} from the regression budget"])
