"""Reader for dated query histories: the proxy's own ledger export, or any CSV/JSON-lines table of queries.

A CSV with a header, or JSON lines, with a time column (``ts``, ``time``, ``timestamp``, ``log_time``,
``at``) and a SQL column (``sql``, ``query``, ``statement``); ``user``/``database`` and the session's
TimeZone (``zone``, ``timezone``) are optional. This is
how the proxy's query history (from the ledger) is fed back to the predictor: export it in this shape, or
call :func:`statements_from_rows` directly with the rows.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable, Iterator, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from parser.semantics.zoned_text import tagged
from predictor.logs.base import LogStatement, ReadStats, parse_timestamp

TIME_KEYS = ("ts", "time", "timestamp", "log_time", "at", "started_at")
SQL_KEYS = ("sql", "query", "statement", "query_text")
ZONE_KEYS = ("zone", "timezone", "time_zone")


def _pick(row: Mapping[str, Any], keys: tuple[str, ...]) -> Any:
    for k in keys:
        if k in row and row[k] not in (None, ""):
            return row[k]
    return None


def statements_from_rows(
    rows: Iterable[Mapping[str, Any]], stats: ReadStats | None = None
) -> Iterator[LogStatement]:
    """Turn history rows (mappings with a time and a SQL field) into statements; bad rows are counted."""
    stats = stats if stats is not None else ReadStats(format="history")
    for i, row in enumerate(rows, start=1):
        stats.lines += 1
        sql = _pick(row, SQL_KEYS)
        raw_ts = _pick(row, TIME_KEYS)
        ts = raw_ts if isinstance(raw_ts, datetime) else parse_timestamp(str(raw_ts)) if raw_ts else None
        if not isinstance(sql, str) or not sql.strip() or ts is None:
            stats.bad(i, str(dict(row))[:200])
            continue
        stats.statements += 1
        user = row.get("user") or row.get("user_name")
        db = row.get("database") or row.get("dbname")
        # The session's TimeZone, when the history kept it (the proxy's statement_history.zone): planned and
        # replayed in it (parser.semantics.zoned_text); none is UTC.
        zone = _pick(row, ZONE_KEYS)
        yield LogStatement(
            ts.replace(tzinfo=None), str(user) if user else None, str(db) if db else None,
            tagged(sql.strip(), str(zone) if zone else None), i
        )


def read_history(path: str | Path, stats: ReadStats | None = None) -> Iterator[LogStatement]:
    stats = stats if stats is not None else ReadStats(path=str(path), format="history")
    with open(path, encoding="utf-8", errors="replace", newline="") as f:
        text = f.read()
    if text.lstrip().startswith("{"):
        rows: list[dict[str, Any]] = []
        for i, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError:
                stats.lines += 1
                stats.bad(i, line)
                continue
            rows.append(obj if isinstance(obj, dict) else {})
        yield from statements_from_rows(rows, stats)
        return
    yield from statements_from_rows(csv.DictReader(text.splitlines(keepends=True)), stats)
