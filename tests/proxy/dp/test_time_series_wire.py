"""Dashboard time series through the real proxy process over a real socket (psycopg, the session's
`events` table): Grafana's multi-series panels (a time bucket and a metric column over the dashboard's
time range) and sums by hour of day. Each answer's keys are the groups the WHERE leaves and its values
are within 5 stated standard errors (+1 for rounding) of the engine's bounded exact answer computed by
PostgreSQL: a false failure has probability below 1e-6 per value (Gaussian tails)."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from proxy.replay.runner import parse_provenance
from tests.fixtures.exact_rows import exact_plan_rows
from tests.fixtures.notices import noticed

GRAFANA = [
    # $__timeGroupAlias(ts, 1h), metric column, $__timeFilter(ts): 8,760 hours x 8 categories over the year
    "SELECT floor(extract(epoch FROM ts) / 3600) * 3600 AS \"time\", category AS metric, count(*) AS value "
    "FROM events WHERE ts BETWEEN '2026-02-01T00:00:00Z' AND '2026-02-01T05:59:59Z' GROUP BY 1, 2 ORDER BY 1, 2",
    "SELECT date_trunc('hour', ts) AS \"time\", country AS metric, sum(amount) AS value FROM events "
    "WHERE ts >= '2026-02-01T00:00:00Z' AND ts < '2026-02-01T03:00:00Z' GROUP BY 1, 2 ORDER BY 1",
]


def _ask(proxy: Any, sql: str) -> tuple[list[tuple[Any, ...]], float]:
    with noticed(proxy.dsn()) as (conn, notices):
        rows = conn.execute(sql).fetchall()
    sd = max(parse_provenance(notices)[1])
    assert 0 < sd < float("inf")
    return [tuple(r) for r in rows], sd


def _close(got: list[tuple[Any, ...]], exact: list[tuple[Any, ...]], keys: int, sd: float) -> None:
    want = {r[:keys]: r[keys:] for r in exact}
    assert [r[:keys] for r in got] == [r[:keys] for r in exact]
    for row in got:
        for g, w in zip(row[keys:], want[row[:keys]], strict=True):
            assert abs(float(g) - float(w or 0)) <= 5 * sd + 1, (row, want[row[:keys]], sd)


@pytest.mark.parametrize("sql", GRAFANA)
def test_multi_series_over_the_time_range(sql: str, proxy: Any, adult_db: str, default_config: Any) -> None:
    """More than 10,000 groups over the public domain, a few dozen within the time range: answered, every
    hour and metric of the range listed (empty ones included), none outside it."""
    plan, exact = exact_plan_rows(sql, default_config.catalog, adult_db)
    hours = 6 if "05:59" in sql else 3
    assert len(plan.group_keys) == hours * (8 if "category" in sql else 20)
    got, sd = _ask(proxy, sql)
    _close(got, exact, 2, sd)


def test_too_many_groups_within_the_range_are_still_refused(proxy: Any) -> None:
    sql = ("SELECT date_trunc('hour', ts) AS \"time\", category, count(*) FROM events "
           "WHERE ts >= '2026-02-01T00:00:00Z' GROUP BY 1, 2")
    with psycopg.connect(proxy.dsn(), autocommit=True) as conn:
        with pytest.raises(psycopg.errors.ProgramLimitExceeded) as err:
            conn.execute(sql)
        assert "groups in the public domain" in str(err.value)
        assert conn.execute("SELECT count(*) FROM events").fetchone() is not None


@pytest.mark.parametrize("sql", [
    "SELECT extract(hour FROM ts) AS h, SUM(amount), AVG(duration_s) FROM events GROUP BY 1 ORDER BY 1",
    "SELECT extract(dow FROM ts) AS d, category, SUM(amount) AS revenue FROM events GROUP BY 1, 2 ORDER BY 1, 2",
])
def test_sums_by_hour_of_day(sql: str, proxy: Any, adult_db: str, default_config: Any) -> None:
    """Each group is hundreds of scattered hourly cells: answered from one GROUP BY over the cells
    (tests/lapras/test_exact_measures.py), where per-query SQL ran into the statement timeout (57014)."""
    plan, exact = exact_plan_rows(sql, default_config.catalog, adult_db)
    keys = len(plan.template.groups)
    got, sd = _ask(proxy, sql)
    _close(got, exact, keys, sd)
