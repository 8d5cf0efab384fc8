"""Dashboard time series through the real proxy process over a real socket (psycopg, the session's
`events` table): Grafana's multi-series panels (a time bucket and a metric column over the dashboard's
time range) and sums by hour of day. Each answer's keys are the groups the WHERE leaves and its values
are within 5 stated standard errors (+1 for rounding) of the engine's bounded exact answer computed by
PostgreSQL: a false failure has probability below 1e-6 per value (Gaussian tails)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import psycopg
import pytest

from proxy.config import load_config
from proxy.replay.runner import parse_provenance
from tests.fixtures.databases import fill_table
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


LOGS = """
[tables.logs]
privacy_unit = "uid"
max_rows_per_unit = 5
[tables.logs.columns]
ts = { type = "timestamp", min = 2026-01-01T00:00:00, max = 2026-03-31T23:59:59, resolution = "hour" }
page = { type = "text", values = ["home", "cart"], nullable = true }
latency = { type = "int", min = 0, max = 5000, nullable = true }
revenue = { type = "numeric", min = 0, max = 200, bins = 10, nullable = true }
"""


@pytest.fixture(scope="module")
def logs_proxy(embedded_pg: Any, default_config: Any, tmp_path_factory: Any, harness: Any) -> Iterator[Any]:
    """A table a DBA declared from draft-config: nullable columns (NULLs and a value outside the list)."""
    dsn = harness.demo_database(embedded_pg, default_config, "logs")
    rows = [(datetime(2026, 1, 1) + timedelta(seconds=i * 1297 % (90 * 86400)), i % 400,
             None if i % 7 == 0 else ("home", "cart", "other")[i % 3], None if i % 5 == 0 else i * 31 % 6000,
             None if i % 3 else i * 13 % 25000 / 100) for i in range(6000)]
    with psycopg.connect(dsn, autocommit=True) as conn:
        fill_table(conn, "logs (ts timestamp, uid bigint, page text, latency int, revenue numeric)", rows)
    port = harness.free_port()
    yield from harness.serve_config(tmp_path_factory.mktemp("logs"), harness.make_test_config(
        dsn, port, epsilon=1e4, stream_length=100_000, extra=LOGS), port, dsn)


def test_average_of_a_nullable_column_by_hour_of_day(logs_proxy: Any) -> None:
    """AVG of a nullable column by hour of day (COUNT(latency) per group: its non-NULL cells, scattered over
    the hours): answered, within 5 stated standard errors of PostgreSQL's answer over each user's 5 rows."""
    sql = "SELECT extract(hour FROM ts) AS h, AVG(latency) AS a, COUNT(latency) AS n FROM logs GROUP BY 1 ORDER BY 1"
    catalog = load_config(logs_proxy.config_path).catalog
    plan, exact = exact_plan_rows(sql, catalog, logs_proxy.upstream_dsn, table="logs")
    got, sd = _ask(logs_proxy, sql)
    assert len(got) == 24
    for row, want in zip(got, exact, strict=True):
        assert row[0] == want[0]
        for g, w in zip(row[1:], want[1:], strict=True):
            assert abs(float(g) - float(w)) <= 5 * sd + 1, (row, want, sd)


def test_a_bucket_with_a_no_value_branch(logs_proxy: Any) -> None:
    """A CASE bucket with an IS NULL branch over a nullable binned column (was refused: "cuts the cells"):
    every bucket, within 5 stated standard errors of the exact answer over each user's 5 rows."""
    sql = ("SELECT CASE WHEN revenue IS NULL THEN 'no sale' WHEN revenue < 50 THEN 'small' ELSE 'big' END AS k, "
           "count(*) AS n FROM logs GROUP BY 1 ORDER BY 1")
    catalog = load_config(logs_proxy.config_path).catalog
    _, exact = exact_plan_rows(sql, catalog, logs_proxy.upstream_dsn, table="logs")
    got, sd = _ask(logs_proxy, sql)
    assert [r[0] for r in got] == [r[0] for r in exact] == ["big", "no sale", "small"]
    _close(got, exact, 1, sd)
