"""Benchmark of the DP regression methods (issue 7): excess empirical risk vs non-private OLS, and runtime.

Methods: AdaSSP, LinMix, IHM (dense Gaussian sketches), fast IHM (FastMix) from lapras.regression, and
diffprivlib's LinearRegression (pure eps-DP, functional mechanism) as the library users reach for today.
Data sets: synthetic Gaussian designs (d = 32, n up to 2^20) and Adult (hours_per_week on the other numeric
attributes, standardised with the public domain of config.toml, intercept added). delta = 1/n^2.

Excess empirical risk = (L(theta) - L(theta_OLS)) / n with L the squared loss on the clipped data the
mechanisms see (the OLS is computed on the same clipped data). Medians over runs.

    python benchmarks/regression.py [--quick] [--runs N] [--json PATH] [--sizes 17,19,20]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
import types
import warnings
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from lapras.regression import methods as M  # noqa: E402
from lapras.regression.clip import clip_rows, clip_values  # noqa: E402

RESULTS = REPO / "benchmarks" / "results"
ADULT = REPO.parent / "shared" / "data" / "adult.csv"
EPSILONS = (0.1, 0.3, 1.0, 3.0, 10.0)
ALL_METHODS = ("adassp", "linmix", "ihm", "fast_ihm", "diffprivlib")
ADULT_X = ("age", "fnlwgt", "education_num", "capital_gain", "capital_loss", "sex", "income_gt_50k")


def _diffprivlib_lr() -> Any:
    # diffprivlib 0.6.6 imports a name scikit-learn no longer exports, in its random-forest module that we
    # do not use; stub that one module so its LinearRegression can be imported unchanged.
    if "diffprivlib.models.forest" not in sys.modules:
        stub = types.ModuleType("diffprivlib.models.forest")
        stub.RandomForestClassifier = stub.DecisionTreeClassifier = None  # type: ignore[attr-defined]
        sys.modules["diffprivlib.models.forest"] = stub
    from diffprivlib.models import LinearRegression

    return LinearRegression


class Dataset:
    """Design X (intercept last), response y, public bounds, and the clipped data + OLS loss for scoring."""

    def __init__(self, name: str, X: np.ndarray, y: np.ndarray, c_x: float, c_y: float,
                 feature_bound: float) -> None:
        self.name, self.X, self.y, self.c_x, self.c_y = name, X, y, c_x, c_y
        self.feature_bound = feature_bound
        self.n, self.d = X.shape
        self.Xc = clip_rows(X, c_x)
        self.yc = clip_values(y, c_y)
        self.ols = np.linalg.lstsq(self.Xc, self.yc, rcond=None)[0]
        self.L0 = self.loss(self.ols)

    def loss(self, theta: np.ndarray) -> float:
        r = self.yc - self.Xc @ theta
        return float(r @ r)

    def excess(self, theta: np.ndarray) -> float:
        return (self.loss(theta) - self.L0) / self.n


def synthetic(n: int, d: int, seed: int) -> Dataset:
    """Correlated Gaussian features (public generator: AR(0.5) covariance), theta ~ N(0, I/d), noise 0.5.

    Bounds come from the generator, not the data: row norm <= sqrt(2 (d - 1)) + intercept, |y| <= 4.
    """
    rng = np.random.default_rng(seed)
    p = d - 1
    idx = np.arange(p)
    L = np.linalg.cholesky(0.5 ** np.abs(idx[:, None] - idx[None, :]))
    Z = rng.standard_normal((n, p)) @ L.T
    theta = rng.standard_normal(p) / math.sqrt(p)
    y = Z @ theta + 0.5 * rng.standard_normal(n)
    X = np.column_stack([Z, np.ones(n)])
    return Dataset(f"synthetic_2^{int(math.log2(n))}", X, y, math.sqrt(2.0 * p + 1.0), 4.0, 3.0)


def adult() -> Dataset | None:
    if not ADULT.exists():
        return None
    from proxy.config import load_config

    table = load_config(REPO / "config.toml").catalog.table("adult")
    assert table is not None
    with ADULT.open() as f:
        header = [h.strip().replace("-", "_").replace(">50K", "_gt_50k").lower() for h in f.readline().split(",")]
    raw = np.loadtxt(ADULT, delimiter=",", skiprows=1, dtype=np.float64)
    names = {h: i for i, h in enumerate(header)}

    def col(name: str) -> np.ndarray:
        v = raw[:, names[name]]
        return v + 16 if name == "age" else v  # the CSV codes age as age - 16

    def std(name: str) -> np.ndarray:
        a = table.attribute(name)
        assert a is not None
        lo, hi = float(a.domain.lo), float(a.domain.hi)
        return (np.clip(col(name), lo, hi) - (lo + hi) / 2) / max((hi - lo) / 2, 1.0)

    X = np.column_stack([std(c) for c in ADULT_X] + [np.ones(len(raw))])
    ya = table.attribute("hours_per_week")
    assert ya is not None
    y = np.clip(col("hours_per_week"), ya.domain.lo, ya.domain.hi) - (ya.domain.lo + ya.domain.hi) / 2
    return Dataset("adult", X, y, math.sqrt(X.shape[1]), float(ya.domain.hi - ya.domain.lo) / 2, 1.0)


def run_one(method: str, ds: Dataset, eps: float, delta: float, rng: np.random.Generator) -> tuple[float, float]:
    t0 = time.perf_counter()
    if method == "diffprivlib":
        LR = _diffprivlib_lr()
        b = ds.feature_bound
        Z = np.clip(ds.Xc[:, :-1], -b, b)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            m = LR(epsilon=eps, bounds_X=(-b, b), bounds_y=(-ds.c_y, ds.c_y), fit_intercept=True,
                   random_state=int(rng.integers(2**31))).fit(Z, ds.yc)
        theta = np.append(m.coef_, m.intercept_)
    else:
        theta, _ = M.fit(method, (ds.X, ds.y), ds.c_x, ds.c_y, eps, delta)  # the release path: CSPRNG noise
    return ds.excess(theta), time.perf_counter() - t0


def bench(datasets: list[Dataset], methods: tuple[str, ...], epsilons: tuple[float, ...], runs: int,
          out_json: Path | None, seed: int = 0, runs_for: dict[str, int] | None = None) -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = []
    rng = np.random.default_rng(seed)
    for ds in datasets:
        delta = 1.0 / ds.n**2
        r = (runs_for or {}).get(ds.name, runs)
        for eps in epsilons:
            for method in methods:
                res = [run_one(method, ds, eps, delta, rng) for _ in range(r)]
                ex = np.array([a for a, _ in res])
                sec = np.array([b for _, b in res])
                rec = {"method": method, "dataset": ds.name, "n": ds.n, "d": ds.d, "epsilon": eps,
                       "delta": delta, "runs": r, "excess_risk": float(np.median(ex)),
                       "excess_risk_q25": float(np.quantile(ex, 0.25)),
                       "excess_risk_q75": float(np.quantile(ex, 0.75)), "seconds": float(np.median(sec))}
                records.append(rec)
                print(f"{ds.name:>16} eps={eps:<5} {method:>11}  excess={rec['excess_risk']:.3e}  "
                      f"t={rec['seconds']:.2f}s  (runs={r})", flush=True)
                if out_json:
                    out_json.write_text(json.dumps(records, indent=1))
    return records


def summarize(records: list[dict[str, Any]]) -> str:
    lines = ["| data set | n | d | epsilon | " + " | ".join(ALL_METHODS) + " |",
             "|---|---|---|---|" + "---|" * len(ALL_METHODS)]
    cells: dict[tuple[str, float], dict[str, dict[str, Any]]] = {}
    for r in records:
        cells.setdefault((r["dataset"], r["epsilon"]), {})[r["method"]] = r
    for (ds, eps), by in cells.items():
        any_r = next(iter(by.values()))
        vals = [f"{by[m]['excess_risk']:.2e} ({by[m]['seconds']:.2f}s)" if m in by else "-" for m in ALL_METHODS]
        lines.append(f"| {ds} | {any_r['n']} | {any_r['d']} | {eps:g} | " + " | ".join(vals) + " |")
    both = [(k, by) for k, by in cells.items() if "ihm" in by and "adassp" in by]
    wins = sum(by["ihm"]["excess_risk"] <= by["adassp"]["excess_risk"] for _, by in both)
    lines += ["", "Cells: median excess empirical risk (median seconds per fit).", ""]
    if both:
        lines.append(f"- IHM at or below AdaSSP: {wins} of {len(both)} (data set, epsilon) cells "
                     f"({100 * wins / len(both):.0f} %; target >= 80 %).")
    for (_ds, eps), by in cells.items():
        r = next(iter(by.values()))
        if r["n"] == 2**19 and r["d"] == 32 and "ihm" in by and "fast_ihm" in by:
            sp = by["ihm"]["seconds"] / by["fast_ihm"]["seconds"]
            ratio = by["fast_ihm"]["excess_risk"] / by["ihm"]["excess_risk"]
            lines.append(f"- n = 2^19, d = 32, eps = {eps:g}: fast IHM {sp:.1f}x faster than dense IHM "
                         f"(target >= 5x), excess-risk ratio fast/dense {ratio:.2f} (target <= 1.5).")
    return "\n".join(lines) + "\n"


def plot(records: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = sorted({r["dataset"] for r in records})
    fig, axes = plt.subplots(1, len(names), figsize=(4.5 * len(names), 3.8), squeeze=False)
    colors = dict(zip(ALL_METHODS, plt.rcParams["axes.prop_cycle"].by_key()["color"], strict=False))
    for ax, ds in zip(axes[0], names, strict=True):
        ours = [r["excess_risk"] for r in records if r["dataset"] == ds and r["method"] != "diffprivlib"]
        top = 10 * max(ours) if ours else None
        for m in ALL_METHODS:
            rs = sorted((r for r in records if r["dataset"] == ds and r["method"] == m), key=lambda r: r["epsilon"])
            if rs:
                ax.plot([r["epsilon"] for r in rs], [max(r["excess_risk"], 1e-12) for r in rs], "o-", label=m,
                        color=colors[m])
        ax.set_xscale("log")
        ax.set_yscale("log")
        if top:
            ax.set_ylim(top=top)  # diffprivlib is orders of magnitude off-scale: see the table
        ax.set_title(ds)
        ax.set_xlabel("epsilon")
        ax.set_ylabel("excess empirical risk (median)")
        ax.grid(True, which="both", alpha=0.3)
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="reduced grid (minutes)")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--json", type=Path, default=None, help="write the records here")
    ap.add_argument("--sizes", default="17,19,20", help="log2 n of the synthetic data sets")
    ap.add_argument("--large-runs", type=int, default=None,
                    help="runs for synthetic sets with n >= 2^19 (default: --runs)")
    ap.add_argument("--methods", default=",".join(ALL_METHODS))
    ap.add_argument("--out", type=Path, default=RESULTS, help="directory for regression.{json,md,png}")
    ap.add_argument("--epsilons", default=",".join(str(e) for e in EPSILONS))
    ap.add_argument("--no-adult", action="store_true", help="synthetic data sets only")
    ap.add_argument("--merge", type=Path, nargs="+", default=None,
                    help="no runs: merge these record files into --json (default regression.json) + md/png")
    a = ap.parse_args(argv)
    methods = tuple(m for m in a.methods.split(",") if m)
    args_out = a.out
    args_out.mkdir(parents=True, exist_ok=True)
    out_json = a.json or (args_out / ("regression_quick.json" if a.quick else "regression.json"))
    stem = out_json.stem
    if a.merge:
        recs = [r for path in a.merge for r in json.loads(path.read_text())]
    elif a.quick:
        # Small grid: accuracy on n = 2^14 and Adult (3 runs), plus the speed cell n = 2^19, d = 32 for
        # dense vs fast IHM only (2 runs).
        ad = adult()
        sets = [synthetic(2**14, 32, 1)] + ([ad] if ad else [])
        recs = bench(sets, methods, EPSILONS, min(a.runs, 3), out_json)
        recs += bench([synthetic(2**19, 32, 2)], tuple(m for m in ("ihm", "fast_ihm") if m in methods),
                      (1.0,), 2, None)
    else:
        sizes = [int(s) for s in a.sizes.split(",") if s]
        sets = [synthetic(2**s, 32, s) for s in sizes]
        ad = None if a.no_adult else adult()
        if ad:
            sets.append(ad)
        runs_for = {ds.name: a.large_runs for ds in sets if a.large_runs and ds.n >= 2**19}
        eps_grid = tuple(float(e) for e in a.epsilons.split(",") if e)
        recs = bench(sets, methods, eps_grid, a.runs, out_json, runs_for=runs_for)
    out_json.write_text(json.dumps(recs, indent=1))
    md = summarize(recs)
    (args_out / f"{stem}.md").write_text("# DP regression benchmark\n\n" + md)
    plot(recs, args_out / f"{stem}.png")
    print(md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
