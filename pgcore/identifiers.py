"""PostgreSQL names: how SQL text folds them, how the proxy quotes them, which ones PostgreSQL accepts.

Every schema, table and column name the proxy reads from SQL goes through ``fold`` and every name it
writes into SQL, messages or canonical keys through ``quote_ident`` or ``display_ident``: one place, the
rules PostgreSQL itself applies (scan.l's ``downcase_truncate_identifier``, ruleutils' ``quote_identifier``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache
from typing import Any

from sqlglot import exp
from sqlglot.dialects.postgres import Postgres
from sqlglot.tokens import TokenType

__all__ = ["MAX_NAME_BYTES", "display_ident", "fold", "mention_pattern", "name_problem", "qualified", "quote_ident",
           "split_list", "split_qualified", "truncate"]

MAX_NAME_BYTES = 63
"""NAMEDATALEN - 1: the longest name PostgreSQL stores, in bytes of the server encoding (UTF-8 here)."""

_DIALECT = Postgres()
_PLAIN = re.compile(r"[a-z_][a-z0-9_$]*")
_BARE = re.compile(r"[^\W\d][\w$]*")


def truncate(name: str, limit: int = MAX_NAME_BYTES) -> str:
    """``name`` cut to ``limit`` bytes (63) at a character boundary, as PostgreSQL's lexer cuts long
    identifiers."""
    raw = name.encode("utf-8")
    if len(raw) <= limit:
        return name
    return raw[:limit].decode("utf-8", errors="ignore")


def fold(node: Any) -> str:
    """The name an identifier in SQL denotes: quoted ones as written, unquoted ones with A-Z lower-cased
    (sqlglot's PostgreSQL normalisation, ASCII only as PostgreSQL does in UTF-8), both cut to 63 bytes."""
    if isinstance(node, exp.Identifier):
        text = str(node.this)
        # Only short texts are cached: a key may be as long as a statement allows.
        fn = _fold if len(text) <= 4 * MAX_NAME_BYTES else _fold.__wrapped__
        return fn(text, bool(node.quoted))
    if isinstance(node, exp.Expr):
        return fold(node.this) if node.this is not None else truncate(node.name)
    return truncate(str(node).lower())


def split_qualified(text: str) -> tuple[str, ...] | None:
    """The names of a dotted SQL name such as ``public."Sales 3".city`` (each folded as in SQL), or None
    when ``text`` is not one (empty parts, keywords or anything else between the dots)."""
    return _names(text, TokenType.DOT)


def split_list(text: str) -> tuple[str, ...] | None:
    """The names of a comma-separated list such as ``age, "Number of Records"`` (each folded as in SQL),
    or None when ``text`` is not one."""
    return _names(text, TokenType.COMMA)


def _names(text: str, separator: TokenType) -> tuple[str, ...] | None:
    try:
        tokens = _DIALECT.tokenize(text)
    except Exception:  # noqa: BLE001 - sqlglot raises several kinds on bad text; all mean "not a name"
        return None
    names: list[str] = []
    for i, tok in enumerate(tokens):
        if i % 2:
            if tok.token_type is not separator:
                return None
        elif tok.token_type is TokenType.IDENTIFIER:
            names.append(truncate(tok.text))
        elif _BARE.fullmatch(tok.text):  # a bare word, keywords included (PostgreSQL takes them after a dot)
            names.append(_fold.__wrapped__(tok.text, False))
        else:
            return None
    return tuple(names) if names and len(tokens) % 2 else None


@lru_cache(maxsize=16384)
def _fold(text: str, quoted: bool) -> str:
    # Cached: statements repeat their few names many times, and a tree node's copy costs ~10 us.
    return truncate(str(_DIALECT.normalize_identifier(exp.Identifier(this=text, quoted=quoted)).this))


def quote_ident(name: str) -> str:
    """``name`` as a quoted SQL identifier (always quoted, so case and every character are kept): the
    only way the proxy writes a name into SQL it sends to a database."""
    return '"' + name.replace('"', '""') + '"'


@lru_cache(maxsize=65536)
def display_ident(name: str) -> str:
    """``name`` as PostgreSQL shows it in SQL text: bare when it reads back unchanged unquoted (lower case
    letters, digits, ``_``, ``$``), else quoted. Used in hints, EXPLAIN and canonical keys, where it is
    also unambiguous: a quoted name starts with ``"`` and ends at its closing quote."""
    return name if _PLAIN.fullmatch(name) else quote_ident(name)


def qualified(schema: str, name: str) -> str:
    """``schema.name`` for messages and keys; each part displayed as ``display_ident`` does."""
    return f"{display_ident(schema)}.{display_ident(name)}"


def mention_pattern(names: Iterable[str]) -> re.Pattern[str] | None:
    """A pattern finding any of ``names`` in SQL text as a whole name, in any case (a superset of the
    references: unquoted names fold, quoted ones may sit between quotes). Names may start or end with
    any character, so whole means "not inside a longer run of identifier characters", not ``\\b``."""
    # A name with a double quote is written with it doubled inside a quoted identifier.
    alts = sorted({f for n in names if n for f in (n, n.replace('"', '""'))}, key=lambda n: (-len(n), n))
    if not alts:
        return None
    # A name of the full 63 bytes is also what any longer identifier starting with it is cut to.
    parts = [re.escape(n) + ("" if len(n.encode("utf-8")) >= MAX_NAME_BYTES else r"(?![\w$])") for n in alts]
    return re.compile(r"(?<![\w$])(?:" + "|".join(parts) + ")", re.IGNORECASE)


def name_problem(name: str) -> str | None:
    """Why PostgreSQL would not store ``name`` as a schema, table or column name, or None if it would."""
    if not name:
        return "must not be empty (PostgreSQL names have at least one character)"
    if "\x00" in name:
        return "must not contain the NUL character"
    size = len(name.encode("utf-8"))
    if size > MAX_NAME_BYTES:
        return (f"is {size} bytes long in UTF-8; PostgreSQL names are at most {MAX_NAME_BYTES} bytes "
                f"(it would cut it to {truncate(name)!r}): shorten it")
    return None
