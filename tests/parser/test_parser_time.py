"""``time`` columns (cells of one hour or one minute of the day): the declaration is checked, comparisons on
cell boundaries, BETWEEN, IN and GROUP BY plan to PostgreSQL's exact rows (differential, over a table of
times spread over the day), also comparisons that cut a cell (split for the statement), and malformed
literals get PostgreSQL's SQLSTATEs."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import time
from typing import Any

import pytest

from parser import plan_query
from parser.coltypes import DeclarationError, TimeType, from_config
from parser.model.schema import Attribute, Catalog, TableSchema
from parser.pushdown.sql import answers_sql
from tests.fixtures.databases import table_fixture
from tests.fixtures.refusals import refused

HOURLY = from_config({"type": "time", "resolution": "hour"})
MINUTES = from_config({"type": "time", "resolution": "minute", "min": "08:00", "max": "17:59"})
TABLE = TableSchema("visits", (Attribute("t", HOURLY), Attribute("m", MINUTES)))


def test_declaration() -> None:
    assert isinstance(HOURLY, TimeType) and HOURLY.base_size == 24
    assert MINUTES.base_size == 600 and MINUTES.format_value(MINUTES.cell_last(0)) == "08:00:59.999999"
    for spec, key in [({"resolution": "day"}, "resolution"), ({"min": "10:30", "resolution": "hour"}, "min"),
                      ({"min": "25:00"}, "min"), ({"min": "12:00", "max": "11:00"}, ""),
                      ({"max": "noon"}, "max"), ({"min": "08:00", "step": 2}, "step")]:
        with pytest.raises(DeclarationError) as err:
            from_config({"type": "time", **spec})
        assert err.value.problems[0][0] == key, (spec, err.value.problems)


def visit_rows() -> Iterator[tuple[time, time]]:
    for i in range(3000):
        s = (i * 7919) % 86400
        t = time(s // 3600, (s // 60) % 60, s % 60, (i * 37) % 1_000_000)
        ms = 8 * 3600 + (i * 104729) % (10 * 3600)
        yield (t, time(ms // 3600, (ms // 60) % 60, ms % 60))


visits = table_fixture("timecol", "visits (t time, m time)", visit_rows)


@pytest.mark.parametrize("sql", [
    "SELECT count(*) FROM visits WHERE t >= '10:00'",
    "SELECT count(*) FROM visits WHERE t < '06:00' OR t >= TIME '22:00'",
    "SELECT count(*) FROM visits WHERE t BETWEEN '08:00' AND '11:59:59.999999'",
    "SELECT count(*) FROM visits WHERE t > '13:59:59.999999' AND t <= '16:59:59.999999'",
    "SELECT count(*) FROM visits WHERE m >= '12:30' AND m < '12:45'",
    "SELECT count(*) FROM visits WHERE (m >= '09:15' AND m < '09:17') OR m >= '17:59'",
    "SELECT count(*) FROM visits WHERE t NOT BETWEEN '01:00' AND '22:59:59.999999'",
    # GROUP BY a time column groups by its cells (as for timestamps): PostgreSQL truncates to compare
    "SELECT t, count(*) FROM visits GROUP BY 1",
    "SELECT t AS hour, count(*) FROM visits WHERE m < '10:00' GROUP BY 1 ORDER BY 1 DESC",
    "SELECT m, count(*) FROM visits WHERE m BETWEEN '12:00' AND '12:09:59.999999' GROUP BY 1",
    # literals inside a cell split it for the statement (parser/bind/splits.py)
    "SELECT count(*) FROM visits WHERE t >= '10:30'",
    "SELECT count(*) FROM visits WHERE m < '12:30:30'",
    "SELECT count(*) FROM visits WHERE m = '09:15' OR t <= '23:00'",
])
def test_time_filters_and_keys_plan_to_postgresqls_rows(sql: str, visits: Any) -> None:
    plan = plan_query(sql, Catalog((TABLE,)))
    row = visits.execute(answers_sql(plan.table_schema, plan.queries)).fetchone()
    ours = [tuple(r) for r in plan.rows([float(v) for v in row]) if r[-1]]
    pg_sql = sql.replace("SELECT t", "SELECT date_trunc('hour', t::interval)::time").replace(
        "SELECT m,", "SELECT date_trunc('minute', m::interval)::time,")
    theirs = [tuple(r) for r in visits.execute(pg_sql).fetchall()]
    if "ORDER BY" in sql:
        assert ours == theirs
    else:
        assert sorted(ours) == sorted(theirs)


@pytest.mark.parametrize("sql, state, words", [
    ("SELECT count(*) FROM visits WHERE t = '25:00'", "22008", "out of range"),
    ("SELECT count(*) FROM visits WHERE t = 'noon'", "22007", "invalid input syntax"),
    ("SELECT count(*) FROM visits WHERE t = 10", "42883", "operator does not exist"),
])
def test_time_refusals(sql: str, state: str, words: str) -> None:
    r = refused(sql, Catalog((TABLE,)))
    assert r.sqlstate == state and words in r.message, r.message
