"""A Superset dashboard on the proxy, rendered by headless Chromium: the picture a new user gets.

Starts the proxy on the embedded default (its own PostgreSQL, the shipped config: epsilon 1 per epoch,
`adult` and `events`), Apache Superset from the `superset` extra (tests/fixtures/superset_harness.py: own
virtualenv, SQLite metadata), adds the proxy as a PostgreSQL database, creates datasets (a virtual one
too), six charts and a dashboard through Superset's REST API, then logs in with Chromium (Debian's
`chromium` and `chromium-driver`, driven by the selenium that Superset itself depends on) and writes a
screenshot of the rendered dashboard to benchmarks/results/superset_dashboard.png.

    .venv/bin/python benchmarks/superset_dashboard.py [--out PATH] [--users N] [--keep-state]

Needs `apt-get install -y chromium chromium-driver`. The proxy's state (embedded database, ledger) is kept
in benchmarks/scratch/superset-dashboard; each run starts it afresh unless `--keep-state` (then a second run
replays the released answers for free). With `--users N` (default 100,000) the embedded `events` table is
refilled, before any statement, with the demo generator's event log of N users (20 events each on average,
a heavy head; fixed seed, all of 2026), and `--set` changes config keys of the copy the proxy serves. After
the screenshot each chart's data is fetched through Superset (the released answers, replayed free) and
compared with PostgreSQL's exact answer over all rows: per chart the median and worst relative error, and
the count of negative sums.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.fixtures.superset_harness import ADMIN, SupersetServer, ensure_installed  # noqa: E402

OUT = REPO / "benchmarks" / "results" / "superset_dashboard.png"
STATE = REPO / "benchmarks" / "scratch" / "superset-dashboard"


def _filter(subject: str, operator: str, comparator: Any) -> dict[str, Any]:
    return {"clause": "WHERE", "subject": subject, "operator": operator, "comparator": comparator,
            "expressionType": "SIMPLE"}


SUM_AMOUNT = {"expressionType": "SIMPLE", "column": {"column_name": "amount"}, "aggregate": "SUM",
              "label": "SUM(amount)"}


def charts(events: int, virtual: int) -> list[tuple[str, int, dict[str, Any], int]]:
    """(title, dataset, form data, width in the 12-column grid) of each chart, as Explore saves them."""
    march = _filter("ts", "TEMPORAL_RANGE", "2026-03-01 : 2026-04-01")
    half = _filter("ts", "TEMPORAL_RANGE", "2026-01-01 : 2026-07-01")
    return [
        ("Events a day, March (noisy counts)", events,
         {"viz_type": "echarts_timeseries_line", "x_axis": "ts", "time_grain_sqla": "P1D", "metrics": ["count"],
          "groupby": [], "adhoc_filters": [march], "row_limit": 10000}, 8),
        ("Events in 2026", events, {"viz_type": "big_number_total", "metric": "count", "adhoc_filters": []}, 4),
        ("Top 3 countries by month (series limit)", events,
         {"viz_type": "echarts_timeseries_line", "x_axis": "ts", "time_grain_sqla": "P1M", "metrics": ["count"],
          "groupby": ["country"], "limit": 3, "timeseries_limit_metric": "count", "adhoc_filters": [half],
          "row_limit": 10000}, 6),
        ("Events by country", events,
         {"viz_type": "echarts_timeseries_bar", "x_axis": "country", "metrics": ["count"], "groupby": [],
          "adhoc_filters": [], "row_limit": 20, "x_axis_sort": "count", "x_axis_sort_asc": False}, 6),
        ("Purchases, refunds and shares (IN filter)", events,
         {"viz_type": "pie", "groupby": ["category"], "metric": "count", "row_limit": 100,
          "adhoc_filters": [_filter("category", "IN", ["purchase", "refund", "share"])]}, 6),
        ("Revenue of big purchases by category (virtual dataset)", virtual,
         {"viz_type": "echarts_timeseries_bar", "x_axis": "category", "metrics": [SUM_AMOUNT], "groupby": [],
          "adhoc_filters": [], "row_limit": 100}, 6),
    ]


def build_dashboard(s: SupersetServer, proxy_port: int, datasets: dict[str, int]) -> int:
    db = s.add_database("LAPRAS Proxy", f"postgresql://analyst:lapras@127.0.0.1:{proxy_port}/adult")
    events = s.add_dataset(db, "events")
    virtual = s.add_dataset(db, "big_purchases", "SELECT ts, category, country, amount FROM events "
                                                 "WHERE amount >= 100")
    datasets.update(events=events, virtual=virtual)
    dash = int(s.api("POST", "/api/v1/dashboard/", {"dashboard_title": "Events through LAPRAS Proxy (DP)",
                                                    "published": True})["id"])
    layout: dict[str, Any] = {
        "DASHBOARD_VERSION_KEY": "v2",
        "ROOT_ID": {"type": "ROOT", "id": "ROOT_ID", "children": ["GRID_ID"]},
        "GRID_ID": {"type": "GRID", "id": "GRID_ID", "children": [], "parents": ["ROOT_ID"]},
        "HEADER_ID": {"id": "HEADER_ID", "type": "HEADER", "meta": {"text": "Events through LAPRAS Proxy (DP)"}},
    }
    row: list[str] = []
    width = 0
    for title, dataset, form, w in charts(events, virtual):
        form = {**form, "datasource": f"{dataset}__table"}
        cid = int(s.api("POST", "/api/v1/chart/", {
            "slice_name": title, "viz_type": form["viz_type"], "datasource_id": dataset,
            "datasource_type": "table", "params": json.dumps(form), "dashboards": [dash]})["id"])
        if width + w > 12:
            row, width = [], 0
        if not row:
            rid = f"ROW-{len(layout)}"
            layout[rid] = {"type": "ROW", "id": rid, "children": row, "parents": ["ROOT_ID", "GRID_ID"],
                           "meta": {"background": "BACKGROUND_TRANSPARENT"}}
            layout["GRID_ID"]["children"].append(rid)
        key = f"CHART-{cid}"
        layout[key] = {"type": "CHART", "id": key, "children": [], "parents": ["ROOT_ID", "GRID_ID", rid],
                       "meta": {"width": w, "height": 50, "chartId": cid, "sliceName": title}}
        row.append(key)
        width += w
    s.api("PUT", f"/api/v1/dashboard/{dash}", {"position_json": json.dumps(layout)})
    return dash


def screenshot(url: str, base: str, out: str) -> None:
    """Runs inside Superset's virtualenv (selenium): log in through the form, open the dashboard, wait for
    every chart to finish loading, save the page."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    opts = webdriver.ChromeOptions()
    opts.binary_location = "/usr/bin/chromium"
    for a in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1500,1500",
              "--hide-scrollbars"):
        opts.add_argument(a)
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=opts)
    try:
        driver.get(base + "/login/")
        wait = WebDriverWait(driver, 400)
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "input#username, input[name=username]"))
        driver.find_element(By.CSS_SELECTOR, "input#username, input[name=username]").send_keys(ADMIN[0])
        pw = driver.find_element(By.CSS_SELECTOR, "input#password, input[name=password]")
        pw.send_keys(ADMIN[1])
        pw.submit() if pw.get_attribute("form") else pw.send_keys("\n")
        wait.until(lambda d: "/login" not in d.current_url)
        driver.get(url)
        wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, ".dashboard-component-chart-holder")) >= 6)
        # Done when no chart shows a loading indicator for a few seconds in a row.
        quiet = 0
        deadline = time.monotonic() + 240
        while quiet < 4 and time.monotonic() < deadline:
            busy = driver.find_elements(By.CSS_SELECTOR, ".dashboard-component-chart-holder .loading")
            quiet = 0 if busy else quiet + 1
            time.sleep(1)
        driver.save_screenshot(out)
    finally:
        driver.quit()


