"""Public tables (``[public_tables.NAME]``): read each one whole from the upstream, with its columns, its
one-column unique keys and whether it is a base table, into ``Catalog.public`` (parser/model/public.py).

The proxy serves the copy: the shadow catalog database holds it with its rows (plain SELECTs and psql's
``\\d`` read it there, never the upstream), and the parser joins protected tables to it. A table that is
not a base table upstream (a view, a materialised view, a foreign table: any of them could read a
protected table) or that cannot be read is kept with its ``problem`` and is neither copied nor joined.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Sequence
from typing import Any

import psycopg
from psycopg import sql

from parser.model.public import PublicColumn, PublicTable
from parser.model.schema import Catalog
from pgcore.identifiers import display_ident

log = logging.getLogger(__name__)

MAX_ROWS = 200_000
"""Rows a public table may hold: it is copied whole into the proxy's memory and the shadow database."""

_KINDS = {"v": "a view", "m": "a materialized view", "f": "a foreign table", "S": "a sequence", "i": "an index",
          "c": "a composite type", "I": "a partitioned index", "t": "a TOAST table"}

_RELATION = """SELECT c.oid, c.relkind FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
               WHERE n.nspname = %s AND c.relname = %s"""
_COLUMNS = """SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute
              WHERE attrelid = %s AND attnum > 0 AND NOT attisdropped ORDER BY attnum"""
_UNIQUE = """SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
             WHERE i.indrelid = %s AND i.indisunique AND i.indnkeyatts = 1 AND i.indpred IS NULL
               AND i.indexprs IS NULL"""


def read_public_table(conn: psycopg.Connection, t: PublicTable) -> PublicTable:
    """``t`` read now: its columns, unique keys and rows, or its ``problem``."""
    name = f"{display_ident(t.schema)}.{display_ident(t.name)}"
    try:
        rel = conn.execute(_RELATION, (t.schema, t.name)).fetchone()
        if rel is None:
            return dataclasses.replace(t, problem=f"{name} does not exist upstream", loaded=True)
        oid, kind = rel
        if kind not in ("r", "p"):
            return dataclasses.replace(t, problem=f"{name} is {_KINDS.get(kind, 'not a table')} upstream, not a "
                                       "base table (it could read a protected table)", loaded=True)
        cols = tuple(PublicColumn(str(n), str(ty)) for n, ty in conn.execute(_COLUMNS, (oid,)).fetchall())
        unique = frozenset(str(r[0]) for r in conn.execute(_UNIQUE, (oid,)).fetchall())
        query = sql.SQL("SELECT {} FROM {}.{} LIMIT {}").format(
            sql.SQL(", ").join(sql.SQL("{}::text").format(sql.Identifier(c.name)) for c in cols),
            sql.Identifier(t.schema), sql.Identifier(t.name), sql.Literal(MAX_ROWS + 1))
        rows = conn.execute(query).fetchall()
    except psycopg.Error as exc:
        conn.rollback()
        return dataclasses.replace(t, problem=f"cannot read {name}: {str(exc).strip()}", loaded=True)
    if len(rows) > MAX_ROWS:
        return dataclasses.replace(t, problem=f"{name} has more than {MAX_ROWS:,} rows", loaded=True)
    # Sorted so that a copy read twice compares equal whatever order the upstream returned.
    ordered = tuple(sorted((tuple(r) for r in rows), key=lambda r: tuple((v is None, v or "") for v in r)))
    return dataclasses.replace(t, columns=cols, unique=unique, rows=ordered, problem=None, loaded=True)


def read_public_tables(tables: Sequence[PublicTable], dsn: str) -> tuple[PublicTable, ...]:
    """Every public table read now (each with its problem, if any)."""
    if not tables:
        return ()
    with psycopg.connect(dsn, autocommit=True) as conn:
        out = tuple(read_public_table(conn, t) for t in tables)
    for t in out:
        if t.problem:
            log.warning("public table %s is not served: %s", t.qualified_name, t.problem)
    return out


def with_public_tables(catalog: Catalog, dsn: str) -> Catalog:
    """``catalog`` with its public tables read now (unchanged when it declares none)."""
    if not catalog.public:
        return catalog
    return dataclasses.replace(catalog, public=read_public_tables(catalog.public, dsn))


def public_table_warnings(catalog: Catalog) -> list[str]:
    """A public table with a column named like a protected table's privacy unit may hold people's ids."""
    units = {t.privacy_unit: t for t in catalog.tables if t.privacy_unit}
    out = []
    for p in catalog.public:
        for c in p.columns:
            if c.name in units:
                out.append(f"public table {p.qualified_name} has a column {display_ident(c.name)}, named like the "
                           f"privacy unit of protected table {units[c.name].qualified_name}: make sure it holds "
                           "nothing about a person (it is served as it is)")
    return out


REFRESH_S = 60.0
"""How often a serving proxy reads its public tables again; a changed copy replaces the old one at once."""


async def follow_public_tables(engine: Any, dsn: str, every: float = REFRESH_S) -> None:
    """Read the public tables every ``every`` seconds; when one changed, plan over the new copy (the DP
    service follows ``engine.catalog``) and let the shadow database copy it (its digest changed)."""
    while True:
        await asyncio.sleep(every)
        try:
            base = engine.base_catalog
            fresh = await asyncio.to_thread(read_public_tables, base.public, dsn)
            if fresh != base.public:
                # The configured catalog first: an epoch adopted meanwhile derives its catalog from it.
                engine.base_catalog = dataclasses.replace(base, public=fresh)
                engine.catalog = dataclasses.replace(engine.catalog, public=fresh)
                log.info("public tables changed upstream: serving the new copy")
        except Exception as exc:  # the upstream may be down for a while; keep the last copy
            log.warning("reading the public tables failed: %s", exc)
