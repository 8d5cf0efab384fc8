"""Column types through the real proxy: psycopg (text and binary), asyncpg (binary, typed parameters) and
psql receive date, timestamp and timestamptz group keys, numeric and float sums, boolean keys with
PostgreSQL's types; timestamptz text follows the session's TimeZone; bad input gets its SQLSTATE and the
connection stays usable."""

from __future__ import annotations

import asyncio
import random
import shutil
import subprocess
import time
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import psycopg
import pytest

from proxy.replay.runner import parse_provenance
from tests.fixtures.psql import bundled_psql

pytestmark = pytest.mark.process

TABLE = """
[tables.visits]
schema = "public"
[tables.visits.columns]
ts = { type = "timestamptz", min = 2026-01-01T00:00:00Z, max = 2026-01-31T23:00:00Z, resolution = "hour" }
day = { type = "date", min = 2026-01-01, max = 2026-01-31 }
at = { type = "timestamp", min = "2026-01-01", max = "2026-01-07", resolution = "day", nullable = true }
pages = { type = "int", min = 0, max = 20 }
amount = { type = "numeric", min = 0, max = 500, bins = [0, 10, 100, 500], nullable = true }
secs = { type = "float", min = 0, max = 600 }
paid = { type = "boolean", nullable = true }
plan = { type = "text", values_from = "lookup.plans.name" }
epoch_s = { type = "bigint", min = 1767225600, max = 1769903999, bins = 86400 }
"""


