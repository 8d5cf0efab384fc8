"""Matrix-mechanism preparation at scale: P of 1,000 queries over Adult marginals, and 1,000 rectangles on
the 256 x 256 Gowalla grid. Times strategy selection (progress bar) and the release, through lapras'
own ``plan_groups`` / ``release_mm`` (Kronecker strategies: no dense 65536-column matrix is ever formed).

    python benchmarks/mm_scale.py --json benchmarks/results/mm_scale.json
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from collections import defaultdict
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "2")

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lapras.accounting import Accountant, Budget  # noqa: E402
from lapras.matrix_mechanism import plan_groups, release_mm  # noqa: E402

DATA = Path(os.environ.get("LAPRAS_DATA", "/work/shared/data"))
RENAME = {"education-num": "education_num", "marital-status": "marital_status", "capital-gain": "capital_gain",
          "capital-loss": "capital_loss", "hours-per-week": "hours_per_week", "native-country": "native_country",
          "income>50K": "income_gt_50k"}
ADULT_MARGINALS = [("age", "hours_per_week"), ("age", "hours_per_week", "sex"), ("age", "hours_per_week", "race"),
                   ("age", "hours_per_week", "income_gt_50k"), ("education_num", "income_gt_50k"),
                   ("occupation", "workclass"), ("marital_status", "relationship", "sex"), ("age",),
                   ("native_country",), ("capital_gain", "capital_loss"), ("education_num", "hours_per_week")]
CATEGORICAL = {"workclass", "marital_status", "occupation", "relationship", "race", "sex", "native_country",
               "income_gt_50k"}


def load_adult() -> tuple[dict[str, np.ndarray], dict[str, int]]:
    hdr = (DATA / "adult.csv").read_text().splitlines()[0].split(",")
    cols = np.loadtxt(DATA / "adult.csv", delimiter=",", skiprows=1, dtype=np.int64)
    sizes = {RENAME.get(k, k): v for k, v in json.loads((DATA / "adult-domain.json").read_text()).items()}
    data = {RENAME.get(h, h): cols[:, i] for i, h in enumerate(hdr)}
    data["age"] = np.clip(data["age"] + 16, 17, 90) - 17  # product domain 17..90
    sizes["age"] = 74
    return data, sizes


def adult_workload(rng: np.random.Generator, sizes: dict[str, int], k: int):  # type: ignore[no-untyped-def]
    out: dict[tuple[str, tuple[str, ...]], tuple[tuple[int, ...], list]] = defaultdict(lambda: ((), []))  # type: ignore[type-arg]
    for _ in range(k):
        marg = tuple(sorted(ADULT_MARGINALS[int(rng.integers(len(ADULT_MARGINALS)))]))
        vs = []
        for a in marg:
            v = np.zeros(sizes[a])
            if a in CATEGORICAL:  # an IN-list of random values
                v[rng.choice(sizes[a], size=int(rng.integers(1, max(2, sizes[a] // 2) + 1)), replace=False)] = 1
            else:
                lo, hi = sorted(int(x) for x in rng.integers(0, sizes[a], 2))
                v[lo:hi + 1] = 1
            vs.append(v)
        key = ("adult", marg)
        out[key] = (tuple(sizes[a] for a in marg), out[key][1] + [[(1.0, vs)]])
    return dict(out)


def gowalla_workload(rng: np.random.Generator, k: int):  # type: ignore[no-untyped-def]
    qs = []
    for _ in range(k):
        vs = []
        for _ax in range(2):
            lo, hi = sorted(int(x) for x in rng.integers(0, 256, 2))
            v = np.zeros(256)
            v[lo:hi + 1] = 1
            vs.append(v)
        qs.append([(1.0, vs)])
    return {("gowalla", ("x", "y")): ((256, 256), qs)}


def run(name: str, workloads, hist_of, budget: Accountant, sizes: dict[str, int]) -> dict[str, object]:  # type: ignore[no-untyped-def]
    from tqdm import tqdm

    total = sum(len(v[1]) for v in workloads.values())
    rng = np.random.default_rng()
    t0, c0 = time.perf_counter(), time.process_time()
    with tqdm(total=len(workloads), desc=f"{name}: strategies", unit="marginal") as bar:
        groups = plan_groups(workloads, rng=rng, progress=bar.update)
    t1, c1 = time.perf_counter(), time.process_time()
    hists = [hist_of(g.marginal) for g in groups]
    rel = release_mm(groups, hists, budget.cost_of(budget.units))
    t2 = time.perf_counter()
    # Answer every query once (what the engine does when they arrive).
    errs = []
    for (table, marg), (_shape, qs) in workloads.items():
        for q in qs:
            est = rel.estimate(table, marg, q, sizes)
            assert est is not None
            errs.append(math.sqrt(est[1]))
    t3 = time.perf_counter()
    return {"workload": name, "queries": total, "groups": len(groups),
            "largest_marginal_cells": max(math.prod(g.shape) for g in groups),
            "strategies": sorted({g.strategy.name for g in groups}),
            "prepare_seconds": t1 - t0, "release_seconds": t2 - t1, "answer_all_seconds": t3 - t2,
            "total_seconds": t2 - t0, "prepare_cpu_seconds": c1 - c0,
            "load_average_1min": os.getloadavg()[0], "mean_stated_stderr": float(np.mean(errs)), "accounting": budget.mode}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queries", type=int, default=1000)
    ap.add_argument("--json", type=Path, default=Path("benchmarks/results/mm_scale.json"))
    args = ap.parse_args()
    if not (DATA / "adult.csv").exists():
        print(f"data folder {DATA} absent: skipping")
        return 0
    rng = np.random.default_rng()
    budget = Budget("gdp", 1.0, 1e-3)
    data, sizes = load_adult()

    def adult_hist(marg: tuple[str, ...]) -> np.ndarray:
        h = np.zeros(tuple(sizes[a] for a in marg))
        np.add.at(h, tuple(np.clip(data[a], 0, sizes[a] - 1) for a in marg), 1.0)
        return h

    grid = np.load(DATA / "gowalla_checkin_256x256.npy").astype(np.float64)
    results = [run("adult", adult_workload(rng, sizes, args.queries), adult_hist, budget, sizes),
               run("gowalla", gowalla_workload(rng, args.queries), lambda m: grid, budget, {"x": 256, "y": 256})]
    for r in results:
        ok = float(r["total_seconds"]) < 60  # type: ignore[arg-type]
        print(f"{'PASS' if ok else 'FAIL'} {r['workload']}: {r['queries']} queries in {r['groups']} groups, "
              f"prepared in {float(r['prepare_seconds']):.1f} s + release {float(r['release_seconds']):.2f} s "  # type: ignore[arg-type]
              f"(target < 60 s; CPU {float(r['prepare_cpu_seconds']):.1f} s, load {float(r['load_average_1min']):.1f})")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"cpus": os.cpu_count(), "results": results}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
