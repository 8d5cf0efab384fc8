"""The floor of what predicting P can buy (issue 24): the best ratio with P / without P that ANY
matrix-mechanism strategy for P could reach on the Adult BI log, and on the shop dashboard week.

Adult BI log. For each held-out day (P learnt from the days before, as ``svd_bound.py`` and the what-if
build it), P's linear queries are embedded in the union of their marginals (all of P at once, so that
measurements shared across marginals count) and each is scaled by its statement's fresh sensitivity (the
noise a fresh answer of that statement gives it). ``lapras.svd_bound.design_bound`` is a lower bound on the
total squared error of those answers, relative to fresh answers at the same budget, over every strategy:
v_floor per query. At a split f of the epoch's stream budget U (P gets f U):

- a recurring statement answered from P has variance at least v_floor / (f U), against S_off / U fresh
  without P (S_off: the statements the P-off run answered fresh that day, spent_off: the share of U it
  spent, as replayed, and = 1 in a second table, the pacing's waste not counted in P's favour):
  r_rec(f)^2 = v_floor spent_off / (f S_off);
- a statement answered fresh with P on gets at most (1 - f) U / B (B: fresh statements with P on that
  day): r_fresh(f)^2 = B spent_off / ((1 - f) S_off).

The replay's own statements (one what-if run, in process) then give the pooled medians the issue's targets
are stated in: each statement's relative error without P is scaled by its r (from P: r_rec, fresh: r_fresh,
a free repeat: its kind's), which is exact for Adult (no bounds: the error is noise alone, proportional to
its scale). The ratio of medians, recurring statements and all, is printed per f beside what the product
measured in the same run.

Dashboard week. P cannot remove the bias of the bounded rows, and it answers only count-shaped panels
(a SUM over a measure has no histogram form). From the README's measured per-panel error without P and
bias (third wave, 100,000 customers), each panel's noise is sqrt(error^2 - bias^2); a panel P can answer
keeps at least its bias even with a noise-free P, and the others are answered fresh with all of the budget
(15 / 7 of their share: their noise x sqrt(7/15)). The median over panels against the median without P is
the floor of the on / off ratio.

``--engine`` plans each day's P as the product does and gives its ratios on the same scale; ``--attain DAY``
tightens DAY's floor (point masses mixed into p) and measures the strategy the bound's dual names,
``A = G^(-1/4) W``, with its sensitivity searched over every atom of the union domain (minutes): an error
some strategy attains, whose factor over the product floor gives the "design strategy" column.

    python benchmarks/p_floor.py [--seed 1] [--epsilon 0.5,1] [--engine] [--attain 15] [--plot out.png] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

DATA = Path(os.environ.get("LAPRAS_DATA", REPO.parent / "shared" / "data"))
F_GRID = (0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9)

# The third wave's merged tree (benchmarks/README.md, "The third wave's merged tree"): per panel, median
# relative error without P and bias of the bounded rows (day 1), read from the README's table; P's release
# can answer only the count-shaped panels (no SUM over a measure) whole.
DASHBOARD_RUN = "**The third wave's merged tree**"
COUNT_SHAPED = frozenset({"daily orders", "orders by region", "orders by hour", "median order value",
                          "weekly customers (distinct)", "region: daily orders"})


def dashboard_panels() -> list[tuple[str, float, float, bool]]:
    """(panel, off %, bias %, P can answer) per panel of the README's third-wave table (bias n/a: 0)."""
    text = (REPO / "benchmarks" / "README.md").read_text()
    lines = text[text.index(DASHBOARD_RUN):].splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("| panel |")) + 2  # past the rule
    panels = []
    for line in lines[first:]:
        if not line.startswith("| ") or line.startswith("| **"):  # the table's end, or its median row
            break
        name, off, _, _, bias = [c.strip().rstrip("%") for c in line.strip("|").split("|")][:5]
        panels.append((name, float(off), 0.0 if bias == "n/a" else float(bias), name in COUNT_SHAPED))
    return panels


DASHBOARD_S, DASHBOARD_FRESH_LEFT = 15, 7  # fresh statements a day; those P cannot answer whole