@pytest.fixture(scope="module")
def temporal_proxy(harness: Any, embedded_pg: Any, default_config: Any,
                   tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    ProxyProcess = harness.ProxyProcess  # noqa: N806
    free_port, make_test_config = harness.free_port, harness.make_test_config

    dsn = harness.demo_database(embedded_pg, default_config, "tz")
    rng = random.Random(5)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE visits (ts timestamptz, day date, at timestamp, pages integer, "
                     "amount numeric(10,2), secs double precision, paid boolean, plan text, epoch_s bigint)")
        # The public value list of `plan`: a table the DBA declares public ("enterprise" has no visit).
        conn.execute("CREATE SCHEMA lookup")
        conn.execute("CREATE TABLE lookup.plans (name text)")
        conn.execute("INSERT INTO lookup.plans VALUES ('free'), ('pro'), ('enterprise'), (NULL)")
        cols = "ts, day, at, pages, amount, secs, paid, plan, epoch_s"
        with conn.cursor().copy(f"COPY visits ({cols}) FROM STDIN") as copy:
            for _ in range(3000):
                ts = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(seconds=rng.randrange(31 * 86400))
                at = None if rng.random() < 0.1 else datetime(2026, 1, 1) + timedelta(minutes=rng.randrange(7 * 1440))
                amount = None if rng.random() < 0.2 else round(rng.uniform(0, 400), 2)
                copy.write_row((ts, ts.date(), at, rng.randrange(21), amount, rng.uniform(0, 600),
                                rng.choice([True, False, None]), rng.choice(["free", "pro"]), int(ts.timestamp())))
    root = tmp_path_factory.mktemp("tzproxy")
    port = free_port()
    cfg = root / "config.toml"
    cfg.write_text(make_test_config(dsn, port, epsilon=1e4, stream_length=100_000, extra=TABLE))
    p = ProxyProcess(cfg, root / "state", port)
    p.upstream_dsn = dsn
    p.start()
    yield p
    p.stop()


DAILY = ("SELECT date_trunc('day', ts) AS d, count(*) FROM visits "
         "WHERE ts >= '2026-01-05' AND ts < TIMESTAMPTZ '2026-01-08T00:00:00Z' GROUP BY 1 ORDER BY 1")


@pytest.fixture(params=[False, True])
def cur(temporal_proxy: Any, request: pytest.FixtureRequest) -> Iterator[psycopg.Cursor[Any]]:
    """A psycopg cursor on the proxy, in text and in binary format."""
    with psycopg.connect(temporal_proxy.dsn(), autocommit=True) as conn:
        yield conn.cursor(binary=request.param)


def test_psycopg_receives_dates_and_timestamps(cur: psycopg.Cursor[Any]) -> None:
    rows = cur.execute(DAILY).fetchall()
    assert [r[0] for r in rows] == [datetime(2026, 1, d, tzinfo=UTC) for d in (5, 6, 7)]
    assert cur.description is not None and cur.description[0].type_code == 1184
    rows = cur.execute("SELECT day, count(*) FROM visits WHERE day BETWEEN %s AND %s GROUP BY day",
                       (date(2026, 1, 2), date(2026, 1, 4))).fetchall()
    assert [r[0] for r in rows] == [date(2026, 1, 2), date(2026, 1, 3), date(2026, 1, 4)]
    assert cur.description[0].type_code == 1082
    rows = cur.execute("SELECT at, count(*) FROM visits GROUP BY at").fetchall()
    assert [r[0] for r in rows] == [datetime(2026, 1, d) for d in range(1, 8)] + [None]
    assert cur.description[0].type_code == 1114
    # Refusals keep their SQLSTATE and hint, and the connection serves the next statement.
    # A literal inside an hourly cell splits it for the statement (parser/bind/splits.py); an expression
    # cutting the cells is refused with its hint.
    assert cur.execute("SELECT count(*) FROM visits WHERE ts >= '2026-01-05 10:30'").fetchone()
    with pytest.raises(psycopg.errors.FeatureNotSupported) as err:
        cur.execute("SELECT date_trunc('minute', ts) AS m, count(*) FROM visits GROUP BY 1")
    assert "cells of one hour" in str(err.value) and err.value.diag.message_hint
    with pytest.raises(psycopg.errors.DatetimeFieldOverflow):
        cur.execute("SELECT count(*) FROM visits WHERE day > '2026-02-30'")
    with pytest.raises(psycopg.errors.InvalidDatetimeFormat):
        cur.execute("SELECT count(*) FROM visits WHERE day > 'someday'")
    with pytest.raises(psycopg.errors.UndefinedFunction):
        cur.execute("SELECT count(*) FROM visits WHERE pages > INTERVAL '1 day'")
    with pytest.raises(psycopg.errors.UndefinedColumn):
        cur.execute("SELECT count(*) FROM visits WHERE created > now()")
    assert len(cur.execute(DAILY).fetchall()) == 3


def test_numeric_and_boolean_keep_their_types(cur: psycopg.Cursor[Any]) -> None:
    row = cur.execute("SELECT sum(amount), avg(amount), sum(secs), count(amount) FROM visits "
                      "WHERE amount >= 10 AND amount < 100").fetchone()
    assert row is not None
    assert isinstance(row[0], Decimal) and isinstance(row[1], Decimal) and isinstance(row[2], float)
    assert [d.type_code for d in cur.description or []] == [1700, 1700, 701, 20]
    rows = cur.execute("SELECT paid, count(*) FROM visits GROUP BY paid").fetchall()
    assert [r[0] for r in rows] == [False, True, None] and cur.description[0].type_code == 16
    assert cur.execute("SELECT count(*) FROM visits WHERE paid AND day < '2026-01-10'").fetchone()
    assert cur.execute("SELECT count(*) FROM visits WHERE amount > 20").fetchone()  # the bin split at 20
    with pytest.raises(psycopg.errors.FeatureNotSupported) as err:
        cur.execute("SELECT count(*) FROM visits WHERE amount * 2 > 40")
    assert "edges 0, 10, 100, 500" in (err.value.diag.message_hint or "")  # the hint names the bins it may use
    with pytest.raises(psycopg.errors.FeatureNotSupported):
        cur.execute("SELECT secs, count(*) FROM visits GROUP BY secs")
    assert cur.execute("SELECT count(*) FROM visits").fetchone()


def test_binned_bigint_keys_and_sums_keep_their_types(cur: psycopg.Cursor[Any]) -> None:
    rows = cur.execute("SELECT (epoch_s - 1767225600) / 86400 AS d, sum(epoch_s), count(*) FROM visits "
                       "WHERE epoch_s >= 1767312000 AND epoch_s <= 1767484799 GROUP BY 1 ORDER BY 1").fetchall()
    assert [r[0] for r in rows] == [1, 2] and all(isinstance(r[1], Decimal) for r in rows)
    assert [d.type_code for d in cur.description or []] == [20, 1700, 20]
    # > inside a bin: the bin is split at the literal for this statement (parser/bind/splits.py)
    assert cur.execute("SELECT count(*) FROM visits WHERE epoch_s > 1767312000").fetchone()
    with pytest.raises(psycopg.errors.FeatureNotSupported) as err:
        cur.execute("SELECT epoch_s > 1767312000 AS k, count(*) FROM visits GROUP BY 1")
    assert "cuts the cells" in str(err.value)
    assert cur.execute("SELECT count(*) FROM visits").fetchone()


def test_value_list_read_from_a_declared_public_table(temporal_proxy: Any) -> None:
    with psycopg.connect(temporal_proxy.dsn(), autocommit=True) as conn:
        rows = conn.execute("SELECT plan, count(*) FROM visits GROUP BY plan ORDER BY plan").fetchall()
        assert [r[0] for r in rows] == ["enterprise", "free", "pro"]
        assert conn.execute("SELECT count(*) FROM visits WHERE plan = 'pro'").fetchone()


def _rows_with_stderrs(conn: psycopg.Connection, sql: str) -> tuple[list[Any], list[float]]:
    """The rows and the stderr of each, from the lapras.show_stderr notice."""

    notices: list[str] = []
    conn.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
    conn.execute("SET lapras.show_stderr = on")
    rows = conn.execute(sql).fetchall()
    errs = parse_provenance([next(n for n in notices if "stderr=[" in n)])[1]
    assert len(errs) == len(rows)
    return rows, errs


def _plan_check(conn: psycopg.Connection) -> str:
    """The CHECK constraint of visits.plan as the catalog shows it through the proxy (psql's \\d query)."""
    row = conn.execute("SELECT pg_get_constraintdef(c.oid, true) FROM pg_constraint c JOIN pg_class r "
                       "ON r.oid = c.conrelid WHERE r.relname = 'visits' AND c.contype = 'c' "
                       "AND pg_get_constraintdef(c.oid) LIKE '%plan%'").fetchone()
    assert row is not None
    return str(row[0])


def test_value_list_is_read_again_at_each_epoch_start(temporal_proxy: Any) -> None:
    """A value inserted into the public list table (sorting first, so every cell index shifts) is a group
    from the next epoch on, with each value's own count."""
    sql = "SELECT plan, count(*) FROM visits GROUP BY plan ORDER BY plan"
    with psycopg.connect(temporal_proxy.upstream_dsn, autocommit=True) as up:
        up.execute("INSERT INTO lookup.plans VALUES ('basic')")
        up.execute("INSERT INTO visits (ts, day, pages, secs, plan, epoch_s) SELECT '2026-01-02', '2026-01-02', "
                   "1, 1.0, 'basic', 1767312000 FROM generate_series(1, 40)")
    try:
        with psycopg.connect(temporal_proxy.dsn(), autocommit=True) as conn:
            assert [r[0] for r in conn.execute(sql).fetchall()] == ["enterprise", "free", "pro"]  # this epoch's list
            assert "'basic'" not in _plan_check(conn)
            with psycopg.connect(temporal_proxy.dsn("dba", "dbapass"), autocommit=True) as dba:
                dba.execute("SELECT lapras.new_epoch()")
            # The shadow catalog (psql's \d, every tool's introspection) shows the new epoch's list.
            deadline = time.monotonic() + 20
            while "'basic'" not in _plan_check(conn) and time.monotonic() < deadline:
                time.sleep(0.2)
            assert "'basic'" in _plan_check(conn) and "'enterprise'" in _plan_check(conn)
            rows, errs = _rows_with_stderrs(conn, sql)
            assert [r[0] for r in rows] == ["basic", "enterprise", "free", "pro"]
            with psycopg.connect(temporal_proxy.upstream_dsn, autocommit=True) as up:
                truth = dict(up.execute("SELECT plan, count(*) FROM visits GROUP BY plan").fetchall())
            for (key, value), se in zip(rows, errs, strict=True):
                assert abs(value - truth.get(key, 0)) <= 5 * se + 0.5, (key, value, se, truth)
            assert truth["basic"] == 40
            rows, errs = _rows_with_stderrs(conn, "SELECT count(*) FROM visits WHERE plan = 'free'")
            assert abs(rows[0][0] - truth["free"]) <= 5 * errs[0] + 0.5, (rows, errs)
    finally:
        with psycopg.connect(temporal_proxy.upstream_dsn, autocommit=True) as up:
            up.execute("DELETE FROM lookup.plans WHERE name = 'basic'")
            up.execute("DELETE FROM visits WHERE plan = 'basic'")
        with psycopg.connect(temporal_proxy.dsn("dba", "dbapass"), autocommit=True) as dba:
            dba.execute("SELECT lapras.new_epoch()")  # the next tests see the list as it was


def test_value_list_from_a_protected_table_is_refused() -> None:
    import tomllib

    from proxy.config import ConfigError, parse_config

    shipped = Path(__file__).resolve().parents[3] / "config.toml"
    tree = tomllib.loads(shipped.read_text() + TABLE.replace("lookup.plans.name", "public.adult.sex"))
    with pytest.raises(ConfigError) as err:
        parse_config(tree)
    assert "values_from" in str(err.value) and "protected table" in str(err.value)


def test_timestamptz_text_follows_session_timezone(temporal_proxy: Any) -> None:
    with psycopg.connect(temporal_proxy.dsn(), autocommit=True) as conn:
        # Days are Tokyo's, as PostgreSQL's are: the literal '2026-01-05' and date_trunc both read in the zone.
        conn.execute("SET TimeZone = 'Asia/Tokyo'")
        raw = conn.pgconn.exec_(DAILY.encode())
        assert raw.get_value(0, 0) == b"2026-01-05 00:00:00+09"
        rows = conn.execute(DAILY).fetchall()  # psycopg reads the offset: the same instants
        assert rows[0][0] == datetime(2026, 1, 4, 15, tzinfo=UTC)
        conn.execute("SET TimeZone = 'Asia/Kolkata'")  # +05:30 would cut the hourly cells: refused, not UTC days
        with pytest.raises(psycopg.errors.FeatureNotSupported):
            conn.execute(DAILY)


def test_asyncpg_binary_with_typed_parameters(temporal_proxy: Any) -> None:
    asyncpg = pytest.importorskip("asyncpg")

    async def run() -> list[Any]:
        conn = await asyncpg.connect(host=temporal_proxy.host, port=temporal_proxy.port, user="analyst",
                                     password="lapras", database="adult", ssl=False)
        try:
            out = [await conn.fetch("SELECT day, count(*) FROM visits WHERE day >= $1 AND day < $2 GROUP BY day",
                                    date(2026, 1, 10), date(2026, 1, 12))]
            out.append(await conn.fetch("SELECT date_trunc('week', ts) AS w, count(*) FROM visits "
                                        "WHERE ts >= $1 GROUP BY 1", datetime(2026, 1, 26, tzinfo=UTC)))
            # a parameter inside an hourly cell: the cell is split at it for the statement
            out.append(await conn.fetchval("SELECT count(*) FROM visits WHERE ts < $1",
                                           datetime(2026, 1, 26, 0, 30, tzinfo=UTC)))
            out.append(await conn.fetchval("SELECT count(*) FROM visits WHERE day = current_date - 400"))
            return out
        finally:
            await conn.close()

    days, weeks, split, count = asyncio.run(run())
    assert [r["day"] for r in days] == [date(2026, 1, 10), date(2026, 1, 11)]
    assert [r["w"] for r in weeks] == [datetime(2026, 1, 26, tzinfo=UTC)]
    assert isinstance(split, int)
    assert isinstance(count, int)


def test_psql_prints_dates(temporal_proxy: Any) -> None:
    psql = bundled_psql() or shutil.which("psql")
    if psql is None:
        pytest.skip("psql is not installed")
    r = subprocess.run([psql, "-X", "-At", temporal_proxy.dsn(), "-c",
                        "SELECT day, count(*) FROM visits WHERE day < '2026-01-03' GROUP BY day"],
                       capture_output=True, text=True, timeout=60)
    assert [line.split("|")[0] for line in r.stdout.splitlines()] == ["2026-01-01", "2026-01-02"], r.stderr


def test_min_max_of_dates_and_timestamps_through_the_engine(temporal_proxy: Any) -> None:
    """Released through the engine (stated standard error about 6 rows a tree count in this config), over
    asyncpg's binary format, each with the column's type: MIN/MAX of a day column (about 100 rows a day)
    and of a day-resolution timestamp (about 390 a day) equal PostgreSQL's truncated to the day. The hourly
    timestamptz has about 4 rows an hour, below the noise: an unfiltered MIN/MAX is the outer end of the
    95% interval of percentile_disc(0.001) / (0.999) (parser.plan.quantile), whole leaves of two hours, here
    within a day of PostgreSQL's extremes (which lie within a day of the declared range's ends)."""
    asyncpg = pytest.importorskip("asyncpg")
    sql = "SELECT min(day), max(day), min(at), max(at), min(ts), max(ts) FROM visits"

    async def run() -> Any:
        conn = await asyncpg.connect(host=temporal_proxy.host, port=temporal_proxy.port, user="analyst",
                                     password="lapras", database="adult", ssl=False)
        try:
            return await conn.fetchrow(sql)
        finally:
            await conn.close()

    got = tuple(asyncio.run(run()))
    with psycopg.connect(temporal_proxy.upstream_dsn, autocommit=True) as up:
        dmin, dmax, amin, amax, tmin, tmax = up.execute(sql).fetchone()  # type: ignore[misc]
    assert type(got[0]) is date and got[2].tzinfo is None and got[4].tzinfo is not None
    assert got[:2] == (dmin, dmax)
    assert got[2:4] == (amin.replace(hour=0, minute=0), amax.replace(hour=0, minute=0)), (got, amin, amax)
    two, day = timedelta(hours=2), timedelta(days=1)
    jan1 = datetime(2026, 1, 1, tzinfo=UTC)
    assert jan1 + (tmin - jan1) // two * two <= got[4] <= tmin + day, (got[4], tmin)
    assert tmax - day <= got[5] <= jan1 + (tmax - jan1) // two * two + timedelta(hours=1), (got[5], tmax)