def refill_events(users: int) -> int:
    """Replace the embedded `events` rows by the generator's log of ``users`` users (one transaction)."""
    import datetime as dt

    import psycopg

    from proxy.upstream.embedded import EmbeddedPostgres
    from proxy.upstream.events_data import ROWS_PER_USER, EventsSpec, fill_events

    spec = EventsSpec(rows=users * ROWS_PER_USER, users=users, end=dt.datetime(2027, 1, 1, tzinfo=dt.UTC))
    with psycopg.connect(EmbeddedPostgres(STATE).dsn("adult")) as conn:
        with conn.transaction():
            conn.execute("TRUNCATE public.events")
            n = fill_events(conn, spec)
        conn.execute("ANALYZE public.events")
    return n


def exact(query: str) -> list[tuple[Any, ...]]:
    import psycopg

    from proxy.upstream.embedded import EmbeddedPostgres

    with psycopg.connect(EmbeddedPostgres(STATE).dsn("adult")) as conn:
        return [tuple(r) for r in conn.execute(query).fetchall()]


MARCH_AXIS = {"timeGrain": "P1D", "columnType": "BASE_AXIS", "sqlExpression": "ts", "label": "ts",
              "expressionType": "SQL"}

# Each measured chart: its dataset ("events" or "virtual"), the query object Superset's chart-data API
# sends for it, and PostgreSQL's exact answer over all rows, keyed as the chart's rows are.
MEASURED: list[tuple[str, str, dict[str, Any], str]] = [
    ("Events a day, March (noisy counts)", "events",
     {"columns": [MARCH_AXIS], "metrics": ["count"], "row_limit": 10000,
      "filters": [{"col": "ts", "op": "TEMPORAL_RANGE", "val": "2026-03-01 : 2026-04-01"}]},
     "SELECT (extract(epoch FROM date_trunc('day', ts)) * 1000)::bigint, count(*) FROM events "
     "WHERE ts >= '2026-03-01' AND ts < '2026-04-01' GROUP BY 1"),
    ("Events in 2026", "events", {"columns": [], "metrics": ["count"]}, "SELECT 'total', count(*) FROM events"),
    ("Events by country", "events", {"columns": ["country"], "metrics": ["count"], "row_limit": 20},
     "SELECT country, count(*) FROM events GROUP BY 1"),
    ("Purchases, refunds and shares (IN filter)", "events",
     {"columns": ["category"], "metrics": ["count"], "row_limit": 100,
      "filters": [{"col": "category", "op": "IN", "val": ["purchase", "refund", "share"]}]},
     "SELECT category, count(*) FROM events WHERE category IN ('purchase', 'refund', 'share') GROUP BY 1"),
    ("Revenue of big purchases by category (virtual dataset)", "virtual",
     {"columns": ["category"], "metrics": [SUM_AMOUNT], "row_limit": 100},
     "SELECT category, sum(amount) FROM events WHERE amount >= 100 GROUP BY 1"),
]


