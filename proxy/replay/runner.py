"""`lapras-proxy replay`: send a production query log through a running proxy with real client sessions.

Each statement of the log goes, in log order, to one of N client connections (psycopg 3, simple query
protocol, autocommit), optionally paced by the log's own inter-arrival times. The outcome of every
statement is read from what the proxy returns: rows plus the provenance NOTICE that the opt-in session
setting `lapras.show_stderr` adds (answered with fresh noise, from the prediction P, free), or an
ErrorResponse (refused, with its SQLSTATE). A separate session samples `SHOW lapras.budget`, which spends
nothing, to draw the budget burn over the stream. A lost connection (the proxy restarted) is an error for
the statement in flight; the client reconnects and goes on.
"""

from __future__ import annotations

import ast
import asyncio
import json
import re
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql as pgsql
from tqdm import tqdm

from parser.semantics.zoned_text import untagged
from predictor.logs import read_log

# Statement-level outcomes, cheapest last; a statement whose queries mix outcomes gets the costliest one.
OUTCOMES = ("answered", "from_p", "free", "refused", "error")
_OUTCOME_WORDS = {
    "answered": "answered", "fresh": "answered", "noised": "answered", "measured": "answered",
    "from_p": "from_p", "p": "from_p", "predicted": "from_p", "mm": "from_p", "matrix": "from_p",
    "free": "free", "cached": "free", "cache": "free", "reused": "free", "stored": "free", "derived": "free",
    # The engine's statement outcomes: bad = fresh noise, good = P's release or free estimates.
    "bad": "answered", "good": "from_p", "repeat": "free", "free_after_stop": "free", "zero": "free",
}
_OUTCOME_RX = re.compile(r"\b(?:outcome|provenance|source)\s*[=:]\s*\"?([A-Za-z_]+)", re.IGNORECASE)
_STDERR_RX = re.compile(r"\b(?:stderrs?|standard error|se)\s*[=:]\s*(?:\[([^\]]*)\]|([-+0-9.eE]+|nan|inf))",
                        re.IGNORECASE)
_NUMBER_RX = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
CONNECTION_LOST = "08006"


class StopReplay(Exception):
    """Raised by an `on_result` callback to end the replay early (not an abort)."""


@dataclass(frozen=True)
class Statement:
    """One statement to replay: seconds since the first statement of the log, the logged user, the SQL."""

    offset_s: float
    user: str | None
    sql: str


@dataclass
class StatementResult:
    """What the proxy did with one statement of the stream."""

    index: int
    client: int
    outcome: str
    latency_ms: float
    sqlstate: str | None = None
    message: str | None = None
    stderrs: list[float] = field(default_factory=list)
    query_outcomes: list[str] = field(default_factory=list)
    rows: list[tuple[Any, ...]] | None = None


@dataclass
class ReplayResult:
    """The whole run: per-statement results in stream order, budget samples, wall time."""

    statements: list[Statement]
    results: list[StatementResult]
    budget: list[tuple[int, float]]  # (statements finished, remaining budget)
    wall_s: float
    clients: int
    speed: float
    aborted: str | None = None


@dataclass(frozen=True)
class ReplayOptions:
    """Where and how to replay."""

    host: str
    port: int
    user: str = "analyst"
    password: str | None = "lapras"
    dbname: str = "adult"
    clients: int = 4
    speed: float = 0.0
    budget_every: int = 0          # 0: about 100 samples over the stream
    keep_rows: bool = False
    show_stderr: bool = True
    reconnect_timeout_s: float = 30.0
    statement_timeout_s: float = 120.0

    def conninfo(self) -> str:
        pw = f" password={self.password}" if self.password is not None else ""
        return (f"host={self.host} port={self.port} user={self.user} dbname={self.dbname}{pw} "
                f"sslmode=disable connect_timeout=10 application_name=lapras-replay")


def load_statements(path: str | Path, fmt: str = "auto", prefix: str | None = None,
                    limit: int | None = None) -> list[Statement]:
    """Read a log with the predictor's readers; offsets come from the log's timestamps (0 when absent)."""
    logged, _stats = read_log(path, fmt, prefix)
    out: list[Statement] = []
    first: datetime | None = None
    for entry in logged:
        if first is None and entry.ts is not None:
            first = entry.ts
        offset = (entry.ts - first).total_seconds() if entry.ts is not None and first is not None else 0.0
        # A pg_stat_statements line stands for `calls` executions; replay each of them.
        for _ in range(max(1, entry.calls)):
            out.append(Statement(offset_s=max(0.0, offset), user=entry.user, sql=entry.sql))
            if limit is not None and len(out) >= limit:
                return out
    return out


