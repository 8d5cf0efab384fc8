"""Turn a sequence of log entries (severity + message + detail) into statements.

All three PostgreSQL log layouts (stderr, csvlog, jsonlog) deliver the same entries; this assembler keeps
the one piece of state they share: an ``execute`` waits for a possible ``DETAIL:  parameters:`` entry
before it is emitted with its parameters bound.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime

from predictor.logs.base import LogStatement, ReadStats
from predictor.logs.messages import bind_parameters, parse_parameters, statement_of


@dataclass
class Entry:
    ts: datetime | None
    user: str | None
    database: str | None
    pid: str | None
    severity: str
    message: str
    detail: str | None
    line: int


class Assembler:
    """Feed entries in log order; collect statements from ``feed``/``finish``."""

    def __init__(self, stats: ReadStats) -> None:
        self.stats = stats
        self._pending: tuple[Entry, str] | None = None  # an execute waiting for its parameters

    def _emit(self, entry: Entry, sql: str) -> LogStatement:
        self.stats.statements += 1
        return LogStatement(entry.ts, entry.user, entry.database, sql, entry.line)

    def feed(self, entry: Entry) -> Iterator[LogStatement]:
        if entry.severity == "DETAIL" and self._pending is not None:
            params = parse_parameters(entry.message)
            if params is not None and self._pending[0].pid == entry.pid:
                first, sql = self._pending
                self._pending = None
                self.stats.skipped += 1
                yield self._emit(first, bind_parameters(sql, params))
                return
        if self._pending is not None:
            first, sql = self._pending
            self._pending = None
            yield self._emit(first, sql)
        if entry.severity != "LOG":
            self.stats.skipped += 1
            return
        found, is_execute = statement_of(entry.message)
        if found is None:
            self.stats.skipped += 1
            return
        text: str = found
        if entry.detail is not None:  # csvlog/jsonlog carry the DETAIL in the same record
            params = parse_parameters(entry.detail)
            if params is not None:
                text = bind_parameters(text, params)
                is_execute = False
        if is_execute:
            self._pending = (entry, text)
            return
        yield self._emit(entry, text)

    def finish(self) -> Iterator[LogStatement]:
        if self._pending is not None:
            first, sql = self._pending
            self._pending = None
            yield self._emit(first, sql)