def p_queries_of_day(day: int) -> tuple[list[Any], list[Any], dict[str, Any]]:
    """Day ``day``'s P as the release takes it, embedded in the union of its marginals: each query scaled by
    its statement's fresh sensitivity, and unscaled (relative to a fresh answer of that query alone)."""
    import mm_prep

    from lapras.matrix_mechanism import p_workloads
    from lapras.mechanisms.sensitivity import statement_sensitivity
    from lapras.strategy.share import embed
    catalog, n_sql, pred = mm_prep.prediction_for_day(day)
    released = {k[1] for k in p_workloads(catalog, pred.queries)}
    table = catalog.table("adult")
    assert table is not None
    by_key = {q.key: q for q in pred.queries}
    delta: dict[str, float] = {}
    for keys in pred.statements:
        s = statement_sensitivity(table, [by_key[k] for k in keys])
        for k in keys:  # a query of several statements: the largest fresh noise (in P's favour)
            delta[k] = max(delta.get(k, 0.0), s)
    sizes = {a.name: a.domain.size for a in table.attributes}
    members = [(tuple(q.marginal), q) for q in pred.queries
               if not q.is_zero and not q.measure and tuple(q.marginal) in released]
    union = tuple(sorted({a for m, _ in members for a in m}))
    scaled = [[(w / q.sensitivity / delta[q.key], vs) for w, vs in embed(q.factors(table), m, union, sizes)]
              for m, q in members]
    plain = [[(w / q.sensitivity, vs) for w, vs in embed(q.factors(table), m, union, sizes)] for m, q in members]
    return scaled, plain, {"day": day, "statements": n_sql, "queries": len(members), "marginals": len(released),
                           "cells": math.prod(sizes[a] for a in union)}


def p_floor_of_day(day: int) -> dict[str, Any]:
    """v_floor (per query, relative to its statement's fresh answer at the same budget) of day ``day``'s P."""
    from lapras.svd_bound import design_bound

    scaled, plain, info = p_queries_of_day(day)
    bound, bound_plain = design_bound(scaled), design_bound(plain)
    assert bound is not None and bound_plain is not None
    return {**info, "v_floor": bound / len(scaled), "v_floor_single": bound_plain / len(plain)}


def _factors(queries: list[Any]) -> tuple[Any, Any, list[Any], list[Any]]:
    """Term owners as a query x term matrix, term weights, per attribute the term vectors, and per attribute
    its atoms (the distinct columns over all terms: cells no term tells apart)."""
    import numpy as np

    from lapras.svd_bound import _term_factors

    owner, weights, vecs = _term_factors(queries)
    e = np.zeros((len(queries), len(owner)))
    e[owner, np.arange(len(owner))] = 1.0
    atoms = []
    for v in vecs:
        _, first = np.unique(v.T, axis=0, return_index=True)
        atoms.append(v[:, np.sort(first)])
    return e, weights, vecs, atoms


def _trace_root(g: Any) -> float:
    import numpy as np

    lam = np.linalg.eigvalsh((g + g.T) / 2)
    return float(np.sqrt(np.clip(lam, 0.0, None)).sum())


def _inv_root(g: Any, power: float) -> Any:
    """G^(-power) on G's range."""
    import numpy as np

    lam, u = np.linalg.eigh((g + g.T) / 2)
    keep = lam > lam.max() * 1e-12
    return (u[:, keep] * lam[keep] ** -power) @ u[:, keep].T


