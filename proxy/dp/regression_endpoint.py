"""`SELECT * FROM lapras.linear_regression(...)`: parse the call, check the budget, run, then charge and
store in one ledger transaction; replay.

A released regression is stored with its epoch, in the transaction that charges it; the same call again in
that epoch (any spelling with the same canonical form: default epsilon written out, regressors reordered)
replays the stored coefficients instead of drawing new noise (a released quantity is never re-noised).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg

from lapras.engine import Engine
from lapras.ledger.base import StaleEpoch, check_regression
from lapras.mechanisms import Cost
from lapras.regression.service import (
    COLUMNS,
    INTERCEPT,
    call_key,
    canonical_call,
    check_columns,
    run_regression_call,
)
from lapras.regression.sqlcall import RESULT_COLUMNS, RegressionCall, parse_regression_call
from pgcore.identifiers import qualified
from pgcore.pgtypes import TEXT

from ..config import Config
from .service_api import ColumnDesc, QueryResult

# Share of the epoch's regression budget one call takes when it names no epsilon/delta.
DEFAULT_CALL_SHARE = 0.5

class RegressionEndpoint:
    """Answers lapras.linear_regression calls for the DP service (synchronous; run in a thread)."""

    def __init__(self, cfg: Config, upstream_dsn: str, engine: Engine) -> None:
        self.cfg = cfg
        self.dsn = upstream_dsn
        self.engine = engine
        self._parsed: dict[str, RegressionCall | None] = {}

    def call_of(self, sql: str) -> RegressionCall | None:
        if sql not in self._parsed:
            if len(self._parsed) > 1024:
                self._parsed.clear()
            self._parsed[sql] = parse_regression_call(sql)
        return self._parsed[sql]

    def matches(self, sql: str) -> bool:
        return "linear_regression" in sql.lower() and self.call_of(sql) is not None

    def describe(self, sql: str) -> tuple[list[int], list[ColumnDesc]]:
        call = self.call_of(sql)  # raises the call's own errors (42601/22023) at Describe time
        assert call is not None
        return [], _columns(call)

    def explain(self, sql: str) -> QueryResult:
        """EXPLAIN of a call: the method, the columns and what it would cost now (or that it replays a
        release of this epoch); nothing is read, drawn or charged. Public quantities only."""
        call = self.call_of(sql)
        assert call is not None
        ledger = self.engine.ledger
        epoch = ledger.current_epoch()
        catalog = self.engine.catalog_of_epoch(epoch.id) if epoch is not None else self.engine.catalog
        spec = epoch.spec if epoch is not None else None
        eps_r = spec.regression_epsilon if spec is not None else 0.0
        delta_r = spec.regression_delta if spec is not None else 0.0
        canon = canonical_call(call, catalog, eps_r * DEFAULT_CALL_SHARE, delta_r * DEFAULT_CALL_SHARE)
        table = catalog.table(canon.table, canon.schema)
        assert table is not None
        check_columns(table, canon.y, canon.xs)  # 42703 / 22023 as the call itself would raise them
        lines = [f"DP linear regression ({canon.method}) of {canon.y} on {', '.join(call.xs)} + intercept over "
                 f"{qualified(table.schema, table.name)}",
                 "  rows: those with no NULL among these columns, each value clamped to its declared domain"]
        if epoch is not None and ledger.regression_answer(epoch.id, call_key(canon)) is not None:
            lines.append("  released earlier in this epoch: replayed, no charge")
        else:
            lines.append(f"  cost: epsilon = {canon.epsilon:.4g}, delta = {canon.delta:.3g}, from the epoch's "
                         f"regression budget (epsilon {eps_r:.4g}, delta {delta_r:.3g})")
            if epoch is not None:
                lines.append(f"  regression budget spent this epoch: epsilon = {epoch.regression_epsilon_spent:.4g}, "
                             f"delta = {epoch.regression_delta_spent:.3g}")
        return QueryResult([ColumnDesc("QUERY PLAN", TEXT)], [(ln,) for ln in lines], "EXPLAIN")

    @contextmanager
    def _conn(self) -> Iterator[psycopg.Connection[Any]]:
        """A connection of the call's own. Its read is not cancelled when the client stops waiting: a read
        stopped after it began would escape its charge (``lapras.read_guard``), so it runs to its end and
        commits, and a retry is a free replay."""
        with psycopg.connect(self.dsn) as conn:
            yield conn

    def execute(self, sql: str, user: str) -> QueryResult:
        call = self.call_of(sql)
        assert call is not None
        ledger = self.engine.ledger
        epoch = ledger.current_epoch()
        if epoch is None:
            epoch = self.engine.new_epoch(expected_current=None)
        eps_r, delta_r = epoch.spec.regression_epsilon, epoch.spec.regression_delta
        # Planned over the epoch's catalog (its values_from lists), as every statement of the epoch is.
        catalog = self.engine.catalog_of_epoch(epoch.id)
        canon = canonical_call(call, catalog, eps_r * DEFAULT_CALL_SHARE, delta_r * DEFAULT_CALL_SHARE)
        key = call_key(canon)
        cols = _columns(call)
        stored = ledger.regression_answer(epoch.id, key)
        if stored is not None:
            rows = _in_call_order(stored, call)
            return QueryResult(cols, rows, f"SELECT {len(rows)}",
                               ["lapras: replayed the regression released earlier in this epoch"])
        epoch_id = epoch.id

        def admit(cost: Cost) -> None:
            current = ledger.current_epoch()
            if current is None or current.id != epoch_id:
                raise StaleEpoch(epoch_id)
            check_regression(current, cost.eps or 0.0, cost.delta or 0.0)

        bounded = getattr(self.engine.exact, "bounded_table", None)
        result = run_regression_call(canon, catalog, self._conn, admit=admit,
                                     default_epsilon=eps_r * DEFAULT_CALL_SHARE,
                                     default_delta=delta_r * DEFAULT_CALL_SHARE,
                                     rows_of=(lambda t: bounded(t, epoch_id)) if bounded is not None else None)
        # The spend and the released rows commit together; a concurrent identical call may have committed
        # first, and then its release is the answer (never two releases of one call).
        final, _ = ledger.commit_regression(epoch_id, key, result.cost.eps or 0.0, result.cost.delta or 0.0,
                                            [list(r) for r in result.rows], note=call.method)
        rows = _in_call_order(final, call)
        return QueryResult(cols, rows, f"SELECT {len(rows)}",
                           [f"lapras: regression ({call.method}) cost epsilon={result.cost.eps:.4g} "
                            f"delta={result.cost.delta:.3g} from the regression budget"])


def _columns(call: RegressionCall) -> list[ColumnDesc]:
    """The result columns the call's SELECT lists (all of them for ``SELECT *``)."""
    by_name = dict(COLUMNS)
    return [ColumnDesc(n, by_name[n]) for n in (call.select or RESULT_COLUMNS)]


def _in_call_order(rows: list[list[Any]], call: RegressionCall) -> list[tuple[Any, ...]]:
    """Stored rows (canonical: regressors sorted) in the order the call listed its regressors, each
    projected on the columns its SELECT lists."""
    order = {name: i for i, name in enumerate((INTERCEPT, *call.xs))}
    ordered = sorted((tuple(r) for r in rows), key=lambda r: order.get(r[0], len(order)))
    if not call.select:
        return ordered
    index = [RESULT_COLUMNS.index(n) for n in call.select]
    return [tuple(r[i] for i in index) for r in ordered]
