"""AT TIME ZONE and timezone(zone, ts) over protected tables against PostgreSQL: local-day buckets, WHERE
conditions, extract and to_char of local times, across the 2026 DST changes of Europe/Paris (29 March, 25
October) and America/New_York (8 March, 1 November), fixed offsets ('+02' is POSIX: two hours west; INTERVAL
is ISO: east), the Metabase report-time-zone form, and the refusals: an expression that would cut a cell (day
cells in a zone that is not UTC, a +05:30 zone on hourly cells) and PostgreSQL's own errors for a bad zone.
The plan's exact answers (answers_sql pushed down) must equal PostgreSQL's answer to the same SQL, session
TimeZone UTC as the proxy declares it."""

from __future__ import annotations

import random
from datetime import UTC, date, datetime, timedelta
from typing import Any

import numpy as np
import psycopg
import pytest

from parser import Refusal, plan_query
from parser.coltypes import DateType, IntType, TimestampType, TimestamptzType
from parser.model.schema import Attribute, Catalog, TableSchema
from parser.pushdown.sql import answers_sql_batches
from tests.fixtures.databases import table_fixture
from tests.fixtures.exact_rows import rows_match
from tests.fixtures.refusals import refused

H0, H1 = datetime(2026, 3, 1), datetime(2026, 11, 10, 23)  # hourly cells over both DST changes of both zones

TZ = TableSchema("tzev", (
    Attribute("ts", TimestamptzType(H0, H1, "hour", nullable=True)),
    Attribute("t", TimestampType(H0, H1, "hour")),
    Attribute("td", TimestamptzType(H0, H1, "day")),
    Attribute("d", DateType(H0, H1)),
    Attribute("n", IntType(0, 9)),
))
CATALOG = Catalog((TZ,))
SPAN = int((H1 - H0).total_seconds()) + 3600


def tz_rows(n: int = 5000, seed: int = 7) -> list[tuple[Any, ...]]:
    """Rows anywhere inside their cells (seconds and microseconds too), dense around the DST changes."""
    rng = random.Random(seed)
    changes = [datetime(2026, 3, 8, 7), datetime(2026, 3, 29, 1), datetime(2026, 10, 25, 1), datetime(2026, 11, 1, 6)]
    out = []
    for i in range(n):
        if i % 2:
            at = rng.choice(changes) + timedelta(seconds=rng.randrange(-30 * 3600, 30 * 3600))
        else:
            at = H0 + timedelta(seconds=rng.randrange(SPAN))
        at += timedelta(microseconds=rng.randrange(10**6))
        ts = None if rng.random() < 0.05 else at.replace(tzinfo=UTC)
        t = H0 + timedelta(seconds=rng.randrange(SPAN), microseconds=rng.randrange(10**6)) if i % 3 else at
        out.append((ts, t, at.replace(tzinfo=UTC), at.date(), rng.randrange(10)))
    return out


tz_conn = table_fixture("parser_tz", "tzev (ts timestamptz, t timestamp, td timestamptz, d date, n integer)", tz_rows,
                        setup=["SET TimeZone = 'UTC'"])


def exact_rows(sql: str, conn: psycopg.Connection, params: list[Any] | None = None) -> list[tuple[Any, ...]]:
    plan = plan_query(sql, CATALOG, params)
    values: list[float] = []
    for batch in answers_sql_batches(plan.table_schema, list(plan.queries)):
        values.extend(float(v) for v in conn.execute(batch).fetchone() or ())
    return plan.rows(np.array(values))