def refine(queries: list[Any], rounds: int = 300, restarts: int = 24, seed: int = 0) -> tuple[float, Any]:
    """A tighter floor: from the product design (``lapras.svd_bound.design``), Frank-Wolfe steps towards
    point masses on single cells. p stays a distribution over the cells (a mixture of the product and the
    cells added), so ``trace(G^(1/2))^2`` with ``G = W P W^T`` stays a valid lower bound at every step. A
    step needs a cell with ``w_j^T G^(-1/2) w_j > F`` (the objective's gradient there exceeds its mean):
    searched by coordinate ascent over the atoms of one attribute at a time, from the design's most likely
    cell and random ones. Returns the bound (F^2) and G."""
    import numpy as np

    from lapras.svd_bound import design

    found = design(queries)
    assert found is not None
    _, ps = found
    e, weights, vecs, atoms = _factors(queries)
    full = np.outer(weights, weights)
    for v, p in zip(vecs, ps, strict=True):
        full *= (v * p) @ v.T
    g = e @ full @ e.T
    rng = np.random.default_rng(seed)
    sizes = [a.shape[1] for a in atoms]

    def column(idx: list[int]) -> Any:
        t = weights.copy()
        for a, i in zip(atoms, idx, strict=True):
            t = t * a[:, i]
        return e @ t

    for _ in range(rounds):
        f = _trace_root(g)
        k = _inv_root(g, 0.5)
        best, best_w = f * (1 + 1e-9), None
        starts = [[int(rng.integers(n)) for n in sizes] for _ in range(restarts)]
        for idx in starts:
            score, moved = -1.0, True
            while moved:
                moved = False
                for a in range(len(atoms)):
                    t = weights.copy()
                    for b, (at, i) in enumerate(zip(atoms, idx, strict=True)):
                        if b != a:
                            t = t * at[:, i]
                    cols = e @ (t[:, None] * atoms[a])  # queries x atoms of a
                    scores = np.einsum("qi,qi->i", cols, k @ cols)
                    i = int(scores.argmax())
                    if scores[i] > score * (1 + 1e-12):
                        score, moved, idx[a] = float(scores[i]), idx[a] != i or moved, i
            if score > best:
                best, best_w = score, column(idx)
        if best_w is None:
            break
        ww = np.outer(best_w, best_w)
        lo, hi = 0.0, 1.0  # golden section on the step: F is concave along it
        for _ in range(40):
            a1, a2 = lo + (hi - lo) * 0.382, lo + (hi - lo) * 0.618
            if _trace_root((1 - a1) * g + a1 * ww) < _trace_root((1 - a2) * g + a2 * ww):
                lo = a1
            else:
                hi = a2
        step = (lo + hi) / 2
        if _trace_root((1 - step) * g + step * ww) <= f:
            break
        g = (1 - step) * g + step * ww
    return _trace_root(g) ** 2, g


def attain(queries: list[Any], g: Any, time_limit: float = 900.0) -> tuple[float, float, int]:
    """The strategy ``A = G^(-1/4) W`` (one row per query; G = W P W^T of a design p) measured exactly: its
    error per unit noise at sensitivity 1 is ``trace(G^(1/2)) * max_j w_j^T G^(-1/2) w_j``, the maximum
    over every atom of the union domain (in blocks). An error some strategy attains: the optimum lies
    between the floor and it. Returns the error, the share of atoms searched and their number."""
    import numpy as np

    e, weights, _, atoms = _factors(queries)
    r = _inv_root(g, 0.25) @ e * weights  # per term, its query's column in A, times the term's weight
    order = sorted(range(len(atoms)), key=lambda a: -atoms[a].shape[1])
    outer, inner = order[:2], order[2:]
    inner_vals = np.ones((len(weights), 1))
    for a in inner:
        inner_vals = (inner_vals[:, :, None] * atoms[a][:, None, :]).reshape(len(weights), -1)
    best, t0, done = 0.0, time.monotonic(), 0
    for i in range(atoms[outer[0]].shape[1]):
        block = (atoms[outer[0]][:, i][:, None] * atoms[outer[1]]).T  # outer[1]'s atoms x terms
        for j in range(block.shape[0]):
            col = r @ (block[j][:, None] * inner_vals)  # A's columns over the inner atoms
            best = max(best, float((col * col).sum(axis=0).max()))
        done += block.shape[0]
        if time.monotonic() - t0 > time_limit:
            break
    n_outer = atoms[outer[0]].shape[1] * atoms[outer[1]].shape[1]
    return _trace_root(g) * best, done / n_outer, int(np.prod([a.shape[1] for a in atoms]))


