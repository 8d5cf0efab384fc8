"""Numeric and float measures and booleans against PostgreSQL: clamped SUM/AVG (their sensitivity from the
clamp), filters and buckets over declared bins, boolean cells; the plan's exact linear answers (computed by
PostgreSQL through the pushed-down SQL) equal PostgreSQL's own answer to the same SQL."""

from __future__ import annotations

import os
import random
from decimal import Decimal
from typing import Any

import numpy as np
import psycopg
import pytest
from hypothesis import strategies as st

from parser import plan_query
from parser.coltypes import BoolType, FloatType, NumericType, TextType, from_config
from parser.model.schema import Attribute, Catalog, TableSchema
from parser.pushdown.sql import answers_sql_batches
from tests.fixtures.databases import fill_table, table_fixture
from tests.fixtures.exact_rows import assert_matches_postgresql, norm, rows_match
from tests.fixtures.parser_strategies import aggregate_queries, random_cases
from tests.fixtures.refusals import refusal_test

EXAMPLES = int(os.environ.get("PARSER_MEASURE_EXAMPLES", "120"))
PRICE_EDGES = (0.0, 10.0, 25.0, 50.0, 100.0, 500.0)

SALES = TableSchema("sales", (
    Attribute("amount", NumericType(0.0, 500.0, nullable=True)),
    Attribute("price", NumericType(0.0, 500.0, PRICE_EDGES)),
    Attribute("dur", FloatType(0.0, 3600.0, tuple(float(x) for x in range(0, 3601, 600)))),
    Attribute("paid", BoolType(nullable=True)),
    Attribute("cat", TextType(values=("a", "b", "c"))),
))
CATALOG = Catalog((SALES,))


