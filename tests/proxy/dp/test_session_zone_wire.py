"""Computations over timestamptz in the session's TimeZone, through the real proxy over real sockets (psycopg)
and against the real PostgreSQL holding the same rows, under the same TimeZone on both: date_trunc('day' |
'week' | 'month', ts), extract(hour from ts), ts::date and a WHERE literal without an offset (read in the zone,
as PostgreSQL reads it; a bound text parameter too), in Europe/Berlin across its 29 March 2026 change (a day of
23 hours) and at a fixed offset, set by SET TIME ZONE or by a start-up TimeZone (as pgjdbc sends the JVM's).

Keys, column names and types must be PostgreSQL's (printed in the zone: false-failure rate 0); each noisy count
must lie within 5 stated standard errors (+1 for rounding) of the engine's exact answer computed in the same
zone from PostgreSQL's rows, a false failure of probability below 1e-6 per value (Gaussian tails); this module's
proxy has so large a budget (epsilon 1e7 over 100 statements) that a count's standard error is below 0.5, so an
hour's or a day's shift in the buckets cannot hide in the noise. A zone that would cut the hourly cells (+05:30) is refused with 0A000 and a hint, never
answered in UTC."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg.types.string import TextLoader

from parser.semantics.session_zone import using_zone
from parser.semantics.zones import session_setting
from proxy.replay.runner import parse_provenance
from tests.fixtures.databases import demo_database
from tests.fixtures.exact_rows import exact_plan_rows
from tests.fixtures.proxy_process import start_test_proxy

pytestmark = pytest.mark.process

WEEK = "ts >= '2026-03-26' AND ts < '2026-04-02'"  # read in the session's zone
STATEMENTS = [
    f"SELECT date_trunc('day', ts) AS d, count(*) FROM events WHERE {WEEK} GROUP BY 1 ORDER BY 1",
    "SELECT date_trunc('week', ts) AS w, count(*) FROM events WHERE ts >= '2026-03-16' AND ts < '2026-04-13' "
    "GROUP BY 1 ORDER BY 1",
    "SELECT date_trunc('month', ts) AS m, count(*) FROM events WHERE ts >= '2026-02-01' AND ts < '2026-05-01' "
    "GROUP BY 1 ORDER BY 1",
    f"SELECT extract(hour from ts) AS h, count(*) FROM events WHERE {WEEK} GROUP BY 1 ORDER BY 1",
    f"SELECT ts::date AS d, count(*) FROM events WHERE {WEEK} GROUP BY 1 ORDER BY 1",
    "SELECT count(*) FROM events WHERE ts >= '2026-03-29' AND ts < '2026-03-30'",
]
ZONES = ["'Europe/Berlin'", "'+03'", "INTERVAL '-05:00' HOUR TO MINUTE"]


@pytest.fixture(scope="module")
def quiet(embedded_pg: Any, default_config: Any, tmp_path_factory: Any) -> Iterator[tuple[str, str]]:
    """A proxy whose answers are nearly exact, and the conninfo of its database: (proxy dsn, database dsn)."""
    dsn = demo_database(embedded_pg, default_config, "sesszone")
    p = start_test_proxy(tmp_path_factory.mktemp("sesszone"), dsn, epsilon=1e7, stream_length=100, learn_prediction=False)
    try:
        yield p.dsn(), dsn
    finally:
        p.stop()


def _text_rows(conn: psycopg.Connection, sql: str, params: Any = None) -> tuple[list[tuple[Any, ...]], list[Any]]:
    cur = conn.execute(sql, params, prepare=params is not None)
    return [tuple(r) for r in cur.fetchall()], [(d.name, d.type_code) for d in cur.description or ()]


def _compare(proxy_dsn: str, adult_db: str, catalog: Any, sql: str, options: str = "", setup: str = "",
             params: Any = None) -> None:
    """``sql`` on both under one TimeZone: keys, names and types equal, counts within noise of the exact."""
    seen = []
    for dsn in (proxy_dsn, adult_db):
        with psycopg.connect(dsn + options, autocommit=True) as conn:
            conn.adapters.register_loader("timestamptz", TextLoader)
            notices: list[str] = []
            conn.add_notice_handler(lambda d, notices=notices: notices.append(d.message_primary or ""))
            if dsn == proxy_dsn:
                conn.execute("SET lapras.show_stderr = on")
            if setup:
                conn.execute(setup)
            zone = conn.execute("SHOW TimeZone").fetchone()[0]  # type: ignore[index]
            seen.append((*_text_rows(conn, sql, params), notices, zone))
    (ours, our_cols, notices, zone), (theirs, their_cols, _, their_zone) = seen
    assert zone == their_zone and our_cols == their_cols, (our_cols, their_cols)
    n_keys = len(our_cols) - 1
    assert [r[:n_keys] for r in ours] == [r[:n_keys] for r in theirs], sql  # the zone's buckets, printed in it
    with using_zone(session_setting(zone)):
        exact_sql = sql if params is None else sql.replace("%s", f"'{params[0]}'")
        _, exact = exact_plan_rows(exact_sql, catalog, adult_db)
    sd = max(parse_provenance(notices)[1])
    assert sd < 0.5, sd
    assert len(exact) == len(ours)
    for got, want in zip(ours, exact, strict=True):
        assert abs(float(got[-1]) - float(want[-1] or 0)) <= 5 * sd + 1, (sql, got, want, sd)


@pytest.mark.parametrize("zone", ZONES)
@pytest.mark.parametrize("sql", STATEMENTS)
def test_timestamptz_computations_follow_set_time_zone(sql: str, zone: str, quiet: tuple[str, str],
                                                        default_config: Any) -> None:
    _compare(*quiet, default_config.catalog, sql, setup=f"SET TIME ZONE {zone}")


def test_a_start_up_time_zone_buckets_local_days(quiet: tuple[str, str], default_config: Any) -> None:
    """pgjdbc's start-up TimeZone (the JVM's zone): DBeaver's and Metabase's days are the zone's."""
    _compare(*quiet, default_config.catalog, STATEMENTS[0], options=" options='-c TimeZone=Europe/Berlin'")


