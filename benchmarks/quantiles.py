"""Accuracy of DP medians and percentiles (the proxy's tree estimator) vs the exact values, beside a
baseline that answers from one independent noisy histogram, at the same (epsilon, delta).

Each statement is one Gaussian release (gdp calibration) with a share of the epoch's budget: the whole of
it, and 1/100 of it (mu^2 / 100: what a statement gets in a stream of ~100 under gdp), as the engine would
release it with nothing predicted: the tree's L2 sensitivity is sqrt(levels), the flat
histogram's 1. The tree estimate is parser.plan.quantile's post-processing itself (least squares, monotone
CDF). Prints a table of mean absolute errors (in the attribute's units) per quantile and group size and
writes benchmarks/results/quantiles.{json,md}.

    .venv/bin/python benchmarks/quantiles.py [--trials 200] [--epsilon 1] [--delta 1e-3] [--data ../shared/data]
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import numpy as np

from lapras.calibration import gdp_mu
from parser.plan.quantile import Quantile, Tree, build_tree
from pgcore.pgtypes import FLOAT8, INT4

RESULTS = Path(__file__).parent / "results"
QUANTILES = [("median", "cont", 0.5), ("p25", "cont", 0.25), ("p90", "disc", 0.9), ("min", "min", 0.0),
             ("max", "max", 1.0)]


def exact_quantile(values: np.ndarray, kind: str, p: float) -> float:
    v = np.sort(values)
    if kind == "min":
        return float(v[0])
    if kind == "max":
        return float(v[-1])
    if kind == "disc":
        return float(v[max(math.ceil(p * len(v)) - 1, 0)])
    return float(np.quantile(v, p))  # linear interpolation, as percentile_cont


def estimate(tree: Tree, hist: np.ndarray, lo: int, kind: str, p: float, sigma: float,
             rng: np.random.Generator) -> float | None:
    """One noisy release of the tree's node counts and the quantile read from it (as the proxy does)."""
    nodes = np.array([hist[tree.node_cells(i)[0] : tree.node_cells(i)[1] + 1].sum() for i in range(len(tree.nodes))])
    noisy = nodes + rng.normal(0.0, sigma, size=nodes.shape)
    q = Quantile(tree, list(range(len(nodes))), [float(lo + i) for i in range(len(hist))], kind, p,
                 FLOAT8 if kind == "cont" else INT4, "q")
    est, _, _ = q._one(noisy @ tree.projection.T, np.full(len(nodes), sigma))
    return None if est is None else float(est)  # type: ignore[arg-type]


