"""Apache Superset 6 (from PyPI, SQLite metadata, started here) against the real proxy: the database added
and datasets listed through Superset's API, then chart after chart through /api/v1/chart/data, as the
Explore view sends them. Every answer is noisy and within its stated error of the exact answer.

The stated error: Superset's own SQL (returned with the chart data) is run again through the proxy with
`lapras.show_stderr` on; the proxy replays the stored answer (identical values, nothing spent) and states
the standard error of the release. The exact answer is that SQL run directly on the database, reading
`events` as the proxy does (each user's rows bounded to the configured k, parser.pushdown.sql.table_ref).
Each value is within 5 standard errors (plus 1 for rounding) of it: a false failure has probability
below 1e-5 over the ~80 values checked.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import psycopg
import pytest

from parser.pushdown.sql import EXACT_SESSION_SQL, table_ref
from proxy.replay.runner import parse_provenance
from tests.fixtures.superset_harness import SupersetServer, ensure_installed

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]  # a cold install of Superset takes minutes

CATEGORIES = {"page_view", "search", "add_to_cart", "purchase", "share", "support", "signup", "refund"}
COUNTRIES = {"US", "IN", "GB", "DE", "BR", "FR", "CA", "JP", "MX", "ES", "IT", "AU", "NL", "KR", "PL", "SE",
             "TR", "ID", "NG", "ZA"}
COUNT = "count"
SUM_AMOUNT = {"expressionType": "SIMPLE", "column": {"column_name": "amount"}, "aggregate": "SUM",
              "label": "SUM(amount)"}
MARCH = "2026-03-01 : 2026-04-01"
HALF_YEAR = "2026-01-01 : 2026-07-01"


def axis(grain: str) -> dict[str, Any]:
    """The x axis of a time-series chart (Superset 6's BASE_AXIS column with a time grain)."""
    return {"timeGrain": grain, "columnType": "BASE_AXIS", "sqlExpression": "ts", "label": "ts",
            "expressionType": "SQL"}


def time_range(spec: str) -> list[dict[str, Any]]:
    return [{"col": "ts", "op": "TEMPORAL_RANGE", "val": spec}]


class Env:
    def __init__(self, superset: SupersetServer, proxy: Any, upstream: str, catalog: Any) -> None:
        self.superset, self.proxy, self.upstream, self.catalog = superset, proxy, upstream, catalog
        self.datasets: dict[str, int] = {}
        self.database = 0


@pytest.fixture(scope="module")
def env(embedded_pg: Any, default_config: Any, harness: Any,
        tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    venv = ensure_installed()
    rc = harness
    upstream = rc.demo_database(embedded_pg, default_config, "superset")
    root = tmp_path_factory.mktemp("superset")
    port = rc.free_port()
    (root / "config.toml").write_text(rc.make_test_config(upstream, port, epsilon=1.0, delta=1e-3,
                                                          stream_length=30))
    proxy = rc.ProxyProcess(root / "config.toml", root / "state", port)
    proxy.start()
    superset = SupersetServer(venv, root / "superset", rc.free_port())
    try:
        superset.start()
        yield Env(superset, proxy, upstream, default_config.catalog)
    finally:
        superset.stop()
        proxy.stop()


def _exact_sql(sql: str, env: Env) -> str:
    events = next(t for t in env.catalog.tables if t.name == "events")
    # The series limit's top-N JOIN picks series; the exact value of each returned series needs none.
    sql = re.sub(r"JOIN \(SELECT .*? AS series_limit ON \w+ = \w+__", "", sql, flags=re.S)
    # A row limit picks rows by their noisy values; the exact value of each returned row needs none (with
    # it, a group the noisy top-N holds but the exact top-N does not would look like an exact zero).
    sql = re.sub(r"\bLIMIT\s+\d+", "", sql)
    return re.sub(r"\bFROM (public\.)?events\b", "FROM " + table_ref(events), sql)


def _key(v: Any) -> Any:
    """Superset's JSON keys (epoch milliseconds for timestamps) and psycopg's, compared alike."""
    if isinstance(v, dt.datetime):
        return v.timestamp() * 1000.0
    if isinstance(v, Decimal):
        return float(v)
    return v


def check_chart(env: Env, result: dict[str, Any], keys: list[str], values: list[str]) -> list[tuple]:
    """Superset's rows are the proxy's answer, noisy, within the stated error of the exact one."""
    sql = result["query"]
    data = result["data"]
    assert result["colnames"] == keys + values, result["colnames"]
    notices: list[str] = []
    with psycopg.connect(env.proxy.dsn(), autocommit=True) as conn:
        conn.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
        before = conn.execute("SHOW lapras.budget").fetchall()
        conn.execute("SET lapras.show_stderr = on")
        again = conn.execute(sql).fetchall()
        assert conn.execute("SHOW lapras.budget").fetchall() == before  # replayed, nothing spent
    assert [tuple(_key(v) for v in r) for r in again] == [tuple(r[c] for c in keys + values) for r in data]
    stated = parse_provenance([n for n in notices if "stderr=[" in n])[1]
    assert stated, notices
    sigma = max(stated)
    with psycopg.connect(env.upstream, autocommit=True) as conn:
        for stmt in EXACT_SESSION_SQL:
            conn.execute(stmt)
        exact = {tuple(_key(v) for v in r[: len(keys)]): r[len(keys):]
                 for r in conn.execute(_exact_sql(sql, env)).fetchall()}
    differs = 0
    for r in again:
        k = tuple(_key(v) for v in r[: len(keys)])
        truth = exact.get(k, (0,) * len(values))
        for ours, theirs in zip(r[len(keys):], truth, strict=True):
            theirs = float(theirs or 0)
            assert abs(float(ours) - theirs) <= 5 * sigma + 1, (k, ours, theirs, sigma, sql)
            differs += round(float(ours)) != round(theirs)
    if len(again) * len(values) >= 3:
        assert differs, f"no noise in {again}"
    return again


def test_database_added_and_datasets_listed(env: Env) -> None:
    s = env.superset
    env.database = s.add_database("lapras", f"postgresql://analyst:lapras@127.0.0.1:{env.proxy.port}/adult")
    tables = s.api("GET", f"/api/v1/database/{env.database}/tables/?q=(schema_name:public)")["result"]
    assert {t["value"] for t in tables} == {"adult", "events", "orders", "products", "stores", "calendar"}
    for name in ("events", "adult"):
        env.datasets[name] = s.add_dataset(env.database, name)
    # A virtual dataset: Superset probes the SQL for its columns (answered with no row, nothing spent).
    env.datasets["big_purchases"] = s.add_dataset(
        env.database, "big_purchases",
        "SELECT ts, category, country, amount FROM events WHERE amount >= 100 AND category <> 'refund'")
    listed = {d["table_name"] for d in s.api("GET", "/api/v1/dataset/")["result"]}
    assert listed == {"events", "adult", "big_purchases"}
    columns = {c["column_name"]: c for c in s.api("GET", f"/api/v1/dataset/{env.datasets['events']}")["result"]["columns"]}
    assert set(columns) == {"ts", "category", "country", "amount", "duration_s"} and columns["ts"]["is_dttm"]


def test_time_series_by_day_and_by_month(env: Env) -> None:
    daily = env.superset.chart_data(env.datasets["events"], {
        "columns": [axis("P1D")], "metrics": [COUNT], "filters": time_range(MARCH), "row_limit": 10000})
    assert "DATE_TRUNC('day', ts)" in daily["query"] and "TO_TIMESTAMP(" in daily["query"]
    rows = check_chart(env, daily, ["ts"], [COUNT])
    assert sorted(r[0] for r in rows) == [dt.datetime(2026, 3, d, tzinfo=dt.UTC) for d in range(1, 32)]
    monthly = env.superset.chart_data(env.datasets["events"], {
        "columns": [axis("P1M")], "metrics": [SUM_AMOUNT], "filters": time_range(HALF_YEAR), "row_limit": 10000})
    rows = check_chart(env, monthly, ["ts"], ["SUM(amount)"])
    assert sorted(r[0] for r in rows) == [dt.datetime(2026, m, 1, tzinfo=dt.UTC) for m in range(1, 7)]


def test_bar_chart_and_big_number(env: Env) -> None:
    bar = env.superset.chart_data(env.datasets["events"], {
        "columns": ["country"], "metrics": [COUNT], "orderby": [[COUNT, False]], "row_limit": 10})
    rows = check_chart(env, bar, ["country"], [COUNT])
    assert len(rows) == 10 and {r[0] for r in rows} <= COUNTRIES
    assert [r[1] for r in rows] == sorted((r[1] for r in rows), reverse=True)
    big = env.superset.chart_data(env.datasets["adult"], {
        "columns": [], "metrics": [COUNT], "filters": [{"col": "sex", "op": "==", "val": 1}]})
    assert len(check_chart(env, big, [], [COUNT])) == 1


def test_pie_with_in_filter_has_only_its_slices(env: Env) -> None:
    pie = env.superset.chart_data(env.datasets["events"], {
        "columns": ["category"], "metrics": [COUNT], "orderby": [[COUNT, False]], "row_limit": 100,
        "filters": [{"col": "category", "op": "IN", "val": ["purchase", "refund", "share"]}]})
    rows = check_chart(env, pie, ["category"], [COUNT])
    assert {r[0] for r in rows} == {"purchase", "refund", "share"}


def test_virtual_dataset_chart(env: Env) -> None:
    chart = env.superset.chart_data(env.datasets["big_purchases"], {
        "columns": ["category"], "metrics": [COUNT, SUM_AMOUNT], "row_limit": 100})
    assert "AS virtual_table" in chart["query"]
    rows = check_chart(env, chart, ["category"], [COUNT, "SUM(amount)"])
    assert {r[0] for r in rows} == CATEGORIES - {"refund"}  # the excluded group is a known zero, not shown


def test_series_limited_time_series(env: Env) -> None:
    chart = env.superset.chart_data(env.datasets["events"], {
        "columns": [axis("P1M"), "country"], "metrics": [COUNT], "filters": time_range(HALF_YEAR),
        "orderby": [[COUNT, False]], "row_limit": 10000, "series_columns": ["country"], "series_limit": 3,
        "series_limit_metric": COUNT, "group_others_when_limit_reached": False})
    assert "AS series_limit" in chart["query"]
    rows = check_chart(env, chart, ["ts", "country"], [COUNT])
    series = {r[1] for r in rows}
    assert len(series) == 3 and series <= COUNTRIES and len(rows) == 18
