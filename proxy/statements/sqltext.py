"""Lexical helpers over SQL text: split a simple-query string into statements, find the leading keywords,
write escaped names and strings out plainly. The scanning itself (strings, names, dollar quotes, comments)
is pgcore/sqlscan.py's.
"""

from __future__ import annotations

import re

from pgcore.sqlscan import is_blank, is_comment, is_e_string, split_statements, strip_comments, tokens

__all__ = ["EscapeError", "command_name", "decode_escapes", "is_blank", "leading_words", "split_statements",
           "strip_comments"]

_WORD = re.compile(r"[A-Za-z_][A-Za-z_0-9]*")


# PostgreSQL's command names for the writes the proxy refuses ("cannot execute CREATE TABLE in a read-only
# transaction"): a modifier (TEMP, OR REPLACE, UNIQUE) is not part of the name; a table name never is.
_FIXED_TAGS = {"TRUNCATE": "TRUNCATE TABLE", "REFRESH": "REFRESH MATERIALIZED VIEW", "SECURITY": "SECURITY LABEL",
               "IMPORT": "IMPORT FOREIGN SCHEMA", "REASSIGN": "REASSIGN OWNED"}
_OBJECT_VERBS = frozenset({"CREATE", "ALTER", "DROP"})
_MODIFIERS = frozenset({"OR", "REPLACE", "TEMP", "TEMPORARY", "UNLOGGED", "GLOBAL", "LOCAL", "UNIQUE", "RECURSIVE",
                        "TRUSTED", "PROCEDURAL", "CONSTRAINT"})
_TWO_WORD_OBJECTS = frozenset({"MATERIALIZED", "FOREIGN", "EVENT", "TEXT", "ACCESS", "USER", "OPERATOR", "DEFAULT"})


def command_name(sql: str) -> str:
    """The command a write statement is, as PostgreSQL names it in errors (``CREATE TABLE``, ``VACUUM``)."""
    words = leading_words(sql, 6)
    if not words:
        return ""
    first = words[0]
    if first in _FIXED_TAGS:
        return _FIXED_TAGS[first]
    if first not in _OBJECT_VERBS:
        return first
    rest = [w for w in words[1:] if w not in _MODIFIERS]
    if not rest:
        return first
    obj = rest[0] if rest[0] not in _TWO_WORD_OBJECTS or len(rest) < 2 else f"{rest[0]} {rest[1]}"
    return f"{first} {obj}"


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
    for i, j in tokens(sql):
        if is_comment(sql, i) or i < last:  # a comment, or the UESCAPE clause of the name before
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
        elif c == "'" and is_e_string(sql, i):
            parts.append(sql[last:i - 1])
            parts.append(_plain(_decode_e(sql[i + 1:j - 1]), "'"))
            last = j
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