def _chart_rows(data: list[dict[str, Any]], metric: str, key: str | None) -> dict[Any, float]:
    """A chart's rows as key -> its metric's value."""
    return {(row[key] if key else "total"): (float(row[metric]) if row[metric] is not None else float("nan"))
            for row in data}


def accuracy(s: SupersetServer, datasets: dict[str, int]) -> list[dict[str, Any]]:
    """Per measured chart: cells, median and worst |answer - exact| / exact against all rows (a missing
    group counts 100%), and the count of negative values of a sum."""
    import numpy as np

    report = []
    for title, dataset, query, truth_sql in MEASURED:
        result = s.chart_data(datasets[dataset], query)
        metric = "SUM(amount)" if query["metrics"] == [SUM_AMOUNT] else "count"
        key = None if not query["columns"] else ("ts" if query["columns"] == [MARCH_AXIS] else query["columns"][0])
        got = _chart_rows(result["data"], metric, key)
        truth = {k: float(v) for k, v in exact(truth_sql)}
        rel = [abs(got.get(k, 0.0) - v) / v for k, v in truth.items() if v]
        worst_key = max((k for k, v in truth.items() if v), key=lambda k: abs(got.get(k, 0.0) - truth[k]) / truth[k])
        negative = sum(1 for v in got.values() if v < 0) if metric != "count" else 0
        report.append({"chart": title, "cells": len(truth), "median": float(np.median(rel)),
                       "worst": float(np.max(rel)), "negative_sums": negative,
                       "worst_cell": [str(worst_key), got.get(worst_key), truth[worst_key]], "sql": result.get("query", "")})
    return report


