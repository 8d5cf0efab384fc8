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


_UESCAPE = re.compile(r"(?:\s|--[^\n]*\n?|/\*.*?\*/)*UESCAPE(?:\s|--[^\n]*\n?|/\*.*?\*/)*'(?P<c>[^'])'",
                      re.IGNORECASE | re.S)
_E_ESCAPE = re.compile(r"''|\\(x[0-9A-Fa-f]{1,2}|[0-7]{1,3}|u[0-9A-Fa-f]{4}|U[0-9A-Fa-f]{8}|.)", re.S)
_E_SIMPLE = {"b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}


class EscapeError(ValueError):
    """An invalid Unicode escape (PostgreSQL would reject the statement too)."""


def _decode_unicode(body: str, esc: str) -> str:
    out: list[str] = []
    i = 0
    n = len(body)
    while i < n:
        c = body[i]
        if c != esc:
            out.append(c)
            i += 1
            continue
        if body.startswith(esc, i + 1):
            out.append(esc)
            i += 2
            continue
        if body.startswith("+", i + 1):
            digits, i = body[i + 2:i + 8], i + 8
        else:
            digits, i = body[i + 1:i + 5], i + 5
        try:
            out.append(chr(int(digits, 16)))
        except ValueError:
            raise EscapeError(f"invalid Unicode escape {esc}{digits!r}") from None
    return "".join(out)


def _decode_e(body: str) -> str:
    def one(m: re.Match[str]) -> str:
        t = m.group(1)
        if t is None:
            return "'"
        if t[0] == "x":
            return chr(int(t[1:], 16))
        if t[0] in "uU" and len(t) > 1:
            return chr(int(t[1:], 16))
        if t[0] in "01234567":
            return chr(int(t, 8))
        return _E_SIMPLE.get(t, t)
    return _E_ESCAPE.sub(one, body)


def _plain(body: str, quote: str) -> str:
    return quote + body.replace(quote, quote * 2) + quote


def decode_escapes(sql: str) -> str:
    """The statement with U&"..." identifiers, U&'...' strings (with UESCAPE) and E'...' strings written
    out as plain quoted identifiers and strings: the names PostgreSQL will resolve, for checks that must
    not be fooled by spelling (U&"set\005fconfig" is set_config). Raises EscapeError when an escape is
    invalid."""
    if "&" not in sql and "'" not in sql:
        return sql
    parts: list[str] = []
    last = 0
    i = 0
    while True:
        m = _SPECIAL.search(sql, i)
        if m is None:
            break
        i = m.start()
        j = _skip_token(sql, i)
        if j is None:
            i += 1
            continue
        c = sql[i]
        prefix = sql[i - 2:i] if i >= 2 else ""
        before = sql[i - 3] if i >= 3 else ""
        if c in "'\"" and prefix.upper() == "U&" and not (before.isalnum() or before == "_"):
            body = sql[i + 1:j - 1].replace(c * 2, c)
            esc = "\\"
            u = _UESCAPE.match(sql, j)
            if u is not None:
                esc = u.group("c")
                j = u.end()
            parts.append(sql[last:i - 2])
            parts.append(_plain(_decode_unicode(body, esc), c))
            last = j
        elif c == "'" and sql[i - 1:i] in ("e", "E") and (i < 2 or not (sql[i - 2].isalnum() or sql[i - 2] == "_")):
            parts.append(sql[last:i - 1])
            parts.append(_plain(_decode_e(sql[i + 1:j - 1]), "'"))
            last = j
        i = j
    parts.append(sql[last:])
    return "".join(parts)


_TOKEN = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|[^\s,=;]+|,|=", re.S)


def command_words(sql: str) -> list[str]:
    """The tokens of a session command (quoted strings and names kept whole; ',' and '=' on their own)."""
    return _TOKEN.findall(strip_comments(sql).strip().rstrip(";"))


def unquote(tok: str) -> str:
    """A '...' string's or a "..." name's text; any other token as it is."""
    if len(tok) >= 2 and tok[0] == tok[-1] == "'":
        return tok[1:-1].replace("''", "'")
    if len(tok) >= 2 and tok[0] == tok[-1] == '"':
        return tok[1:-1].replace('""', '"')
    return tok


def fold_ident(tok: str) -> str:
    """A name token as PostgreSQL reads it: quoted kept as written, unquoted lower-cased."""
    return unquote(tok) if tok.startswith('"') else tok.lower()
