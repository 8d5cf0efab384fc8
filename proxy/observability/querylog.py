"""Structured query log: one JSON line per statement on the `lapras.queries` logger, never a value.

A line says who asked what (canonical query ids, not SQL text, whose literals the operator may not want
in logs), what happened (outcome, SQLSTATE), what it cost and how long it took. `log_query` takes no
argument that could carry an answer, so an exact aggregate cannot reach the log by mistake.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import sys
import time
from collections.abc import Sequence
from typing import IO, TYPE_CHECKING

if TYPE_CHECKING:
    from .metrics import ProxyMetrics

LOGGER_NAME = "lapras.queries"
log = logging.getLogger(LOGGER_NAME)
# Off until configure() ([server] query_log): otherwise every statement would reach the application log.
log.propagate = False
log.setLevel(logging.WARNING)

OUTCOMES = ("answered", "from_p", "free", "refused", "error", "metadata", "cancelled")
# The engine's statement outcomes (lapras.engine.Answer.outcome) in the log's and the metrics' words.
ENGINE_OUTCOMES = {"bad": "answered", "good": "from_p", "repeat": "free", "free_after_stop": "free",
                   "zero": "free"}
_SQLSTATE_CHARS = set("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ")


def query_id(canonical_key: str) -> str:
    """Short stable id of a canonical query key (equal keys, equal ids, across processes)."""
    return hashlib.sha256(canonical_key.encode("utf-8")).hexdigest()[:16]


def _number(value: float | None, name: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    return float(value)


def build_record(user: str, outcome: str, latency_ms: float, *, query_ids: Sequence[str] = (),
                 sqlstate: str | None = None, mu: float | None = None, epsilon: float | None = None,
                 delta: float | None = None, session: int | None = None, kind: str | None = None,
                 ts: float | None = None) -> dict[str, object]:
    """The record for one statement, validated so that nothing but ids, codes and costs gets in."""
    if outcome not in OUTCOMES:
        raise ValueError(f"outcome must be one of {OUTCOMES}, got {outcome!r}")
    if sqlstate is not None and (len(sqlstate) != 5 or not set(sqlstate) <= _SQLSTATE_CHARS):
        raise ValueError(f"sqlstate must be a 5-character SQLSTATE, got {sqlstate!r}")
    for qid in query_ids:
        if not (isinstance(qid, str) and len(qid) == 16 and set(qid) <= set("0123456789abcdef")):
            raise ValueError(f"query ids come from query_id(); got {qid!r}")
    record: dict[str, object] = {
        "ts": round(time.time() if ts is None else ts, 3),
        "user": str(user),
        "outcome": outcome,
        "latency_ms": round(_number(latency_ms, "latency_ms") or 0.0, 3),
    }
    if query_ids:
        record["query_ids"] = list(query_ids)
    if sqlstate:
        record["sqlstate"] = sqlstate
    for name, value in (("mu", mu), ("epsilon", epsilon), ("delta", delta)):
        checked = _number(value, name)
        if checked is not None:
            record[name] = checked
    if session is not None:
        record["session"] = int(session)
    if kind is not None:
        record["kind"] = str(kind)[:32]
    return record


def log_query(user: str, outcome: str, latency_ms: float, *, query_ids: Sequence[str] = (),
              sqlstate: str | None = None, mu: float | None = None, epsilon: float | None = None,
              delta: float | None = None, session: int | None = None, kind: str | None = None) -> None:
    """Emit one line for one finished statement (spend is the cost charged by this statement, 0 if free)."""
    if not log.isEnabledFor(logging.INFO):
        return
    record = build_record(user, outcome, latency_ms, query_ids=query_ids, sqlstate=sqlstate, mu=mu,
                          epsilon=epsilon, delta=delta, session=session, kind=kind)
    log.info(json.dumps(record, separators=(",", ":"), sort_keys=True))


def finish_statement(metrics: ProxyMetrics | None, user: str, outcome: str, started: float, *,
                     query_keys: Sequence[str] = (), sqlstate: str | None = None, mu: float | None = None,
                     epsilon: float | None = None, delta: float | None = None, session: int | None = None,
                     kind: str | None = None) -> None:
    """The one call the server makes per finished statement: metrics and the query-log line.

    `started` is the `time.perf_counter()` reading when the statement arrived; `outcome` may be one of
    OUTCOMES or an engine outcome (bad, good, repeat, ...); `query_keys` are canonical LinearQuery keys.
    """
    latency_s = time.perf_counter() - started
    outcome = ENGINE_OUTCOMES.get(outcome, outcome)
    if metrics is not None:
        metrics.observe_query(outcome, latency_s, sqlstate)
    if log.isEnabledFor(logging.INFO):  # the per-statement path stays lean when the log is off
        log_query(user, outcome, latency_s * 1000, query_ids=[query_id(k) for k in query_keys],
                  sqlstate=sqlstate, mu=mu, epsilon=epsilon, delta=delta, session=session, kind=kind)


class _MessageOnly(logging.Formatter):
    """The message is already a JSON object: print it alone so each line parses as JSON."""

    def format(self, record: logging.LogRecord) -> str:
        return record.getMessage()


def configure(target: str | IO[str] | None = None) -> logging.Handler:
    """Send query lines to a file path or stream (default stderr), one JSON object per line, not propagated."""
    handler: logging.Handler
    if isinstance(target, str):
        # Other analysts' statements and outcomes are a side channel: a new log is readable by the
        # service account only (an existing file keeps the mode the operator gave it).
        os.close(os.open(target, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600))
        handler = logging.FileHandler(target, encoding="utf-8")
    else:
        handler = logging.StreamHandler(target or sys.stderr)
    handler.setFormatter(_MessageOnly())
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    # Keep query lines out of the human-readable application log (different format, own destination).
    log.propagate = False
    return handler


def reconfigure(query_log: str) -> None:
    """Apply a reloaded ``[server] query_log``: the old destination closed, then the new one ("stderr", a
    file path) opened, or the log turned off ("")."""
    for handler in list(log.handlers):
        log.removeHandler(handler)
        handler.close()
    if query_log:
        configure(None if query_log == "stderr" else query_log)
    else:
        log.setLevel(logging.WARNING)
