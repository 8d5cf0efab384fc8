"""Recall of DP partition selection against the number of privacy units holding a key.

One selection at (epsilon, delta) = (1, 1e-5), calibrated exactly as the proxy calibrates a selection
that gets a whole partition part of that size (``PartitionAccountant(1, 1e-5, selections=1)``: rho from
half of delta, the threshold events from the other half over e^epsilon), for units holding at most m keys
(``max_groups_per_unit``; 1 without a privacy unit). For each n, ``--keys`` keys held by n units each go
through the real mechanism (OpenDP's sampler, OS CSPRNG): the share released is the measured recall,
beside the exact probability P[Z >= T - n] and, as a baseline, the Laplace threshold that BigQuery's and
Tumult's partition selection use (noise Lap(m / epsilon), threshold 1 + (m / epsilon) ln(m / (2 delta)),
continuous, computed). Prints a table and writes benchmarks/results/partition_recall.{json,md,png}.

    .venv/bin/python benchmarks/partition_recall.py [--keys 2000] [--epsilon 1] [--delta 1e-5]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lapras.accounting import PartitionAccountant  # noqa: E402
from lapras.mechanisms.threshold import GaussianThreshold  # noqa: E402

RESULTS = Path(__file__).parent / "results"
UNITS = [1, 5, 10, 15, 20, 25, 30, 35, 40, 50, 60, 80, 100, 150, 200]


def laplace_recall(n: float, m: int, eps: float, delta: float) -> float:
    b = m / eps
    tau = 1.0 + b * math.log(m / (2.0 * delta))
    return 1.0 - 0.5 * math.exp(-(n - tau) / b) if n >= tau else 0.5 * math.exp((n - tau) / b)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--keys", type=int, default=2000, help="keys per number of units")
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--delta", type=float, default=1e-5)
    ap.add_argument("--m", type=int, nargs="+", default=[1, 4])
    args = ap.parse_args()
    cost = PartitionAccountant(args.epsilon, args.delta, 1).cost_per_selection()
    out: dict[str, object] = {"epsilon": args.epsilon, "delta": args.delta, "keys": args.keys,
                              "cost": cost.to_json(), "rows": []}
    rows: list[dict[str, float]] = []
    lines = [f"one selection at (epsilon, delta) = ({args.epsilon:g}, {args.delta:g}): "
             f"rho = {cost.rho:.4g}, threshold-event delta = {cost.delta:.3g}"]
    t0 = time.perf_counter()
    for m in args.m:
        mech = GaussianThreshold.calibrate(cost, m)
        lines.append(f"m = {m}: sigma = {mech.sigma:.3f}, threshold T = {mech.threshold}, "
                     f"single-unit key released with probability <= {mech.single_unit_bound():.3g}")
        for n in UNITS:
            got = float(mech.select(np.full(args.keys, n, dtype=np.int64)).mean())
            rows.append({"m": m, "units": n, "recall": got, "exact": float(mech.release_probability(n)),
                         "laplace": laplace_recall(n, m, args.epsilon, args.delta),
                         "sigma": mech.sigma, "threshold": mech.threshold})
    out["rows"] = rows
    out["seconds"] = time.perf_counter() - t0
    md = ["| m | units per key | recall (measured) | P[Z >= T - n] | Laplace threshold (baseline) |",
          "|---:|---:|---:|---:|---:|"]
    md += [f"| {r['m']} | {r['units']} | {r['recall']:.4f} | {r['exact']:.4f} | {r['laplace']:.4f} |" for r in rows]
    text = "\n".join(lines) + "\n\n" + "\n".join(md) + "\n"
    print(text)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "partition_recall.json").write_text(json.dumps(out, indent=1))
    (RESULTS / "partition_recall.md").write_text(text)
    plot(rows, args.m, RESULTS / "partition_recall.png", args.epsilon, args.delta)


def plot(rows: list[dict[str, float]], ms: list[int], path: Path, eps: float, delta: float) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for m, colour in zip(ms, ["tab:blue", "tab:orange", "tab:green", "tab:red"], strict=False):
        sel = [r for r in rows if r["m"] == m]
        n = [r["units"] for r in sel]
        ax.plot(n, [r["recall"] for r in sel], "o", color=colour, label=f"Gaussian threshold, m={m} (measured)")
        ax.plot(n, [r["exact"] for r in sel], "-", color=colour, alpha=0.6)
        ax.plot(n, [r["laplace"] for r in sel], "--", color=colour, alpha=0.6, label=f"Laplace threshold, m={m}")
    ax.set_xscale("log")
    ax.set_xlabel("privacy units holding the key")
    ax.set_ylabel("probability the key is released")
    ax.set_title(f"Partition selection recall at (epsilon, delta) = ({eps:g}, {delta:g})")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    main()
