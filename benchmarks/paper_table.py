"""Reproduce the shape of the LAPRAS paper's evaluation (DESIGN.md section 7) with the library's own code.

Every run draws a fresh stream of S = 100 distinct sensitivity-1 counts, a prediction set P with overlap rho
(round(rho S) stream queries plus decoys from the same generator), and answers the stream in random and
bad-first order with: Online (independent Gaussian noise, budget / S each), OfflineMM (the matrix
mechanism on the realised stream with the whole budget), and LAPRAS (Smooth and Static, four presets and
``auto``), in ``basic`` and ``gdp`` accounting. Unanswered queries count with error |true answer|.

The simulation runs on numpy histograms but through lapras' allocation, mechanisms, strategies, matrix
mechanism, online policy and accounting: nothing of the algorithm is re-implemented here.

    python benchmarks/paper_table.py --runs 20 --json benchmarks/results/paper_table.json
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from collections import defaultdict
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lapras.accounting import Accountant, Budget  # noqa: E402
from lapras.allocation import PRESETS, Allocator, AllocState, Split, auto_split, warmup_length  # noqa: E402
from lapras.matrix_mechanism import MMRelease, expected_relative_variance, plan_groups, release_mm  # noqa: E402
from lapras.mechanisms import Gaussian  # noqa: E402
from lapras.mechanisms.noise import simulation  # noqa: E402
from lapras.online import OnlinePolicy, combine  # noqa: E402
from lapras.strategy import ProductQuery  # noqa: E402

DATA = Path(os.environ.get("LAPRAS_DATA", "/work/shared/data"))
S = 100
EPSILON, DELTA = 1.0, 1e-3
RHOS = (0.0, 0.25, 0.5, 0.75, 1.0)
ORDERS = ("random", "bad_first")
MODES = ("basic", "gdp")
SPLITS = (*PRESETS, "auto")
POLICIES = ("smooth", "static")

ADULT_ATTRS = ("age", "hours_per_week", "income_gt_50k", "race", "sex")


@dataclass(frozen=True)
class Q:
    """One workload query: its key, its table, the marginal it reads and its product-query form."""

    key: str
    table: str
    marginal: tuple[str, ...]
    pq: ProductQuery


class Dataset:
    """A histogram and a query generator for one dataset of section 7."""

    def __init__(self, name: str) -> None:
        self.name = name
        if name == "adult":
            cols = np.loadtxt(DATA / "adult.csv", delimiter=",", skiprows=1, dtype=np.int64)
            hdr = (DATA / "adult.csv").read_text().splitlines()[0].split(",")
            c = {h: cols[:, i] for i, h in enumerate(hdr)}
            age = np.clip(c["age"] + 16, 17, 90) - 17  # product domain 17..90, values clipped to it
            idx = (age, c["hours-per-week"], c["income>50K"], c["race"], c["sex"])
            self.sizes = {"age": 74, "hours_per_week": 99, "income_gt_50k": 2, "race": 5, "sex": 2}
            self.attrs = ADULT_ATTRS
            full = np.zeros(tuple(self.sizes[a] for a in self.attrs))
            np.add.at(full, idx, 1.0)
        else:
            full = np.load(DATA / "gowalla_checkin_256x256.npy").astype(np.float64)
            self.sizes = {"x": 256, "y": 256}
            self.attrs = ("x", "y")
        self.full = full
        self._marg: dict[tuple[str, ...], np.ndarray] = {}

    def marginal(self, attrs: tuple[str, ...]) -> np.ndarray:
        if attrs not in self._marg:
            drop = tuple(i for i, a in enumerate(self.attrs) if a not in attrs)
            self._marg[attrs] = self.full.sum(axis=drop)
        return self._marg[attrs]

    def draw(self, rng: np.random.Generator) -> Q:
        def rng_range(n: int) -> tuple[int, int]:
            a, b = sorted(int(v) for v in rng.integers(0, n, size=2))
            return a, b

        def vec(n: int, a: int, b: int) -> np.ndarray:
            v = np.zeros(n)
            v[a:b + 1] = 1.0
            return v

        if self.name == "adult":
            (a0, a1), (h0, h1) = rng_range(74), rng_range(99)
            parts = {"age": vec(74, a0, a1), "hours_per_week": vec(99, h0, h1)}
            key = f"age{a0}-{a1}|h{h0}-{h1}"
            if rng.random() < 0.5:
                extra = ("sex", "race", "income_gt_50k")[int(rng.integers(0, 3))]
                val = int(rng.integers(0, self.sizes[extra]))
                parts[extra] = vec(self.sizes[extra], val, val)
                key += f"|{extra}={val}"
            marginal = tuple(sorted(parts))
            return Q(key, "adult", marginal, [(1.0, [parts[a] for a in marginal])])
        (x0, x1), (y0, y1) = rng_range(256), rng_range(256)
        return Q(f"x{x0}-{x1}|y{y0}-{y1}", "gowalla", ("x", "y"), [(1.0, [vec(256, x0, x1), vec(256, y0, y1)])])

    def truth(self, q: Q) -> float:
        t = self.marginal(q.marginal)
        total = 0.0
        for w, vs in q.pq:
            r = t
            for v in vs:
                r = np.tensordot(v, r, axes=([0], [0]))
            total += w * float(r)
        return total


def distinct(ds: Dataset, rng: np.random.Generator, k: int, exclude: set[str]) -> list[Q]:
    out: list[Q] = []
    seen = set(exclude)
    while len(out) < k:
        q = ds.draw(rng)
        if q.key not in seen:
            seen.add(q.key)
            out.append(q)
    return out


def workloads(ds: Dataset, qs: Sequence[Q]) -> dict[tuple[str, tuple[str, ...]], tuple[tuple[int, ...], list]]:
    out: dict[tuple[str, tuple[str, ...]], tuple[tuple[int, ...], list]] = {}
    for q in qs:
        k = (q.table, q.marginal)
        if k not in out:
            out[k] = (tuple(ds.sizes[a] for a in q.marginal), [])
        out[k][1].append(q.pq)
    return out


def mm_release(ds: Dataset, groups, budget: Accountant, units: float, rng: np.random.Generator) -> MMRelease | None:  # type: ignore[no-untyped-def]
    if units <= 0 or not groups:
        return None
    # The release's lattice draws from a stream seeded by `rng` (noise.simulation: values nobody is shown), so
    # that twin cells seeded alike share them; the proxy's releases draw from the OS CSPRNG.
    with simulation(int(rng.integers(2**63))):
        return release_mm(groups, [ds.marginal(g.marginal) for g in groups], budget.cost_of(units))


def answer_from(rel: MMRelease | None, ds: Dataset, q: Q) -> tuple[float, float]:
    if rel is None:
        return math.nan, math.inf
    est = rel.estimate(q.table, q.marginal, q.pq, ds.sizes)
    return est if est is not None else (math.nan, math.inf)


def run_lapras(ds: Dataset, order: Sequence[Q], truths: dict[str, float], pkeys: set[str], rel: MMRelease | None,
               budget: Accountant, split: Split, policy: str, rng: np.random.Generator) -> tuple[float, float, float]:
    alloc = Allocator(split, budget.units, S, warmup_length(S), policy)  # type: ignore[arg-type]
    pol = OnlinePolicy(alloc, budget)
    st = AllocState()
    spent = split.mm * budget.units if rel is not None else 0.0
    with simulation(int(rng.integers(2**63))):   # the bad queries' draws: shared by twins (see mm_release)
        return _answer_stream(ds, order, truths, pkeys, rel, pol, st, spent)


def _answer_stream(ds: Dataset, order: Sequence[Q], truths: dict[str, float], pkeys: set[str],
                   rel: MMRelease | None, pol: OnlinePolicy, st: AllocState, spent: float) -> tuple[float, float, float]:
    errs, answered = [], 0
    for q in order:
        free, free_var = answer_from(rel, ds, q)
        d = pol.decide(st, predicted=q.key in pkeys, free_var=np.array([free_var]), sensitivity_of=lambda m: 1.0)
        st = d.state
        if d.outcome in ("good", "free_after_stop"):
            value = free
        elif d.outcome == "bad":
            spent += d.grant.total
            assert d.cost is not None
            mech = Gaussian.calibrate(d.cost, 1.0)
            noisy = mech.release(np.array([truths[q.key]]), 1.0)
            value = float(combine(noisy, mech.variance(1.0).reshape(1), np.array([free]), np.array([free_var]))[0][0])
        else:
            errs.append(abs(truths[q.key]))
            continue
        answered += 1
        errs.append(abs(value - truths[q.key]))
    return float(np.mean(errs)), answered / len(order), spent


def one_draw(args: tuple[str, float, int]) -> list[dict[str, object]]:
    """One fresh draw for (dataset, rho): every method, order, split, policy and mode on it."""
    name, rho, _run = args
    rng = np.random.default_rng()
    ds = Dataset(name)
    n_pred = round(rho * S)
    stream = distinct(ds, rng, S, set())
    predicted = stream[:n_pred]
    decoys = distinct(ds, rng, S - n_pred, {q.key for q in stream})
    pset = predicted + decoys
    pkeys = {q.key for q in predicted}
    truths = {q.key: ds.truth(q) for q in stream}
    # The overlap the predictor would report: measured on an earlier, independent stream of this workload.
    old = distinct(ds, rng, S, set())
    rho_hat = round(rho * S) / S if old else rho
    perm = [stream[i] for i in rng.permutation(S)]
    bad_first = [q for q in perm if q.key not in pkeys] + [q for q in perm if q.key in pkeys]
    orders = {"random": perm, "bad_first": bad_first}
    s_groups = plan_groups(workloads(ds, stream), maxiter=50, rounds=2, rng=rng)
    # At rho = 1, P is the stream itself: the same (data-independent) strategies serve both.
    p_groups = s_groups if n_pred == S else plan_groups(workloads(ds, pset), maxiter=50, rounds=2, rng=rng)
    # Common random numbers: the basic and gdp twins of a cell see the same standard normal draws, so
    # their comparison measures the accounting, not the luck of the draw.
    seeds = {k: int(rng.integers(2**63)) for k in [("online",), ("off",)] + [(s, o) for s in SPLITS for o in ORDERS]}
    recs: list[dict[str, object]] = []

    def rec(order: str, method: str, preset: str, mode: str, mae: float, frac: float, units: float,
            budget: Accountant) -> None:
        recs.append({"dataset": name, "order": order, "overlap": rho, "method": method, "preset": preset,
                     "accounting": mode, "mae": mae, "answered": frac,
                     "epsilon_spent": budget.eps_delta(units)[0]})

    for mode in MODES:
        budget = Budget(mode, EPSILON, DELTA)
        u = budget.units
        with simulation(seeds[("online",)]):   # twins share their draws (see mm_release)
            online = Gaussian.calibrate(budget.cost_of(u / S), 1.0).release(
                np.array([truths[q.key] for q in stream]), 1.0)
        mae_on = float(np.mean(np.abs(online - [truths[q.key] for q in stream])))
        off = mm_release(ds, s_groups, budget, u, np.random.default_rng(seeds[("off",)]))
        mae_off = float(np.mean([abs(answer_from(off, ds, q)[0] - truths[q.key]) for q in stream]))
        for order in ORDERS:
            rec(order, "Online", "-", mode, mae_on, 1.0, u, budget)
            rec(order, "OfflineMM", "-", mode, mae_off, 1.0, u, budget)
        v_unit = expected_relative_variance(p_groups, budget.cost_of(1.0))
        for split_name in SPLITS:
            split = (auto_split(rho_hat, S, v_unit, mode) if split_name == "auto" else Split.preset(split_name))
            for order in ORDERS:
                # A fresh MM release per (split, order): runs of one cell stay independent draws of noise.
                crn = np.random.default_rng(seeds[(split_name, order)])
                rel = mm_release(ds, p_groups, budget, split.mm * u, crn)
                state = crn.bit_generator.state
                for policy in POLICIES:
                    crn.bit_generator.state = state
                    mae, frac, spent = run_lapras(ds, orders[order], truths, pkeys, rel, budget, split, policy, crn)
                    rec(order, f"LAPRAS-{policy}", split_name, mode, mae, frac, spent, budget)
    return recs


def aggregate(records: list[dict[str, object]]) -> list[dict[str, object]]:
    cells: dict[tuple, list[dict[str, object]]] = defaultdict(list)
    for r in records:
        cells[(r["dataset"], r["order"], r["overlap"], r["method"], r["preset"], r["accounting"])].append(r)
    out = []
    for (ds, order, rho, method, preset, mode), rs in sorted(cells.items(), key=lambda kv: str(kv[0])):
        maes = np.array([float(r["mae"]) for r in rs])  # type: ignore[arg-type]
        out.append({
            "dataset": ds, "order": order, "overlap": rho, "method": method, "preset": preset, "accounting": mode,
            "mean_abs_error": float(maes.mean()), "mae_stderr": float(maes.std(ddof=1) / math.sqrt(len(maes)))
            if len(maes) > 1 else 0.0,
            "answered_fraction": float(np.mean([float(r["answered"]) for r in rs])),  # type: ignore[arg-type]
            "epsilon_spent": float(np.mean([float(r["epsilon_spent"]) for r in rs])),  # type: ignore[arg-type]
            "runs": len(rs),
        })
    return out


def cell(cells: list[dict[str, object]], **kw: object) -> dict[str, object]:
    for c in cells:
        if all(c[k] == v for k, v in kw.items()):
            return c
    raise KeyError(kw)


def checks(cells: list[dict[str, object]]) -> list[tuple[str, bool, str]]:
    """The issue's acceptance targets, each with the figures behind it."""
    out = []
    for ds in ("adult", "gowalla"):
        on = cell(cells, dataset=ds, order="random", overlap=0.0, method="Online", accounting="basic")
        m = float(on["mean_abs_error"])  # type: ignore[arg-type]
        out.append((f"{ds} basic Online MAE within 5% of 194.5", abs(m / 194.5 - 1) <= 0.05, f"{m:.1f}"))
        for rho, ref_method in ((1.0, "OfflineMM"), (0.0, "Online")):
            ref = float(cell(cells, dataset=ds, order="random", overlap=rho, method=ref_method,  # type: ignore[arg-type]
                             accounting="basic")["mean_abs_error"])
            best = min((c for c in cells if c["dataset"] == ds and c["order"] == "random" and c["overlap"] == rho
                        and str(c["method"]).startswith("LAPRAS") and c["accounting"] == "basic"),
                       key=lambda c: float(c["mean_abs_error"]))  # type: ignore[arg-type]
            b = float(best["mean_abs_error"])  # type: ignore[arg-type]
            out.append((f"{ds} basic LAPRAS rho={rho} within 1.15x of {ref_method}", b <= 1.15 * ref,
                        f"{b:.1f} ({best['method']} {best['preset']}) vs {ref:.1f}: {b / ref:.3f}x"))
        auto0 = float(cell(cells, dataset=ds, order="random", overlap=0.0, method="LAPRAS-smooth", preset="auto",  # type: ignore[arg-type]
                           accounting="gdp")["mean_abs_error"])
        if ds == "adult":
            out.append(("adult gdp LAPRAS auto rho=0 MAE < 25", auto0 < 25, f"{auto0:.1f}"))
    worse, ties = [], []
    for c in cells:
        if c["accounting"] != "gdp":
            continue
        twin = cell(cells, dataset=c["dataset"], order=c["order"], overlap=c["overlap"], method=c["method"],
                    preset=c["preset"], accounting="basic")
        g, b = float(c["mean_abs_error"]), float(twin["mean_abs_error"])  # type: ignore[arg-type]
        name = f"{c['dataset']}/{c['order']}/{c['overlap']}/{c['method']}/{c['preset']}"
        if g == b:
            ties.append(name)
        elif g > b:
            worse.append(name)
    methods = sorted({t.split("/")[3] for t in ties})
    out.append(("every gdp cell better than its basic twin", not worse and not ties,
                f"{len(worse)} worse {worse[:5]}; {len(ties)} exact ties ({', '.join(methods)}: a single "
                "Gaussian release has the same sigma under both modes, and twins share their normal draws)"))
    return out