ANSWERED = [
    # local days (Grafana / Superset by hand), across both DST changes of each zone
    "SELECT date_trunc('day', ts AT TIME ZONE 'Europe/Paris') AS d, count(*) FROM tzev GROUP BY 1",
    "SELECT date_trunc('day', ts AT TIME ZONE 'America/New_York') AS d, count(*), sum(n) FROM tzev GROUP BY 1",
    "SELECT date_trunc('day', timezone('Europe/Paris', ts)) AS d, count(*) FROM tzev GROUP BY 1",
    "SELECT date_trunc('week', ts AT TIME ZONE 'america/new_york') AS w, avg(n) FROM tzev GROUP BY 1",
    "SELECT date_trunc('month', ts AT TIME ZONE 'Europe/Paris') AS m, count(*) FROM tzev GROUP BY 1",
    "SELECT (ts AT TIME ZONE 'Europe/Paris')::date AS d, count(*) FROM tzev GROUP BY 1",
    "SELECT CAST(ts AT TIME ZONE 'America/New_York' AS date) AS d, count(*) FROM tzev GROUP BY 1",
    # local hours of the day, local text labels
    "SELECT extract(hour from ts AT TIME ZONE 'Europe/Paris') AS h, count(*) FROM tzev GROUP BY 1",
    "SELECT extract(dow from ts AT TIME ZONE 'America/New_York') AS dow, count(*) FROM tzev GROUP BY 1",
    "SELECT to_char(ts AT TIME ZONE 'America/New_York', 'YYYY-MM-DD HH24') AS k, count(*) FROM tzev GROUP BY 1",
    "SELECT to_char(ts AT TIME ZONE 'Europe/Paris', 'IYYY-IW') AS k, count(*) FROM tzev GROUP BY 1",
    # the local day's start as an instant again (a time axis in the client's zone)
    "SELECT date_trunc('day', ts AT TIME ZONE 'Europe/Paris') AT TIME ZONE 'Europe/Paris' AS d, count(*) "
    "FROM tzev GROUP BY 1",
    # Metabase with a report time zone: a timestamp column read as UTC, then shown in the zone
    "SELECT date_trunc('day', ((t AT TIME ZONE 'UTC') AT TIME ZONE 'Europe/Paris')) AS d, count(*) FROM tzev "
    "GROUP BY 1",
    "SELECT CAST(date_trunc('day', ((t AT TIME ZONE 'UTC') AT TIME ZONE 'America/New_York')) AS date) AS d, count(*) "
    "FROM tzev GROUP BY 1",
    "SELECT date_trunc('day', ((ts AT TIME ZONE 'UTC') AT TIME ZONE 'Europe/Paris')) AS d, count(*) FROM tzev GROUP BY 1",
    # Metabase's own text: a month of local days filtered by instants with offsets, Sunday-started local weeks
    'SELECT CAST(date_trunc(\'day\', ("public"."tzev"."ts" AT TIME ZONE \'Europe/Paris\')) AS timestamp) AS "ts", '
    'count(*) AS "count" FROM "public"."tzev" WHERE ("public"."tzev"."ts" >= timestamp with time zone '
    '\'2026-03-01 00:00:00.000+01:00\' AND "public"."tzev"."ts" < timestamp with time zone \'2026-04-01 00:00:00.000+02:00\') '
    'GROUP BY CAST(date_trunc(\'day\', ("public"."tzev"."ts" AT TIME ZONE \'Europe/Paris\')) AS timestamp)',
    "SELECT date_trunc('week', (((\"public\".\"tzev\".\"t\" AT TIME ZONE 'UTC') AT TIME ZONE 'Europe/Paris') "
    "+ INTERVAL '1 day')) - INTERVAL '1 day' AS \"t\", count(*) FROM \"public\".\"tzev\" GROUP BY 1",
    # a timestamp column's wall times as instants: the spring-forward gap and the repeated fall-back hour
    "SELECT date_trunc('day', t AT TIME ZONE 'America/New_York') AS d, count(*) FROM tzev GROUP BY 1",
    "SELECT date_trunc('hour', t AT TIME ZONE 'Europe/Paris') AS h, count(*) FROM tzev "
    "WHERE t >= '2026-10-24' AND t < '2026-10-27' GROUP BY 1",
    # fixed offsets: POSIX ('+02' is two hours west), abbreviations, ISO intervals, UTC
    "SELECT date_trunc('day', ts AT TIME ZONE '+02') AS d, count(*) FROM tzev GROUP BY 1",
    "SELECT date_trunc('day', ts AT TIME ZONE 'UTC+3') AS d, count(*) FROM tzev GROUP BY 1",
    "SELECT date_trunc('day', ts AT TIME ZONE 'CET') AS d, count(*) FROM tzev GROUP BY 1",
    "SELECT date_trunc('day', ts AT TIME ZONE INTERVAL '-05:00') AS d, count(*) FROM tzev GROUP BY 1",
    "SELECT date_trunc('day', td AT TIME ZONE 'UTC') AS d, count(*) FROM tzev GROUP BY 1",
    "SELECT date_trunc('month', d AT TIME ZONE 'Europe/Paris') AS m, count(*) FROM tzev GROUP BY 1",
    # WHERE conditions on local times
    "SELECT count(*) FROM tzev WHERE (ts AT TIME ZONE 'Europe/Paris') >= '2026-03-29' "
    "AND (ts AT TIME ZONE 'Europe/Paris') < '2026-03-30'",
    "SELECT count(*), sum(n) FROM tzev WHERE date_trunc('day', ts AT TIME ZONE 'America/New_York') = '2026-11-01'",
    "SELECT extract(hour from ts AT TIME ZONE 'Europe/Paris') AS h, count(*) FROM tzev "
    "WHERE (ts AT TIME ZONE 'Europe/Paris')::date = '2026-10-25' GROUP BY 1",
    "SELECT count(*) FROM tzev WHERE extract(hour from timezone('America/New_York', ts)) BETWEEN 9 AND 17",
    "SELECT count(*) FROM tzev WHERE ts AT TIME ZONE 'Europe/Paris' IS NULL",
    "SELECT date_trunc('day', ts AT TIME ZONE 'Europe/Paris') AS d, count(*) FROM tzev GROUP BY 1 "
    "HAVING date_trunc('day', ts AT TIME ZONE 'Europe/Paris') > '2026-10-20'",
    "SELECT CASE WHEN extract(hour from ts AT TIME ZONE 'Europe/Paris') < 12 THEN 'am' ELSE 'pm' END AS k, count(*) "
    "FROM tzev GROUP BY 1",
    # Grafana's epoch buckets of local days
    "SELECT floor(extract(epoch from ts AT TIME ZONE 'Europe/Paris') / 86400) * 86400 AS b, count(*) FROM tzev GROUP BY 1",
]


