"""Parsing cost: median time to parse and canonicalise a typical dashboard query, and the cost of cache hits.

    python benchmarks/parse_cost.py [--repeat N] [--log PATH]

Measures, per query (medians over ``--repeat`` runs; the cold minimum shows the cost on an idle core):
  cold       plan_query with every cache cleared: sqlglot parse, checks, WHERE -> canonical decision
             diagram, one LinearQuery per group and aggregate;
  new params the parse cache hit but a new parameter value (bind only: what a prepared statement costs);
  hit        the plan cache hit (same text, same parameters).
Queries: Metabase/Superset/Tableau-style dashboard panels, plus a sample of the BI log's statements when
../shared/data is present.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from parser import clear_caches, plan_query  # noqa: E402
from parser.planner import _plans  # noqa: E402
from parser.schema import Attribute, Catalog, Domain, TableSchema  # noqa: E402

SIZES = {"workclass": 9, "fnlwgt": 100, "education_num": 16, "marital_status": 7, "occupation": 15,
         "relationship": 6, "race": 5, "sex": 2, "capital_gain": 100, "capital_loss": 100, "hours_per_week": 99,
         "native_country": 42, "income_gt_50k": 2}
CATALOG = Catalog((TableSchema("adult", (Attribute("age", Domain("int", 17, 90)),
                                         *(Attribute(n, Domain("int", 0, s - 1)) for n, s in SIZES.items()))),))

DASHBOARD = {
    "metabase count by race, filtered": (
        'SELECT "public"."adult"."race" AS "race", count(*) AS "count" FROM "public"."adult" '
        'WHERE ("public"."adult"."age" >= 30 AND "public"."adult"."age" < 40) AND "public"."adult"."sex" = 1 '
        'GROUP BY "public"."adult"."race" ORDER BY "public"."adult"."race" ASC'),
    "superset avg hours by income": (
        'SELECT income_gt_50k AS income_gt_50k, AVG(hours_per_week) AS "AVG(hours_per_week)", COUNT(*) AS count '
        "FROM public.adult WHERE age >= 25 AND age < 65 GROUP BY income_gt_50k LIMIT 10000"),
    "tableau sum(1) by sex, IN list": (
        'SELECT "adult"."sex" AS "sex", SUM(1) AS "cnt:adult:ok" FROM "public"."adult" "adult" '
        'WHERE ("adult"."education_num" IN (9, 10, 13)) GROUP BY 1'),
    "log: count, 3 conjuncts": "SELECT COUNT(*) FROM adult WHERE relationship = 0 AND age >= 46 AND age BETWEEN 55 AND 63",
}
PARAM_SQL = "SELECT race, COUNT(*) FROM adult WHERE age BETWEEN $1 AND $2 AND sex = $3 GROUP BY race"


LAST_MIN_US = 0.0


def median_us(fn: Callable[[int], object], repeat: int) -> float:
    """Median wall time in microseconds (the minimum is kept in LAST_MIN_US: the cost on an idle core)."""
    global LAST_MIN_US
    times = []
    for i in range(repeat):
        t = time.perf_counter()
        fn(i)
        times.append(time.perf_counter() - t)
    LAST_MIN_US = min(times) * 1e6
    return statistics.median(times) * 1e6


def log_sample(path: Path, n: int) -> list[str]:
    """Distinct statements of a PostgreSQL stderr log (continuation lines joined), first ``n``."""
    out: list[str] = []
    cur: list[str] | None = None
    for line in path.read_text().splitlines():
        m = re.search(r"LOG:  statement: (.*)$", line)
        if m:
            if cur:
                out.append(" ".join(cur))
            cur = [m.group(1)]
        elif re.match(r"^\d{4}-\d\d-\d\d ", line):
            if cur:
                out.append(" ".join(cur))
            cur = None
        elif cur is not None:
            cur.append(line.strip())
    if cur:
        out.append(" ".join(cur))
    return list(dict.fromkeys(out))[:n]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=300)
    ap.add_argument("--log", type=Path, default=REPO.parent / "shared" / "data" / "querylogs" / "adult_bi_21d.log")
    args = ap.parse_args(argv)

    def cold(sql: str) -> Callable[[int], object]:
        def run(_: int) -> object:
            clear_caches()
            return plan_query(sql, CATALOG)
        return run

    def hit(sql: str) -> Callable[[int], object]:
        return lambda _: plan_query(sql, CATALOG)

    print(f"{'query':40s} {'cold (parse+canonicalise)':>26s} {'min':>8s} {'plan-cache hit':>15s} {'queries':>8s}")
    colds = []
    for name, sql in DASHBOARD.items():
        c = median_us(cold(sql), args.repeat)
        c_min = LAST_MIN_US
        plan_query(sql, CATALOG)
        h = median_us(hit(sql), args.repeat * 10)
        colds.append(c)
        print(f"{name:40s} {c / 1000:23.2f} ms {c_min / 1000:5.2f} ms {h:12.2f} us "
              f"{len(plan_query(sql, CATALOG).queries):8d}")
    clear_caches()
    plan_query(PARAM_SQL, CATALOG, [30, 39, 1])

    def rebind(i: int) -> object:
        _plans.clear()  # keep the parse cache, drop the bound plans: the cost of a new parameter value
        return plan_query(PARAM_SQL, CATALOG, [20 + i % 50, 40 + i % 50, i % 2])

    bind = median_us(rebind, args.repeat)
    print(f"{'prepared statement, new params (bind)':40s} {bind / 1000:23.2f} ms")
    print(f"\nmedian over dashboard queries: parse+canonicalise {statistics.median(colds) / 1000:.2f} ms; "
          f"cache hit {median_us(lambda _: plan_query(DASHBOARD['log: count, 3 conjuncts'], CATALOG), 5000):.2f} us")
    if args.log.exists():
        sample = log_sample(args.log, 300)
        t = time.perf_counter()
        ok = 0
        per = []
        for sql in sample:
            clear_caches()
            t1 = time.perf_counter()
            try:
                plan_query(sql, CATALOG)
                ok += 1
            except Exception:  # noqa: BLE001 - refusals are part of real traffic
                pass
            per.append(time.perf_counter() - t1)
        print(f"BI log sample: {len(sample)} distinct statements, {ok} planned, median cold "
              f"{statistics.median(per) * 1000:.2f} ms, total {time.perf_counter() - t:.2f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
