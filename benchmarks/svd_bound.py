"""The matrix mechanism's strategies for P against the SVD lower bound of Li and Miklau.

For each marginal of P (the Adult BI log's P for one day, learnt from the days before it, or the events
time-series dashboard with --timeseries), the strategy the engine's preparation chooses (``plan_groups``,
the same time limit) is compared with the least error any strategy could have on that marginal's workload
at the same noise scale and share of the release: per-query RMSE of the release at mu (the stream's mu with
the given MM fraction of its mu^2), the bound's RMSE, and their ratio (1 = optimal). The bound is per
marginal: P's marginals share one release, weighted by ``group_weights``, and the bound of the joint
workload over the full domain (which sharing measurements across marginals could approach) is not computed.

    python benchmarks/svd_bound.py [--day 15] [--timeseries [SINCE]] [--mm-fraction 0.5] [--time-limit 30]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--day", type=int, default=15)
    ap.add_argument("--timeseries", metavar="SINCE", nargs="?", const="")
    ap.add_argument("--mm-fraction", type=float, default=0.5, help="share of the stream's mu^2 for the release")
    ap.add_argument("--time-limit", type=float, default=30.0)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()

    import mm_prep
    import numpy as np

    from lapras.accounting import Budget
    from lapras.matrix_mechanism import MMRelease, joint_sensitivity, p_workloads, plan_groups
    from lapras.mechanisms import Gaussian
    from lapras.settings import EngineSettings
    from lapras.svd_bound import svd_bound

    if args.timeseries is None:
        catalog, n_sql, pred = mm_prep.prediction_for_day(args.day)
        what = f"Adult BI log, P of day {args.day}"
    else:
        catalog, n_sql, pred = mm_prep.prediction_timeseries(args.timeseries)
        what = f"events time-series dashboard from {args.timeseries or '2026-01-01'}"
    workloads = p_workloads(catalog, pred.queries)
    groups = plan_groups(workloads, rng=np.random.default_rng(1), time_limit=args.time_limit)
    for g in groups:
        g.svd_error = svd_bound(workloads[(g.table, g.marginal)][1], g.shape)
    eps, delta = EngineSettings().stream_budget
    budget = Budget("gdp", eps, delta)
    cost = budget.cost_of(args.mm_fraction * budget.units)
    unit_rows = {t.name: t.unit_rows for t in catalog.tables}
    sigma = Gaussian.calibrate(cost, joint_sensitivity(groups, unit_rows), sum(g.strategy.rows for g in groups)).sigma
    rel = MMRelease(groups, [], sigma, cost)
    n_q = sum(g.n_queries for g in groups)
    print(f"{what}: P = {n_sql} statements -> {n_q} linear queries over {len(groups)} marginals; "
          f"release at mu = {cost.mu:.4f} ({args.mm_fraction:.0%} of the stream's mu^2)")
    print(f"{'marginal':<40} {'cells':>8} {'queries':>7} {'strategy':<26} {'RMSE':>9} {'SVD bound':>9} {'ratio':>6}")
    rows: list[dict[str, Any]] = []
    mse, bound_mse, covered = 0.0, 0.0, 0
    for i, g in enumerate(groups):
        rmse, low = rel.query_rmse(i)
        ratio = rmse / low if low else math.nan
        rows.append({"marginal": list(g.marginal), "cells": math.prod(g.shape), "queries": g.n_queries,
                     "strategy": g.strategy.name, "rmse": rmse, "svd_rmse": low, "ratio": ratio})
        if low:
            mse += rmse**2 * g.n_queries
            bound_mse += low**2 * g.n_queries
            covered += g.n_queries
        print(f"{'/'.join(g.marginal)[:40]:<40} {math.prod(g.shape):>8} {g.n_queries:>7} {g.strategy.name[:26]:<26} "
              f"{rmse:>9.3f} {low if low else math.nan:>9.3f} {ratio:>6.2f}")
    overall = math.sqrt(mse / bound_mse) if bound_mse else math.nan
    ratios = sorted(r["ratio"] for r in rows if r["svd_rmse"])
    median = ratios[len(ratios) // 2] if ratios else math.nan
    print(f"all of P ({covered} of {n_q} queries with a bound): RMSE / SVD bound = {overall:.3f} "
          f"(per marginal: median {median:.3f}, worst {max(ratios) if ratios else math.nan:.3f})")
    if args.json is not None:
        args.json.write_text(json.dumps({"workload": what, "mu": cost.mu, "overall_ratio": overall,
                                         "median_ratio": median, "groups": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