@pytest.mark.parametrize("sql", ANSWERED)
def test_time_zone_statements_match_postgresql(sql: str, tz_conn: psycopg.Connection) -> None:
    ours = exact_rows(sql, tz_conn)
    n_keys = 1 if "GROUP BY" in sql else 0
    problem = rows_match(ours, tz_conn.execute(sql).fetchall(), n_keys, ordered=False)
    assert problem is None, f"{sql}\n{problem}"


def test_local_days_hold_23_and_25_hours(tz_conn: psycopg.Connection) -> None:
    """The DST days are local days of 23 and 25 hours: every cell lands in one local day, none is lost."""
    rows = exact_rows("SELECT date_trunc('day', ts AT TIME ZONE 'Europe/Paris') AS d, count(*) FROM tzev GROUP BY 1",
                      tz_conn)
    days = [r[0] for r in rows if r[0] is not None]
    assert days[0] == datetime(2026, 3, 1) and days[-1] == datetime(2026, 11, 11)  # 23:00 UTC is 00:00 Paris
    assert len(days) == len(set(days)) == (date(2026, 11, 11) - date(2026, 3, 1)).days + 1
    plan = plan_query("SELECT date_trunc('day', ts AT TIME ZONE 'Europe/Paris') AS d, count(*) FROM tzev GROUP BY 1",
                      CATALOG)
    assert plan.columns[0].type_oid == 1114  # timestamp without time zone, as PostgreSQL types it
    ny = plan_query("SELECT date_trunc('hour', timezone('America/New_York', t)) AS k, count(*) FROM tzev GROUP BY 1", CATALOG)
    assert ny.columns[0].type_oid == 1184 and ny.columns[0].name == "k"
    assert plan_query("SELECT date_trunc('day', ts) AT TIME ZONE 'UTC', count(*) FROM tzev GROUP BY 1",
                      CATALOG).columns[0].name == "timezone"


@pytest.mark.parametrize(("sql", "column"), [
    # day cells read in a zone that is not UTC: a local day cuts every UTC day
    ("SELECT date_trunc('day', td AT TIME ZONE 'Europe/Paris') AS d, count(*) FROM tzev GROUP BY 1", "td"),
    ("SELECT count(*) FROM tzev WHERE (td AT TIME ZONE 'America/New_York')::date = '2026-07-01'", "td"),
    # a zone off the hour on hourly cells
    ("SELECT date_trunc('day', ts AT TIME ZONE '+05:30') AS d, count(*) FROM tzev GROUP BY 1", "ts"),
    ("SELECT date_trunc('hour', ts AT TIME ZONE 'Asia/Kolkata') AS d, count(*) FROM tzev GROUP BY 1", "ts"),
    ("SELECT extract(hour from t AT TIME ZONE INTERVAL '00:30') AS h, count(*) FROM tzev GROUP BY 1", "t"),
    # finer than the cells, whatever the zone
    ("SELECT date_trunc('minute', ts AT TIME ZONE 'Europe/Paris') AS m, count(*) FROM tzev GROUP BY 1", "ts"),
])
def test_time_zones_that_cut_cells_are_refused(sql: str, column: str) -> None:
    r = refused(sql, CATALOG)
    assert r.sqlstate == "0A000" and "cuts the cells" in r.message and f"column {column}" in r.message, r.message
    assert r.hint and "AT TIME ZONE" in r.hint, r.hint


