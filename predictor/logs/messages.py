"""Interpret the message part of a PostgreSQL log entry (shared by the stderr, csvlog and jsonlog readers).

Statement-bearing messages, as written by ``log_statement`` and ``log_min_duration_statement``:
``statement: SQL``, ``execute <name>: SQL`` (extended protocol), and either of them after
``duration: N ms  ``. ``parse``/``bind`` messages repeat the SQL of an execute and are skipped (counting
them would count one query three times); so are bare duration lines and every other message.
The bind parameters of an execute (``DETAIL:  parameters: $1 = '30', ...``) are substituted into its SQL
so that the statement is concrete, as a simple-protocol query would have been logged.
"""

from __future__ import annotations

import re

from pgcore.sqlscan import quoted_end

_DURATION = re.compile(r"^duration:\s*[\d.]+\s*ms\s*")
_STATEMENT = re.compile(r"^statement:\s?", re.S)
_EXECUTE = re.compile(r"^execute(?: fetch from)? [^:]*?:\s?", re.S)
_PARSE_BIND = re.compile(r"^(parse|bind) [^:]*?:", re.S)
_PARAM = re.compile(r"\$(\d+)\s*=\s*(NULL|'(?:[^']|'')*')", re.S)
_NUMBER = re.compile(r"^-?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?$")
_PLACEHOLDER = re.compile(r"\$(\d+)\b")


def statement_of(message: str) -> tuple[str | None, bool]:
    """Return ``(sql, is_execute)`` for a statement-bearing message, else ``(None, False)``."""
    body = _DURATION.sub("", message, count=1)
    m = _STATEMENT.match(body)
    if m:
        return body[m.end() :].strip() or None, False
    if _PARSE_BIND.match(body):
        return None, False
    m = _EXECUTE.match(body)
    if m:
        return body[m.end() :].strip() or None, True
    return None, False


def parse_parameters(detail: str) -> dict[int, str] | None:
    """``parameters: $1 = '30', $2 = NULL`` -> {1: "30", 2: "NULL"} as SQL literals; None if not such."""
    detail = detail.strip()
    if not detail.startswith("parameters:"):
        return None
    out: dict[int, str] = {}
    for num, raw in _PARAM.findall(detail):
        if raw == "NULL":
            out[int(num)] = "NULL"
            continue
        value = raw[1:-1].replace("''", "'")
        # Drivers send numbers as text; a literal number keeps the statement identical to the same query
        # sent through the simple protocol (age = 30, not age = '30').
        out[int(num)] = value if _NUMBER.match(value) else "'" + value.replace("'", "''") + "'"
    return out


def bind_parameters(sql: str, params: dict[int, str]) -> str:
    """Substitute ``$n`` placeholders outside string literals and quoted identifiers."""
    pieces: list[str] = []
    i = 0
    n = len(sql)
    while i < n:
        c = sql[i]
        if c in ("'", '"'):
            j = quoted_end(sql, i)
            pieces.append(sql[i:j])
            i = j
            continue
        m = _PLACEHOLDER.match(sql, i) if c == "$" else None
        if m and int(m.group(1)) in params:
            pieces.append(params[int(m.group(1))])
            i = m.end()
            continue
        pieces.append(c)
        i += 1
    return "".join(pieces)
