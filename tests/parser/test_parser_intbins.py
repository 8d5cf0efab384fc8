"""Wide integer columns (epoch seconds, cents, ids) declared with bins, and smallint/bigint columns, against
PostgreSQL: filters on bin edges (integer semantics, so ``<= edge - 1`` counts), bucket keys that agree
over whole bins, clamped SUM/AVG, and PostgreSQL's result types. The plan's exact linear answers (computed by
PostgreSQL through the pushed-down SQL) equal PostgreSQL's own answer to the same SQL. No noise is drawn
here: the random statements and rows are seeded inputs and every comparison is exact, so no test has a
false-failure rate."""

from __future__ import annotations

import os
import random
from typing import Any

import psycopg
import pytest
from hypothesis import strategies as st
from test_parser_measures import exact_rows as _exact_rows

from parser import plan_query
from parser.coltypes import BigIntType, BinnedBigIntType, BinnedIntType, IntType, SmallIntType, from_config
from parser.model.schema import Attribute, Catalog, TableSchema
from pgcore import pgtypes as T
from tests.fixtures.databases import table_fixture
from tests.fixtures.exact_rows import assert_matches_postgresql
from tests.fixtures.parser_strategies import aggregate_queries, random_cases
from tests.fixtures.refusals import refusal_test

EXAMPLES = int(os.environ.get("PARSER_MEASURE_EXAMPLES", "120"))
DAY = 86_400
T0 = 1_767_225_600  # 2026-01-01 00:00 UTC in epoch seconds
DAYS = 40
CENT_EDGES = [0, 100, 500, 1_000, 5_000, 100_000]

TICKS = TableSchema("ticks", (
    Attribute("ts_epoch", from_config({"type": "bigint", "min": T0, "max": T0 + DAYS * DAY, "bins": DAY})),
    Attribute("cents", from_config({"type": "integer", "min": 0, "max": 100_000, "bins": CENT_EDGES,
                                    "nullable": True})),
    Attribute("account", from_config({"type": "bigint", "min": 0, "max": 9_000_000_000_000_000,
                                      "bins": 1_000_000_000_000_000})),
    Attribute("qty", from_config({"type": "smallint", "min": 0, "max": 20})),
))
CATALOG = Catalog((TICKS,))


