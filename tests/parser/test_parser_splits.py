"""Literals that cut a cell (parser/bind/splits.py): Grafana's ``$__timeFilter`` (an inclusive end on a cell
boundary, ``23:59:59`` ends), ``amount > 105`` inside a bin of 10, integer bins, ``=`` inside a bin, IN
lists and parameters are answered as written: the statement's exact linear answers (computed by PostgreSQL
through the pushed-down SQL) equal PostgreSQL's own answer to the same SQL on the same rows, and the split
leaves keys of whole cells, sensitivities, GROUP BY keys and the refusals of expressions that cut cells as
they were. No noise is drawn here: rows and statements are seeded inputs compared exactly, so no test has a
false-failure rate."""

from __future__ import annotations

import random
from collections.abc import Iterator
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

import numpy as np
import psycopg
import pytest
from test_parser_measures import exact_rows as _exact_rows

from lapras.matrix_mechanism import p_workloads
from lapras.mechanisms.sensitivity import statement_sensitivity
from parser import Refusal, plan_query
from parser.bind.splits import MAX_CUTS, describe, has_splits
from parser.coltypes import from_config
from parser.model.schema import Attribute, Catalog, TableSchema
from parser.pushdown.sql import answers_sql
from tests.fixtures.databases import table_database
from tests.fixtures.exact_rows import rows_match

T0 = datetime(2026, 1, 1)
PAY = TableSchema("pay", (
    Attribute("amount", from_config({"type": "numeric", "min": 0, "max": 1000, "bins": 10})),
    Attribute("price", from_config({"type": "float", "min": 0, "max": 100, "bins": [0, 10, 25, 50],
                                    "nullable": True})),
    Attribute("raw", from_config({"type": "numeric", "min": 0, "max": 1000})),
    Attribute("n", from_config({"type": "integer", "min": 0, "max": 100_000, "bins": 100})),
    Attribute("ts", from_config({"type": "timestamp", "min": "2026-01-01", "max": "2026-06-30T23:00:00",
                                 "resolution": "hour"})),
    Attribute("tz", from_config({"type": "timestamptz", "min": "2026-01-01", "max": "2026-06-30",
                                 "resolution": "day", "nullable": True})),
    Attribute("d", from_config({"type": "date", "min": "2026-01-01", "max": "2026-06-30"})),
    Attribute("region", from_config({"type": "text", "values": ["a", "b", "c"]})),
    Attribute("name", from_config({"type": "text", "keys": "private"})),
))
CATALOG = Catalog((PAY,))
CUTS = [Decimal("105"), Decimal("100"), Decimal("103.5"), Decimal("1000"), Decimal("0"), Decimal("999.99")]
INSTANTS = [datetime(2026, 5, 1), datetime(2026, 5, 1, 0, 0, 0, 1), datetime(2026, 1, 31, 23, 59, 59),
            datetime(2026, 1, 31, 23, 59, 59, 1), datetime(2026, 3, 1, 10, 30), datetime(2026, 3, 1, 10, 29, 59, 999999)]