@pytest.mark.parametrize("sql", [
    "SELECT date_trunc('day', ts AT TIME ZONE 'Mars/Base') AS d, count(*) FROM tzev GROUP BY 1",
    "SELECT count(*) FROM tzev WHERE (ts AT TIME ZONE 'Europe/Pariss') >= '2026-04-01'",
    "SELECT count(*) FROM tzev WHERE timezone('+0200', ts) >= '2026-04-01'",
    "SELECT date_trunc('day', ts AT TIME ZONE INTERVAL '1 day') AS d, count(*) FROM tzev GROUP BY 1",
    "SELECT date_trunc('day', timezone(2, ts)) AS d, count(*) FROM tzev GROUP BY 1",
])
def test_bad_zones_get_postgresql_errors(sql: str, tz_conn: psycopg.Connection) -> None:
    """The same SQLSTATE and message as PostgreSQL (22023 for a zone it does not know, 42883 for a zone that
    is not text or an interval)."""
    with pytest.raises(psycopg.Error) as pg:
        tz_conn.execute(sql)
    tz_conn.rollback()
    r = refused(sql, CATALOG)
    assert r.sqlstate == pg.value.sqlstate
    theirs = str(pg.value).splitlines()[0]
    assert r.message == theirs or r.message in theirs.replace("pg_catalog.", ""), (r.message, theirs)


def test_posix_zones_with_dst_rules_and_dynamic_abbreviations_are_refused() -> None:
    for zone in ("EST5EDT4,M3.2.0,M11.1.0", "MSK"):
        r = refused(f"SELECT count(*) FROM tzev WHERE (ts AT TIME ZONE '{zone}') >= '2026-04-01'", CATALOG)
        assert r.sqlstate == "0A000" and zone in r.message and r.hint, r.message


ZONES = ["Europe/Paris", "America/New_York", "Australia/Lord_Howe", "Asia/Kathmandu", "Europe/Moscow",
         "America/Sao_Paulo", "Pacific/Apia", "Europe/Dublin", "America/St_Johns", "+02", "UTC-05:30", "EST", "cet"]


def test_conversions_equal_postgresql_around_every_transition(tz_conn: psycopg.Connection) -> None:
    """Both directions over 1995-2030 in zones with half-hour and 45-minute offsets, 30-minute DST (Lord Howe),
    a skipped day (Apia 2011), negative DST (Dublin) and changed standard offsets (Moscow 2011, 2014): every
    15 minutes for 3 hours either side of each transition, and 500 random instants, equal PostgreSQL's."""
    from parser.scalar.zone import _datetimes, _micros
    from parser.semantics.zones import resolve

    rng = random.Random(3)
    lo, hi = datetime(1995, 1, 1), datetime(2030, 12, 31)
    for name in ZONES:
        zone = resolve(name)
        trans, _ = zone.table(int(_micros([lo])[0]), int(_micros([hi])[0]))
        base = [lo + timedelta(seconds=rng.randrange(int((hi - lo).total_seconds()))) for _ in range(500)]
        near = [t + timedelta(minutes=15 * k) for t in _datetimes(trans, aware=False) for k in range(-12, 13)]
        walls = base + near
        ours_local = _datetimes(zone.to_local(_micros(walls)), aware=False)
        ours_utc = _datetimes(zone.to_utc(_micros(walls)), aware=True)
        theirs = tz_conn.execute("SELECT (x AT TIME ZONE 'UTC') AT TIME ZONE %s, x AT TIME ZONE %s "
                                 "FROM unnest(%s::timestamp[]) AS x", [name, name, walls]).fetchall()
        assert ours_local == [r[0] for r in theirs], name
        assert ours_utc == [r[1] for r in theirs], name


