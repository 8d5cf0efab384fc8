"""Reader for PostgreSQL ``jsonlog`` files (PostgreSQL 15+): one JSON object per line.

Keys used: ``timestamp``, ``user``, ``dbname``, ``pid``, ``error_severity``, ``message``, ``detail``. A
line that is not a JSON object with a timestamp and a message is counted as unreadable.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

from predictor.logs.base import LogStatement, ReadStats, parse_timestamp
from predictor.logs.entries import Assembler, Entry


def read_jsonlog(path: str | Path, stats: ReadStats | None = None) -> Iterator[LogStatement]:
    stats = stats if stats is not None else ReadStats(path=str(path), format="jsonlog")
    asm = Assembler(stats)
    with open(path, encoding="utf-8", errors="replace") as f:
        for line_no, line in enumerate(f, start=1):
            stats.lines += 1
            if not line.strip():
                stats.skipped += 1
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError:
                stats.bad(line_no, line)
                continue
            if not isinstance(obj, dict) or "message" not in obj:
                stats.bad(line_no, line)
                continue
            ts = parse_timestamp(str(obj.get("timestamp", "")))
            if ts is None:
                stats.bad(line_no, line)
                continue
            pid = obj.get("pid")
            entry = Entry(
                ts=ts,
                user=obj.get("user") or None,
                database=obj.get("dbname") or None,
                pid=str(pid) if pid is not None else None,
                severity=str(obj.get("error_severity", "")),
                message=str(obj["message"]),
                detail=str(obj["detail"]) if obj.get("detail") else None,
                line=line_no,
            )
            yield from asm.feed(entry)
    yield from asm.finish()
