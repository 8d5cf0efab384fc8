"""pg_stat_user_tables answered with the tables and no figures, so that tools' table sync works.

Metabase's PostgreSQL driver (since v50) LEFT JOINs `pg_stat_user_tables` in its table sync for an
estimated row count (`stat.n_live_tup AS estimated_row_count`). The real view is revoked in the shadow
database and refused by the router, which failed the whole sync. A reference to it (bare or as
`pg_catalog.pg_stat_user_tables`) is rewritten into a subquery over `pg_class` that lists the same tables
with the view's own columns and types, every counter and timestamp NULL: no row estimate, size or
activity is read (invariant 3). NULL rather than 0, because 0 says "empty table" (Metabase flags empty
tables) while the proxy does not tell. A statement that cannot be rewritten reaches the shadow database
as written, where the revoked view refuses it.
"""

from __future__ import annotations

import sqlglot
from sqlglot import exp

from pgcore.identifiers import quote_ident

VIEW = "pg_stat_user_tables"

COLUMNS_SQL = ("SELECT attname, format_type(atttypid, atttypmod) FROM pg_catalog.pg_attribute "
               "WHERE attrelid = 'pg_catalog.pg_stat_user_tables'::regclass AND attnum > 0 "
               "AND NOT attisdropped ORDER BY attnum")
"""The view's columns on this server (they change between PostgreSQL versions); reading pg_attribute
needs no privilege on the view."""

_KEPT = {"relid": "c.oid", "schemaname": "n.nspname", "relname": "c.relname"}


def figure_free_sql(columns: list[tuple[str, str]]) -> str:
    """The replacement: the tables pg_stat_user_tables lists (its own relkind and schema filter), each
    other column NULL of its declared type."""
    select = ", ".join(f"{_KEPT.get(name, f'NULL::{typ}')} AS {quote_ident(name)}" for name, typ in columns)
    return (f"SELECT {select} FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n "
            "ON n.oid = c.relnamespace WHERE c.relkind IN ('r', 't', 'm', 'p') "
            "AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname !~ '^pg_toast'")


def mentions(sql_text: str) -> bool:
    return VIEW in sql_text.lower()


def rewrite(sql_text: str, replacement: str, view: str = VIEW) -> str:
    """`sql_text` with every table reference to `view` (pg_stat_user_tables) replaced by `replacement` under
    the same alias (or the view's name); the text unchanged when it names none or does not parse."""
    try:
        tree = sqlglot.parse_one(sql_text, read="postgres")
        sub = sqlglot.parse_one(replacement, read="postgres")
    except sqlglot.errors.SqlglotError:
        return sql_text
    changed = False
    for table in list(tree.find_all(exp.Table)):
        if table.name.lower() != view or table.args.get("catalog") or table.db.lower() not in ("", "pg_catalog"):
            continue
        alias = table.args.get("alias")
        alias = alias.copy() if alias is not None else exp.TableAlias(this=exp.to_identifier(view))
        table.replace(exp.Subquery(this=sub.copy(), alias=alias))
        changed = True
    return tree.sql(dialect="postgres") if changed else sql_text
