"""Parse + plan cost of time-series statements (dates, timestamps, buckets, now()-relative filters).

    python benchmarks/timeseries_cost.py [--repeat N]

An events-shaped table as config.toml would declare it: ``ts timestamptz`` over 2026 at hourly
resolution (8,760 cells) or minute resolution (525,600 cells), ``day date`` over 2026, a text category,
a numeric measure with a clamp, an integer. Per statement, medians over ``--repeat`` runs (and the
minimum, the cost on an idle core):
  cold   a fresh Planner: sqlglot parse, analysis (literals, buckets evaluated on every cell), binding
         to canonical linear queries;
  buckets known  a fresh Planner, but the statement's buckets were evaluated before (by any statement:
         dashboards repeat them), so only parsing and binding remain;
  hit    the plan cache hit (statements reading now() are planned anew each time: they show cold).
A plain integer dashboard statement on Adult is measured in the same run as the reference row, so the
ratios do not depend on the machine's load.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from datetime import datetime

from parser import Planner
from parser.analysis.cells import clear_cell_cache
from parser.coltypes import DateType, IntType, NumericType, TextType, TimestamptzType
from parser.model.schema import Attribute, Catalog, TableSchema

Y0, Y1 = datetime(2026, 1, 1), datetime(2026, 12, 31, 23, 59)


def catalog(resolution: str) -> Catalog:
    events = TableSchema("events", (
        Attribute("ts", TimestamptzType(Y0, Y1.replace(minute=0) if resolution == "hour" else Y1, resolution)),
        Attribute("day", DateType(Y0, datetime(2026, 12, 31))),
        Attribute("category", TextType(values=tuple(f"c{i}" for i in range(8)))),
        Attribute("amount", NumericType(0.0, 500.0, nullable=True)),
        Attribute("duration_s", IntType(0, 3600)),
    ))
    adult = TableSchema("adult", (Attribute("age", IntType(17, 90)), Attribute("sex", IntType(0, 1)),
                                  Attribute("race", IntType(0, 4))))
    return Catalog((events, adult))


STATEMENTS = {
    "reference: adult count by race, filtered": (
        "SELECT race, count(*) FROM adult WHERE age >= 30 AND age < 40 AND sex = 1 GROUP BY race ORDER BY race"),
    "daily counts, one month": (
        "SELECT date_trunc('day', ts) AS d, count(*) FROM events "
        "WHERE ts >= '2026-03-01' AND ts < '2026-04-01' GROUP BY 1 ORDER BY 1"),
    "weekly sum(amount) by category, quarter": (
        "SELECT date_trunc('week', ts) AS w, category, sum(amount) FROM events "
        "WHERE ts >= TIMESTAMPTZ '2026-04-01T00:00:00Z' AND ts < '2026-07-01' GROUP BY 1, 2"),
    "monthly avg(amount), whole year": (
        "SELECT date_trunc('month', ts), avg(amount) FROM events GROUP BY 1 ORDER BY 1"),
    "hour of day x day of week": (
        "SELECT extract(dow from ts) AS dow, extract(hour from ts) AS h, count(*) FROM events GROUP BY 1, 2"),
    "last 7 days, daily (now())": (
        "SELECT ts::date AS d, count(*) FROM events WHERE ts >= date_trunc('day', now()) - INTERVAL '7 days' "
        "GROUP BY 1 ORDER BY 1"),
    "grafana epoch buckets, one day": (
        "SELECT floor(extract(epoch from ts) / 3600) * 3600 AS time, count(*) FROM events "
        "WHERE ts >= '2026-06-01T00:00:00Z' AND ts < '2026-06-02T00:00:00Z' GROUP BY 1 ORDER BY 1"),
    "date column, BETWEEN, by month": (
        "SELECT extract(month from day) AS m, count(*) FROM events "
        "WHERE day BETWEEN DATE '2026-01-01' AND '2026-06-30' GROUP BY 1"),
}


def timed(fn: Callable[[], object], repeat: int) -> tuple[float, float]:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e3, min(times) * 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=30)
    args = ap.parse_args()
    rows: list[tuple[str, ...]] = []
    for resolution in ("hour", "minute"):
        cat = catalog(resolution)
        warm = Planner(cat)
        for name, sql in STATEMENTS.items():
            if resolution == "minute" and name.startswith("reference"):
                continue
            try:
                plan = warm.plan(sql)
            except Exception as exc:  # noqa: BLE001 - a refusal is a row of the table too
                rows.append((resolution, name, f"refused: {str(exc)[:60]}", "", "", "", "", ""))
                continue
            def cold_plan(sql: str = sql, cat: Catalog = cat) -> object:
                clear_cell_cache()  # cold: no bucket evaluated before, in this statement or another
                return Planner(cat).plan(sql)

            def shared_plan(sql: str = sql, cat: Catalog = cat) -> object:
                return Planner(cat).plan(sql)

            def hit_plan(sql: str = sql, warm: Planner = warm) -> object:
                return warm.plan(sql)

            cold, cold_min = timed(cold_plan, args.repeat)
            shared, _ = timed(shared_plan, args.repeat)
            hit, _ = timed(hit_plan, args.repeat * 10)
            rows.append((resolution, name, f"{cold:.2f}", f"{cold_min:.2f}", f"{shared:.2f}", f"{hit * 1e3:.1f}",
                         str(len(plan.queries)), str(plan.n_groups)))
    ref = next(float(r[2]) for r in rows if r[1].startswith("reference"))
    print(f"repeat {args.repeat}; ratio = cold median / the reference row's cold median ({ref:.2f} ms)\n")
    print("| cells | statement | cold median ms | cold min ms | ratio | buckets known ms | cache hit us | queries "
          "| groups |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for res, name, cold_s, cmin, known, hit_s, nq, ng in rows:
        ratio = f"{float(cold_s) / ref:.1f}" if cmin else ""
        print(f"| {res} | {name} | {cold_s} | {cmin} | {ratio} | {known} | {hit_s} | {nq} | {ng} |")


if __name__ == "__main__":
    main()
