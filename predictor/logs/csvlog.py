"""Reader for PostgreSQL ``csvlog`` files (``log_destination = 'csvlog'``).

Columns follow the server's documented layout (log_time, user_name, database_name, process_id, ...,
error_severity at 11, message at 13, detail at 14); 23 (PostgreSQL 13), 24 or 26 (14+) columns are
accepted. The csv module handles quoted fields spanning several lines (multi-line statements). A record
that does not have the layout or whose time does not parse is counted as unreadable.
"""

from __future__ import annotations

import csv
from collections.abc import Iterator
from pathlib import Path

from predictor.logs.base import LogStatement, ReadStats, parse_timestamp
from predictor.logs.entries import Assembler, Entry

_SEVERITIES = {"LOG", "ERROR", "FATAL", "PANIC", "WARNING", "NOTICE", "INFO", "DETAIL", "HINT", "STATEMENT"}


def read_csvlog(path: str | Path, stats: ReadStats | None = None) -> Iterator[LogStatement]:
    stats = stats if stats is not None else ReadStats(path=str(path), format="csvlog")
    asm = Assembler(stats)
    with open(path, encoding="utf-8", errors="replace", newline="") as f:
        reader = csv.reader(f)
        while True:
            start = reader.line_num + 1
            try:
                row = next(reader)
            except StopIteration:
                break
            except csv.Error as exc:
                stats.lines = reader.line_num
                stats.bad(start, f"csv error: {exc}")
                continue
            stats.lines = reader.line_num
            if not row or (len(row) == 1 and not row[0].strip()):
                stats.skipped += 1
                continue
            ts = parse_timestamp(row[0]) if row else None
            if len(row) < 15 or ts is None or row[11] not in _SEVERITIES and not row[11].startswith("DEBUG"):
                stats.bad(start, ",".join(row))
                continue
            entry = Entry(
                ts=ts,
                user=row[1] or None,
                database=row[2] or None,
                pid=row[3] or None,
                severity=row[11],
                message=row[13],
                detail=row[14] or None,
                line=start,
            )
            yield from asm.feed(entry)
    yield from asm.finish()
