"""Helpers of the engine tests: a small catalog with a known histogram, plans through the real parser."""

from __future__ import annotations

import os
from collections.abc import Iterable

import numpy as np
import psycopg

import parser as sqlparser
from parser.model.schema import Attribute, Catalog, IntType, TableSchema, TextType

TABLE = TableSchema("t", (
    Attribute("a", IntType(0, 9)),
    Attribute("b", TextType(values=("x", "y", "z"))),
    Attribute("c", IntType(0, 39)),
))
CATALOG = Catalog((TABLE,))


def make_hist(seed: int = 7) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 60, size=(10, 3, 40)).astype(float)


def plan(sql: str):  # type: ignore[no-untyped-def]
    return sqlparser.plan_query(sql, CATALOG)


def range_sqls(k: int, seed: int) -> list[str]:
    """k distinct one-attribute range counts on c (the stream generator of the engine tests)."""
    rng = np.random.default_rng(seed)
    seen: set[tuple[int, int]] = set()
    out = []
    while len(out) < k:
        lo, hi = sorted(int(v) for v in rng.integers(0, 40, 2))
        if (lo, hi) not in seen:
            seen.add((lo, hi))
            out.append(f"SELECT count(*) FROM t WHERE c BETWEEN {lo} AND {hi}")
    return out


def events_database(embedded_pg, name: str, rows: Iterable[tuple[int | None, int, int, int]],  # type: ignore[no-untyped-def]
                    template: str | None = None) -> str:
    """Conninfo of a new database ``NAME_<pid>`` whose table ``events (user_id, day, kind, amount)`` holds
    ``rows`` (the per-unit bounding tests' table), added to a copy of database ``TEMPLATE_<pid>`` if given."""
    name = f"{name}_{os.getpid()}"
    copy = f' TEMPLATE "{template}_{os.getpid()}"' if template else ""
    with psycopg.connect(embedded_pg.dsn(), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"{copy}')
    dsn = embedded_pg.dsn(name)
    with psycopg.connect(dsn) as conn:
        if template is None:
            conn.execute("CREATE TABLE events (user_id bigint, day int, kind int, amount int)")
        with conn.cursor().copy("COPY events (user_id, day, kind, amount) FROM STDIN") as cp:
            for r in rows:
                cp.write_row(r)
    return dsn
