"""Reader for plain files of SQL statements separated by semicolons.

Comments, strings, quoted identifiers and dollar quoting are found by pgcore/sqlscan.py (the proxy's
scanner too), so a semicolon inside any of them does not split. A comment line holding only a timestamp
(``-- 2026-10-01 08:00:00``) dates the statements that follow; otherwise statements have ``ts=None``.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

from pgcore.sqlscan import tokens
from predictor.logs.base import LogStatement, ReadStats, parse_timestamp


def split_sql(text: str) -> Iterator[tuple[int, str, datetime | None]]:
    """Yield (line of the statement's start, statement text without comments, timestamp in force)."""
    line = 1
    buf: list[str] = []
    start_line: int | None = None
    ts: datetime | None = None
    last = 0

    def plain(seg: str) -> None:
        nonlocal line, start_line
        if start_line is None and seg.strip():
            start_line = line + seg[:len(seg) - len(seg.lstrip())].count("\n")
        line += seg.count("\n")
        buf.append(seg)

    for i, j in tokens(text, semicolons=True):
        plain(text[last:i])
        last = j
        c = text[i]
        if c == ";":
            stmt = "".join(buf).strip()
            if stmt:
                yield (start_line or line), stmt, ts
            buf, start_line = [], None
        elif c == "-":  # a line comment: a timestamp alone on it dates the statements after it
            if not "".join(buf).strip():
                stamp = parse_timestamp(text[i + 2:j].strip())
                if stamp is not None:
                    ts = stamp
            if text[j - 1] == "\n":
                plain("\n")
        elif c == "/":
            line += text.count("\n", i, j)
            buf.append(" ")
        else:  # kept whole: a ';' or comment mark inside is text
            if start_line is None:
                start_line = line
            line += text.count("\n", i, j)
            buf.append(text[i:j])
    plain(text[last:])
    stmt = "".join(buf).strip()
    if stmt:
        yield (start_line or line), stmt, ts


def read_sqlfile(path: str | Path, stats: ReadStats | None = None) -> Iterator[LogStatement]:
    stats = stats if stats is not None else ReadStats(path=str(path), format="sql")
    with open(path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    stats.lines = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
    for line, stmt, ts in split_sql(text):
        stats.statements += 1
        yield LogStatement(ts, None, None, stmt, line)