def markdown(cells: list[dict[str, object]], chk: list[tuple[str, bool, str]], runs: int, secs: float) -> str:
    lines = [f"# Paper table (S={S}, epsilon={EPSILON}, delta={DELTA}, {runs} runs per cell, {secs:.0f} s)", ""]
    for ds in ("adult", "gowalla"):
        for mode in MODES:
            for order in ORDERS:
                lines += [f"## {ds}, {mode}, {order} order (MAE ± s.e.; answered fraction when < 1)", "",
                          "| method | preset | " + " | ".join(f"rho={r}" for r in RHOS) + " |",
                          "|---|---|" + "---|" * len(RHOS)]
                rows = sorted({(str(c["method"]), str(c["preset"])) for c in cells if c["dataset"] == ds})
                for method, preset in rows:
                    vals = []
                    for rho in RHOS:
                        c = cell(cells, dataset=ds, accounting=mode, order=order, overlap=rho, method=method,
                                 preset=preset)
                        a = float(c["answered_fraction"])  # type: ignore[arg-type]
                        vals.append(f"{float(c['mean_abs_error']):.1f} ± {float(c['mae_stderr']):.1f}"  # type: ignore[arg-type]
                                    + (f" ({a:.2f})" if a < 1 else ""))
                    lines.append(f"| {method} | {preset} | " + " | ".join(vals) + " |")
                lines.append("")
    lines += ["## Targets", ""] + [f"- [{'x' if ok else ' '}] {name}: {fig}" for name, ok, fig in chk]
    return "\n".join(lines) + "\n"