def parse_provenance(notices: Iterable[str]) -> tuple[list[str], list[float]]:
    """Outcomes and standard errors from the proxy's `lapras.show_stderr` NOTICEs
    (`lapras: outcome=bad stderr=[count: 25.7, 25.7; avg: 0.31, 0.29] cost=...`; a bare `stderr=1.5` is
    read too)."""
    outcomes: list[str] = []
    stderrs: list[float] = []
    for text in notices:
        for word in _OUTCOME_RX.findall(text):
            outcomes.append(_OUTCOME_WORDS.get(word.lower(), word.lower()))
        for listed, single in _STDERR_RX.findall(text):
            # `stderr=[count: 25.7, 25.7; avg: 0.31, 0.29]`: per column, its name before the last colon
            numbers = [n for part in listed.split(";") for n in _NUMBER_RX.findall(part.rsplit(":", 1)[-1])]
            for num in (numbers if listed else [single]):
                try:
                    stderrs.append(float(num))
                except ValueError:
                    continue
    return outcomes, stderrs


def statement_outcome(query_outcomes: Sequence[str]) -> str:
    """The costliest outcome among a statement's queries ("answered" when the proxy said nothing)."""
    for name in ("answered", "from_p", "free"):
        if name in query_outcomes:
            return name
    return "answered"


def _number(cell: Any) -> float | None:
    if isinstance(cell, int | float) and not isinstance(cell, bool):
        return float(cell)
    m = _NUMBER_RX.search(str(cell))
    return float(m.group(0)) if m else None


def _flatten(prefix: str, value: Any, out: dict[str, Any]) -> None:
    # A nested report may arrive as JSON or as a Python dict's text; flatten it to dotted keys.
    if isinstance(value, str) and value[:1] in "{[":
        for decode in (json.loads, ast.literal_eval):
            try:
                value = decode(value)
                break
            except (ValueError, SyntaxError):
                continue
    if isinstance(value, dict):
        for k, v in value.items():
            _flatten(f"{prefix}.{k}" if prefix else str(k), v, out)
    else:
        out[prefix.lower()] = value


def _key_rank(key: str) -> tuple[int, int]:
    last = key.rsplit(".", 1)[-1]
    if key == "remaining":
        return (0, 0)
    if "epsilon" in key:
        return (1, len(key))
    if "mu" in key.split(".") or last == "mu" or "_mu" in key:
        return (2, len(key))
    return (3, len(key))


def parse_budget(description: Sequence[Any] | None, rows: Sequence[Sequence[Any]] | None) -> float | None:
    """Remaining budget from `SHOW lapras.budget`: key/value rows (possibly nested reports; the key naming
    *remaining*, epsilon preferred), a column named *remaining*, or else the first number of the first row."""
    if not rows:
        return None
    names = [getattr(d, "name", str(d)).lower() for d in (description or [])]
    if len(names) == 2 and all(len(r) == 2 for r in rows):
        flat: dict[str, Any] = {}
        for k, v in rows:
            _flatten(str(k), v, flat)
        keys = sorted((k for k in flat if "remaining" in k and "regression" not in k), key=_key_rank)
        for k in keys:
            value = _number(flat[k])
            if value is not None:
                return value
    first = list(rows[0])
    for i, name in enumerate(names):
        if "remaining" in name and i < len(first):
            return _number(first[i])
    for cell in first:
        value = _number(cell)
        if value is not None:
            return value
    return None


class _Client:
    """One client session with its own connection, reconnecting after the proxy or the network drops it."""

    def __init__(self, number: int, opts: ReplayOptions) -> None:
        self.number = number
        self.opts = opts
        self.conn: psycopg.AsyncConnection[Any] | None = None
        self.notices: list[str] = []
        self.zone: str | None = None  # the TimeZone this client last SET (None: the connection's default)

    async def connect(self) -> None:
        deadline = time.monotonic() + self.opts.reconnect_timeout_s
        delay = 0.05
        while True:
            try:
                conn = await psycopg.AsyncConnection.connect(self.opts.conninfo(), autocommit=True)
                break
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(delay)
                delay = min(1.0, delay * 2)
        conn.add_notice_handler(lambda diag: self.notices.append(diag.message_primary or ""))
        if self.opts.show_stderr:
            try:
                await conn.execute("SET lapras.show_stderr = on")
            except psycopg.Error:
                # An older proxy without provenance: outcomes fall back to answered/refused.
                pass
        self.conn = conn
        self.zone = None

    async def run(self, index: int, stmt: Statement) -> StatementResult:
        if self.conn is None or self.conn.closed:
            await self.connect()
        assert self.conn is not None
        self.notices.clear()
        # A statement recorded with its session's TimeZone (``zoned_text``: the proxy's history) runs in it, as
        # it was asked; an untagged one after a zoned one runs in UTC again.
        zone, text = untagged(stmt.sql)
        t0 = time.perf_counter()
        try:
            if zone != self.zone:
                await self.conn.execute(pgsql.SQL("SET TIME ZONE {}").format(pgsql.Literal(zone or "UTC")))
                self.zone = zone
            cur = await asyncio.wait_for(self.conn.execute(text.encode("utf-8")),
                                         self.opts.statement_timeout_s)
            rows: list[tuple[Any, ...]] = []
            while True:
                if cur.description is not None:
                    rows.extend(await cur.fetchall())
                if not cur.nextset():
                    break
        except psycopg.Error as exc:
            latency = (time.perf_counter() - t0) * 1000
            state = exc.sqlstate or (CONNECTION_LOST if self.conn.closed else None)
            if self.conn.closed:
                self.conn = None
                return StatementResult(index, self.number, "error", latency, state, str(exc).strip()[:200])
            outcome = "refused" if exc.sqlstate else "error"
            return StatementResult(index, self.number, outcome, latency, state, _primary(exc))
        except TimeoutError:
            latency = (time.perf_counter() - t0) * 1000
            await self.close()
            return StatementResult(index, self.number, "error", latency, "57014", "client-side timeout")
        latency = (time.perf_counter() - t0) * 1000
        query_outcomes, stderrs = parse_provenance(self.notices)
        return StatementResult(index, self.number, statement_outcome(query_outcomes), latency,
                               stderrs=stderrs, query_outcomes=query_outcomes,
                               rows=rows if self.opts.keep_rows else None)

    async def close(self) -> None:
        if self.conn is not None:
            try:
                await self.conn.close()
            except Exception:
                pass
            self.conn = None


