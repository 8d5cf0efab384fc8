"""The database name catalog queries show: the one the client connected to, not the schema-only catalog
database's internal name (``adult_lapras_catalog``).

Tools filter their metadata on it (``WHERE table_catalog = 'adult'``: DBeaver, Power BI, Tableau) and list
databases (psql's ``\\l``). Three places name the database, each handled where it is robust:

- information_schema's views compute every ``*_catalog`` column from ``current_database()``: at set-up
  their definitions in the catalog database read the name from the setting ``lapras.client_database``
  instead (``localize_information_schema``), which each pooled backend of a proxy gets at start-up
  (``startup_option``). Any SQL over those views then sees the client's name; the set-up's own
  connections, without the setting, see the real name.
- ``current_database()`` and ``current_catalog`` written in a relayed statement are replaced by the
  client's name (a one-column subquery of a ``name`` literal, so the output column keeps the function's
  name), outside strings, quoted names and comments (``with_client_database``).
- ``pg_database`` (a cluster-wide catalog: it lists the protected database and every other database of
  the cluster) as a table reference becomes one row, the catalog database's own, under the client's name
  (``database_row_sql``, applied with table_stats.rewrite).
"""

from __future__ import annotations

import re
from typing import Any

import psycopg
from psycopg import sql

from pgcore.identifiers import quote_ident
from pgcore.sqlscan import tokens

SETTING = "lapras.client_database"
TABLE = "pg_database"

_CURRENT = re.compile(r'(?<![\w.$"])(?:(?:pg_catalog|(?-i:"pg_catalog"))\s*\.\s*)?'
                      r'(?:(?:current_database|(?-i:"current_database"))\s*\(\s*\)|current_catalog\b(?!\s*\())',
                      re.IGNORECASE)
_KEPT_NAMES = frozenset({'"pg_catalog"', '"current_database"'})
"""Quoted names that spell the function or its schema as PostgreSQL folds them (``"pg_catalog".current_database()``
calls the same function); any other quoted name, string or comment is masked before matching."""
_OWN_DATABASE = re.compile(r"\b(?:has_database_privilege|pg_database_size)\s*\(\s*(?:[^,()]*,\s*)?$", re.IGNORECASE)
"""A call asking about the database by name: it keeps current_database(), the catalog database's own (its
size and privileges are the ones the client's database has there; the name may not exist on the cluster)."""
_PREFILTER = re.compile(r"current_(?:database|catalog)", re.IGNORECASE)

_LOCALIZED = f"(COALESCE(pg_catalog.current_setting('{SETTING}'::text, true), current_database()::text))::name"
"""What information_schema's views compute in place of current_database()."""

COLUMNS_SQL = ("SELECT attname FROM pg_catalog.pg_attribute WHERE attrelid = 'pg_catalog.pg_database'::regclass "
               "AND attnum > 0 AND NOT attisdropped ORDER BY attnum")
"""pg_database's columns on this server (they change between PostgreSQL versions)."""


def literal(value: str) -> str:
    return "'" + value.replace("'", "''") + "'::pg_catalog.name"


def startup_option(client_database: str) -> str:
    """The ``options`` start-up switch setting ``lapras.client_database`` (spaces and backslashes escaped as
    PostgreSQL's options parsing wants)."""
    escaped = client_database.replace("\\", "\\\\").replace(" ", "\\ ")
    return f"-c {SETTING}={escaped}"


def with_client_database(sql_text: str, client_database: str) -> str:
    """``sql_text`` with each call of current_database() (bare or pg_catalog-qualified, either name quoted
    or not) and each current_catalog, outside strings, other quoted names and comments, replaced by the
    client's database name."""
    if not client_database or not _PREFILTER.search(sql_text):
        return sql_text
    value = literal(client_database)

    def name(m: re.Match[str]) -> str:
        if _OWN_DATABASE.search(m.string, 0, m.start()):
            return m.group(0)
        # A one-column subquery: the output column keeps the function's name, as PostgreSQL names it.
        column = "current_catalog" if m.group(0).lower().endswith("catalog") else "current_database"
        return f"(SELECT {value} AS {column})"

    masked = list(sql_text)  # same length: a match's span in the mask is its span in the text
    for start, end in tokens(sql_text):
        if sql_text[start:end] not in _KEPT_NAMES:
            masked[start:end] = "\x00" * (end - start)
    out: list[str] = []
    pos = 0
    for m in _CURRENT.finditer("".join(masked)):
        out.append(sql_text[pos:m.start()])
        out.append(name(m))
        pos = m.end()
    out.append(sql_text[pos:])
    return "".join(out)


def mentions_databases(sql_text: str) -> bool:
    return TABLE in sql_text.lower()


def database_row_sql(columns: list[str], shadow_database: str, client_database: str) -> str:
    """pg_database as clients see it: the catalog database's row alone, its datname the client's."""
    select = ", ".join(literal(client_database) + " AS datname" if c == "datname" else f"d.{quote_ident(c)}"
                       for c in columns)
    return (f"SELECT {select} FROM pg_catalog.pg_database d "
            f"WHERE d.datname = {literal(shadow_database)}")


async def localize_information_schema(conn: psycopg.AsyncConnection[Any]) -> None:
    """Redefine information_schema's views in this (the catalog) database so that their current_database()
    reads ``lapras.client_database`` when set (run as a superuser inside the set-up transaction). Views done
    already are left alone, so a restart writes nothing."""
    await conn.execute("SET LOCAL search_path = pg_catalog")
    cur = await conn.execute(
        "SELECT c.relname, pg_get_viewdef(c.oid) FROM pg_class c WHERE c.relkind = 'v' "
        "AND c.relnamespace = 'information_schema'::regnamespace ORDER BY c.oid")
    for name, definition in await cur.fetchall():
        if "current_database()" not in definition or SETTING in definition:
            continue
        body = definition.replace("current_database()", _LOCALIZED)
        await conn.execute(sql.SQL("CREATE OR REPLACE VIEW {} AS {}").format(
            sql.Identifier("information_schema", name), sql.SQL(body.rstrip().rstrip(";"))))
