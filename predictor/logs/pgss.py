"""Reader for a ``pg_stat_statements`` export: normalised queries (``$1`` placeholders) with call counts.

Accepted shapes: CSV with a header naming ``query`` and ``calls`` (e.g. ``\\copy (SELECT query, calls FROM
pg_stat_statements) TO 'x.csv' CSV HEADER``), a JSON array of objects, or JSON lines. Other columns are
ignored. The export has no timestamps: each query becomes one LogStatement with ``ts=None`` and
``calls`` set; a row without a query or with a non-integer ``calls`` is unreadable.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from predictor.logs.base import LogStatement, ReadStats


def _statement(obj: dict[str, Any], line: int, stats: ReadStats) -> LogStatement | None:
    query = obj.get("query")
    try:
        calls = int(float(str(obj.get("calls", 1))))
    except ValueError:
        calls = -1
    if not isinstance(query, str) or not query.strip() or calls < 0:
        stats.bad(line, json.dumps(obj)[:200])
        return None
    stats.statements += 1
    user = obj.get("rolname") or obj.get("user") or obj.get("userid")
    db = obj.get("datname") or obj.get("dbname") or obj.get("dbid")
    return LogStatement(
        None, str(user) if user else None, str(db) if db else None, query.strip(), line, calls
    )


def read_pgss(path: str | Path, stats: ReadStats | None = None) -> Iterator[LogStatement]:
    stats = stats if stats is not None else ReadStats(path=str(path), format="pgss")
    with open(path, encoding="utf-8", errors="replace", newline="") as f:
        text = f.read()
    head = text.lstrip()[:1]
    if head in ("[", "{"):
        yield from _read_json(text, stats)
        return
    reader = csv.DictReader(text.splitlines(keepends=True))
    for row in reader:
        line_num: int = reader.line_num
        stats.lines = line_num
        st = _statement(dict(row), line_num, stats)
        if st is not None:
            yield st


def _read_json(text: str, stats: ReadStats) -> Iterator[LogStatement]:
    try:
        data = json.loads(text)
        rows = data if isinstance(data, list) else [data]
        numbered = [(i + 1, r) for i, r in enumerate(rows)]
    except json.JSONDecodeError:
        numbered = []
        for i, raw in enumerate(text.splitlines(), start=1):
            if not raw.strip():
                continue
            try:
                numbered.append((i, json.loads(raw)))
            except json.JSONDecodeError:
                stats.bad(i, raw)
    stats.lines += len(numbered)
    for line, row in numbered:
        if not isinstance(row, dict):
            stats.bad(line, str(row))
            continue
        st = _statement(row, line, stats)
        if st is not None:
            yield st
