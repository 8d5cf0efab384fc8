"""Matrix-mechanism preparation on a realistic prediction: P learned from the shared 21-day BI log for one
day, strategy selection timed on the current tree and on a baseline commit side by side, with the total
expected error of P's answers at the same budget.

    python benchmarks/mm_prep.py [--day 15] [--baseline REV] [--repeat 3] [--json benchmarks/results/mm_prep.json]

The baseline's ``lapras`` package is taken from ``git archive REV`` and run in a subprocess on the same
workloads (pickled), so both sides see the same P and the same machine load.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import pickle
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

os.environ.setdefault("OPENBLAS_NUM_THREADS", "2")

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

DATA = Path(os.environ.get("LAPRAS_DATA", REPO.parent / "shared" / "data"))

# The timing loop, one text for both sides: run_current executes it here, run_baseline in a subprocess with
# the baseline's lapras first on sys.path.
_TIME_GROUPS = r"""
def time_groups(w, repeat):
    import time
    import numpy as np
    from lapras.matrix_mechanism import plan_groups, expected_query_variance
    from lapras.mechanisms import Cost
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        groups = plan_groups(w, rng=np.random.default_rng(1))
        dt = time.perf_counter() - t0
        n = sum(g.n_queries for g in groups)
        out.append({"seconds": dt, "total_var": expected_query_variance(groups, Cost(mu=1.0)) * n,
                    "per_group": {"/".join(g.marginal): [g.strategy.name, g.unit_error] for g in groups}})
    return out
"""

_BASELINE = _TIME_GROUPS + r"""
import pickle, sys
import lapras; assert lapras.__file__.startswith(sys.argv[3]), lapras.__file__
w = pickle.load(open(sys.argv[1], "rb"))
print("RESULT", __import__("json").dumps(time_groups(w, int(sys.argv[2]))))
"""


def prediction_for_day(day: int) -> Any:
    """P for ``day`` (1-based) learnt from the log's earlier days, as the engine's linear queries."""
    from lapras.engine import load_prediction
    from predictor.output import write_prediction
    from predictor.predict import Epochs, bucket, read_logs, train
    from proxy.config import load_config

    catalog = load_config(REPO / "config.toml").catalog
    statements, _ = read_logs([str(DATA / "querylogs" / "adult_bi_21d.csv")], "auto", None)
    epochs, _, _ = bucket(statements, 24.0, catalog)
    window = Epochs(epochs.origin, epochs.hours, epochs.buckets[: day - 1])
    pset = train(window, day - 1, catalog)
    with tempfile.TemporaryDirectory() as tmp:
        write_prediction(pset, Path(tmp) / "P.json")
        return catalog, len(pset.queries), load_prediction(Path(tmp) / "P.json", catalog)


def prediction_timeseries(since: str) -> Any:
    """P of the time-series dashboard (benchmarks/timeseries_mae.py's panels) over `events`, whose hourly
    `ts` is declared from ``since`` (empty: the whole year, 8,760 cells) to the end of 2026."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    import timeseries_mae

    import parser as sqlparser
    from lapras.engine import Prediction
    from proxy.config import load_config

    catalog = load_config(timeseries_mae._config(since)).catalog
    planner = sqlparser.Planner(catalog)
    sqls = [q for qs in timeseries_mae._panels().values() for q in qs]
    queries: dict[str, Any] = {}
    for sql in sqls:
        for q in planner.plan(sql).queries:
            if not q.is_zero:
                queries.setdefault(q.key, q)
    return catalog, len(sqls), Prediction(tuple(queries.values()))


def run_current(workloads: Any, repeat: int) -> list[dict[str, Any]]:
    scope: dict[str, Any] = {}
    exec(_TIME_GROUPS, scope)  # this file's own timing loop (see _TIME_GROUPS)
    out: list[dict[str, Any]] = scope["time_groups"](workloads, repeat)
    return out


def run_baseline(rev: str, workloads: Any, repeat: int, timeout: float | None = None) -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory() as tmp:
        archive = subprocess.run(["git", "-C", str(REPO), "archive", rev, "lapras"], check=True,
                                 capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
        wfile = Path(tmp) / "w.pkl"
        wfile.write_bytes(pickle.dumps(workloads))
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([tmp, str(REPO)]))
        try:
            proc = subprocess.run([sys.executable, "-c", _BASELINE, str(wfile), str(repeat), tmp], env=env,
                                  capture_output=True, text=True, check=True, cwd=tmp, timeout=timeout)
        except subprocess.TimeoutExpired:
            return [{"seconds": math.inf, "total_var": math.nan, "per_group": {}, "timed_out": timeout}]
    line = next(s for s in proc.stdout.splitlines() if s.startswith("RESULT "))
    return json.loads(line[len("RESULT "):])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--day", type=int, default=15)
    ap.add_argument("--baseline", default="92809e3", help="git revision to compare against (empty: none)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--baseline-repeat", type=int, default=1)
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--timeseries", metavar="SINCE", nargs="?", const="",
                    help="P = the events time-series dashboard's panels instead (hourly ts from SINCE, YYYY-MM-DD; "
                         "bare: the whole year)")
    ap.add_argument("--baseline-timeout", type=float, default=None, metavar="S",
                    help="stop the baseline after S seconds (reported as more than S)")
    args = ap.parse_args()

    from lapras.matrix_mechanism import p_workloads

    if args.timeseries is None:
        catalog, n_sql, pred = prediction_for_day(args.day)
        what = f"day {args.day}"
    else:
        catalog, n_sql, pred = prediction_timeseries(args.timeseries)
        what = f"time series from {args.timeseries or '2026-01-01'}"
    workloads = p_workloads(catalog, pred.queries)
    n_q = sum(len(v[1]) for v in workloads.values())
    shapes = ", ".join("x".join(map(str, v[0])) for v in workloads.values())
    print(f"{what}: P = {n_sql} SQL statements -> {n_q} linear queries over {len(workloads)} marginals ({shapes})")
    rows: dict[str, list[dict[str, Any]]] = {}
    if args.baseline:
        rows[f"baseline {args.baseline}"] = run_baseline(args.baseline, workloads, args.baseline_repeat,
                                                         args.baseline_timeout)
    rows["current"] = run_current(workloads, args.repeat)
    print(f"{'tree':<20} {'prep s (median)':>16} {'runs':>5} {'total variance at mu=1':>24}")
    summary = {}
    for name, runs in rows.items():
        sec = statistics.median(r["seconds"] for r in runs)
        var = statistics.median(r["total_var"] for r in runs)
        summary[name] = {"prep_s_median": sec, "prep_s": [r["seconds"] for r in runs], "total_var_mu1": var}
        print(f"{name:<20} {sec:>16.2f} {len(runs):>5} {var:>24.1f}")
    if len(rows) == 2:
        (b, bs), (c, cs) = list(summary.items())
        print(f"ratio current/baseline: prep {cs['prep_s_median'] / bs['prep_s_median']:.3f}, "
              f"total variance {cs['total_var_mu1'] / bs['total_var_mu1']:.3f}")
    slow = sorted(rows["current"][0]["per_group"].items(), key=lambda kv: -kv[1][1])[:8]
    print("largest stated errors (current): " + ", ".join(f"{k} {v[0]} {v[1]:.3f}" for k, v in slow))
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"workload": what, "day": args.day, "n_sql": n_sql, "n_queries": n_q,
                                         "n_marginals": len(workloads), "summary": summary, "runs": rows},
                                        indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