def tick_rows(n: int = 3000, seed: int = 5) -> list[tuple[Any, ...]]:
    """Rows inside the ranges, values exactly on edges and at max included, NULL cents sometimes."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        ts = rng.choice([T0 + rng.randrange(0, DAYS * DAY + 1), T0 + rng.randrange(0, DAYS + 1) * DAY])
        cents = None if rng.random() < 0.1 else rng.choice([rng.randrange(0, 100_001), rng.choice(CENT_EDGES)])
        account = rng.choice([rng.randrange(0, 9_000_000_000_000_001), 9_000_000_000_000_000])
        out.append((ts, cents, account, rng.randrange(0, 21)))
    return out


ticks_conn = table_fixture("parser_ticks", "ticks (ts_epoch bigint, cents integer, account bigint, qty smallint)",
                           tick_rows)


def exact_rows(sql: str, conn: psycopg.Connection) -> tuple[list[tuple[Any, ...]], Any]:
    return _exact_rows(sql, conn, CATALOG)


def _filter(rnd: random.Random) -> str:
    d1, d2 = sorted(rnd.sample(range(DAYS), 2))
    c1, c2 = sorted(rnd.sample(CENT_EDGES[:-1], 2))
    return rnd.choice([
        f"ts_epoch >= {T0 + d1 * DAY} AND ts_epoch < {T0 + d2 * DAY}",
        f"ts_epoch BETWEEN {T0 + d1 * DAY} AND {T0 + d2 * DAY - 1}", f"ts_epoch > {T0 + d1 * DAY - 1}",
        f"cents >= {c1} AND cents <= {c2 - 1}", "cents IS NULL", f"NOT cents < {c2}", "cents = 100000",
        f"qty BETWEEN {rnd.randrange(0, 10)} AND {rnd.randrange(5, 21)}", f"qty IN ({rnd.randrange(0, 21)}, 3)",
        "account < 3000000000000000", "account >= 8000000000000000",
    ])


def int_queries() -> st.SearchStrategy[tuple[str, int]]:
    return aggregate_queries("ticks", ["sum(cents)", "avg(cents)", "count(cents)", "sum(qty)", "avg(qty)", "count(*)",
                                       "sum(ts_epoch)"], _filter,
                             ["qty", f"(ts_epoch - {T0}) / {DAY}", f"(ts_epoch - {T0}) / {7 * DAY}",
                              "account / 1000000000000000"])


@random_cases(EXAMPLES, case=int_queries())
def test_random_wide_integer_queries_match_postgresql(case: tuple[str, int], ticks_conn: psycopg.Connection) -> None:
    assert_matches_postgresql(case, ticks_conn, exact_rows)


def test_result_types_follow_postgresql(ticks_conn: psycopg.Connection) -> None:
    _, plan = exact_rows("SELECT sum(cents), sum(ts_epoch), sum(qty), count(*) FROM ticks", ticks_conn)
    # PostgreSQL: sum(integer) is bigint, sum(bigint) numeric, sum(smallint) bigint.
    assert [c.type_oid for c in plan.columns] == [T.INT8, T.NUMERIC, T.INT8, T.INT8]
    sums = {q.value: q.sensitivity for q in plan.queries if q.value is not None}
    assert sums == {"cents": 100_000.0, "ts_epoch": float(T0 + DAYS * DAY), "qty": 20.0}


test_bad_wide_integer_input_gets_its_sqlstate = refusal_test(CATALOG, [
    ("SELECT count(*) FROM ticks WHERE cents < 'cheap'", "22P02", "integer"),
    ("SELECT count(*) FROM ticks WHERE account = DATE '2026-01-01'", "42883", "bigint = date"),
])


@pytest.mark.parametrize("sql", [f"SELECT count(*), sum(cents) FROM ticks WHERE ts_epoch >= {T0 + 5}",
                                 "SELECT count(*) FROM ticks WHERE cents = 250 OR cents > 99999.5"])
def test_literals_inside_bins_match_postgresql(sql: str, ticks_conn: psycopg.Connection) -> None:
    ours, _ = exact_rows(sql, ticks_conn)  # the bins split at the literals for the statement (parser/bind/splits.py)
    theirs = ticks_conn.execute(sql).fetchall()
    assert [float(v or 0) for v in ours[0]] == [float(v or 0) for v in theirs[0]], sql


def test_group_by_a_binned_column_is_one_group_a_bin() -> None:
    """GROUP BY the binned column itself: one group a bin, keyed by its lower edge (NULL last: nullable)."""
    keys = [k[0] for k in plan_query("SELECT cents, count(*) FROM ticks GROUP BY cents", CATALOG).group_keys]
    domain = CATALOG.table("ticks").attribute("cents").domain  # type: ignore[union-attr]
    assert keys == list(domain) and keys[:5] == CENT_EDGES[:5] and keys[-1] is None


def test_integer_declarations() -> None:
    assert type(from_config({"type": "int", "min": 0, "max": 9})) is IntType
    assert isinstance(from_config({"type": "smallint", "min": 0, "max": 9}), SmallIntType)
    big = from_config({"type": "bigint", "min": 0, "max": 9})
    assert isinstance(big, BigIntType) and big.oid == T.INT8 and big.sql_type == "bigint"
    d = from_config({"type": "bigint", "min": 0, "max": 10**18, "bins": 10**17})
    # max on a width boundary is a one-value bin of its own, as integer division puts it
    assert isinstance(d, BinnedBigIntType) and d.size == 11 and d.edges[-3:] == (9 * 10**17, 10**18, 10**18)
    assert d.index_of(10**18) == 10 and d.index_of(10**17 - 1) == 0 and d.index_of(10**17) == 1
    assert d.ranges("<", 10**18) == [(0, 9)] and d.ranges("=", 10**18) == [(10, 10)]
    d = from_config({"type": "int", "min": 0, "max": 10, "bins": [1, 2, 5]})
    assert isinstance(d, BinnedIntType) and d.ranges("=", 1) == [(1, 1)] and d.ranges("<=", 4) == [(0, 2)]
    assert d.last_values() == [0, 1, 4, 10]
    for bad in ({"type": "int", "min": 0, "max": 10, "bins": 0}, {"type": "int", "min": 0, "max": 10, "bins": 2.5},
                {"type": "int", "min": 0, "max": 10, "bins": [11]}, {"type": "smallint", "min": 0, "max": 10**6,
                                                                     "bins": 10},
                {"type": "int", "min": 0, "max": 10**7}):
        with pytest.raises(ValueError):
            from_config(bad)
