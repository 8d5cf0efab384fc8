"""SELECTs made only of session functions, answered from the session as PostgreSQL would answer them.

Drivers and tools ask who and where they are, and read or change a setting, in one SELECT without FROM:
``SELECT current_database(), current_user`` (DBeaver, pgAdmin), asyncpg's type introspection
``SELECT current_setting('jit') AS cur, set_config('jit', 'off', false) AS new`` (set_config only for
``SETTABLE``). Relayed to the schema-only
catalog database they would name its reader role and database (``adult_lapras_catalog_reader``), or be
refused (set_config would leave a setting on a pooled backend). Here the names are the client's own (the
user it logged in as, the database it asked for) and settings are the session's, as SET keeps them.
Anything else in the statement (FROM, WHERE, another function, a parameter) leaves it to the catalog.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import lru_cache
from typing import Protocol

import sqlglot
from sqlglot import exp

from ..protocol.errors import PgError


class Session(Protocol):
    """What a session function reads of the session (``statements.session.Session`` is one; not imported,
    so that the router, which imports this module, and the session, which imports the router, stay a line)."""

    database: str
    user: str

    @property
    def tx(self) -> str: ...  # the transaction status: "I" outside a block
    def get(self, name: str) -> str | None: ...
    def set(self, name: str, value: str, local: bool = False) -> None: ...


Item = tuple[str, Callable[[Session], str | None], bool]
"""A result column: its name, how the session computes its value (text; None is NULL) and whether it is of
type name (the database and user functions, as in PostgreSQL) rather than text (settings)."""

PREFILTER = re.compile(r"\b(current_setting|set_config|current_database|current_catalog|current_user|"
                       r"session_user|current_role|user)\b", re.IGNORECASE)

SETTABLE = frozenset({"jit", "application_name"})
"""Settings set_config may set here: what drivers set by SELECT (asyncpg turns jit off around its type
introspection), none of which changes how the proxy answers. Others are refused as before."""

_WHO: dict[type[exp.Expr], str] = {exp.CurrentUser: "current_user", exp.SessionUser: "session_user"}
_WHO_NAMES = {"user", "current_role", "current_user", "session_user"}


def _lone_select(sql: str) -> exp.Select | None:
    """``sql`` parsed when it is one short SELECT naming a session function (the prefilter), else None."""
    if len(sql) > 2000 or not PREFILTER.search(sql):
        return None
    try:
        trees = sqlglot.parse(sql, read="postgres")
    except (sqlglot.errors.ParseError, sqlglot.errors.TokenError):
        return None
    return trees[0] if len(trees) == 1 and isinstance(trees[0], exp.Select) else None


def session_select(sql: str) -> list[Item] | None:
    """The columns of ``sql`` when it is a SELECT of session functions only, else None."""
    sel = _lone_select(sql)
    if sel is None:
        return None
    if any(sel.args.get(k) for k in ("from", "from_", "where", "group", "having", "order", "limit", "with",
                                     "distinct", "joins")):
        return None
    items = []
    for e in sel.expressions:
        item = _item(e.unalias())
        if item is None:
            return None
        items.append((e.alias if isinstance(e, exp.Alias) else item[0], item[1], item[2]))
    return items or None


def _literal(e: exp.Expr) -> str | None:
    return str(e.this) if isinstance(e, exp.Literal) and e.is_string else None


def _item(e: exp.Expr) -> Item | None:
    if isinstance(e, exp.CurrentDatabase | exp.CurrentCatalog):
        name = "current_database" if isinstance(e, exp.CurrentDatabase) else "current_catalog"
        return name, lambda s: s.database, True
    if type(e) in _WHO:
        return _WHO[type(e)], lambda s: s.user, True
    if isinstance(e, exp.Column) and not e.table and not e.this.quoted and e.name.lower() in _WHO_NAMES:
        return e.name.lower(), lambda s: s.user, True
    if not isinstance(e, exp.Anonymous):
        return None
    fn, args = str(e.this).lower(), e.expressions
    if fn == "current_setting" and 1 <= len(args) <= 2 and _literal(args[0]) is not None:
        name = _literal(args[0]) or ""
        missing_ok = len(args) == 2 and isinstance(args[1], exp.Boolean) and bool(args[1].this)
        if len(args) == 2 and not isinstance(args[1], exp.Boolean):
            return None

        def current(s: Session) -> str | None:
            value = s.get(name)
            if value is None and not missing_ok:
                raise PgError("42704", f'unrecognized configuration parameter "{name}"')
            return value

        return "current_setting", current, False
    if fn == "set_config" and len(args) == 3 and isinstance(args[2], exp.Boolean):
        setting, value = _literal(args[0]), _literal(args[1])
        if setting is None or value is None or setting.lower() not in SETTABLE:
            return None  # other settings stay refused (statement_timeout, search_path: use SET)

        local = bool(args[2].this)

        def set_config(s: Session) -> str | None:
            assert setting is not None
            if local and s.tx == "I":
                return value  # is_local outside a block: this statement's own transaction, over as it ends
            s.set(setting, value, local=local)  # in a block, is_local lasts until it ends, as SET LOCAL
            return s.get(setting)

        return "set_config", set_config, False
    return None


@lru_cache(maxsize=512)
def with_client_user(sql: str, user: str) -> str:
    """``sql`` as the catalog database runs it: a SELECT without FROM that mixes session functions with others
    (DBeaver's ``SELECT current_schema(),session_user``), with each function naming the user written as the
    client's own name (``'analyst'::name``), its output column keeping the function's name. The database's
    name is the catalog relay's to write, in every relayed statement (``catalog/client_names.py``)."""
    sel = _lone_select(sql)
    if sel is None or any(sel.args.get(k) for k in ("from", "from_", "with", "joins")):
        return sql
    changed = False
    for item in list(sel.expressions):
        for node in list(item.walk()):
            name = _WHO.get(type(node))
            if name is None and isinstance(node, exp.Column) and not node.table and not node.this.quoted \
                    and node.name.lower() in _WHO_NAMES:
                name = node.name.lower()
            if name is None:
                continue
            literal = exp.cast(exp.Literal.string(user), exp.DataType.build("name", dialect="postgres"))
            if node is item:
                item.replace(exp.alias_(literal, name, quoted=True))
            else:
                node.replace(literal)
            changed = True
    return sel.sql(dialect="postgres") if changed else sql