def test_steps_back_inside_a_cell_are_found() -> None:
    """Lord Howe springs forward by 30 minutes at 02:00 local: the wall hour 02:00-03:00 maps back at 02:30 (its
    first half reads in the old offset), so a cell holding it is not ordered; Paris's hour-aligned changes never
    fall inside an hourly cell."""
    from parser.scalar.zone import _micros
    from parser.semantics.zones import resolve

    def cell(a: datetime, b: datetime) -> tuple[Any, Any]:
        return _micros([a]), _micros([b - timedelta(microseconds=1)])

    assert not resolve("Australia/Lord_Howe").monotone(*cell(datetime(2026, 10, 4, 2), datetime(2026, 10, 4, 3)), False)
    assert resolve("Australia/Lord_Howe").monotone(*cell(datetime(2026, 10, 4, 3), datetime(2026, 10, 4, 4)), False)
    assert resolve("Europe/Paris").monotone(*cell(datetime(2026, 10, 25, 0), datetime(2026, 10, 25, 1)), True)
    assert resolve("Europe/Paris").monotone(*cell(datetime(2026, 10, 25, 1), datetime(2026, 10, 25, 2)), True)
    assert not resolve("Europe/Paris").monotone(*cell(datetime(2026, 10, 25, 0), datetime(2026, 10, 26, 0)), True)


def test_a_time_of_day_at_a_zone_is_refused_not_misnamed() -> None:
    """PostgreSQL answers time AT TIME ZONE with a timetz, a type the proxy does not produce: 0A000, not 42883."""
    r = refused("SELECT count(*) FROM tzev WHERE n > 3 AND (TIME '10:00' AT TIME ZONE 'Europe/Paris') IS NOT NULL", CATALOG)
    assert r.sqlstate == "0A000" and "time of day" in r.message and r.hint


SESSION_ZONES = ["'+02'", "'UTC+3'", "'Europe/Paris'", "'europe/paris'", "'-3.5'", "2", "'utc'", "'CET'", "'EST'",
                 "INTERVAL '+02:00' HOUR TO MINUTE", "'GMT-5'", "'<+02:30>-02:30'", "'America/St_Johns'"]


def _pg_text(dt: datetime) -> str:
    """A timestamptz as PostgreSQL prints it (ISO: the offset's minutes only when not whole hours)."""
    off = int(dt.utcoffset().total_seconds())  # type: ignore[union-attr]
    h, m = divmod(abs(off) // 60, 60)
    return dt.strftime("%Y-%m-%d %H:%M:%S") + ("-" if off < 0 else "+") + f"{h:02d}" + (f":{m:02d}" if m else "")


@pytest.mark.parametrize("zone", SESSION_ZONES)
def test_session_time_zone_reads_as_postgresql_reads_it(zone: str, tz_conn: psycopg.Connection) -> None:
    """``SET TIME ZONE x`` (zones.session_setting, the one reader of the proxy's SET and of its output's zone):
    hours and INTERVALs east of UTC ('+02' is two hours east here, unlike AT TIME ZONE's POSIX reading), zone
    names in any case, POSIX offsets, tz files named like abbreviations (CET keeps its DST here): its name is
    PostgreSQL's SHOW TimeZone and an instant in January and in July prints with PostgreSQL's offset."""
    from parser.semantics.zones import session_setting

    text = zone.removeprefix("'").removesuffix("'") if zone.startswith("'") else zone.replace("'", "")
    ours = session_setting(text)
    tz_conn.execute(f"SET TIME ZONE {zone}")
    try:
        assert ours.text == tz_conn.execute("SHOW TimeZone").fetchone()[0]  # type: ignore[index]
        for instant in (datetime(2026, 1, 15, 12, tzinfo=UTC), datetime(2026, 7, 15, 12, tzinfo=UTC)):
            theirs = tz_conn.execute("SELECT %s::timestamptz::text", (instant,)).fetchone()[0]  # type: ignore[index]
            assert _pg_text(instant.astimezone(ours.tzinfo())) == theirs, zone
    finally:
        tz_conn.execute("SET TIME ZONE 'UTC'")


@pytest.mark.parametrize(("zone", "state"), [("MSK", "22023"), ("Foo/Bar", "22023"), ("Z", "22023"),
                                             ("XXX3YYY", "0A000"), ("100", "0A000"), ("1e306", "22023")])
def test_session_time_zones_refused(zone: str, state: str) -> None:
    """What PostgreSQL refuses in SET TIME ZONE (an abbreviation is no zone there) is 22023 with its message;
    what it accepts but no datetime can print here (DST rules without a zone, a day's offset) is 0A000."""
    from parser.semantics.zones import session_setting

    with pytest.raises(Refusal) as err:
        session_setting(zone)
    assert err.value.sqlstate == state
    if state == "22023":
        assert err.value.message == f'invalid value for parameter "TimeZone": "{zone}"'
