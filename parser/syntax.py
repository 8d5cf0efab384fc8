"""SQL text -> sqlglot tree, with PostgreSQL-style syntax errors (42601 and a 1-based position)."""

from __future__ import annotations

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from .errors import SYNTAX_ERROR, Refusal


def _offset(sql: str, line: int, col: int) -> int:
    """0-based offset of sqlglot's (1-based line, 1-based col of a token's last character)."""
    lines = sql.split("\n")
    return sum(len(x) + 1 for x in lines[: max(line - 1, 0)]) + col - 1


def parse_statements(sql: str) -> list[exp.Expression]:
    """Parse every statement of ``sql`` (empty ones dropped); raise Refusal 42601 on a syntax error."""
    try:
        trees = sqlglot.parse(sql, read="postgres")
    except ParseError as e:
        raise _syntax_refusal(sql, e) from None
    except TokenError as e:
        raise Refusal(SYNTAX_ERROR, f"syntax error: {e}") from None
    return [t for t in trees if t is not None]


def _syntax_refusal(sql: str, e: ParseError) -> Refusal:
    err = e.errors[0] if e.errors else {}
    highlight = str(err.get("highlight") or "")
    line, col = err.get("line"), err.get("col")
    if not isinstance(line, int) or not isinstance(col, int):
        return Refusal(SYNTAX_ERROR, "syntax error")
    end = _offset(sql, line, col)
    start = max(end - len(highlight) + 1, 0)
    rest = sql[end + 1 :].strip().rstrip(";").strip()
    desc = str(err.get("description") or "")
    # sqlglot blames the last token when input ends early; PostgreSQL says "at end of input" there.
    if not rest and ("Required keyword" in desc or "Expecting" in desc or "Expected" in desc):
        return Refusal(SYNTAX_ERROR, "syntax error at end of input", position=len(sql.rstrip().rstrip(";")) + 1)
    token = sql[start : end + 1] if highlight else highlight
    return Refusal(SYNTAX_ERROR, f'syntax error at or near "{token}"', position=start + 1, detail=desc or None)


def position_of(node: exp.Expression | None) -> int | None:
    """1-based offset of the first token of ``node`` that sqlglot located, as PostgreSQL reports it."""
    if node is None:
        return None
    best: int | None = None
    for n in node.walk():
        meta = n.meta if isinstance(n, exp.Expression) else None
        if meta and isinstance(meta.get("start"), int):
            start = int(meta["start"])
            if best is None or start < best:
                best = start
    return None if best is None else best + 1
