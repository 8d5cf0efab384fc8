"""Guess a log file's format (``--format auto``) from its first lines.

Order of the checks: JSON objects (jsonlog when they carry ``error_severity``/``message``, pg_stat_statements
when ``calls``, else a dated history), CSV with a header (pg_stat_statements when it names ``calls``, a
history when it names a time and a SQL column), csvlog (a timestamp first field and a severity field),
stderr/syslog (a line that parses under a common ``log_line_prefix``), and plain SQL otherwise.
"""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path

from predictor.logs.history import SQL_KEYS, TIME_KEYS
from predictor.logs.stderr import guess_prefix

FORMATS = ("stderr", "csvlog", "jsonlog", "pgss", "sql", "history")
_CSVLOG_FIRST = re.compile(r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(\.\d+)?( \S+)?,")
_ENTRY = re.compile(
    r"^(?:<\d+>)?(?:\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}|[A-Z][a-z]{2}\s+\d{1,2} \d{2}:\d{2}:\d{2}|\d{10})"
)


def detect_format(path: str | Path, sample_lines: int = 200) -> str:
    with open(path, encoding="utf-8", errors="replace", newline="") as f:
        head = [line for _, line in zip(range(sample_lines), f, strict=False)]
    lines = [ln.rstrip("\r\n") for ln in head if ln.strip()]
    if not lines:
        return "sql"
    first = lines[0].lstrip()
    if first.startswith("{") or first.startswith("["):
        try:
            obj = json.loads(first if first.startswith("{") else "".join(head))
        except json.JSONDecodeError:
            obj = None
        if isinstance(obj, list):
            obj = obj[0] if obj else {}
        if isinstance(obj, dict):
            if "calls" in obj:
                return "pgss"
            if "error_severity" in obj or ("message" in obj and "timestamp" in obj):
                return "jsonlog"
            return "history"
        return "jsonlog" if first.startswith("{") else "pgss"
    header = next(csv.reader(io.StringIO(lines[0])), [])
    names = {h.strip().lower() for h in header}
    if "query" in names and "calls" in names:
        return "pgss"
    if names & set(TIME_KEYS) and names & set(SQL_KEYS):
        return "history"
    csvlog_hits = sum(1 for ln in lines[:50] if _CSVLOG_FIRST.match(ln) and ln.count(",") >= 14)
    entry_hits = sum(1 for ln in lines[:50] if _ENTRY.match(ln))
    if csvlog_hits and csvlog_hits * 2 >= entry_hits:
        return "csvlog"
    if entry_hits and (guess_prefix(lines) is not None or entry_hits * 2 >= min(len(lines), 50) // 2):
        return "stderr"
    return "sql"