def _primary(exc: psycopg.Error) -> str:
    diag = getattr(exc, "diag", None)
    text = diag.message_primary if diag is not None and diag.message_primary else str(exc)
    return text.strip()[:200]


async def _sample_budget(opts: ReplayOptions) -> float | None:
    try:
        async with await psycopg.AsyncConnection.connect(opts.conninfo(), autocommit=True) as conn:
            cur = await conn.execute("SHOW lapras.budget")
            return parse_budget(cur.description, await cur.fetchall())
    except psycopg.Error:
        return None


async def replay_async(statements: Sequence[Statement], opts: ReplayOptions, progress: bool = False,
                       on_result: Callable[[StatementResult], None] | None = None) -> ReplayResult:
    """Replay the statements through the proxy and collect every outcome (`on_result` sees each one as it
    arrives, e.g. to act on the proxy at that exact moment)."""
    clients = [_Client(k, opts) for k in range(max(1, opts.clients))]
    # Fail fast when the target is unreachable, before any statement is counted as an error.
    await clients[0].connect()
    n = len(statements)
    results: list[StatementResult | None] = [None] * n
    budget: list[tuple[int, float]] = []
    every = opts.budget_every or max(1, n // 100)
    next_index = 0
    done = 0
    stopped = False
    sample_due = asyncio.Event()
    finished = asyncio.Event()
    bar = tqdm(total=n, unit="stmt", disable=not progress, file=sys.stderr, dynamic_ncols=True)
    start_budget = await _sample_budget(opts)
    if start_budget is not None:
        budget.append((0, start_budget))
    t_start = time.monotonic()

    async def worker(client: _Client) -> None:
        nonlocal next_index, done, stopped
        try:
            while next_index < n and not stopped:
                i = next_index
                next_index += 1
                stmt = statements[i]
                if opts.speed > 0:
                    wait = t_start + stmt.offset_s / opts.speed - time.monotonic()
                    if wait > 0:
                        await asyncio.sleep(wait)
                res = results[i] = await client.run(i, stmt)
                if on_result is not None:
                    try:
                        on_result(res)
                    except StopReplay:
                        stopped = True
                done += 1
                bar.update(1)
                if done % every == 0:
                    sample_due.set()
        finally:
            await client.close()

    async def sampler() -> None:
        while not finished.is_set():
            await sample_due.wait()
            sample_due.clear()
            position = done
            value = await _sample_budget(opts)
            if value is not None:
                budget.append((position, value))

    sampler_task = asyncio.create_task(sampler())
    aborted: str | None = None
    try:
        gathered = await asyncio.gather(*(worker(c) for c in clients), return_exceptions=True)
        failures = [g for g in gathered if isinstance(g, BaseException)]
        if failures:
            aborted = f"{type(failures[0]).__name__}: {failures[0]}".strip()[:300]
    finally:
        finished.set()
        sample_due.set()
        await sampler_task
        bar.close()
    wall = time.monotonic() - t_start
    end_budget = await _sample_budget(opts)
    if end_budget is not None:
        budget.append((done, end_budget))
    final = [r for r in results if r is not None]
    return ReplayResult(list(statements), final, budget, wall, len(clients), opts.speed, aborted)


def replay(statements: Sequence[Statement], opts: ReplayOptions, progress: bool = False,
           on_result: Callable[[StatementResult], None] | None = None) -> ReplayResult:
    """Synchronous wrapper of `replay_async`."""
    return asyncio.run(replay_async(statements, opts, progress, on_result))
