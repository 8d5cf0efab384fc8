"""to_char(date / timestamp, pattern) evaluated by the proxy equals PostgreSQL's own to_char over every day
of a 15-month range and every hour of four days, for the patterns BI tools send and their variants (case,
FM, TH, quoted text), and GROUP BY / WHERE over them plan to PostgreSQL's exact rows."""

from __future__ import annotations

from datetime import date, datetime, timedelta
from typing import Any

import psycopg
import pytest

from parser import Refusal, plan_query
from parser.coltypes import DateType, TimestampType
from parser.model.schema import Attribute, Catalog, TableSchema
from parser.semantics.tochar import Unsupported, parse, pg_pattern, to_char
from tests.fixtures.databases import table_fixture

PATTERNS = [
    "Month", "MONTH", "month", "FMMonth", "Mon", "MON", "mon", "YYYY-MM", "YYYY-MM-DD", "Day", "DAY", "day",
    "FMDay", "Dy", "DY", "dy", "Q", "YYYY \"Q\"Q", "IW", "IYYY-IW", "\"W\"IW IYYY", "WW", "W", "D", "ID", "DDD",
    "IDDD", "DD", "FMDD", "DDth", "FMDDTH", "Mon DD, YYYY", "FMMonth FMDDth, YYYY", "MM/DD/YYYY", "YY", "YYY",
    "Y", "Y,YYY", "CC", "J", "RM", "rm", "FMRM", "Month YYYY", "Dy, DD Mon YYYY", "YYYY\"年\"MM\"月\"",
    "HH24:MI", "HH12 AM", "HH:MI:SS pm", "HH24", "FMHH12 a.m.", "SSSS", "MS US", "AD", "b.c.", "Qth", "dd-mm-yy",
    "iyyy", "Mm", "TMMonth", "FMDay, FMMonth FMDD", "\\\"YYYY\\\"", "\"quoted \\\"x\\\"\" MM", "IYYY-\"W\"IW-ID",
]
DAYS = [date(2024, 12, 20) + timedelta(days=i) for i in range(400)]
HOURS = [datetime(2025, 12, 30) + timedelta(hours=i) for i in range(96)]


@pytest.fixture(scope="module")
def pg(embedded_pg: Any) -> Any:
    with psycopg.connect(embedded_pg.dsn(), autocommit=True) as conn:
        conn.execute("SET TimeZone = 'UTC'")
        yield conn


@pytest.mark.parametrize("pattern", PATTERNS)
def test_to_char_equals_postgresql_on_every_day_and_hour(pattern: str, pg: Any) -> None:
    theirs = [r[0] for r in pg.execute("SELECT to_char(d, %s) FROM unnest(%s::date[]) AS d", (pattern, DAYS))]
    assert [to_char(d, pattern) for d in DAYS] == theirs
    theirs = [r[0] for r in pg.execute("SELECT to_char(t, %s) FROM unnest(%s::timestamp[]) AS t", (pattern, HOURS))]
    assert [to_char(t, pattern) for t in HOURS] == theirs


def test_month_names_are_blank_padded_to_nine() -> None:
    assert to_char(date(2026, 5, 1), "Month") == "May      "
    assert to_char(date(2026, 9, 1), "Month|") == "September|"
    assert to_char(date(2026, 5, 1), "FMMonth|") == "May|"
    assert to_char(date(2026, 5, 3), "Day|") == "Sunday   |"


def test_time_zone_patterns_are_refused() -> None:
    with pytest.raises(Unsupported):
        parse("YYYY TZ")


def test_sqlglot_patterns_read_back() -> None:
    """Trees read by sqlglot's own dialect (series limits) hold strftime codes: read back, they mean the
    same (case variants of numeric keywords come back in one case), outside quoted text."""
    import sqlglot

    for pattern in PATTERNS:
        if '"' in pattern:
            continue  # sqlglot maps inside quotes too (our parser keeps to_char's pattern as written)
        node = sqlglot.parse_one(f"SELECT to_char(d, '{pattern}')", read="postgres").selects[0]
        raw = pg_pattern(str(node.args["format"].this))
        assert raw is not None and to_char(DAYS[3], raw) == to_char(DAYS[3], pattern), pattern


TABLE = TableSchema("shop", (Attribute("d", DateType(datetime(2025, 12, 1), datetime(2026, 3, 31))),
                             Attribute("h", TimestampType(datetime(2026, 1, 1), datetime(2026, 1, 3, 23), "hour"))))


shop = table_fixture("tochar", "shop (d date, h timestamp)",
                     lambda: [(date(2025, 12, 1) + timedelta(days=(i * 7) % 121),
                               datetime(2026, 1, 1) + timedelta(hours=(i * 5) % 72)) for i in range(2000)],
                     setup=["SET TimeZone = 'UTC'"])


@pytest.mark.parametrize("sql", [
    "SELECT to_char(d, 'Month') AS m, count(*) FROM shop GROUP BY 1",
    "SELECT to_char(d, 'FMMonth YYYY') AS m, count(*) FROM shop GROUP BY 1",
    "SELECT to_char(d, 'Day') AS m, count(*) FROM shop GROUP BY 1",
    "SELECT to_char(d, 'YYYY \"Q\"Q') AS m, count(*) FROM shop GROUP BY 1",
    "SELECT to_char(d, 'IYYY-IW') AS m, count(*) FROM shop GROUP BY 1",
    "SELECT count(*) FROM shop WHERE to_char(d, 'Mon') = 'Jan'",
    "SELECT count(*) FROM shop WHERE to_char(d, 'FMDay') IN ('Saturday', 'Sunday')",
    "SELECT to_char(h, 'Dy HH24') AS m, count(*) FROM shop WHERE to_char(h, 'AM') = 'PM' GROUP BY 1",
    # Over two columns, one of them hourly: constant over each hour for every day (analysis/joint.py).
    "SELECT concat(to_char(d, 'Mon'), ' ', to_char(h, 'HH24')) AS k, count(*) FROM shop GROUP BY 1",
    "SELECT CASE WHEN extract(hour FROM h) < 12 AND d < '2026-01-15' THEN 'early am' ELSE 'other' END AS k, "
    "count(*) FROM shop GROUP BY 1",
])
def test_to_char_keys_and_filters_plan_to_postgresqls_rows(sql: str, shop: Any) -> None:
    from parser.pushdown.sql import answers_sql

    plan = plan_query(sql, Catalog((TABLE,)))
    row = shop.execute(answers_sql(TABLE, plan.queries)).fetchone() if plan.queries else ()
    ours = {tuple(r[:-1]): r[-1] for r in plan.rows([float(v) for v in row]) if r[-1]}
    theirs = {tuple(r[:-1]): r[-1] for r in shop.execute(sql).fetchall()}
    assert ours == theirs


def test_unsupported_pattern_is_refused_with_its_part() -> None:
    with pytest.raises(Refusal) as err:
        plan_query("SELECT to_char(d, 'YYYY TZ'), count(*) FROM shop GROUP BY 1", Catalog((TABLE,)))
    assert err.value.sqlstate == "0A000" and "TZ" in err.value.message
    with pytest.raises(Refusal) as err:  # minutes of hourly cells, beside another column
        plan_query("SELECT concat(to_char(d, 'Mon'), to_char(h, 'HH24:MI')), count(*) FROM shop GROUP BY 1",
                   Catalog((TABLE,)))
    assert err.value.sqlstate == "0A000" and "cuts the cells of column h" in err.value.message
