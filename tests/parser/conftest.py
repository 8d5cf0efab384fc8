"""Parser test fixtures: an Adult-shaped database filled by the product's own demo generator (so the tests
run from the repository alone), marginal histograms cached per marginal, and a small table with nullable
and text domains."""

from __future__ import annotations

import random
from collections.abc import Iterable, Iterator, Sequence
from decimal import Decimal
from typing import Any

import numpy as np
import psycopg
import pytest
from parser_catalog import ADULT, PEOPLE

from parser.model.linear import LinearQuery
from parser.model.schema import TableSchema
from parser.pushdown.histogram import to_dense
from parser.pushdown.sql import derived_index, derived_marginal_sql, marginal_sql


class Histograms:
    """Dense marginal histograms of one table, each computed once by PostgreSQL (marginal_sql)."""

    def __init__(self, conn: psycopg.Connection, table: TableSchema) -> None:
        self.conn, self.table = conn, table
        self.cache: dict[tuple[str, ...], np.ndarray] = {}

    def __getitem__(self, attrs: tuple[str, ...]) -> np.ndarray:
        if attrs not in self.cache:
            rows = self.conn.execute(marginal_sql(self.table, attrs)).fetchall()
            self.cache[attrs] = to_dense(self.table, attrs, rows)
        return self.cache[attrs]

    def answer(self, q: LinearQuery) -> float:
        """The exact answer of ``q``; over a derived table (COUNT(DISTINCT)) from its histogram, read by
        PostgreSQL as the engine reads it."""
        if q.source is None:
            return q.answer(self.table, self[q.marginal])
        if q.is_zero:
            return 0.0
        hist = np.zeros(q.source.shape(q.marginal))
        index = [derived_index(q.source, a) for a in q.marginal]
        for row in self.conn.execute(derived_marginal_sql(q.source, q.marginal)).fetchall():
            idx = tuple(f(v) for f, v in zip(index, row[:-1], strict=True))
            if None not in idx:
                hist[idx] += row[-1]
        return q.answer(q.source, hist)


def _new_database(embedded_pg: Any, name: str) -> str:
    with psycopg.connect(embedded_pg.dsn(), autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}"')
        admin.execute(f'CREATE DATABASE "{name}"')
    return str(embedded_pg.dsn(name))


def table_database(embedded_pg: Any, name: str, table: str, rows: Iterable[Sequence[Any]],
                   setup: Sequence[str] = ()) -> psycopg.Connection:
    """An autocommit connection to a new database ``name`` holding ``table`` (``"t (a int, b text)"``, its
    CREATE TABLE) filled with ``rows`` in column order, after the ``setup`` statements."""
    conn = psycopg.connect(_new_database(embedded_pg, name), autocommit=True)
    for stmt in setup:
        conn.execute(stmt)
    conn.execute(f"CREATE TABLE {table}")
    with conn.cursor().copy(f"COPY {table.split(' (', 1)[0]} FROM STDIN") as cp:
        for r in rows:
            cp.write_row(r)
    return conn


@pytest.fixture(scope="session")
def adult_conn(embedded_pg: Any) -> Iterator[psycopg.Connection]:
    """public.adult with the demo generator's seeded rows (never ../shared: these tests stand alone)."""
    from proxy.config import LoadSettings
    from proxy.upstream.demo_data import ensure_table

    dsn = _new_database(embedded_pg, "parser_adult")
    ensure_table(dsn, ADULT, LoadSettings(), None)
    with psycopg.connect(dsn, autocommit=True) as conn:
        yield conn


@pytest.fixture(scope="session")
def adult_hist(adult_conn: psycopg.Connection) -> Histograms:
    return Histograms(adult_conn, ADULT)


def people_rows(n: int = 3000, seed: int = 7) -> list[tuple[Any, ...]]:
    """Rows inside PEOPLE's declared domains, NULLs included where the domain admits them."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        city = rng.choice(["Berlin", "Lyon", "Oslo", None])
        dept = rng.choice(["eng", "ops", "sales", "eng"])
        score = rng.choice([*range(-5, 11), None, None])
        level = rng.randint(1, 4)
        out.append((city, dept, score, level))
    return out


@pytest.fixture(scope="session")
def people_conn(embedded_pg: Any) -> Iterator[psycopg.Connection]:
    with table_database(embedded_pg, "parser_people", "hr.people (city text, dept text, score integer, level integer)",
                        people_rows(), setup=["CREATE SCHEMA hr"]) as conn:
        yield conn


@pytest.fixture(scope="session")
def people_hist(people_conn: psycopg.Connection) -> Histograms:
    return Histograms(people_conn, PEOPLE)


def leading_keys(plan: Any) -> int:
    """How many output columns at the start of each row are GROUP BY keys."""
    from parser.scalar import Key

    n = 0
    for e in plan.template.outputs:
        if not isinstance(e, Key):
            break
        n += 1
    return n


def norm(v: Any) -> Any:
    """PostgreSQL values -> comparable Python values (numeric -> float)."""
    if isinstance(v, Decimal):
        return float(v)
    return v


def close(a: Any, b: Any) -> bool:
    if a is None or b is None:
        # SUM over no row is NULL upstream; the plan releases a (noisy) 0 so emptiness is never revealed.
        return (a is None and b is None) or (a == 0 and b is None)
    if isinstance(a, int | float) and isinstance(b, int | float) and not isinstance(a, bool):
        return abs(float(a) - float(b)) <= 1e-9 * max(1.0, abs(float(a)), abs(float(b)))
    return bool(a == b)


def rows_match(ours: Sequence[tuple[Any, ...]], theirs: Sequence[tuple[Any, ...]], n_keys: int,
               ordered: bool) -> str | None:
    """Compare plan rows (empty groups included) with PostgreSQL's (empty groups absent). None if equal.

    With ``n_keys`` group-key columns leading each row, PostgreSQL's rows must appear among ours and every
    row of ours it lacks must be an empty group: counts 0, sums 0, averages NULL.
    """
    theirs = [tuple(norm(v) for v in r) for r in theirs]
    if ordered:
        if len(ours) != len(theirs) or not all(
            len(a) == len(b) and all(close(x, y) for x, y in zip(a, b, strict=True)) for a, b in zip(ours, theirs,
                                                                                                 strict=True)):
            return f"ordered rows differ:\n ours   {list(ours)[:8]}\n theirs {theirs[:8]}"
        return None
    by_key: dict[tuple[Any, ...], tuple[Any, ...]] = {}
    for r in theirs:
        by_key[r[:n_keys]] = r
    if n_keys == 0:
        if len(ours) != len(theirs):
            return f"row count differs: ours {ours} theirs {theirs}"
        # No key columns: compare as multisets (PostgreSQL's group order is unspecified).
        a, b = sorted(ours, key=repr), sorted(theirs, key=repr)
        if all(close(x, y) for r1, r2 in zip(a, b, strict=True) for x, y in zip(r1, r2, strict=True)):
            return None
        return f"rows differ: ours {a} theirs {b}"
    for r in ours:
        other = by_key.pop(r[:n_keys], None)
        if other is None:
            if n_keys == 0:
                return f"missing row {r}"
            if any(v not in (0, None) for v in r[n_keys:]):
                return f"empty group {r[:n_keys]} has non-zero values {r}"
            continue
        if not all(close(x, y) for x, y in zip(r, other, strict=True)):
            return f"row differs: ours {r} theirs {other}"
    if by_key:
        return f"PostgreSQL rows missing from ours: {list(by_key.values())[:5]}"
    return None
