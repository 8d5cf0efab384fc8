"""Buckets over a nullable binned column or a nullable day-resolution timestamp with an IS NULL branch or a
COALESCE (the BI tools' "no value" bucket: Metabase custom columns, Tableau CASE): NULL is a cell of its
own, so ``col IS NULL`` and ``COALESCE(col, c)`` take one value on every cell and the bucket is answered
as PostgreSQL answers it; a literal inside a bin is still refused (it cuts the cell)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from test_parser_splits import CATALOG, exact_rows, pay_rows

from parser import Refusal, plan_query
from tests.fixtures.databases import table_database
from tests.fixtures.exact_rows import rows_match


@pytest.fixture(scope="module")
def pay(embedded_pg: Any) -> Iterator[psycopg.Connection]:
    """test_parser_splits' ``pay`` rows (NULL prices and instants, values on the bins' edges)."""
    conn = table_database(embedded_pg, "parser_null_buckets", "pay (amount numeric, price double precision, "
                          "raw numeric, n integer, ts timestamp, tz timestamptz, d date, region text, name text)",
                          pay_rows(), setup=["SET TimeZone = 'UTC'"])
    conn.execute("SET TimeZone = 'UTC'")
    yield conn
    conn.close()

ANSWERED = [
    "SELECT CASE WHEN price IS NULL THEN 'none' WHEN price < 25 THEN 'cheap' ELSE 'dear' END AS k, count(*) "
    "FROM pay GROUP BY 1",
    "SELECT CASE WHEN price IS NOT NULL AND price >= 10 THEN 'ten+' ELSE 'other' END AS k, count(*), sum(amount) "
    "FROM pay GROUP BY 1",
    "SELECT COALESCE(price, 0) < 10 AS k, count(*) FROM pay GROUP BY 1",
    "SELECT CASE WHEN tz IS NULL THEN 'unknown' ELSE to_char(tz, 'YYYY-MM') END AS m, count(*) FROM pay GROUP BY 1",
    "SELECT count(*) FROM pay WHERE CASE WHEN price IS NULL THEN 'none' ELSE 'some' END = 'none'",
]


@pytest.mark.parametrize("sql", ANSWERED)
def test_null_buckets_match_postgresql(sql: str, pay: psycopg.Connection) -> None:
    ours, plan = exact_rows(sql, pay)
    problem = rows_match(ours, pay.execute(sql).fetchall(), len(plan.template.groups), ordered=False)
    assert problem is None, f"{sql}\n{problem}"


@pytest.mark.parametrize("sql", [
    "SELECT CASE WHEN price IS NULL THEN 'none' WHEN price < 12 THEN 'cheap' ELSE 'dear' END AS k, count(*) "
    "FROM pay GROUP BY 1",
    "SELECT COALESCE(price, 0) < 12 AS k, count(*) FROM pay GROUP BY 1",
])
def test_a_literal_inside_a_bin_still_cuts_it(sql: str) -> None:
    with pytest.raises(Refusal) as err:
        plan_query(sql, CATALOG)
    assert err.value.sqlstate == "0A000" and "cuts the cells" in err.value.message