def main() -> None:
    if sys.argv[1:2] == ["--screenshot"]:
        screenshot(*sys.argv[2:5])
        return
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(OUT))
    ap.add_argument("--users", type=int, default=100_000, help="users of the events table (0: the demo's)")
    ap.add_argument("--keep-state", action="store_true", help="reuse the previous run's state (replays)")
    ap.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE",
                    help="a key of the served config, e.g. tables.events.max_rows_per_group=2")
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args()
    # Here, not at the top: the screenshot step runs this file in Superset's virtualenv, without pytest.
    from tests.fixtures.proxy_process import ProxyProcess, free_port

    t0 = time.monotonic()
    venv = ensure_installed()
    proxy_port = free_port()
    if not args.keep_state and STATE.exists():
        subprocess.run([sys.executable, "-m", "proxy.ops.cli", "reset", "--state-dir", str(STATE), "--yes"],
                       cwd=REPO, check=False, capture_output=True)
        shutil.rmtree(STATE, ignore_errors=True)
    STATE.mkdir(parents=True, exist_ok=True)
    config = STATE / "config.toml"
    config.write_text(served_config(args.set))
    proxy = ProxyProcess(config, STATE, proxy_port, ("--listen", f"127.0.0.1:{proxy_port}"))
    proxy.start(timeout=600)  # the first start fills the embedded database
    if args.users and not args.keep_state:
        t_fill = time.monotonic()
        n = refill_events(args.users)
        # A new epoch, so that every exact source (the epoch's bounded table too) reads the new rows.
        subprocess.run([sys.executable, "-m", "proxy.ops.cli", "epoch", "--config", str(config), "--state-dir",
                        str(STATE)], cwd=REPO, check=True, capture_output=True)
        print(f"events: {n:,} rows of {args.users:,} users in {time.monotonic() - t_fill:.0f} s, new epoch")
    t_proxy = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="lapras-superset-") as work:
        s = SupersetServer(venv, Path(work), free_port())
        try:
            s.start()
            t_superset = time.monotonic()
            datasets: dict[str, int] = {}
            dash = build_dashboard(s, proxy_port, datasets)
            url = f"{s.base}/superset/dashboard/{dash}/?standalone=1"
            subprocess.run([str(venv / "bin" / "python"), __file__, "--screenshot", url, s.base, args.out],
                           check=True)
            t_done = time.monotonic()
            report = accuracy(s, datasets)
        finally:
            s.stop()
            proxy.stop()
    print(f"wrote {args.out}: proxy ready in {t_proxy - t0:.0f} s, superset in {t_superset - t_proxy:.0f} s, "
          f"dashboard built and rendered in {t_done - t_superset:.0f} s")
    print(f"\n| chart ({args.users:,} users{', ' + ', '.join(args.set) if args.set else ''}) | cells | "
          "median error | worst error | negative sums |\n|---|---:|---:|---:|---:|")
    for r in report:
        print(f"| {r['chart']} | {r['cells']} | {r['median']:.1%} | {r['worst']:.1%} | {r['negative_sums']} |")
    if args.json:
        Path(args.json).write_text(json.dumps({"users": args.users, "set": args.set, "charts": report}, indent=1))


def served_config(sets: list[str]) -> str:
    """The shipped config.toml with each ``SECTION.KEY=VALUE`` (a dotted path, a TOML value) set."""
    import tomlkit

    doc = tomlkit.parse((REPO / "config.toml").read_text())
    for item in sets:
        path, _, value = item.partition("=")
        *parents, key = path.split(".")
        node: Any = doc
        for part in parents:
            if part not in node:
                sys.exit(f"--set {item}: no [{'.'.join(parents)}] in config.toml")
            node = node[part]
        node[key] = tomlkit.parse(f"v = {value}")["v"]
    return tomlkit.dumps(doc)


if __name__ == "__main__":
    main()
