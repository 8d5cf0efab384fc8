"""Lexical helpers over SQL text: split a simple-query string into statements, find the leading keywords.

PostgreSQL's lexical rules that matter for splitting: '...' strings (with '' escapes), E'...' strings
(with backslash escapes), "identifiers", $tag$ dollar quotes $tag$, -- line comments and nested /* */
comments. A semicolon inside any of those does not end a statement.
"""

from __future__ import annotations

import re

_DOLLAR_TAG = re.compile(r"\$([A-Za-z_\x80-\uffff][A-Za-z_0-9\x80-\uffff]*)?\$")


# Scanning jumps from one character that may matter to the next with compiled patterns: a statement of a
# megabyte is lexed in milliseconds, not character by character on the event loop.
_QUOTE_OR_BACKSLASH = re.compile(r"['\\]")
_COMMENT_MARK = re.compile(r"/\*|\*/")
_SPECIAL = re.compile(r"['\"$]|--|/\*")
_SPECIAL_OR_SEMICOLON = re.compile(r"['\"$;]|--|/\*")


def _skip_quoted(sql: str, i: int, quote: str, backslash: bool) -> int:
    """Index just past the closing quote of a literal starting at sql[i] (the opening quote)."""
    n = len(sql)
    i += 1
    while i < n:
        if backslash:
            m = _QUOTE_OR_BACKSLASH.search(sql, i)
            if m is None:
                return n
            j = m.start()
            if sql[j] == "\\":
                i = j + 2
                continue
        else:
            j = sql.find(quote, i)
            if j < 0:
                return n
        if j + 1 < n and sql[j + 1] == quote:
            i = j + 2
            continue
        return j + 1
    return n


def _skip_block_comment(sql: str, i: int) -> int:
    depth = 0
    n = len(sql)
    while i < n:
        m = _COMMENT_MARK.search(sql, i)
        if m is None:
            return n
        depth += 1 if m.group(0) == "/*" else -1
        i = m.end()
        if depth == 0:
            return i
    return n


def _skip_token(sql: str, i: int) -> int | None:
    """If a quoted/commented region starts at i, the index past it; otherwise None."""
    c = sql[i]
    if c == "'":
        backslash = i > 0 and sql[i - 1] in "eE" and (i < 2 or not (sql[i - 2].isalnum() or sql[i - 2] == "_"))
        return _skip_quoted(sql, i, "'", backslash)
    if c == '"':
        return _skip_quoted(sql, i, '"', False)
    if c == "-" and sql.startswith("--", i):
        j = sql.find("\n", i)
        return len(sql) if j < 0 else j + 1
    if c == "/" and sql.startswith("/*", i):
        return _skip_block_comment(sql, i)
    if c == "$" and (i == 0 or not (sql[i - 1].isalnum() or sql[i - 1] == "_")):
        m = _DOLLAR_TAG.match(sql, i)
        if m:
            end = sql.find(m.group(0), m.end())
            return len(sql) if end < 0 else end + len(m.group(0))
    return None


def split_statements(sql: str) -> list[str]:
    """Split on top-level semicolons; statements that are only whitespace/comments are dropped."""
    if ";" not in sql:
        return [sql] if not is_blank(sql) else []
    out: list[str] = []
    start = 0
    i = 0
    while True:
        m = _SPECIAL_OR_SEMICOLON.search(sql, i)
        if m is None:
            break
        i = m.start()
        if sql[i] == ";":
            out.append(sql[start:i])
            start = i + 1
            i += 1
            continue
        j = _skip_token(sql, i)
        i = i + 1 if j is None else j
    out.append(sql[start:])
    return [s.strip() for s in out if not is_blank(s)]


def strip_comments(sql: str) -> str:
    """The SQL with comments replaced by spaces (string literals kept)."""
    parts: list[str] = []
    i = 0
    last = 0
    while True:
        m = _SPECIAL.search(sql, i)
        if m is None:
            break
        i = m.start()
        j = _skip_token(sql, i)
        if j is None:
            i += 1
            continue
        if sql[i] in "-/":
            parts.append(sql[last:i])
            parts.append(" ")
            last = j
        i = j
    parts.append(sql[last:])
    return "".join(parts)


def is_blank(sql: str) -> bool:
    """True when the text holds no statement (whitespace and comments only)."""
    return not strip_comments(sql).strip(" \t\r\n\f;")


_WORD = re.compile(r"[A-Za-z_][A-Za-z_0-9]*")


def leading_words(sql: str, count: int = 3) -> list[str]:
    """The first `count` keywords of a statement, upper-cased, ignoring comments and opening parentheses."""
    text = strip_comments(sql)
    out: list[str] = []
    for m in _WORD.finditer(text.lstrip(" \t\r\n\f(")):
        out.append(m.group(0).upper())
        if len(out) == count:
            break
    return out


_UNITS_MS = {"us": 0.001, "ms": 1.0, "s": 1000.0, "min": 60000.0, "h": 3600000.0, "d": 86400000.0}


def duration_ms(text: str) -> float:
    """A PostgreSQL time setting ('5000', '5s', '100ms', '1min') in milliseconds; 0 when unreadable."""
    t = text.strip().strip("'").lower()
    num = t.rstrip("abcdefghijklmnopqrstuvwxyz ")
    unit = t[len(num):].strip() or "ms"
    try:
        return float(num) * _UNITS_MS[unit]
    except (ValueError, KeyError):
        return 0.0
