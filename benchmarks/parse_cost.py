"""Parsing cost: median time to parse and canonicalise dashboard queries, and the cost of cache hits.

    python benchmarks/parse_cost.py [--repeat N] [--log PATH] [--against REF [--rounds R]]

Measures, per query (medians over ``--repeat`` runs; the minimum shows the cost on an idle core):
  cold       a fresh Planner (empty caches): sqlglot parse, analysis passes, WHERE -> canonical decision
             diagram, one LinearQuery per group and aggregate;
  new params the template cache hit but a new parameter value (bind only: what a prepared statement costs);
  hit        the plan cache hit (same text, same parameters).
Queries: Metabase/Superset/Tableau-style dashboard panels, a long IN list, plus a sample of the BI log's
statements when ../shared/data is present.

With ``--against REF`` the same measurements run on the parser of git revision REF too, alternating the
two trees ``--rounds`` times in separate processes, and the table shows both side by side with ratios.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]

SIZES = {"workclass": 9, "fnlwgt": 100, "education_num": 16, "marital_status": 7, "occupation": 15,
         "relationship": 6, "race": 5, "sex": 2, "capital_gain": 100, "capital_loss": 100, "hours_per_week": 99,
         "native_country": 42, "income_gt_50k": 2}

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
    "metabase binning, count-where": (
        "SELECT floor((age - 17.0) / 10.0) * 10.0 + 17.0 AS age, "
        "sum(CASE WHEN sex = 1 THEN 1 ELSE 0 END) AS c FROM adult GROUP BY 1 ORDER BY 1"),
    "log: count, 3 conjuncts": "SELECT COUNT(*) FROM adult WHERE relationship = 0 AND age >= 46 AND age BETWEEN 55 AND 63",
    "IN list of 2,000 values": ("SELECT COUNT(*) FROM adult WHERE fnlwgt IN ("
                                + ", ".join(str(i % 100) for i in range(0, 4000, 2)) + ") AND age > 30"),
}
PARAM_SQL = "SELECT race, COUNT(*) FROM adult WHERE age BETWEEN $1 AND $2 AND sex = $3 GROUP BY race"
DEFAULT_LOG = REPO.parent / "shared" / "data" / "querylogs" / "adult_bi_21d.log"


def median_and_min_us(fn: Callable[[int], object], repeat: int) -> tuple[float, float]:
    times = []
    for i in range(repeat):
        t = time.perf_counter()
        fn(i)
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e6, min(times) * 1e6


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


class Api:
    """The parser under test: a Planner (this tree) or the module-level caches of older trees."""

    def __init__(self) -> None:
        import parser as P
        try:
            from parser.model import schema  # trees since issue 28's split by role
        except ImportError:
            from parser import schema  # type: ignore[no-redef]  # older trees (move_modules: keep)

        def ints(lo: int, hi: int) -> Any:
            # Trees before the column-type classes spelled an integer domain Domain("int", lo, hi).
            return schema.IntType(lo, hi) if hasattr(schema, "IntType") else schema.Domain("int", lo, hi)

        self.P = P
        self.catalog = schema.Catalog((schema.TableSchema("adult", (schema.Attribute("age", ints(17, 90)), *(
            schema.Attribute(n, ints(0, s - 1)) for n, s in SIZES.items()))),))
        self.planner = P.Planner(self.catalog) if hasattr(P, "Planner") else None

    def cold(self, sql: str, params: Any = None) -> Any:
        if self.planner is not None:
            return self.P.Planner(self.catalog).plan(sql, params)
        self.P.clear_caches()
        return self.P.plan_query(sql, self.catalog, params)

    def warm(self, sql: str, params: Any = None) -> Any:
        if self.planner is not None:
            return self.planner.plan(sql, params)
        return self.P.plan_query(sql, self.catalog, params)

    def drop_plans(self) -> None:
        if self.planner is not None:
            self.planner.plans.clear()
        else:
            from parser.planner import _plans  # type: ignore[attr-defined]

            _plans.clear()


def measure(repeat: int, log: Path | None) -> dict[str, Any]:
    """Every figure for the parser importable from sys.path (run in a worker process per tree)."""
    api = Api()
    out: dict[str, Any] = {"queries": {}}
    for name, sql in DASHBOARD.items():
        reps = max(repeat // 10, 5) if "2,000" in name else repeat
        cold, cold_min = median_and_min_us(lambda _, sql=sql: api.cold(sql), reps)
        api.warm(sql)
        hit, _ = median_and_min_us(lambda _, sql=sql: api.warm(sql), repeat * 10)
        out["queries"][name] = {"cold_us": cold, "cold_min_us": cold_min, "hit_us": hit,
                                "n_queries": len(api.warm(sql).queries)}
    api.warm(PARAM_SQL, [30, 39, 1])

    def rebind(i: int) -> object:
        api.drop_plans()  # keep the parse cache, drop the bound plans: the cost of a new parameter value
        return api.warm(PARAM_SQL, [20 + i % 50, 40 + i % 50, i % 2])

    out["bind_us"], _ = median_and_min_us(rebind, repeat)
    if log is not None and log.exists():
        per, ok = [], 0
        for sql in log_sample(log, 300):
            t = time.perf_counter()
            try:
                api.cold(sql)
                ok += 1
            except Exception:  # noqa: BLE001 - refusals are part of real traffic
                pass
            per.append(time.perf_counter() - t)
        out["log"] = {"n": len(per), "planned": ok, "cold_median_us": statistics.median(per) * 1e6}
    return out


def _worker(root: Path, repeat: int, log: Path | None) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--worker", str(root), "--repeat", str(repeat), "--log", str(log or "")]
    done = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def _median_of(runs: list[dict[str, Any]], *path: str) -> float:
    vals = []
    for r in runs:
        v: Any = r
        for p in path:
            v = v[p]
        vals.append(float(v))
    return statistics.median(vals)


def compare(ref: str, rounds: int, repeat: int, log: Path | None) -> None:
    import ref_tree  # benchmarks/ref_tree.py, beside this script

    old, new = ref_tree.alternate(ref, rounds, lambda root: _worker(root, repeat, log), "parse-cost-")
    print(f"medians of {rounds} alternating rounds; {ref} vs this tree (ratio = this / {ref})")
    print(f"{'query':34s} {'cold ' + ref:>14s} {'cold this':>10s} {'ratio':>6s} {'hit ' + ref:>12s} "
          f"{'hit this':>9s} {'ratio':>6s} {'queries':>8s}")
    for name in DASHBOARD:
        c0, c1 = _median_of(old, "queries", name, "cold_us"), _median_of(new, "queries", name, "cold_us")
        h0, h1 = _median_of(old, "queries", name, "hit_us"), _median_of(new, "queries", name, "hit_us")
        nq = new[0]["queries"][name]["n_queries"]
        print(f"{name:34s} {c0 / 1000:11.2f} ms {c1 / 1000:7.2f} ms {c1 / c0:6.2f} {h0:9.1f} us {h1:6.1f} us "
              f"{h1 / h0:6.2f} {nq:8d}")
    b0, b1 = _median_of(old, "bind_us"), _median_of(new, "bind_us")
    print(f"{'prepared statement, new params':34s} {b0 / 1000:11.2f} ms {b1 / 1000:7.2f} ms {b1 / b0:6.2f}")
    if "log" in new[0]:
        l0, l1 = _median_of(old, "log", "cold_median_us"), _median_of(new, "log", "cold_median_us")
        print(f"{'BI log sample, median cold':34s} {l0 / 1000:11.2f} ms {l1 / 1000:7.2f} ms {l1 / l0:6.2f}  "
              f"({new[0]['log']['n']} statements, {new[0]['log']['planned']} planned)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=300)
    ap.add_argument("--log", type=str, default=str(DEFAULT_LOG))
    ap.add_argument("--against", help="git revision whose parser to measure side by side")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    log = Path(args.log) if args.log else None
    if args.worker:
        sys.path.insert(0, args.worker)
        print(json.dumps(measure(args.repeat, log)))
        return 0
    if args.against:
        compare(args.against, args.rounds, args.repeat, log)
        return 0
    sys.path.insert(0, str(REPO))
    res = measure(args.repeat, log)
    print(f"{'query':34s} {'cold (parse+canonicalise)':>26s} {'min':>8s} {'plan-cache hit':>15s} {'queries':>8s}")
    for name, r in res["queries"].items():
        print(f"{name:34s} {r['cold_us'] / 1000:23.2f} ms {r['cold_min_us'] / 1000:5.2f} ms {r['hit_us']:12.2f} us "
              f"{r['n_queries']:8d}")
    print(f"{'prepared statement, new params':34s} {res['bind_us'] / 1000:23.2f} ms")
    if "log" in res:
        lg = res["log"]
        print(f"BI log sample: {lg['n']} distinct statements, {lg['planned']} planned, "
              f"median cold {lg['cold_median_us'] / 1000:.2f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
