"""A new user's statements through the real proxy over real sockets (psycopg), each sent to the real PostgreSQL
holding the same rows too, and compared: column names and types, keys and errors (SQLSTATE and message) must be
PostgreSQL's; a noisy value must lie within 5 stated standard errors (+1 for rounding) of the engine's exact
answer computed by PostgreSQL, a false failure of probability below 1e-6 per value (Gaussian tails). The
rest (names, types, keys, errors) draws no noise: false-failure rate 0.

The session's TimeZone prints timestamptz values as PostgreSQL prints them ('+02' and INTERVALs east,
'UTC+3' POSIX west, zone names), in answers and in relayed catalog statements; ``AT TIME ZONE $1`` in GROUP BY is bound like its literal; a quoted
``"pg_catalog".current_database()`` names the client's database; numeric casts and round() of aggregates are
numeric; unaliased function calls are named after the function; a parameter beside two columns in WHERE is
bound on their joint cells."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import psycopg
import pytest
from psycopg.types.string import TextLoader

from proxy.replay.runner import parse_provenance
from tests.fixtures.describe import described
from tests.fixtures.exact_rows import exact_plan_rows
from tests.fixtures.notices import noticed

pytestmark = pytest.mark.process


def _run(dsn: str, sql: str, params: Any = None, setup: str = "") -> list[tuple[Any, ...]] | tuple[str, str]:
    """Rows (timestamptz as the server's text), or (SQLSTATE, message) of the error."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.adapters.register_loader("timestamptz", TextLoader)
        try:
            if setup:
                conn.execute(setup)
            return [tuple(r) for r in conn.execute(sql, params, prepare=params is not None).fetchall()]
        except psycopg.Error as e:
            return e.sqlstate or "", e.diag.message_primary or ""


# 'Etc/UTC', not 'UTC': under SET TIME ZONE 'UTC+3' PostgreSQL reads the abbreviation UTC as that zone's (-03).
MONTHS = ("SELECT date_trunc('month', ts AT TIME ZONE 'Etc/UTC') AT TIME ZONE 'Etc/UTC' AS d, count(*) FROM events "
          "GROUP BY 1 ORDER BY 1 LIMIT 3")


@pytest.mark.parametrize("zone", ["'+02'", "'UTC+3'", "'Europe/Paris'", "INTERVAL '-03:30' HOUR TO MINUTE", "'-3.5'",
                                  "'cet'"])
def test_timestamptz_prints_in_the_session_time_zone(zone: str, proxy: Any, adult_db: str) -> None:
    setup = f"SET TIME ZONE {zone}"
    ours, theirs = _run(proxy.dsn(), MONTHS, setup=setup), _run(adult_db, MONTHS, setup=setup)
    assert [r[0] for r in ours] == [r[0] for r in theirs], zone  # the same instants, the same printed offset
    assert _run(proxy.dsn(), "SHOW TimeZone", setup=setup) == _run(adult_db, "SHOW TimeZone", setup=setup)
    # A catalog statement (relayed to the catalog database, whose backends print UTC) prints in it too.
    relayed = "SELECT '2026-07-01 12:00:00.25+00'::timestamptz AS t, 'infinity'::timestamptz AS i, NULL::timestamptz"
    assert _run(proxy.dsn(), relayed, setup=setup) == _run(adult_db, relayed, setup=setup)


@pytest.mark.parametrize("zone", ["+02", "europe/paris", "GMT-05:00"])
def test_a_start_up_time_zone_is_spelt_and_printed_as_postgresql(zone: str, proxy: Any, adult_db: str) -> None:
    """A TimeZone in the start-up packet (pgjdbc sends the JVM's): ParameterStatus, SHOW and the printed
    offsets are PostgreSQL's."""
    seen = []
    for dsn in (proxy.dsn(), adult_db):
        with psycopg.connect(dsn + f" options='-c TimeZone={zone}'", autocommit=True) as conn:
            conn.adapters.register_loader("timestamptz", TextLoader)
            seen.append((conn.pgconn.parameter_status(b"TimeZone"), conn.execute("SHOW TimeZone").fetchone(),
                         conn.execute(MONTHS).fetchall()[0][0]))
    assert seen[0] == seen[1], seen


@pytest.mark.parametrize("zone", ["'MSK'", "'Foo/Bar'"])
def test_a_time_zone_postgresql_refuses_is_refused_alike(zone: str, proxy: Any, adult_db: str) -> None:
    ours = _run(proxy.dsn(), "SELECT 1", setup=f"SET TIME ZONE {zone}")
    assert ours == _run(adult_db, "SELECT 1", setup=f"SET TIME ZONE {zone}")
    assert ours[0] == "22023"


LOCAL_DAYS = ("SELECT date_trunc('day', ts AT TIME ZONE %s) AS d, count(*) FROM events "
              "WHERE ts >= '2026-03-27T23:00:00Z' AND ts < '2026-03-31T22:00:00Z' GROUP BY 1 ORDER BY 1")


def test_a_bound_zone_groups_by_local_days_as_its_literal(proxy: Any, adult_db: str, default_config: Any) -> None:
    """``date_trunc('day', ts AT TIME ZONE $1)`` with 'Europe/Paris' bound: PostgreSQL's local days (the 29th
    of March has 23 hours), each count within noise of the literal zone's exact answer."""
    _, exact = exact_plan_rows(LOCAL_DAYS.replace("%s", "'Europe/Paris'"), default_config.catalog, adult_db)
    with noticed(proxy.dsn()) as (conn, notices):
        cur = conn.execute(LOCAL_DAYS, ["Europe/Paris"], prepare=True)
        got = cur.fetchall()
        assert [(d.name, d.type_code) for d in cur.description or ()] == [("d", 1114), ("count", 20)]
    sd = max(parse_provenance(notices)[1])
    theirs = _run(adult_db, LOCAL_DAYS, ["Europe/Paris"])
    assert [r[0] for r in got] == [r[0] for r in theirs] == [r[0] for r in exact]
    for g, w in zip(got, exact, strict=True):
        assert abs(g[1] - float(w[1] or 0)) <= 5 * sd + 1, (g, w, sd)


@pytest.mark.parametrize(("zone", "state"), [("Asia/Kolkata", "0A000"), ("Nowhere/Land", "22023")])
def test_a_bound_zone_is_refused_as_its_literal(zone: str, state: str, proxy: Any, adult_db: str) -> None:
    """A zone of +05:30 would cut the hourly cells: 0A000, as the literal is; an unknown zone: PostgreSQL's
    own 22023 and message."""
    bound = _run(proxy.dsn(), LOCAL_DAYS, [zone])
    literal = _run(proxy.dsn(), LOCAL_DAYS.replace("%s", f"'{zone}'"))
    assert isinstance(bound, tuple) and isinstance(literal, tuple)
    assert bound[0] == literal[0] == state
    if state == "22023":
        assert bound == _run(adult_db, LOCAL_DAYS, [zone])


@pytest.mark.parametrize("sql", ['SELECT "pg_catalog".current_database()', 'SELECT "pg_catalog"."current_database"()',
                                 "SELECT pg_catalog.current_database()", "SELECT current_database(), current_user"])
def test_current_database_names_the_clients_database(sql: str, proxy: Any, adult_db: str) -> None:
    with psycopg.connect(proxy.dsn(), autocommit=True) as conn:
        cur = conn.execute(sql)
        assert cur.fetchone()[0] == "adult"  # type: ignore[index]
    assert described(proxy.dsn(), sql) == described(adult_db, sql)  # name-typed columns, named alike


NUMERIC = ["SELECT COUNT(*)::numeric / 3 FROM events", "SELECT SUM(duration_s)::numeric / COUNT(*) FROM events",
           "SELECT AVG(duration_s)::numeric(10,2) FROM events", "SELECT round(AVG(duration_s), 2) FROM events",
           "SELECT round(AVG(amount)::numeric, 2) AS a FROM events", "SELECT round(SUM(amount) / COUNT(*), 1) FROM events",
           "SELECT category, COUNT(*)::numeric / 3 AS share FROM events GROUP BY 1",
           "SELECT COUNT(*)::numeric(12) FROM events"]


@pytest.mark.parametrize("sql", NUMERIC)
def test_numeric_arithmetic_of_aggregates_is_numeric(sql: str, proxy: Any, adult_db: str) -> None:
    assert described(proxy.dsn(), sql) == described(adult_db, sql)
    rows = _run(proxy.dsn(), sql)
    assert isinstance(rows, list) and rows and all(isinstance(r[-1], Decimal) for r in rows)
    if "(10,2)" in sql or ", 2)" in sql:
        assert all(r[-1].as_tuple().exponent == -2 for r in rows)  # type: ignore[union-attr]


NAMED = ["lower($1)", "upper($1::text)", "coalesce($1, 'y')", "upper(category)", "coalesce(category, 'x')",
         "date_trunc('day', ts)", "to_char(ts, 'YYYY')", "lower(category)", "length(category)", "extract(hour FROM ts)",
         "date_part('hour', ts)", "substring(category, 1, 3)", "trim(category)", "btrim(category)", "ltrim(category)",
         "trim(trailing 'x' from category)", "concat(category, 'x')", "abs(duration_s)"]


@pytest.mark.parametrize("expr", NAMED)
def test_unaliased_function_calls_are_named_as_postgresql_names_them(expr: str, proxy: Any, adult_db: str) -> None:
    """Describe's column names (FigureColname: the function's name) of ``SELECT f(...), count(*) ... GROUP BY 1``
    (``f($1)``: no GROUP BY, a value per execution)."""
    sql = f"SELECT {expr}, count(*) FROM events" + ("" if "$" in expr else " GROUP BY 1")
    ours, theirs = described(proxy.dsn(), sql), described(adult_db, sql)
    assert ours == theirs, (ours, theirs)


JOINT = "SELECT count(*) FROM adult WHERE age + %s > hours_per_week"


def test_a_parameter_beside_two_columns_is_bound_on_their_cells(proxy: Any, adult_db: str,
                                                                default_config: Any) -> None:
    """``age + $1 > hours_per_week``: answered within noise of the literal's exact answer; a value that does not
    read as an integer is PostgreSQL's 22P02."""
    _, exact = exact_plan_rows(JOINT.replace("%s", "5"), default_config.catalog, adult_db, table="adult")
    with noticed(proxy.dsn()) as (conn, notices):
        got = conn.execute(JOINT, [5], prepare=True).fetchone()[0]  # type: ignore[index]
    sd = max(parse_provenance(notices)[1])
    assert abs(got - float(exact[0][0])) <= 5 * sd + 1, (got, exact, sd)
    bad = _run(proxy.dsn(), JOINT, ["x"])
    assert isinstance(bad, tuple) and bad == _run(adult_db, JOINT, ["x"])


def test_an_untyped_parameter_minus_an_interval_is_refused_as_postgresql_refuses_it(proxy: Any, adult_db: str) -> None:
    """``ts > $1 - interval '1 day'``: $1 is an interval by PostgreSQL's resolution, so there is no
    timestamptz > interval operator (42883, its message); cast to timestamptz it is answered."""
    sql = "SELECT count(*) FROM events WHERE ts > %s - interval '1 day'"
    ours = _run(proxy.dsn(), sql, ["2026-03-01"])
    assert ours == _run(adult_db, sql, ["2026-03-01"])
    assert ours[0] == "42883"
    fixed = _run(proxy.dsn(), sql.replace("%s", "%s::timestamptz"), ["2026-03-01 00:00:00+00"])
    assert isinstance(fixed, list) and len(fixed) == 1


def test_a_parameter_in_a_group_key_is_refused_naming_it(proxy: Any) -> None:
    """PostgreSQL answers ``GROUP BY age + $1 > hours_per_week``; the proxy cannot list keys that depend on a
    value it has not seen: 0A000 naming the parameter and the expression."""
    got = _run(proxy.dsn(), "SELECT age + %s > hours_per_week AS k, count(*) FROM adult GROUP BY 1", [5])
    assert isinstance(got, tuple) and got[0] == "0A000"
    assert got[1].startswith("a parameter ($1) in the GROUP BY expression"), got
