"""A Superset dashboard on the proxy, rendered by headless Chromium: the picture a new user gets.

Starts the proxy on the embedded default (its own PostgreSQL, the shipped config: epsilon 1 per epoch,
`adult` and `events`), Apache Superset from the `superset` extra (tests/fixtures/superset_harness.py: own
virtualenv, SQLite metadata), adds the proxy as a PostgreSQL database, creates datasets (a virtual one
too), six charts and a dashboard through Superset's REST API, then logs in with Chromium (Debian's
`chromium` and `chromium-driver`, driven by the selenium that Superset itself depends on) and writes a
screenshot of the rendered dashboard to benchmarks/results/superset_dashboard.png.

    .venv/bin/python benchmarks/superset_dashboard.py [--out PATH]

Needs `apt-get install -y chromium chromium-driver`. The proxy's state (embedded database, ledger) is kept
in benchmarks/scratch/superset-dashboard, so a second run replays the released answers for free.
"""

from __future__ import annotations

import argparse
import json
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


def build_dashboard(s: SupersetServer, proxy_port: int) -> int:
    db = s.add_database("LAPRAS Proxy", f"postgresql://analyst:lapras@127.0.0.1:{proxy_port}/adult")
    events = s.add_dataset(db, "events")
    virtual = s.add_dataset(db, "big_purchases", "SELECT ts, category, country, amount FROM events "
                                                 "WHERE amount >= 100")
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
        wait = WebDriverWait(driver, 120)
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


def main() -> None:
    if sys.argv[1:2] == ["--screenshot"]:
        screenshot(*sys.argv[2:5])
        return
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args()
    # Here, not at the top: the screenshot step runs this file in Superset's virtualenv, without pytest.
    from tests.fixtures.proxy_process import ProxyProcess, free_port

    t0 = time.monotonic()
    venv = ensure_installed()
    proxy_port = free_port()
    proxy = ProxyProcess(REPO / "config.toml", STATE, proxy_port, ("--listen", f"127.0.0.1:{proxy_port}"))
    proxy.start(timeout=600)  # the first start fills the embedded database
    t_proxy = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="lapras-superset-") as work:
        s = SupersetServer(venv, Path(work), free_port())
        try:
            s.start()
            t_superset = time.monotonic()
            dash = build_dashboard(s, proxy_port)
            url = f"{s.base}/superset/dashboard/{dash}/?standalone=1"
            subprocess.run([str(venv / "bin" / "python"), __file__, "--screenshot", url, s.base, args.out],
                           check=True)
            t_done = time.monotonic()
        finally:
            s.stop()
            proxy.stop()
    print(f"wrote {args.out}: proxy ready in {t_proxy - t0:.0f} s, superset in {t_superset - t_proxy:.0f} s, "
          f"dashboard built and rendered in {t_done - t_superset:.0f} s")


if __name__ == "__main__":
    main()
