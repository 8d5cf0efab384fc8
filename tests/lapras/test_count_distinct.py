"""COUNT(DISTINCT) on a real PostgreSQL: units present per cell, each unit bounded to g cells in the
pushed-down SQL (``parser.sql.unit_cells_sql``), the same cells whatever the physical order."""

from __future__ import annotations

import os
from dataclasses import replace

import numpy as np
import psycopg
import pytest

from parser.schema import Attribute, IntType, TableSchema
from parser.sql import cell_expr, unit_cells_sql

K, G = 6, 2
ROWLEVEL = TableSchema("visits", (Attribute("a", IntType(0, 9)), Attribute("c", IntType(0, 39))))
UNIT = replace(ROWLEVEL, privacy_unit="user_id", max_rows_per_unit=K)
BOUNDED = replace(UNIT, max_groups_per_unit=G)


def _rows(seed: int = 11) -> list[tuple[int, int, int]]:
    """1,500 light users with 1-3 rows in one or two values of ``a``, 15 heavy users with 200 rows over
    every value of ``a``."""
    rng = np.random.default_rng(seed)
    out = []
    for u in range(1500):
        home = [int(x) for x in rng.integers(0, 10, size=2)]
        out += [(u, home[int(rng.integers(0, 2))], int(rng.integers(0, 40))) for _ in range(int(rng.integers(1, 4)))]
    for u in range(1500, 1515):
        out += [(u, int(rng.integers(0, 10)), int(rng.integers(0, 40))) for _ in range(200)]
    return out


def _load(dsn: str, rows: list[tuple[int, int, int]]) -> None:
    with psycopg.connect(dsn) as conn:
        conn.execute("CREATE TABLE visits (user_id bigint, a int, c int)")
        with conn.cursor().copy("COPY visits (user_id, a, c) FROM STDIN") as cp:
            for r in rows:
                cp.write_row(r)


@pytest.fixture(scope="module")
def data(embedded_pg) -> tuple[list[tuple[int, int, int]], str, str]:  # type: ignore[no-untyped-def]
    """The rows, and two databases holding them in opposite physical orders."""
    rows = _rows()
    dsns = []
    for i in range(2):
        name = f"distinct_{os.getpid()}_{i}"
        with psycopg.connect(embedded_pg.dsn(), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
            conn.execute(f'CREATE DATABASE "{name}"')
        dsns.append(embedded_pg.dsn(name))
    _load(dsns[0], rows)
    _load(dsns[1], rows[::-1])
    return rows, dsns[0], dsns[1]


def _cells(dsn: str, table: TableSchema, where: str | None = None) -> list[tuple[int, int]]:
    sql = unit_cells_sql(table, [cell_expr(table.attributes[0])], where)
    with psycopg.connect(dsn) as conn:
        return sorted((int(u), int(a)) for u, a in conn.execute(sql).fetchall())


def test_each_unit_is_kept_in_at_most_g_cells_the_same_ones_in_any_order(data) -> None:  # type: ignore[no-untyped-def]
    rows, first, second = data
    kept = _cells(first, BOUNDED)
    per_unit: dict[int, set[int]] = {}
    for u, a in kept:
        per_unit.setdefault(u, set()).add(a)
    assert max(len(v) for v in per_unit.values()) == G
    assert kept == _cells(second, BOUNDED)
    # Without g the k kept rows bound the cells; every kept cell is one the unit has rows in.
    unbounded = _cells(first, UNIT)
    assert set(kept) <= set(unbounded)
    assert max(sum(1 for u, _ in unbounded if u == x) for x in range(1500, 1515)) <= K
    real = {(u, a) for u, a, _ in rows}
    assert set(unbounded) <= real
    light = {(u, a) for u, a, _ in rows if u < 1500}
    assert {p for p in kept if p[0] < 1500} == light  # light users are in at most 2 cells: all kept
    # A filter applies before the bound: the cells kept are among the rows that pass it.
    assert all(a >= 5 for _, a in _cells(first, BOUNDED, "a >= 5"))