def sales_rows(n: int = 3000, seed: int = 3) -> list[tuple[Any, ...]]:
    """Rows inside the clamp ranges (values exactly at bin edges included); NULLs where declared."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        amount = None if rng.random() < 0.1 else Decimal(rng.randrange(0, 50_000)) / 100
        price = Decimal(rng.choice([rng.randrange(0, 49_999), int(rng.choice(PRICE_EDGES[:-1]) * 100)])) / 100
        dur = rng.uniform(0, 3599.9)
        paid = rng.choice([True, False, None])
        out.append((amount, price, dur, paid, rng.choice("abc")))
    return out


sales_conn = table_fixture("parser_sales", "sales (amount numeric(10,2), price numeric(10,2), dur double precision, "
                           "paid boolean, cat text)", sales_rows)


def exact_rows(sql: str, conn: psycopg.Connection, catalog: Catalog = CATALOG) -> tuple[list[tuple[Any, ...]], Any]:
    plan = plan_query(sql, catalog)
    values: list[float] = []
    for batch in answers_sql_batches(plan.table_schema, list(plan.queries)):
        values.extend(float(v) for v in conn.execute(batch).fetchone() or ())
    return [tuple(norm(v) for v in r) for r in plan.rows(np.array(values))], plan


def _filter(rnd: random.Random) -> str:
    a, b = sorted(rnd.sample(PRICE_EDGES[:-1], 2))  # a bound at max would cut the closed last bin
    return rnd.choice([
        f"price >= {a:g} AND price < {b:g}", f"price < {b:g}", "price BETWEEN 0 AND 500", f"NOT price >= {a:g}",
        "paid", "NOT paid", "paid IS NULL", "paid = 'f'", f"cat IN ('{rnd.choice('abc')}', 'c')",
        f"dur >= {rnd.randrange(0, 6) * 600} AND dur < {rnd.randrange(1, 6) * 600}",
    ])


def measure_queries() -> st.SearchStrategy[tuple[str, int]]:
    return aggregate_queries("sales", ["sum(amount)", "avg(amount)", "count(amount)", "sum(price)", "avg(dur)",
                                       "sum(dur)", "count(*)"], _filter,
                             ["paid", "cat", "floor(dur / 600) * 600", "floor(dur / 1200) * 1200"])


@random_cases(EXAMPLES, case=measure_queries())
def test_random_measure_queries_match_postgresql(case: tuple[str, int], sales_conn: psycopg.Connection) -> None:
    assert_matches_postgresql(case, sales_conn, exact_rows)


def test_sums_are_clamped_in_sql_and_keep_postgresql_types(sales_conn: psycopg.Connection) -> None:
    sales_conn.execute("INSERT INTO sales VALUES (900.50, 2000, 5000, true, 'a'), (-30, -1, -5, true, 'a')")
    try:
        ours, plan = exact_rows("SELECT sum(amount), avg(dur) FROM sales WHERE paid", sales_conn)
        clamped = sales_conn.execute("SELECT sum(LEAST(GREATEST(amount, 0), 500)), avg(LEAST(GREATEST(dur, 0), 3600)) "
                                     "FROM sales WHERE paid").fetchone()
    finally:
        sales_conn.execute("DELETE FROM sales WHERE amount > 500 OR amount < 0")
    assert clamped is not None and ours[0][0] == pytest.approx(float(clamped[0]))
    assert ours[0][1] == pytest.approx(float(clamped[1]))
    assert [c.type_oid for c in plan.columns] == [1700, 701]  # numeric stays numeric; float8 stays float8
    sums = [q for q in plan.queries if q.value is not None]
    assert [(q.value, q.measure, q.sensitivity) for q in sums] == [("amount", True, 500.0), ("dur", True, 3600.0)]


test_bad_measure_input_gets_its_sqlstate = refusal_test(CATALOG, [
    ("SELECT count(*) FROM sales WHERE amount > 5", "0A000", "bins"),
    ("SELECT amount, count(*) FROM sales GROUP BY amount", "0A000", "bins"),
    ("SELECT floor(dur / 60) * 60, count(*) FROM sales GROUP BY 1", "0A000", "one bin"),
    ("SELECT count(*) FROM sales WHERE paid = 3", "42883", "boolean"),
    ("SELECT count(*) FROM sales WHERE paid = 'maybe'", "22P02", "boolean"),
    ("SELECT sum(paid) FROM sales", "42883", "sum(boolean)"),
    ("SELECT count(*) FROM sales WHERE price > 'cheap'", "22P02", "numeric"),
])


@pytest.mark.parametrize("sql", ["SELECT count(*), sum(price) FROM sales WHERE price >= 20",
                                 "SELECT count(*) FROM sales WHERE price = 10 OR price > 499.5"])
def test_literals_inside_bins_match_postgresql(sql: str, sales_conn: psycopg.Connection) -> None:
    ours, _ = exact_rows(sql, sales_conn)  # the bins split at the literals for the statement (parser/bind/splits.py)
    theirs = sales_conn.execute(sql).fetchall()
    assert [float(v or 0) for v in ours[0]] == pytest.approx([float(v or 0) for v in theirs[0]], rel=1e-12), sql


def test_measure_declarations() -> None:
    d = from_config({"type": "numeric", "min": 0, "max": 500, "bins": 100})
    assert isinstance(d, NumericType) and d.edges == (0.0, 100.0, 200.0, 300.0, 400.0, 500.0)
    d = from_config({"type": "float", "min": -1, "max": 1, "bins": [0, 0.5]})
    assert isinstance(d, FloatType) and d.edges == (-1.0, 0.0, 0.5, 1.0)
    assert from_config({"type": "boolean", "nullable": True}).size == 3
    for bad in ({"type": "numeric", "min": 5, "max": 5}, {"type": "numeric", "min": 0},
                {"type": "numeric", "min": 0, "max": 1, "bins": -1}, {"type": "numeric", "min": 0, "max": 1,
                                                                     "bins": [2]}):
        with pytest.raises(ValueError):
            from_config(bad)


def test_decimal_bin_edges_read_as_written(sales_conn: psycopg.Connection) -> None:
    """bins = 0.1 puts edges at 0.1, 0.2, 0.3 as written (not at 0.30000000000000004), so Tableau's
    ``"Discount" >= 0.2`` is on an edge, and values stored exactly at an edge land in the bin it opens."""
    disc = TableSchema("disc", (Attribute("d", from_config({"type": "float", "min": 0, "max": 1, "bins": 0.1})),
                                Attribute("n", from_config({"type": "numeric", "min": 0, "max": 1, "bins": 0.1}))))
    assert disc.attributes[0].domain.edges[3] == 0.3  # type: ignore[attr-defined]
    rng = random.Random(11)
    # below max: a value exactly at max counts in the last (closed) bin, which floor(n * 10) would not
    rows = [(v, v) for v in (rng.choice([rng.randrange(0, 100) / 100, rng.randrange(0, 10) / 10]) for _ in range(500))]
    fill_table(sales_conn, "disc (d double precision, n numeric(4,2))", rows)
    try:
        for sql in ("SELECT count(*) FROM disc WHERE d >= 0.2 AND d < 0.3", "SELECT count(*) FROM disc WHERE n >= 0.2",
                    "SELECT sum(d), count(*) FROM disc WHERE n < 0.7 AND d >= 0.3",
                    "SELECT floor(n * 10) AS k, count(*) FROM disc GROUP BY 1"):
            ours, _ = exact_rows(sql, sales_conn, Catalog((disc,)))
            theirs = sales_conn.execute(sql).fetchall()
            problem = rows_match(ours, theirs, 1 if "GROUP BY" in sql else 0, ordered=False)
            assert problem is None, f"{sql}\n{problem}"
    finally:
        sales_conn.execute("DROP TABLE disc")


@pytest.mark.parametrize("sql, clamped", [
    ("SELECT sum(amount) FROM sales", True),                                   # measure declared 0..500
    ("SELECT sum(CASE WHEN price >= 100 THEN amount ELSE 0 END) FROM sales", True),
    ("SELECT sum(amount * 2 + 1) FROM sales", True),
    ("SELECT sum(amount - 100) FROM sales", False),                            # values below 0 exist
])
def test_sum_of_values_never_negative_is_clamped_at_0(sql: str, clamped: bool) -> None:
    """Post-processing: a SUM whose every row value is >= 0 is never shown negative (as a count); any other
    SUM keeps its noisy sign."""
    plan = plan_query(sql, Catalog((SALES,)))
    # noisy answers of every query: -50 (a negative sum); for amount - 100: a sum of 50 over a count of 50
    (value,) = plan.rows(np.full(len(plan.queries), -50.0 if clamped else 50.0))[0]
    assert (value == 0) if clamped else (value < 0), (sql, value)