def engine_v_of_day(day: int, time_limit: float = 20.0) -> float:
    """The product's v for day ``day``'s P: its strategies as the epoch preparation plans them (shared
    measurements merged, then optimised), mean variance per query relative to a fresh answer of the query
    alone at the same budget (``expected_relative_variance``, what the split uses)."""
    import mm_prep
    import numpy as np

    from lapras.matrix_mechanism import expected_relative_variance, p_workloads, plan_groups
    from lapras.mechanisms import Cost
    from lapras.strategy.share import share_marginals, shared_workloads

    catalog, _, pred = mm_prep.prediction_for_day(day)
    work = p_workloads(catalog, pred.queries)
    members = share_marginals(work, time_limit=time_limit / 3)
    groups = plan_groups(shared_workloads(work, members), rng=np.random.default_rng(1), time_limit=time_limit)
    return expected_relative_variance(groups, Cost(mu=1.0))


def replay(seed: int, epsilons: list[float]) -> Any:
    from predictor.predict import read_logs
    from proxy.config import load_config
    from proxy.dp.engine_factory import engine_settings
    from proxy.replay.whatif.cli import _run
    from proxy.replay.whatif.simulate import WhatIfOptions

    cfg = load_config(REPO / "config.toml")
    statements, _ = read_logs([DATA / "querylogs" / "adult_bi_21d.log"])
    return _run(cfg, Path(tempfile.mkdtemp(prefix="lapras-pfloor-")), {"adult": DATA / "adult.csv"}, statements,
                engine_settings(cfg, progress=False), WhatIfOptions(epsilons=epsilons, seed=seed, workers=1),
                progress=False)


def _median(xs: list[float]) -> float:
    return statistics.median(xs) if xs else math.nan


def adult_table(result: Any, floors: dict[int, dict[str, Any]], eps: float, ideal_off: bool) -> dict[str, Any]:
    """Per f: the floor's pooled median ratios (recurring, all) at ``eps``; and the product's measured ones."""
    on = {r.epoch: r for r in result.runs if r.epsilon == eps and r.with_p}
    off = {r.epoch: r for r in result.runs if r.epsilon == eps and not r.with_p}
    pairs = []  # (epoch, kind recurring, outcome with P, rel. error without P, rel. error with P)
    counts: dict[int, tuple[int, int, float]] = {}
    for e, run_off in off.items():
        run_on = on[e]
        assert len(run_on.outcomes) == len(run_off.outcomes)
        s_off = sum(o.outcome == "fresh" for o in run_off.outcomes)
        b_on = sum(o.outcome == "fresh" for o in run_on.outcomes)
        spent = 1.0 if ideal_off else max((o.spent for o in run_off.outcomes), default=1.0)
        counts[e] = (s_off, b_on, spent)
        for o_on, o_off in zip(run_on.outcomes, run_off.outcomes, strict=True):
            if o_off.outcome in ("unsupported", "refused") or o_on.outcome in ("unsupported", "refused"):
                continue
            if o_off.rel_error is None or o_on.rel_error is None or o_off.kind is None:
                continue
            pairs.append((e, o_off.kind.recurring, o_on.outcome, o_off.rel_error, o_on.rel_error))
    measured = {
        "recurring": _median([p[4] for p in pairs if p[1]]) / _median([p[3] for p in pairs if p[1]]),
        "all": _median([p[4] for p in pairs]) / _median([p[3] for p in pairs]),
    }
    rows = []
    for f in F_GRID:
        row: dict[str, float] = {"f": f}
        for name, v_key in (("", "v_floor"), ("product_", "v_engine"), ("design_", "v_design")):
            if any(v_key not in fl for fl in floors.values()):
                continue
            scaled = []
            for e, rec, outcome, rel_off, _ in pairs:
                fl = floors.get(e + 1)
                s_off, b_on, spent = counts[e]
                if fl is None or s_off == 0:
                    r = 1.0  # no P that day: both runs are the same engine
                else:
                    r_rec = math.sqrt(fl[v_key] * spent / (f * s_off))
                    r_fresh = math.sqrt(b_on * spent / ((1 - f) * s_off))
                    r = r_rec if outcome == "from_p" else r_fresh if outcome == "fresh" else (r_rec if rec else r_fresh)
                scaled.append((rec, rel_off, rel_off * r))
            row[name + "recurring"] = _median([x[2] for x in scaled if x[0]]) / _median([x[1] for x in scaled if x[0]])
            row[name + "all"] = _median([x[2] for x in scaled]) / _median([x[1] for x in scaled])
        rows.append(row)
    feasible = [r["f"] for r in rows if r["recurring"] <= 0.4 and r["all"] <= 0.7]
    return {"epsilon": eps, "ideal_off": ideal_off, "rows": rows, "measured": measured,
            "best_recurring": min(rows, key=lambda r: r["recurring"]),
            "best_all": min(rows, key=lambda r: r["all"]),
            "both_targets_at_f": feasible,
            "from_p": sum(p[2] == "from_p" for p in pairs), "statements": len(pairs)}


