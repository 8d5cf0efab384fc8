"""Reader for PostgreSQL stderr (and syslog-style) logs, with a ``log_line_prefix`` compiler.

A line that starts with the prefix opens a new entry; any other line continues the previous entry's
message (multi-line statements are written as-is). A continuation line with no entry to continue is
unreadable. When no prefix is given, the reader tries common prefixes on the first lines and keeps the
best match, falling back to a lenient "timestamp ... SEVERITY:" pattern.

Syslog lines (``Oct  1 02:39:46 host postgres[123]: [7-1] ...``) are unwrapped first: ``[7-2]`` and later
segments are continuations.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from datetime import datetime
from pathlib import Path

from predictor.logs.base import LogStatement, ReadStats, parse_timestamp
from predictor.logs.entries import Assembler, Entry
from predictor.logs.messages import statement_of
from predictor.templates import analyse

_TZ = r"(?: (?:[A-Za-z][A-Za-z0-9_/+-]*|[+-]\d{2}(?::?\d{2})?))?"
_TS_T = r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}" + _TZ
_TS_M = r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\.\d+" + _TZ

# Escape -> regex. Named groups carry what a LogStatement needs; the others only have to match.
_ESCAPES: dict[str, str] = {
    "a": r"(?P<app>.*?)",
    "u": r"(?P<user>.*?)",
    "d": r"(?P<db>.*?)",
    "r": r"(?:.*?)",
    "h": r"(?:.*?)",
    "b": r"(?:.*?)",
    "i": r"(?:.*?)",
    "p": r"(?P<pid>\d+)",
    "P": r"(?:\d*)",
    "t": r"(?P<ts>" + _TS_T + ")",
    "m": r"(?P<ts>" + _TS_M + ")",
    "n": r"(?P<ts>\d+(?:\.\d+)?)",
    "s": r"(?:" + _TS_T + ")",
    "l": r"(?:\d+)",
    "c": r"(?:[0-9a-f]+\.[0-9a-f]+)",
    "v": r"(?:\d+/\d+|)",
    "x": r"(?:\d*)",
    "e": r"(?:[0-9A-Z]{5})",
    "Q": r"(?:-?\d*)",
}
_SEVERITY = (
    r"(?P<severity>LOG|ERROR|FATAL|PANIC|WARNING|NOTICE|INFO|DEBUG[1-5]?|DETAIL|HINT|CONTEXT|STATEMENT|"
    r"QUERY|LOCATION):\s+(?P<msg>.*)$"
)

COMMON_PREFIXES = (
    "%m [%p] %q%u@%d ",
    "%t [%p] %q%u@%d ",
    "%m [%p] ",
    "%t [%p] ",
    "%t [%p]: [%l-1] user=%u,db=%d,app=%a,client=%h ",
    "%t [%p]: [%l-1] ",
    "%m [%p]: [%l-1] user=%u,db=%d,app=%a,client=%h ",
    "%m [%p] %q[user=%u,db=%d,app=%a] ",
    "%m [%p] %quser=%u,db=%d ",
    "%t [%p-%l] %q%u@%d ",
    "%m %u@%d ",
    "< %m > ",
    "%m ",
    "%t ",
    "",
)

_GENERIC = re.compile(
    r"^(?P<ts>\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(?:\.\d+)?" + _TZ + r")\b"
    r"(?:.*?\[(?P<pid>\d+)\])?(?:.*?\s(?P<user>[\w.-]+)@(?P<db>[\w.-]+))?.*?\s" + _SEVERITY
)

_SYSLOG = re.compile(
    r"^(?:<\d+>)?(?P<sts>[A-Z][a-z]{2}\s+\d{1,2} \d{2}:\d{2}:\d{2}|\d{4}-\d{2}-\d{2}T\S+)\s+\S+\s+"
    r"[^\s\[]+\[\d+\]:\s+\[(?P<num>\d+)-(?P<seg>\d+)\]\s?(?P<rest>.*)$"
)


def compile_prefix(prefix: str) -> re.Pattern[str]:
    """Compile a ``log_line_prefix`` into a regex matching a whole entry line (prefix, severity, message).

    Supports ``%a %u %d %r %h %b %i %p %P %t %m %n %s %l %c %v %x %e %Q %q %%`` and padding such as
    ``%-10u``. Everything after ``%q`` is optional (PostgreSQL omits it for background processes).
    """
    parts: list[str] = []
    optional_from: int | None = None
    i = 0
    seen: set[str] = set()
    while i < len(prefix):
        c = prefix[i]
        if c != "%" or i + 1 >= len(prefix):
            parts.append(re.escape(c))
            i += 1
            continue
        m = re.match(r"%(-?\d+)?([a-zA-Z%])", prefix[i:])
        if not m:
            parts.append(re.escape(c))
            i += 1
            continue
        pad, esc = m.group(1), m.group(2)
        i += m.end()
        if esc == "%":
            parts.append("%")
        elif esc == "q":
            optional_from = len(parts)
        elif esc in _ESCAPES:
            rx = _ESCAPES[esc]
            # A group name may occur once in a regex; a repeated escape only has to match.
            for name in re.findall(r"\?P<(\w+)>", rx):
                if name in seen:
                    rx = rx.replace(f"?P<{name}>", "?:")
                seen.add(name)
            parts.append((r"\s*" + rx + r"\s*") if pad else rx)
        else:
            parts.append(r"(?:.*?)")  # an escape from a newer PostgreSQL: match anything
    if optional_from is not None:
        head, tail = parts[:optional_from], parts[optional_from:]
        body = "".join(head) + "(?:" + "".join(tail) + ")?"
    else:
        body = "".join(parts)
    return re.compile("^" + body + _SEVERITY, re.S)


def _unwrap_syslog(lines: Iterable[str]) -> Iterator[tuple[str, bool, str | None]]:
    """Yield (text, is_continuation_hint, syslog_ts) per physical line; non-syslog lines pass through."""
    for raw in lines:
        m = _SYSLOG.match(raw)
        if m:
            yield m.group("rest"), m.group("seg") != "1", m.group("sts")
        else:
            yield raw, False, None


def _syslog_time(text: str | None) -> datetime | None:
    if text is None:
        return None
    if "T" in text:
        return parse_timestamp(text.replace("T", " ")[:19])
    try:
        # Syslog does not write the year; assume the current one (only the calendar day matters here).
        return datetime.strptime(f"{datetime.now().year} {text}", "%Y %b %d %H:%M:%S")
    except ValueError:
        return None


def guess_prefix(sample: list[str]) -> str | None:
    """The common prefix matching most of the sample's entry lines (None: use the lenient pattern)."""
    best, best_hits = None, 0
    texts = [t for t, cont, _ in _unwrap_syslog(sample) if not cont]
    for prefix in COMMON_PREFIXES:
        rx = compile_prefix(prefix)
        hits = 0
        for t in texts:
            m = rx.match(t)
            # A prefix with a timestamp escape must actually capture one: "" matches too much otherwise.
            if m and (("ts" not in rx.groupindex) or m.group("ts")):
                hits += 1
        if hits > best_hits:
            best, best_hits = prefix, hits
    return best if best_hits * 2 >= max(1, len(texts) // 2) else None


def read_stderr(
    path: str | Path, prefix: str | None = None, stats: ReadStats | None = None
) -> Iterator[LogStatement]:
    """Yield the statements of a stderr/syslog log. ``prefix`` is the server's ``log_line_prefix``."""
    stats = stats if stats is not None else ReadStats(path=str(path), format="stderr")
    with open(path, encoding="utf-8", errors="replace") as f:
        lines = [ln.rstrip("\r\n") for ln in f]
    if prefix is None:
        prefix = guess_prefix(lines[:200])
    rx = compile_prefix(prefix) if prefix is not None else _GENERIC
    yield from read_stderr_lines(lines, rx, stats)


def read_stderr_lines(lines: list[str], rx: re.Pattern[str], stats: ReadStats) -> Iterator[LogStatement]:
    asm = Assembler(stats)
    current: Entry | None = None
    parts: list[tuple[int, str]] = []

    def flush() -> Iterator[LogStatement]:
        if current is not None:
            current.message = "\n".join(_keep_readable(current, parts, stats))
            yield from asm.feed(current)

    for line_no, (text, cont_hint, sts) in enumerate(_unwrap_syslog(lines), start=1):
        stats.lines += 1
        m = None if cont_hint else rx.match(text)
        if m is None and not cont_hint and rx is not _GENERIC:
            m = _GENERIC.match(text)  # a line written under another prefix (e.g. after a reload)
        if m is not None:
            yield from flush()
            g = m.groupdict()
            ts = parse_timestamp(g["ts"]) if g.get("ts") else _syslog_time(sts)
            current = Entry(
                ts=ts,
                user=g.get("user") or None,
                database=g.get("db") or None,
                pid=g.get("pid"),
                severity=g["severity"],
                message="",
                detail=None,
                line=line_no,
            )
            parts = [(line_no, g["msg"])]
            continue
        if current is not None and (cont_hint or text.strip() == "" or not _looks_like_new_entry(text)):
            parts.append((line_no, text))
            continue
        if text.strip():
            stats.bad(line_no, text)
        else:
            stats.skipped += 1
    yield from flush()
    yield from asm.finish()


def _untab(line: str) -> str:
    """PostgreSQL starts every continuation line with a tab (syslog shows it as ``#011``)."""
    if line.startswith("\t"):
        return line[1:]
    if line.startswith("#011"):
        return line[4:]
    return line


# Messages that PostgreSQL writes over several lines; a LOG line of any other kind is one line long.
_MULTILINE = {
    "DETAIL",
    "HINT",
    "CONTEXT",
    "STATEMENT",
    "QUERY",
    "ERROR",
    "FATAL",
    "PANIC",
    "WARNING",
    "NOTICE",
}


def _keep_readable(entry: Entry, parts: list[tuple[int, str]], stats: ReadStats) -> list[str]:
    """The entry's message lines, minus trailing junk (counted as unreadable).

    A statement keeps its continuation lines as long as the SQL still parses with them; if it does not,
    the longest parseable head is kept (junk written between two entries must not spoil a statement).
    A one-line LOG message (checkpoint, connection, ...) keeps only indented continuations (auto_explain
    plans); anything else after it is junk.
    """
    if len(parts) == 1:
        return [parts[0][1]]
    texts = [parts[0][1]] + [_untab(t) for _, t in parts[1:]]
    if entry.severity == "LOG":
        sql, _ = statement_of("\n".join(texts))
        if sql is not None:
            if analyse(sql) is not None:
                return texts
            for k in range(len(texts) - 1, 0, -1):
                head, _ = statement_of("\n".join(texts[:k]))
                if head is not None and analyse(head) is not None:
                    for line_no, t in parts[k:]:
                        if t.strip():
                            stats.bad(line_no, t)
                    return texts[:k]
            return texts  # not SQL we understand either way: keep it whole, the model will skip it
        kept = [texts[0]]
        for line_no, t in parts[1:]:
            if t[:1].isspace() or t.startswith("#011") or not t.strip():
                kept.append(_untab(t))
            else:
                stats.bad(line_no, t)
        return kept
    if entry.severity not in _MULTILINE:
        for line_no, t in parts[1:]:
            if t.strip():
                stats.bad(line_no, t)
        return [texts[0]]
    return texts


_NEW_ENTRY_HINT = re.compile(r"^(?:\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}|<\d+>|[A-Z][a-z]{2}\s+\d{1,2} \d{2}:)")


def _looks_like_new_entry(text: str) -> bool:
    """A line that starts like a log entry but did not parse is junk, not part of the previous SQL."""
    return bool(_NEW_ENTRY_HINT.match(text))