def flat_tree(n: int) -> Tree:
    return Tree(n, 0, tuple((i, i) for i in range(n)), tuple((i, i) for i in range(n)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--delta", type=float, default=1e-3)
    ap.add_argument("--data", default=str(Path(__file__).parents[1] / ".." / "shared" / "data"))
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    raw = np.genfromtxt(Path(args.data) / "adult.csv", delimiter=",", names=True, dtype=np.int64)
    columns = {"age": (raw["age"] + 16, 17, 90), "hours_per_week": (raw["hoursperweek"], 0, 98)}
    groups = {"all": np.ones(len(raw), bool), "race=1 (small)": raw["race"] == 1,
              "race=4 (large)": raw["race"] == 4}
    rng = np.random.default_rng(args.seed)
    out = []
    t0 = time.perf_counter()
    for share, col, (vals, lo, hi) in [(s, c, v) for s in (1.0, 0.01) for c, v in columns.items()]:
        mu = gdp_mu(args.epsilon, args.delta) * math.sqrt(share)
        n_cells = hi - lo + 1
        tree, flat = build_tree(n_cells), flat_tree(n_cells)
        # Every cell lies in one node per level: the L2 sensitivity is sqrt(levels) (the engine computes it).
        sens_tree = math.sqrt(sum(1 for i in range(len(tree.nodes)) if tree.node_cells(i)[0] == 0))
        for gname, mask in groups.items():
            v = np.clip(vals[mask], lo, hi)
            hist = np.bincount(v - lo, minlength=n_cells).astype(float)
            for qname, kind, p in QUANTILES:
                truth = exact_quantile(v, kind, p)
                errs = {"tree": [], "flat": []}  # type: dict[str, list[float]]
                for method, tr, sens in (("tree", tree, sens_tree), ("flat", flat, 1.0)):
                    sigma = sens / mu
                    for _ in range(args.trials):
                        e = estimate(tr, hist, lo, kind, p, sigma, rng)
                        errs[method].append(abs(e - truth) if e is not None else float(hi - lo))
                row = {"share": share, "column": col, "group": gname, "rows": int(mask.sum()), "quantile": qname, "exact": truth,
                       "tree_mae": float(np.mean(errs["tree"])), "flat_mae": float(np.mean(errs["flat"])),
                       "tree_p90": float(np.quantile(errs["tree"], 0.9)),
                       "flat_p90": float(np.quantile(errs["flat"], 0.9)),
                       "tree_levels": sens_tree**2, "branching": tree.branching}
                out.append(row)
    elapsed = time.perf_counter() - t0
    lines = [f"DP quantiles at (epsilon, delta) = ({args.epsilon}, {args.delta}), {args.trials} trials each, "
             f"median |error| (90th percentile) in the column's units; tree = the proxy's estimator, flat = one "
             "noisy histogram", "",
             "| budget share | column | group (rows) | quantile | exact | tree | flat | flat / tree |",
             "|---|---|---|---|---|---|---|---|"]
    for r in out:
        ratio = r["flat_mae"] / r["tree_mae"] if r["tree_mae"] > 0 else float("inf")
        lines.append(f"| {r['share']:g} | {r['column']} | {r['group']} ({r['rows']}) | {r['quantile']} | {r['exact']:g} | "
                     f"{r['tree_mae']:.2f} ({r['tree_p90']:.2f}) | {r['flat_mae']:.2f} ({r['flat_p90']:.2f}) | "
                     f"{ratio:.2f} |")
    for share in (1.0, 0.01):
        mine = [r for r in out if r["share"] == share and r["quantile"] not in ("min", "max")]
        lines.append(f"share {share:g}: medians/percentiles, mean over rows of tree MAE {np.mean([r['tree_mae'] for r in mine]):.3f}"
                     f" vs flat {np.mean([r['flat_mae'] for r in mine]):.3f}")
    lines.append("")
    lines.append(f"trees: age b={build_tree(74).branching}, hours_per_week b={build_tree(99).branching}; "
                 f"run time {elapsed:.1f} s")
    text = "\n".join(lines)
    print(text)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "quantiles.json").write_text(json.dumps(out, indent=1))
    (RESULTS / "quantiles.md").write_text(text + "\n")
    plot(out, RESULTS / "quantiles.png")


def plot(rows: list[dict[str, object]], path: Path) -> None:
    """Mean absolute error per cell, tree beside flat, at 1/100 of the budget (where noise matters)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cells = [r for r in rows if r["share"] == 0.01]
    labels = [f"{r['column']}\n{str(r['group']).split(' ')[0]} {r['quantile']}" for r in cells]
    x = np.arange(len(cells))
    fig, ax = plt.subplots(figsize=(14, 4.5))
    ax.bar(x - 0.2, [float(r["tree_mae"]) for r in cells], 0.4, label="tree (proxy)", color="#2b6cb0")  # type: ignore[arg-type]
    ax.bar(x + 0.2, [float(r["flat_mae"]) for r in cells], 0.4, label="one noisy histogram", color="#c05621")  # type: ignore[arg-type]
    ax.set_xticks(x, labels, rotation=90, fontsize=7)
    ax.set_ylabel("mean |error| (column units)")
    ax.set_yscale("symlog", linthresh=1.0)
    ax.set_title("DP quantiles on Adult at 1/100 of (1, 1e-3): mean absolute error per cell")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
