"""The session's TimeZone in plans over protected tables, against PostgreSQL: with TimeZone Europe/Berlin (the
2026 March and October changes inside the table's hourly cells) or a fixed offset, date_trunc, extract, ::date,
date(), to_char, current_date-free WHERE literals without an offset and timestamptz + interval '1 day' are
computed in that zone, as PostgreSQL computes them; the plan's exact answers (answers_sql pushed down, session
UTC) must equal PostgreSQL's answer to the same SQL under the same TimeZone (false-failure rate 0: exact
values). A zone that would cut the cells (+05:30 on hourly cells, any zone but UTC on day cells) is refused with
0A000 and a hint naming SET TIME ZONE and AT TIME ZONE; timestamp columns are unaffected."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import psycopg
import pytest

from parser import plan_query
from parser.pushdown.sql import answers_sql_batches
from parser.semantics.session_zone import cache_tag, using_zone
from parser.semantics.zones import session_setting
from tests.fixtures.exact_rows import rows_match
from tests.fixtures.refusals import refused
from tests.parser.test_parser_time_zones import CATALOG, tz_conn

__all__ = ["tz_conn"]

ZONES = ["Europe/Berlin", "<+03>-03"]  # SHOW TimeZone's spelling of SET TIME ZONE 3

ANSWERED = [
    "SELECT date_trunc('day', ts) AS d, count(*) FROM tzev GROUP BY 1",
    "SELECT date_trunc('week', ts) AS w, count(*), sum(n) FROM tzev GROUP BY 1",
    "SELECT date_trunc('month', ts) AS m, count(*) FROM tzev GROUP BY 1",
    "SELECT extract(hour from ts) AS h, count(*) FROM tzev GROUP BY 1",
    "SELECT date_part('dow', ts) AS dow, count(*) FROM tzev GROUP BY 1",
    "SELECT ts::date AS d, count(*) FROM tzev GROUP BY 1",
    "SELECT date(ts) AS d, count(*) FROM tzev GROUP BY 1",
    "SELECT date_trunc('hour', CAST(ts AS timestamp)) AS t, count(*) FROM tzev WHERE ts < '2026-03-30' GROUP BY 1",
    "SELECT to_char(ts, 'YYYY-MM-DD HH24') AS k, count(*) FROM tzev GROUP BY 1",
    "SELECT count(*) FROM tzev WHERE ts >= '2026-03-29' AND ts < '2026-03-30 05:00'",
    "SELECT count(*) FROM tzev WHERE ts::date = '2026-10-25'",
    "SELECT count(*) FROM tzev WHERE ts >= DATE '2026-03-29'",
    "SELECT count(*) FROM tzev WHERE ts < '2026-03-29 12:00:00+00'",
    "SELECT count(*) FROM tzev WHERE ts >= to_timestamp('2026-03-29 10', 'YYYY-MM-DD HH24')",
    "SELECT count(*) FROM tzev WHERE ts + interval '1 day' < '2026-03-30 12:00'",
    "SELECT date_trunc('day', ts - interval '1 month 1 day 2 hours') AS d, count(*) FROM tzev GROUP BY 1",
    "SELECT date_trunc('day', interval '1 day' + ts) AS d, count(*) FROM tzev GROUP BY 1",
    "SELECT date_trunc('day', ts) AS d, count(*) FROM tzev WHERE ts >= '2026-10-24' AND ts < '2026-10-27' GROUP BY 1",
    "SELECT date_trunc('day', d) AS d, count(*) FROM tzev GROUP BY 1",
    "SELECT date_trunc('day', ts AT TIME ZONE 'UTC') AS d, count(*) FROM tzev GROUP BY 1",
    "SELECT count(*) FROM tzev WHERE td >= '2026-07-01'",  # day cells split at the literal's instant
    "SELECT date_trunc('hour', ts) AS h, count(*) FROM tzev WHERE ts < '2026-03-30' GROUP BY 1",
    "SELECT floor(extract(epoch from ts) / 86400) AS b, count(*) FROM tzev GROUP BY 1",  # no zone in an epoch
    # a timestamptz against a timestamp or a date column: they meet in the zone
    "SELECT count(*) FROM tzev WHERE t >= CAST('2026-03-29 00:00:00+00' AS timestamptz)",
    "SELECT count(*) FROM tzev WHERE d >= CAST('2026-03-29 23:30:00+00' AS timestamptz)",
    # timestamp columns: no zone at all
    "SELECT date_trunc('day', t) AS d, extract(hour from t) AS h, count(*) FROM tzev GROUP BY 1, 2",
    "SELECT count(*) FROM tzev WHERE t >= '2026-03-29' AND t < '2026-03-30'",
]


@pytest.fixture
def zoned(tz_conn: psycopg.Connection) -> Iterator[psycopg.Connection]:
    yield tz_conn
    tz_conn.execute("SET TimeZone = 'UTC'")


def _exact(sql: str, zone: str, conn: psycopg.Connection) -> list[tuple[Any, ...]]:
    with using_zone(session_setting(zone)):
        plan = plan_query(sql, CATALOG)
    values: list[float] = []
    for batch in answers_sql_batches(plan.table_schema, list(plan.queries)):
        values.extend(float(v) for v in conn.execute(batch).fetchone() or ())
    return plan.rows(np.array(values))


@pytest.mark.parametrize("zone", ZONES)
@pytest.mark.parametrize("sql", ANSWERED)
def test_session_zone_statements_match_postgresql(sql: str, zone: str, zoned: psycopg.Connection) -> None:
    ours = _exact(sql, zone, zoned)
    zoned.execute(f"SET TimeZone = '{zone}'")
    theirs = zoned.execute(sql).fetchall()
    zoned.execute("SET TimeZone = 'UTC'")
    n_keys = sql.split("GROUP BY ")[1].count(",") + 1 if "GROUP BY" in sql else 0
    problem = rows_match(ours, theirs, n_keys, ordered=False)
    assert problem is None, f"{zone}: {sql}\n{problem}"


@pytest.mark.parametrize(("sql", "zone", "column"), [
    ("SELECT date_trunc('day', ts) AS d, count(*) FROM tzev GROUP BY 1", "<+05:30>-05:30", "ts"),
    ("SELECT extract(hour from ts) AS h, count(*) FROM tzev GROUP BY 1", "Asia/Kolkata", "ts"),
    ("SELECT date_trunc('day', td) AS d, count(*) FROM tzev GROUP BY 1", "Europe/Berlin", "td"),
])
def test_zones_that_cut_cells_are_refused(sql: str, zone: str, column: str) -> None:
    with using_zone(session_setting(zone)):
        r = refused(sql, CATALOG)
    assert r.sqlstate == "0A000" and "cuts the cells" in r.message and f"column {column}" in r.message, r.message
    assert r.hint and "SET TIME ZONE 'UTC'" in r.hint and "AT TIME ZONE" in r.hint, r.hint


def test_utc_spellings_plan_as_utc_and_zones_key_the_caches() -> None:
    """False-failure rate 0."""
    for utc in (None, "UTC", "Etc/UTC", "<+00>-00"):
        with using_zone(session_setting(utc) if utc else None):
            assert cache_tag() == ""
    with using_zone(session_setting("Europe/Berlin")):
        assert cache_tag() == "|TimeZone=Europe/Berlin"
