"""Common types of the log readers: one statement as logged, and the reader's bookkeeping."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

# How many unreadable lines a reader keeps verbatim for the report (the counts are always exact).
MAX_EXAMPLES = 5


@dataclass(frozen=True)
class LogStatement:
    """One SQL statement taken from a log.

    ``ts`` is the wall-clock time as the log wrote it (naive, in the log's own timezone, so that the
    epoch boundary is the log's calendar day); None when the source has no timestamps (plain SQL files,
    pg_stat_statements). ``calls`` is the number of executions the line stands for: 1 except for
    pg_stat_statements exports.
    """

    ts: datetime | None
    user: str | None
    database: str | None
    sql: str
    source_line: int
    calls: int = 1


@dataclass
class ReadStats:
    """What a reader did with its input: nothing unreadable is fatal, everything is counted."""

    path: str = ""
    format: str = ""
    lines: int = 0
    statements: int = 0
    skipped: int = 0  # well-formed lines that are not statements (durations, DETAIL, checkpoints, ...)
    unreadable: int = 0  # lines the reader could not make sense of
    examples: list[tuple[int, str]] = field(default_factory=list)

    def bad(self, line_no: int, text: str) -> None:
        self.unreadable += 1
        if len(self.examples) < MAX_EXAMPLES:
            self.examples.append((line_no, text.rstrip("\r\n")[:200]))  # the line, not its line break

    def merge(self, other: ReadStats) -> None:
        self.lines += other.lines
        self.statements += other.statements
        self.skipped += other.skipped
        self.unreadable += other.unreadable
        self.examples.extend(other.examples[: max(0, MAX_EXAMPLES - len(self.examples))])

    def summary(self) -> str:
        return (
            f"{self.path or '-'} [{self.format}]: {self.lines} lines, {self.statements} statements, "
            f"{self.skipped} skipped, {self.unreadable} unreadable"
        )


_TS_RE = re.compile(
    r"^(?P<date>\d{4}-\d{2}-\d{2})[ T](?P<time>\d{2}:\d{2}:\d{2})(?P<frac>\.\d+)?"
    r"\s*(?P<tz>Z|[+-]\d{2}(?::?\d{2})?|[A-Za-z][A-Za-z0-9_/+-]*)?$"
)


def parse_timestamp(text: str) -> datetime | None:
    """Parse a PostgreSQL log timestamp (``%m``/``%t`` style, csvlog, jsonlog) or a Unix epoch (``%n``).

    The result is the wall-clock time as written; a numeric offset or zone name is dropped on purpose:
    epochs are calendar days of the log's own clock, which is what a DBA means by "tomorrow".
    """
    text = text.strip()
    m = _TS_RE.match(text)
    if m:
        frac = m.group("frac") or ""
        micro = int((frac[1:] + "000000")[:6]) if frac else 0
        try:
            base = datetime.strptime(f"{m.group('date')} {m.group('time')}", "%Y-%m-%d %H:%M:%S")
        except ValueError:
            return None
        return base.replace(microsecond=micro)
    try:
        seconds = float(text)
    except ValueError:
        return None
    if not 0 < seconds < 1e11:
        return None
    return datetime.fromtimestamp(seconds, tz=UTC).replace(tzinfo=None) + timedelta(0)
