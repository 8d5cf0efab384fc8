"""Text columns whose public value list lives in a table the DBA declares public (``values_from``): read
the list from that table (never from a protected one) and put it into the catalog before serving; each
epoch reads the lists again when it is prepared and keeps them in its spec (see lapras.engine)."""

from __future__ import annotations

import dataclasses

import psycopg
from psycopg import sql

from parser.model.schema import Catalog, value_list_sources, with_value_lists
from pgcore.identifiers import split_qualified

from ..config import Config

MAX_VALUES = 100_000


class ValueListError(RuntimeError):
    """The declared value list could not be read; the message names the column and the table."""


def read_values(conn: psycopg.Connection, source: str) -> tuple[str, ...]:
    """The distinct non-NULL values of ``schema.table.column``, in sorted order."""
    parts = split_qualified(source)
    assert parts is not None and len(parts) == 3, source  # checked when the config was read
    schema, table, column = parts
    query = sql.SQL("SELECT DISTINCT {c}::text FROM {s}.{t} WHERE {c} IS NOT NULL ORDER BY 1 LIMIT {n}").format(
        c=sql.Identifier(column), s=sql.Identifier(schema), t=sql.Identifier(table), n=sql.Literal(MAX_VALUES + 1))
    try:
        rows = conn.execute(query).fetchall()
    except psycopg.Error as exc:
        conn.rollback()
        raise ValueListError(f"cannot read the value list {source}: {str(exc).strip()}") from None
    if len(rows) > MAX_VALUES:
        raise ValueListError(f"the value list {source} has more than {MAX_VALUES:,} values")
    if not rows:
        raise ValueListError(f"the value list {source} is empty")
    return tuple(str(r[0]) for r in rows)


def read_value_lists(catalog: Catalog, dsn: str) -> dict[str, tuple[str, ...]]:
    """Every ``values_from`` list of ``catalog`` read now from its public table (empty if none): what an
    epoch fixes as its text domains when it is prepared (the engine stores them in the epoch's spec)."""
    sources = value_list_sources(catalog)
    if not sources:
        return {}
    with psycopg.connect(dsn, autocommit=True) as conn:
        return {s: read_values(conn, s) for s in sources}


def resolve_value_lists(cfg: Config, dsn: str) -> Config:
    """``cfg`` with every ``values_from`` column's values read from its public table (unchanged if none)."""
    lists = read_value_lists(cfg.catalog, dsn)
    return dataclasses.replace(cfg, catalog=with_value_lists(cfg.catalog, lists)) if lists else cfg
