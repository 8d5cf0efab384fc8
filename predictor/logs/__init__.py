"""Log readers: every supported source becomes a stream of :class:`LogStatement` plus a :class:`ReadStats`.

Formats: ``stderr`` (also syslog-style; ``log_line_prefix`` configurable or guessed), ``csvlog``,
``jsonlog``, ``pgss`` (pg_stat_statements export), ``sql`` (plain statements), ``history`` (dated CSV/JSON
lines, e.g. the proxy's ledger history). ``auto`` picks one with :func:`detect_format`.
"""

from __future__ import annotations

from pathlib import Path

from predictor.logs.base import LogStatement, ReadStats, parse_timestamp
from predictor.logs.csvlog import read_csvlog
from predictor.logs.detect import FORMATS, detect_format
from predictor.logs.history import read_history, statements_from_rows
from predictor.logs.jsonlog import read_jsonlog
from predictor.logs.pgss import read_pgss
from predictor.logs.sqlfile import read_sqlfile
from predictor.logs.stderr import compile_prefix, read_stderr

__all__ = [
    "FORMATS",
    "LogStatement",
    "ReadStats",
    "compile_prefix",
    "detect_format",
    "parse_timestamp",
    "read_log",
    "statements_from_rows",
]


def read_log(
    path: str | Path, format: str = "auto", prefix: str | None = None
) -> tuple[list[LogStatement], ReadStats]:
    """Read one log file completely. Never raises on bad content: unreadable lines are counted in stats."""
    fmt = detect_format(path) if format == "auto" else format
    stats = ReadStats(path=str(path), format=fmt)
    if fmt == "stderr":
        it = read_stderr(path, prefix, stats)
    elif fmt == "csvlog":
        it = read_csvlog(path, stats)
    elif fmt == "jsonlog":
        it = read_jsonlog(path, stats)
    elif fmt == "pgss":
        it = read_pgss(path, stats)
    elif fmt == "sql":
        it = read_sqlfile(path, stats)
    elif fmt == "history":
        it = read_history(path, stats)
    else:
        raise ValueError(f"unknown log format {format!r}; expected auto or one of {', '.join(FORMATS)}")
    return list(it), stats
