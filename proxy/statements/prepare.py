"""SQL-level PREPARE, EXECUTE and DECLARE CURSOR read from their text (psql before 16, ODBC and JDBC
drivers in some modes send them); the executor runs what they name."""

from __future__ import annotations

import re

from pgcore.pgtypes import OID_BY_NAME

from ..protocol.errors import PgError
from .sqltext import fold_ident as _ident
from .sqltext import strip_comments
from .sqltext import unquote as _unquote

_DECLARE = re.compile(
    r"^\s*DECLARE\s+(?P<name>\"(?:[^\"]|\"\")*\"|[\w$]+)\s+(?P<opts>(?:\w+\s+)*?)CURSOR\s+"
    r"(?:(?P<hold>WITH|WITHOUT)\s+HOLD\s+)?FOR\s+(?P<query>.*)$", re.I | re.S)


def parse_declare(sql: str) -> tuple[str, bool, bool, str]:
    """(cursor name, binary, with hold, query) of a DECLARE statement."""
    m = _DECLARE.match(strip_comments(sql).strip().rstrip(";"))
    if not m:
        raise PgError("42601", "syntax error in DECLARE",
                      hint="write DECLARE name [BINARY] [NO SCROLL] CURSOR [WITH HOLD] FOR query")
    binary = "BINARY" in m.group("opts").upper().split()
    return _ident(m.group("name")), binary, (m.group("hold") or "").upper() == "WITH", m.group("query")


TYPE_OIDS = {**OID_BY_NAME, "unknown": 0}

_PREPARE = re.compile(r"^\s*PREPARE\s+(?P<name>\"(?:[^\"]|\"\")*\"|[\w$]+)\s*(?:\((?P<types>[^)]*)\))?\s*AS\s+"
                      r"(?P<body>.*)$", re.I | re.S)
_EXPLAIN = re.compile(r"^EXPLAIN\s+", re.I)
_EXECUTE = re.compile(r"^\s*EXECUTE\s+(?P<name>\"(?:[^\"]|\"\")*\"|[\w$]+)\s*(?:\((?P<args>.*)\))?\s*$", re.I | re.S)


def parse_prepare(sql: str) -> tuple[str, list[int], str]:
    """(name, parameter type oids, statement) of SQL-level PREPARE."""
    m = _PREPARE.match(strip_comments(sql).strip().rstrip(";"))
    if not m:
        raise PgError("42601", "syntax error in PREPARE", hint="write PREPARE name [(type, ...)] AS query")
    oids = []
    for t in filter(None, (x.strip().lower() for x in (m.group("types") or "").split(","))):
        if t not in TYPE_OIDS:
            raise PgError("0A000", f"PREPARE parameter type \"{t}\" is not supported")
        oids.append(TYPE_OIDS[t])
    return _ident(m.group("name")), oids, m.group("body")


def _split_args(text: str) -> list[str]:
    out, depth, cur, i = [], 0, [], 0
    while i < len(text):
        c = text[i]
        if c == "'":
            j = i + 1
            while j < len(text):
                if text[j] == "'" and text[j + 1:j + 2] == "'":
                    j += 2
                    continue
                if text[j] == "'":
                    break
                j += 1
            cur.append(text[i:j + 1])
            i = j + 1
            continue
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        if c == "," and depth == 0:
            out.append("".join(cur).strip())
            cur = []
        else:
            cur.append(c)
        i += 1
    if cur or out:
        out.append("".join(cur).strip())
    return out


def parse_execute(sql: str) -> tuple[str, list[str | None]]:
    """(name, text-format arguments) of SQL-level EXECUTE (or EXPLAIN EXECUTE); arguments must be literals."""
    m = _EXECUTE.match(_EXPLAIN.sub("", strip_comments(sql).strip().rstrip(";")))
    if not m:
        raise PgError("42601", "syntax error in EXECUTE", hint="write EXECUTE name (literal, ...)")
    args: list[str | None] = []
    for a in _split_args(m.group("args") or ""):
        if a.upper() == "NULL":
            args.append(None)
        elif len(a) >= 2 and a[0] == a[-1] == "'":
            args.append(_unquote(a))
        elif re.fullmatch(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?|TRUE|FALSE", a, re.I):
            args.append(a)
        else:
            raise PgError("0A000", "EXECUTE arguments must be literals", hint=f"got {a!r}")
    return _ident(m.group("name")), args