def plot(cells: list[dict[str, object]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(12, 9))
    for i, ds in enumerate(("adult", "gowalla")):
        for j, mode in enumerate(MODES):
            ax = axes[i][j]
            for method, preset in (("Online", "-"), ("OfflineMM", "-"), ("LAPRAS-smooth", "auto"),
                                   ("LAPRAS-smooth", "matrix_heavy"), ("LAPRAS-static", "query_heavy"),
                                   ("LAPRAS-smooth", "equal")):
                ys = [float(cell(cells, dataset=ds, accounting=mode, order="random", overlap=r, method=method,  # type: ignore[arg-type]
                                 preset=preset)["mean_abs_error"]) for r in RHOS]
                ax.plot(RHOS, ys, marker="o", label=f"{method} {preset}".replace(" -", ""))
            ax.set_yscale("log")
            ax.set_title(f"{ds}, {mode} accounting, random order")
            ax.set_xlabel("overlap rho")
            ax.set_ylabel("mean absolute error")
            ax.grid(True, alpha=0.3)
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--json", type=Path, default=Path("benchmarks/results/paper_table.json"))
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--datasets", default="adult,gowalla")
    ap.add_argument("--render", action="store_true", help="re-render markdown/PNG/targets from --json")
    args = ap.parse_args(argv)
    if args.render:
        doc = json.loads(args.json.read_text())
        cells, runs, secs = doc["cells"], doc["runs"], doc["seconds"]
        chk = checks(cells)
        doc["targets"] = [{"target": n, "met": ok, "figures": f} for n, ok, f in chk]
        args.json.write_text(json.dumps(doc, indent=1))
        args.json.with_suffix(".md").write_text(markdown(cells, chk, runs, secs))
        plot(cells, args.json.with_suffix(".png"))
        for n, ok, f in chk:
            print(("PASS " if ok else "FAIL ") + n + ": " + f)
        return 0
    if not (DATA / "adult.csv").exists():
        print(f"data folder {DATA} absent: skipping")
        return 0
    from tqdm import tqdm

    jobs = [(d, rho, r) for d in args.datasets.split(",") for rho in RHOS for r in range(args.runs)]
    t0 = time.time()
    records: list[dict[str, object]] = []
    with ProcessPoolExecutor(max_workers=args.workers) as ex:
        for recs in tqdm(ex.map(one_draw, jobs), total=len(jobs), desc="draws"):
            records.extend(recs)
    secs = time.time() - t0
    cells = aggregate(records)
    chk = checks(cells) if args.datasets == "adult,gowalla" else []
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"S": S, "epsilon": EPSILON, "delta": DELTA, "runs": args.runs,
                                     "seconds": secs, "cells": cells,
                                     "targets": [{"target": n, "met": ok, "figures": f} for n, ok, f in chk]},
                                    indent=1))
    md = markdown(cells, chk, args.runs, secs) if args.datasets == "adult,gowalla" else ""
    if md:
        args.json.with_suffix(".md").write_text(md)
        plot(cells, args.json.with_suffix(".png"))
    for n, ok, f in chk:
        print(("PASS " if ok else "FAIL ") + n + ": " + f)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