def test_a_bound_text_parameter_reads_in_the_session_zone(quiet: tuple[str, str], default_config: Any) -> None:
    """A prepared statement's timestamptz parameter without an offset, read at Bind in the zone in force."""
    sql = "SELECT date_trunc('day', ts) AS d, count(*) FROM events WHERE ts >= %s AND ts < '2026-04-02' GROUP BY 1 ORDER BY 1"
    _compare(*quiet, default_config.catalog, sql, setup="SET TIME ZONE 'Europe/Berlin'",
             params=["2026-03-28"])


@pytest.mark.parametrize("sql", [STATEMENTS[0], STATEMENTS[3]])
def test_a_zone_that_cuts_the_cells_is_refused(sql: str, quiet: tuple[str, str]) -> None:
    with psycopg.connect(quiet[0], autocommit=True) as conn:
        conn.execute("SET TIME ZONE 'Asia/Kolkata'")
        with pytest.raises(psycopg.errors.FeatureNotSupported) as e:
            conn.execute(sql).fetchall()
    hint = e.value.diag.message_hint or ""
    assert "cuts the cells" in (e.value.diag.message_primary or "") and "SET TIME ZONE 'UTC'" in hint, hint


def test_describe_plans_in_the_session_zone(quiet: tuple[str, str]) -> None:
    """Parse then Describe (no Execute) under Asia/Kolkata: the zone's refusal comes at Describe, as Execute's
    would, and the same statement under UTC describes (false-failure rate 0)."""
    sql = STATEMENTS[0].encode()
    with psycopg.connect(quiet[0], autocommit=True) as conn:
        pg = conn.pgconn
        for name, zone, refused in ((b"k", "'Asia/Kolkata'", True), (b"u", "'UTC'", False)):
            conn.execute(f"SET TIME ZONE {zone}")
            parsed = pg.prepare(name, sql)
            assert parsed.status == psycopg.pq.ExecStatus.COMMAND_OK, parsed.error_message
            described = pg.describe_prepared(name)
            if refused:
                assert described.status == psycopg.pq.ExecStatus.FATAL_ERROR
                assert described.error_field(psycopg.pq.DiagnosticField.SQLSTATE) == b"0A000"
                assert b"cuts the cells" in (described.error_message or b"")
            else:
                assert described.status == psycopg.pq.ExecStatus.COMMAND_OK, described.error_message
                assert described.nfields == 2