def pay_rows(n: int = 4000, seed: int = 11) -> list[tuple[Any, ...]]:
    """Rows inside the ranges, many exactly at the cut points and one microsecond either side of them."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        amount = rng.choice([Decimal(rng.randrange(0, 100_001)) / 100, rng.choice(CUTS)])
        price = rng.choice([None, round(rng.uniform(0, 100), 2), rng.choice([10.0, 12.5, 12.25, 100.0])])
        ts = rng.choice([T0 + timedelta(seconds=rng.randrange(0, 181 * 86400)),
                         rng.choice(INSTANTS) + timedelta(microseconds=rng.choice([-1, 0, 1]))])
        tz = None if rng.random() < 0.05 else ts  # inside the range: the clamp would move other values
        d = (T0 + timedelta(days=rng.randrange(0, 181))).date()
        out.append((amount, price, Decimal(rng.randrange(0, 1001)), rng.choice([rng.randrange(0, 100_001), 150, 151]),
                    ts, tz.isoformat() + "+00:00" if tz is not None else None, d, rng.choice("abc"),
                    rng.choice(["Ann", "Bob", "Max", "Zoe"])))
    return out


def pay_database(embedded_pg: Any, name: str) -> Iterator[psycopg.Connection]:
    """A connection (TimeZone UTC) to a new database ``name`` holding ``pay_rows()`` in ``pay``, closed after."""
    conn = table_database(embedded_pg, name, "pay (amount numeric, price double precision, raw numeric, "
                          "n integer, ts timestamp, tz timestamptz, d date, region text, name text)", pay_rows(),
                          setup=["SET TimeZone = 'UTC'"])
    conn.execute("SET TimeZone = 'UTC'")
    yield conn
    conn.close()


@pytest.fixture(scope="module")
def pay_conn(embedded_pg: Any) -> Iterator[psycopg.Connection]:
    yield from pay_database(embedded_pg, "parser_splits")


def exact_rows(sql: str, conn: psycopg.Connection) -> tuple[list[tuple[Any, ...]], Any]:
    return _exact_rows(sql, conn, CATALOG)


ANSWERED = [
    "SELECT count(*) FROM pay WHERE amount > 105",
    "SELECT count(*), sum(amount), avg(amount) FROM pay WHERE amount >= 105",
    "SELECT count(*) FROM pay WHERE amount <= 105 OR amount > 999.99",
    "SELECT count(*), sum(raw) FROM pay WHERE amount BETWEEN 103.5 AND 105",
    "SELECT count(*) FROM pay WHERE amount = 105 OR amount = 103.5",
    "SELECT count(*) FROM pay WHERE amount <> 105 AND NOT amount < 100",
    "SELECT count(*) FROM pay WHERE amount IN (105, 103.5, 0, 250)",
    "SELECT count(*) FROM pay WHERE amount >= 1000",
    "SELECT count(*) FROM pay WHERE amount > 0",
    "SELECT region, count(*), sum(amount) FROM pay WHERE amount > 105 AND amount < 555.5 GROUP BY region",
    "SELECT count(*) FROM pay WHERE price > 12.25",
    "SELECT count(*), sum(price) FROM pay WHERE price <= 12.5",
    "SELECT count(*) FROM pay WHERE price IS NULL OR price >= 12.5",
    "SELECT count(*) FROM pay WHERE n > 150",
    "SELECT count(*), sum(n) FROM pay WHERE n >= 151 AND n <= 20050",
    "SELECT count(*) FROM pay WHERE n = 150",
    "SELECT count(*) FROM pay WHERE ts BETWEEN '2026-04-01 00:00:00' AND '2026-05-01 00:00:00'",
    "SELECT count(*) FROM pay WHERE \"ts\" BETWEEN '2026-01-01T00:00:00Z' AND '2026-01-31T23:59:59Z'",
    "SELECT count(*) FROM pay WHERE ts >= '2026-03-01 10:30' AND ts < '2026-05-01 00:00:00.000001'",
    "SELECT count(*) FROM pay WHERE ts > '2026-05-01' OR ts = '2026-01-31 23:59:59'",
    "SELECT count(*) FROM pay WHERE tz BETWEEN '2026-01-01T00:00:00Z' AND '2026-01-31T23:59:59Z'",
    "SELECT count(*) FROM pay WHERE tz <= '2026-05-01 00:00:00+00' AND tz > '2026-03-01 10:30:00+00'",
    "SELECT count(*) FROM pay WHERE tz IS NULL OR tz < '2026-03-01 10:30:00+00'",
    "SELECT count(*) FROM pay WHERE d >= TIMESTAMP '2026-03-01 10:00' AND d <= TIMESTAMP '2026-03-05 10:00'",
    "SELECT count(*) FROM pay WHERE d > TIMESTAMP '2026-03-01 10:00' OR d = TIMESTAMP '2026-02-01 10:00'",
    "SELECT region, count(*) FROM pay WHERE ts BETWEEN '2026-02-01 06:15' AND '2026-02-01 18:45' "
    "AND amount > 105 GROUP BY region ORDER BY region",
    "SELECT count(*) FILTER (WHERE amount > 105), count(*) FILTER (WHERE amount <= 105) FROM pay",
    "SELECT sum(CASE WHEN ts > '2026-05-01' THEN amount ELSE 0 END) FROM pay",
    # Buckets with an IS NULL branch or COALESCE over a nullable binned column or day-resolution timestamp (the
    # BI tools' "no value" bucket: Metabase custom columns, Tableau CASE): NULL is a cell of its own.
    "SELECT CASE WHEN price IS NULL THEN 'none' WHEN price < 25 THEN 'cheap' ELSE 'dear' END AS k, count(*) "
    "FROM pay GROUP BY 1",
    "SELECT CASE WHEN price IS NOT NULL AND price >= 10 THEN 'ten+' ELSE 'other' END AS k, count(*), sum(amount) "
    "FROM pay GROUP BY 1",
    "SELECT COALESCE(price, 0) < 10 AS k, count(*) FROM pay GROUP BY 1",
    "SELECT CASE WHEN tz IS NULL THEN 'unknown' ELSE to_char(tz, 'YYYY-MM') END AS m, count(*) FROM pay GROUP BY 1",
    "SELECT count(*) FROM pay WHERE CASE WHEN price IS NULL THEN 'none' ELSE 'some' END = 'none'",
]


@pytest.mark.parametrize("sql", ANSWERED)
def test_literals_inside_cells_are_answered_as_postgresql_answers(sql: str, pay_conn: psycopg.Connection) -> None:
    ours, plan = exact_rows(sql, pay_conn)
    theirs = pay_conn.execute(sql).fetchall()
    n_keys = len(plan.template.groups)
    assert rows_match(ours, theirs, n_keys, ordered=False) is None, (sql, ours, theirs)


def test_parameters_inside_cells_are_answered(pay_conn: psycopg.Connection) -> None:
    sql = "SELECT count(*) FROM pay WHERE ts BETWEEN $1 AND $2 AND amount > $3"
    params = ["2026-01-01T00:00:00Z", "2026-01-31T23:59:59Z", "105"]
    plan = plan_query(sql, CATALOG, params)
    got = pay_conn.execute(answers_sql(plan.table_schema, plan.queries)).fetchone()
    want = pay_conn.execute("SELECT count(*) FROM pay WHERE ts BETWEEN %s AND %s AND amount > %s",
                            [datetime(2026, 1, 1), datetime(2026, 1, 31, 23, 59, 59), Decimal(105)]).fetchone()
    assert got is not None and want is not None and plan.rows(np.asarray(got, dtype=float))[0][0] == want[0]


def test_the_pushed_down_sql_holds_the_literals_as_written() -> None:
    plan = plan_query("SELECT count(*) FROM pay WHERE amount > 105 AND n <= 150", CATALOG)
    sql = answers_sql(plan.table_schema, plan.queries)
    assert '"amount" > 105' in sql and '"n" < 151' in sql
    plan = plan_query("SELECT count(*) FROM pay WHERE ts <= '2026-05-01 00:00:00'", CATALOG)
    assert "\"ts\" < TIMESTAMP '2026-05-01 00:00:00.000001'" in answers_sql(plan.table_schema, plan.queries)


def test_whole_cells_keep_their_keys_and_equal_sets_share_keys() -> None:
    def keys(sql: str) -> list[str]:
        return [q.key for q in plan_query(sql, CATALOG).queries]

    # A split that leaves whole cells changes nothing: the key, hence P's release and stored answers, apply.
    assert keys("SELECT count(*) FROM pay WHERE amount >= 110 AND amount > 105") == \
        keys("SELECT count(*) FROM pay WHERE amount >= 110")
    assert not has_splits(plan_query("SELECT count(*) FROM pay WHERE amount >= 110", CATALOG).table_schema)
    # The same rows under other cut points (another statement's) are the same key.
    alone = keys("SELECT count(*) FROM pay WHERE amount > 105")
    assert alone == ["public.pay|count|amount={100}&amount~cut={(105,inf)}|amount={110..990}"]
    both = keys("SELECT count(*) FILTER (WHERE amount > 105), count(*) FILTER (WHERE amount = 555.5) FROM pay")
    assert both[0] == alone[0] and both[1] != alone[0]
    assert keys("SELECT count(*) FROM pay WHERE ts <= '2026-05-01 00:00:00'") == \
        keys("SELECT count(*) FROM pay WHERE ts < '2026-05-01 00:00:00.000001'")
    # Different rows, different keys.
    assert keys("SELECT count(*) FROM pay WHERE amount >= 105") != alone


def test_sensitivities_are_unchanged_by_a_split() -> None:
    cases = [("SELECT count(*) FROM pay WHERE amount > 105", "SELECT count(*) FROM pay WHERE amount >= 110"),
             ("SELECT region, sum(amount) FROM pay WHERE amount > 105 GROUP BY region",
              "SELECT region, sum(amount) FROM pay WHERE amount >= 110 GROUP BY region"),
             ("SELECT count(*) FILTER (WHERE amount > 105), count(*) FILTER (WHERE amount <= 105) FROM pay",
              "SELECT count(*) FILTER (WHERE amount >= 110), count(*) FILTER (WHERE amount < 110) FROM pay"),
             ("SELECT region, count(*) FROM pay WHERE ts BETWEEN '2026-04-01' AND '2026-05-01 00:00:00' "
              "GROUP BY region", "SELECT region, count(*) FROM pay WHERE ts >= '2026-04-01' GROUP BY region")]
    for unit in (None, 3):
        table = TableSchema("pay", PAY.attributes, privacy_unit="name" if unit else None, max_rows_per_unit=unit or 1)
        catalog = Catalog((table,))
        for split, whole in cases:
            a, b = plan_query(split, catalog), plan_query(whole, catalog)
            assert has_splits(a.table_schema)
            assert [q.sensitivity for q in a.queries] == [q.sensitivity for q in b.queries]
            assert statement_sensitivity(a.table_schema, a.queries) == pytest.approx(
                statement_sensitivity(b.table_schema, b.queries))


def test_a_split_statement_is_never_part_of_the_matrix_mechanism_release() -> None:
    plan = plan_query("SELECT region, count(*) FROM pay WHERE amount > 105 GROUP BY region", CATALOG)
    split = [q for q in plan.queries if any("~cut~" in a for a in q.marginal)]
    whole = [q for q in plan.queries if q not in split]
    assert split and not whole
    assert p_workloads(CATALOG, plan.queries) == {}
    plan = plan_query("SELECT amount, count(*) FROM pay WHERE amount > 105 GROUP BY amount", CATALOG)
    work = p_workloads(CATALOG, plan.queries)
    assert list(work) == [("pay", ("amount",))] and len(work[("pay", ("amount",))][1]) == 89  # whole bins only


def test_group_by_keeps_the_declared_cells() -> None:
    plan = plan_query("SELECT amount, count(*) FROM pay WHERE amount > 105 GROUP BY amount", CATALOG)
    assert [k[0] for k in plan.group_keys][:2] == [Decimal(100), Decimal(110)]
    assert plan.queries[0].key == "public.pay|count|amount={100}&amount~cut={(105,inf)}"


@pytest.mark.parametrize(("sql", "state", "words"), [
    # A literal cutting a cell in a GROUP BY key, or in an expression, is refused as before.
    ("SELECT CASE WHEN amount > 105 THEN 'hi' ELSE 'lo' END AS k, count(*) FROM pay GROUP BY 1", "0A000",
     "cuts the cells of column amount"),
    ("SELECT date_trunc('minute', ts) AS k, count(*) FROM pay GROUP BY 1", "0A000", "cuts the cells of column ts"),
    ("SELECT count(*) FROM pay WHERE amount * 2 > 211", "0A000", "cuts the cells of column amount"),
    # A NULL bucket does not help a literal inside a bin (price's bins: 0, 10, 25, 50, 100).
    ("SELECT CASE WHEN price IS NULL THEN 'none' WHEN price < 12 THEN 'cheap' ELSE 'dear' END AS k, count(*) "
     "FROM pay GROUP BY 1", "0A000", "cuts the cells"),
    ("SELECT COALESCE(price, 0) < 12 AS k, count(*) FROM pay GROUP BY 1", "0A000", "cuts the cells"),
    # A measure without bins has one cell: filtering it stays refused; so do private-key text columns.
    ("SELECT count(*) FROM pay WHERE raw > 5", "0A000", "without bins"),
    ("SELECT name, count(*) FROM pay WHERE name >= 'M' GROUP BY name", "0A000", "private keys"),
    ("SELECT count(*) FROM pay WHERE name = 'Max'", "0A000", "private keys"),
    ("SELECT count(*) FROM pay WHERE amount IN (" + ", ".join(f"{100 + i}.5" for i in range(MAX_CUTS)) + ")",
     "54000", "limit of 64"),
])
def test_what_stays_refused(sql: str, state: str, words: str) -> None:
    with pytest.raises(Refusal) as err:
        plan_query(sql, CATALOG)
    assert err.value.sqlstate == state and words in err.value.message, (err.value.sqlstate, err.value.message)


@pytest.mark.parametrize(("sql", "hint"), [
    ("SELECT CASE WHEN amount > 105 THEN 'hi' ELSE 'lo' END AS k, count(*) FROM pay GROUP BY 1",
     "amount's cells are bins [a, b) with edges 0, 10, 20"),
    ("SELECT COALESCE(price, 0) < 12 AS k, count(*) FROM pay GROUP BY 1", "edges 0, 10, 25, 50, 100"),
    ("SELECT date_trunc('minute', ts) AS k, count(*) FROM pay GROUP BY 1", "panel's Min interval to 1h or more"),
])
def test_a_cut_cell_refusal_says_how_to_use_whole_cells(sql: str, hint: str) -> None:
    """The hint names the column's own cells: a binned measure's edges (not date_trunc), a timestamp's unit."""
    with pytest.raises(Refusal) as err:
        plan_query(sql, CATALOG)
    assert hint in (err.value.hint or ""), err.value.hint
    assert ("date_trunc" in (err.value.hint or "")) == ("ts" in sql)


def test_explain_names_the_cut_points() -> None:
    plan = plan_query("SELECT count(*) FROM pay WHERE amount > 105 AND ts <= '2026-05-01 00:00:00'", CATALOG)
    lines = describe(plan.table_schema)
    assert "split" in lines[0] and lines[1:] == ["    amount: > 105", "    ts: >= 2026-05-01T00:00:00.000001"]
    assert describe(PAY) == []


def test_a_partition_selection_under_a_split_filter_counts_the_rows_as_written() -> None:
    from parser.bind.partition import NeedsPartition

    with pytest.raises(NeedsPartition) as need:
        plan_query("SELECT name, count(*) FROM pay WHERE amount > 105 GROUP BY name", CATALOG)
    req = need.value.request
    assert req.key == "public.pay|keys(name)|where:amount={100}&amount~cut={(105,inf)}|amount={110..990}"
    assert '"amount" > 105' in req.sql
