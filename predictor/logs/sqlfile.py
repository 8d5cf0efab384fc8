"""Reader for plain files of SQL statements separated by semicolons.

Handles ``--`` and ``/* */`` comments, single-quoted strings with ``''``, quoted identifiers and dollar
quoting, so a semicolon inside any of them does not split. A comment line holding only a timestamp
(``-- 2026-10-01 08:00:00``) dates the statements that follow; otherwise statements have ``ts=None``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

from parser.syntax.parse import quoted_end
from predictor.logs.base import LogStatement, ReadStats, parse_timestamp

_DOLLAR = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)?\$")


def _literal_end(text: str, i: int) -> int | None:
    """The index just past the string, quoted name or dollar-quoted body opening at ``text[i]`` (the end of
    the text when it is not closed), or None when none opens there (a ``$`` of a parameter)."""
    if text[i] in ("'", '"'):
        return quoted_end(text, i)
    m = _DOLLAR.match(text, i)
    if m is None:
        return None
    end = text.find(m.group(0), m.end())
    return len(text) if end < 0 else end + len(m.group(0))


def split_sql(text: str) -> Iterator[tuple[int, str, datetime | None]]:
    """Yield (line of the statement's start, statement text without comments, timestamp in force)."""
    i, n, line = 0, len(text), 1
    buf: list[str] = []
    start_line: int | None = None
    ts: datetime | None = None
    while i < n:
        c = text[i]
        if c == "-" and text.startswith("--", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            comment = text[i + 2 : j].strip()
            if not "".join(buf).strip():
                stamp = parse_timestamp(comment)
                if stamp is not None:
                    ts = stamp
            i = j
            continue
        if c == "/" and text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            line += text.count("\n", i, j)
            buf.append(" ")
            i = j
            continue
        end = _literal_end(text, i) if c in "'\"$" else None
        if end is not None:  # kept whole: a ';' or comment mark inside is text
            if start_line is None:
                start_line = line
            line += text.count("\n", i, end)
            buf.append(text[i:end])
            i = end
            continue
        if c == ";":
            stmt = "".join(buf).strip()
            if stmt:
                yield (start_line or line), stmt, ts
            buf, start_line = [], None
            i += 1
            continue
        if c == "\n":
            line += 1
        elif not c.isspace() and start_line is None:
            start_line = line
        buf.append(c)
        i += 1
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
