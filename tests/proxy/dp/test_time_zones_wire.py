"""Local-day dashboards through the real proxy process over a real socket (psycopg, the session's `events`
table, ts timestamptz in hourly cells): events per Paris day across the March DST change, the same days as
instants shown in the session's TimeZone, and PostgreSQL's error for an unknown zone. Each answer's keys are
the local days PostgreSQL's exact answer holds and its values are within 5 stated standard errors (+1 for
rounding) of the engine's bounded exact answer computed by PostgreSQL: a false failure has probability below
1e-6 per value (Gaussian tails)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo

import psycopg
import pytest

from proxy.replay.runner import parse_provenance
from tests.fixtures.exact_rows import exact_plan_rows
from tests.fixtures.notices import noticed

RANGE = "ts >= '2026-03-27T23:00:00Z' AND ts < '2026-03-31T22:00:00Z'"  # Paris days 28..31 March (29th: 23 hours)
LOCAL_DAYS = (f"SELECT date_trunc('day', ts AT TIME ZONE 'Europe/Paris') AS d, count(*) AS n FROM events "
              f"WHERE {RANGE} GROUP BY 1 ORDER BY 1")
AS_INSTANTS = (f"SELECT date_trunc('day', timezone('Europe/Paris', ts)) AT TIME ZONE 'Europe/Paris' AS d, count(*) AS n "
               f"FROM events WHERE {RANGE} GROUP BY 1 ORDER BY 1")


def _ask(proxy: Any, sql: str, setup: str | None = None) -> tuple[list[tuple[Any, ...]], float]:
    with noticed(proxy.dsn()) as (conn, notices):
        if setup:
            conn.execute(setup)
        rows = conn.execute(sql).fetchall()
    sd = max(parse_provenance(notices)[1])
    assert 0 < sd < float("inf")
    return [tuple(r) for r in rows], sd


def _close(got: list[tuple[Any, ...]], exact: list[tuple[Any, ...]], sd: float) -> None:
    assert [r[0] for r in got] == [r[0] for r in exact]
    for g, w in zip(got, exact, strict=True):
        assert abs(float(g[1]) - float(w[1] or 0)) <= 5 * sd + 1, (g, w, sd)


def test_events_per_local_day_across_dst(proxy: Any, adult_db: str, default_config: Any) -> None:
    plan, exact = exact_plan_rows(LOCAL_DAYS, default_config.catalog, adult_db)
    got, sd = _ask(proxy, LOCAL_DAYS)
    assert [r[0] for r in got] == [datetime(2026, 3, d) for d in (28, 29, 30, 31)]  # timestamp: local wall days
    _close(got, exact, sd)
    with psycopg.connect(adult_db, autocommit=True) as pg:  # the same local days as PostgreSQL's own answer
        pg.execute("SET TimeZone = 'UTC'")
        assert [r[0] for r in pg.execute(LOCAL_DAYS).fetchall()] == [r[0] for r in got]


def test_local_days_as_instants_follow_the_session_time_zone(proxy: Any, adult_db: str, default_config: Any) -> None:
    """timestamp AT TIME ZONE gives timestamptz: the instants of Paris midnights, printed in the session's
    TimeZone (New York here) as PostgreSQL prints them."""
    _, exact = exact_plan_rows(AS_INSTANTS, default_config.catalog, adult_db)
    got, sd = _ask(proxy, AS_INSTANTS, "SET TimeZone = 'America/New_York'")
    paris = ZoneInfo("Europe/Paris")
    assert [r[0] for r in got] == [datetime(2026, 3, d, tzinfo=paris) for d in (28, 29, 30, 31)]
    assert all(r[0].utcoffset() == ZoneInfo("America/New_York").utcoffset(r[0].replace(tzinfo=None)) for r in got)
    assert [r[0].astimezone(UTC) for r in got] == [r[0].astimezone(UTC) for r in exact]
    _close(got, exact, sd)


def test_unknown_zone_gets_postgresql_error_and_the_session_goes_on(proxy: Any) -> None:
    with psycopg.connect(proxy.dsn(), autocommit=True) as conn:
        with pytest.raises(psycopg.errors.InvalidParameterValue) as err:
            conn.execute("SELECT date_trunc('day', ts AT TIME ZONE 'Europe/Pariss') AS d, count(*) FROM events GROUP BY 1")
        assert 'time zone "Europe/Pariss" not recognized' in str(err.value)
        with pytest.raises(psycopg.errors.FeatureNotSupported) as cut:
            conn.execute("SELECT date_trunc('day', ts AT TIME ZONE 'Asia/Kolkata') AS d, count(*) FROM events GROUP BY 1")
        assert "cuts the cells of column ts" in str(cut.value)
        assert conn.execute("SELECT count(*) FROM events").fetchone() is not None