def dashboard_floor() -> dict[str, Any]:
    """The dashboard's on / off floor with a noise-free P (see the module docstring), and with every panel
    (SUMs too) noise-free: the biases alone."""
    shrink = math.sqrt(DASHBOARD_FRESH_LEFT / DASHBOARD_S)
    off, free_p, no_noise = [], [], []
    for _, e, b, answerable in dashboard_panels():
        noise = math.sqrt(max(e * e - b * b, 0.0))
        off.append(e)
        no_noise.append(min(e, b))
        free_p.append(min(e, b) if answerable else math.sqrt(b * b + (shrink * noise) ** 2))
    m_off = statistics.median(off)
    return {"off_median": m_off, "free_p_median": statistics.median(free_p),
            "free_p_ratio": statistics.median(free_p) / m_off,
            "bias_only_median": statistics.median(no_noise), "bias_only_ratio": statistics.median(no_noise) / m_off}


def plot(tables: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5))
    for t, colour in zip(tables, ("tab:blue", "tab:orange", "tab:green"), strict=False):
        fs = [r["f"] for r in t["rows"]]
        for key, style, what in (("", "-", "floor"), ("design_", "-.", "design strategy"), ("product_", ":", "product")):
            if key + "recurring" in t["rows"][0]:
                ax.plot(fs, [r[key + "recurring"] for r in t["rows"]], style, color=colour, lw=1.6,
                        label=f"{what}, recurring, eps {t['epsilon']:g}")
        ax.plot(fs, [r["all"] for r in t["rows"]], "--", color=colour, lw=0.8, label=f"floor, all, eps {t['epsilon']:g}")
        ax.plot([0.55], [t["measured"]["recurring"]], "o", color=colour, label=f"measured, recurring, eps {t['epsilon']:g}")
    ax.axhline(0.4, color="k", lw=1)
    ax.axhline(0.7, color="grey", lw=1)
    ax.set_xlabel("f: P's share of the epoch's stream budget")
    ax.set_ylabel("median rel. error, with P / without P")
    ax.set_ylim(0, 1.6)
    ax.legend(fontsize=6, ncol=2)
    ax.set_title("Adult BI log: with P / without P against P's share of the budget")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--epsilon", default="0.5,1")
    ap.add_argument("--attain", type=int, default=None, metavar="DAY",
                    help="also measure the design strategy of DAY's P exactly (minutes: every atom of the domain)")
    ap.add_argument("--engine", action="store_true",
                    help="also plan each day's P as the product does (about 10 s a day) and give its ratios per f")
    ap.add_argument("--plot", type=Path, default=None)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    if not (DATA / "querylogs" / "adult_bi_21d.log").exists():
        print(f"{DATA}/querylogs/adult_bi_21d.log is absent: nothing to benchmark")
        return 0
    eps = [float(x) for x in args.epsilon.split(",")]
    t0 = time.perf_counter()
    result = replay(args.seed, eps)
    t1 = time.perf_counter()
    days = sorted({r.epoch + 1 for r in result.runs if r.with_p and r.p_size > 0})
    floors = {d: p_floor_of_day(d) for d in days}
    if args.engine:
        for d in days:
            # the product's v on the floor's scale (statement sensitivities): the same factor as the floor's
            fl = floors[d]
            fl["v_engine_single"] = engine_v_of_day(d)
            fl["v_engine"] = fl["v_engine_single"] * fl["v_floor"] / fl["v_floor_single"]
    t2 = time.perf_counter()
    print(f"replay {t1 - t0:.0f} s, floors of {len(days)} days' P {t2 - t1:.0f} s")
    print(f"{'day':>4} {'stmts':>5} {'queries':>7} {'marginals':>9} {'union cells':>12} {'v_floor':>8} {'(single q.)':>11}"
          f" {'v_product (single q.)':>22}")
    for fl in floors.values():
        print(f"{fl['day']:>4} {fl['statements']:>5} {fl['queries']:>7} {fl['marginals']:>9} {fl['cells']:>12,} "
              f"{fl['v_floor']:>8.2f} {fl['v_floor_single']:>11.2f} {fl.get('v_engine_single', math.nan):>22.2f}")
    from lapras.svd_bound import design_bound

    attained = None
    if args.attain is not None:
        t3 = time.perf_counter()
        queries = p_queries_of_day(args.attain)[0]
        product = design_bound(queries)
        floor, g = refine(queries)
        error, share, atoms = attain(queries, g)
        attained = {"day": args.attain, "product_floor": product, "floor": floor, "design_strategy": error,
                    "searched": share, "atoms": atoms, "queries": len(queries)}
        print(f"\nday {args.attain}: floor {product:.1f} (product p) -> {floor:.1f} (with point masses); the strategy "
              f"A = G^(-1/4) W of that design has error {error:.1f} ({error / floor:.2f}x the floor; {share:.0%} of "
              f"{atoms:,} atoms searched; {time.perf_counter() - t3:.0f} s); per query {floor / len(queries):.2f} and "
              f"{error / len(queries):.2f}")
        for fl in floors.values():
            # the other days' P are the same shape (72-140 queries over the same 35-59 marginals): the
            # attained strategy's factor over the product floor of one day stands for all
            fl["v_design"] = fl["v_floor"] * error / product
    tables = [adult_table(result, floors, e, ideal) for ideal in (False, True) for e in eps]
    for t in tables:
        print(f"\nepsilon {t['epsilon']:g} ({t['statements']} statements, {t['from_p']} from P; P-off pacing "
              f"{'ideal (spends all of U)' if t['ideal_off'] else 'as replayed'}): floor of with P / without P, "
              f"pooled medians")
        print(f"{'f':>5} {'recurring':>9} {'all':>6}   product's strategies: {'recurring':>9} {'all':>6}   "
              f"design strategy: {'recurring':>9} {'all':>6}")
        for r in t["rows"]:
            print(f"{r['f']:>5.2f} {r['recurring']:>9.3f} {r['all']:>6.3f}   {'':>22}{r.get('product_recurring', math.nan):>9.3f} "
                  f"{r.get('product_all', math.nan):>6.3f}   {'':>17}{r.get('design_recurring', math.nan):>9.3f} "
                  f"{r.get('design_all', math.nan):>6.3f}")
        br, ba = t["best_recurring"], t["best_all"]
        print(f"best recurring {br['recurring']:.3f} at f = {br['f']:.2f} (all {br['all']:.3f}); best all "
              f"{ba['all']:.3f} at f = {ba['f']:.2f} (recurring {ba['recurring']:.3f}); both targets (<= 0.4, <= 0.7) "
              f"at f in {t['both_targets_at_f'] or 'none'}")
        print(f"measured by the product in the same run: recurring {t['measured']['recurring']:.3f}, "
              f"all {t['measured']['all']:.3f}")
    d = dashboard_floor()
    print(f"\ndashboard week: median over panels without P {d['off_median']:.2f}%; with a noise-free P for the "
          f"panels it can answer {d['free_p_median']:.2f}% -> on / off >= {d['free_p_ratio']:.2f}; every panel "
          f"noise-free (biases alone) {d['bias_only_median']:.2f}% -> {d['bias_only_ratio']:.2f}")
    if args.plot is not None:
        plot(tables[:len(eps)], args.plot)
    if args.json is not None:
        args.json.write_text(json.dumps({"floors": list(floors.values()), "adult": tables, "attained": attained,
                                         "dashboard": d},
                                        indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
