"""The one lexical scanner of SQL text: where PostgreSQL's strings, quoted names, dollar quotes and comments
start and end, so that a semicolon, a comment mark or a ``$1`` inside one of them is text.

PostgreSQL's lexical rules that matter here: '...' strings (with '' escapes), E'...' strings (with
backslash escapes), "identifiers", $tag$ dollar quotes $tag$, -- line comments and nested /* */ comments.
The proxy splits and inspects statements with it (proxy/statements/sqltext.py), the predictor splits SQL
files with it (predictor/logs/sqlfile.py).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

_DOLLAR_TAG = re.compile(r"\$([A-Za-z_\x80-\uffff][A-Za-z_0-9\x80-\uffff]*)?\$")

# Scanning jumps from one character that may matter to the next with compiled patterns: a statement of a
# megabyte is lexed in milliseconds, not character by character on the event loop.
_QUOTE_OR_BACKSLASH = re.compile(r"['\\]")
_COMMENT_MARK = re.compile(r"/\*|\*/")
_SPECIAL = re.compile(r"['\"$]|--|/\*")
_SPECIAL_OR_SEMICOLON = re.compile(r"['\"$;]|--|/\*")


def _word_char(c: str) -> bool:
    return c.isalnum() or c == "_"


def quoted_end(sql: str, i: int, backslash: bool = False) -> int:
    """The index just past the string or quoted name whose opening quote is ``sql[i]`` (a doubled quote
    stands for itself; with ``backslash``, as in an E'' string, a backslash escapes the next character),
    or ``len(sql)`` when it is not closed."""
    quote, n = sql[i], len(sql)
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


def _block_comment_end(sql: str, i: int) -> int:
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


def is_e_string(sql: str, i: int) -> bool:
    """True when the quote at ``sql[i]`` opens an E'...' string (an ``e`` or ``E`` standing alone before it)."""
    return i > 0 and sql[i - 1] in "eE" and (i < 2 or not _word_char(sql[i - 2]))


def token_end(sql: str, i: int) -> int | None:
    """The index just past the string, quoted name, dollar-quoted body or comment that starts at ``sql[i]``
    (the end of the text when it is not closed), or None when none starts there (a ``$1`` parameter)."""
    c = sql[i]
    if c == "'":
        return quoted_end(sql, i, is_e_string(sql, i))
    if c == '"':
        return quoted_end(sql, i)
    if c == "-" and sql.startswith("--", i):
        j = sql.find("\n", i)
        return len(sql) if j < 0 else j + 1
    if c == "/" and sql.startswith("/*", i):
        return _block_comment_end(sql, i)
    if c == "$" and (i == 0 or not _word_char(sql[i - 1])):
        m = _DOLLAR_TAG.match(sql, i)
        if m:
            end = sql.find(m.group(0), m.end())
            return len(sql) if end < 0 else end + len(m.group(0))
    return None


def is_comment(sql: str, start: int) -> bool:
    """True when the token :func:`tokens` found at ``start`` is a comment (not a string or name)."""
    return sql[start] in "-/"


def tokens(sql: str, semicolons: bool = False) -> Iterator[tuple[int, int]]:
    """(start, end) of each string, quoted name, dollar-quoted body and comment, in order; with
    ``semicolons``, each top-level ``;`` too (as ``(i, i + 1)``). What lies between is plain SQL."""
    special = _SPECIAL_OR_SEMICOLON if semicolons else _SPECIAL
    i = 0
    while True:
        m = special.search(sql, i)
        if m is None:
            return
        i = m.start()
        if sql[i] == ";":
            yield i, i + 1
            i += 1
            continue
        j = token_end(sql, i)
        if j is None:
            i += 1
            continue
        yield i, j
        i = j


def split_statements(sql: str) -> list[str]:
    """Split on top-level semicolons; statements that are only whitespace/comments are dropped."""
    if ";" not in sql:
        return [sql] if not is_blank(sql) else []
    out: list[str] = []
    start = 0
    for i, j in tokens(sql, semicolons=True):
        if sql[i] == ";":
            out.append(sql[start:i])
            start = j
    out.append(sql[start:])
    return [s.strip() for s in out if not is_blank(s)]


def strip_comments(sql: str) -> str:
    """The SQL with comments replaced by spaces (string literals kept)."""
    parts: list[str] = []
    last = 0
    for i, j in tokens(sql):
        if is_comment(sql, i):
            parts.append(sql[last:i])
            parts.append(" ")
            last = j
    parts.append(sql[last:])
    return "".join(parts)


def is_blank(sql: str) -> bool:
    """True when the text holds no statement (whitespace and comments only)."""
    return not strip_comments(sql).strip(" \t\r\n\f;")
