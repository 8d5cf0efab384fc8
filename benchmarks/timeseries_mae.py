"""Accuracy of a time-series dashboard stream on `events`: LAPRAS with P beside independent Gaussian noise.

A 100-statement stream of the statements Superset or Grafana send over the generated `events` table (daily
counts per category, weekly sums, counts per country, hourly counts, average duration) runs through the
real engine twice in process, at (epsilon, delta) = (1, 1e-3): once with P (the recurring dashboard
statements' linear queries, S = 100) answered up front by the matrix mechanism, once with no prediction
(every statement answered online with fresh Gaussian noise). Both are compared with exact answers from the
same PostgresExactSource (rows bounded per user) and the script prints the mean absolute error per statement
kind, the ratio, overall medians, and writes `results/timeseries_mae.{json,png}`.

    .venv/bin/python benchmarks/timeseries_mae.py [--rows 200000] [--trials 3]

Operator-side benchmark: exact values are only used here to measure errors.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import parser as sqlparser  # noqa: E402
from lapras.engine import Engine, Prediction  # noqa: E402
from lapras.exact import PostgresExactSource  # noqa: E402
from lapras.ledger.memory import MemoryLedger  # noqa: E402
from lapras.strategy_cache import StrategyCache  # noqa: E402  # noqa: E402
from parser.model.linear import LinearQuery  # noqa: E402  # noqa: E402
from proxy.config import load_config  # noqa: E402
from proxy.dp.engine_factory import engine_settings  # noqa: E402
from proxy.replay.whatif.exact import SnapshotExactSource  # noqa: E402
from proxy.upstream.embedded import EmbeddedPostgres  # noqa: E402
from proxy.upstream.events_data import EventsSpec, ensure_events_table  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
STREAM = 100
MONTHS = (("2026-09-01", "2026-10-01"), ("2026-10-01", "2026-11-01"), ("2026-11-01", "2026-12-01"))
DAYS = ("2026-11-28", "2026-11-29", "2026-11-30")


def _panels() -> dict[str, list[str]]:
    """The recurring dashboard panels, each kind over a few ranges of a month or less (planning cost
    grows with the hourly cells a range covers)."""
    month = "ts >= '{0}' AND ts < '{1}'"
    return {
        "daily count by category, month": [
            f"SELECT date_trunc('day', ts) AS day, category, count(*) FROM events WHERE {month.format(a, b)} "
            "GROUP BY 1, 2 ORDER BY 1" for a, b in MONTHS],
        "weekly sum(amount), month": [
            f"SELECT date_trunc('week', ts) AS week, sum(amount) FROM events WHERE {month.format(a, b)} "
            "GROUP BY 1 ORDER BY 1" for a, b in MONTHS],
        "count by country, month": [
            f"SELECT country, count(*) FROM events WHERE {month.format(a, b)} GROUP BY country"
            for a, b in MONTHS],
        "hourly count, one day": [
            f"SELECT date_trunc('hour', ts) AS hour, count(*) FROM events WHERE ts >= '{d}' "
            f"AND ts < '{d}'::date + 1 GROUP BY 1 ORDER BY 1" for d in DAYS],
        "avg(duration_s) by category, month": [
            f"SELECT category, avg(duration_s) FROM events WHERE {month.format(a, b)} GROUP BY category"
            for a, b in MONTHS],
    }


def _ad_hoc() -> dict[str, list[str]]:
    """Unpredicted statements an analyst adds to the dashboard: a filter or a range not in P."""
    return {
        "ad hoc": [
            "SELECT date_trunc('day', ts), count(*) FROM events WHERE country = 'US' "
            "AND ts >= '2026-11-01' AND ts < '2026-11-15' GROUP BY 1",
            "SELECT category, sum(amount) FROM events WHERE ts >= '2026-11-16' AND ts < '2026-11-23' GROUP BY 1",
            "SELECT country, avg(amount) FROM events WHERE category = 'purchase' "
            "AND ts >= '2026-10-01' AND ts < '2026-11-01' GROUP BY 1",
            "SELECT date_trunc('hour', ts), count(*) FROM events WHERE ts >= '2026-11-27' "
            "AND ts < '2026-11-28' AND category = 'search' GROUP BY 1",
            "SELECT count(*) FROM events WHERE ts >= '2026-11-01' AND ts < '2026-12-01' AND amount >= 100",
        ],
    }


def _config(since: str) -> Path:
    """config.toml, or a copy whose `events.ts` range starts at ``since`` (a smaller declared domain)."""
    path = ROOT / "config.toml"
    if not since:
        return path
    old = "ts = { type = \"timestamptz\", min = 2026-01-01T00:00:00Z"
    text = path.read_text()
    assert old in text, "config.toml's events.ts declaration changed"
    copy = Path(tempfile.mkdtemp(prefix="tsmae-cfg-")) / "config.toml"
    copy.write_text(text.replace(old, old.replace("2026-01-01", since)))
    return copy


def build_stream(rng: np.random.Generator) -> tuple[list[tuple[str, str]], list[str]]:
    """100 (kind, sql) pairs: every ad hoc statement once, every panel at least once, the rest refreshes of
    panels drawn at random (a dashboard reloading); and the panels' SQL (what P holds)."""
    panels = [(k, s) for k, ss in _panels().items() for s in ss]
    ad_hoc = [(k, s) for k, ss in _ad_hoc().items() for s in ss]
    refresh = [panels[i] for i in rng.integers(0, len(panels), STREAM - len(panels) - len(ad_hoc))]
    stream = panels + ad_hoc + refresh
    order = rng.permutation(len(stream))
    return [stream[i] for i in order], [s for _, s in panels]


def run_stream(engine: Engine, planner: sqlparser.Planner, stream: list[tuple[str, str]], catalog, exact,
               prediction: Prediction) -> list[tuple[str, float, str]]:
    """(kind, mean absolute error over the statement's cells, engine outcome) per statement."""
    t0 = time.perf_counter()
    engine.new_epoch(prediction)
    print(f"  epoch prepared in {time.perf_counter() - t0:.1f} s ({len(prediction.queries)} queries in P)",
          file=sys.stderr)
    out: list[tuple[str, float, str]] = []
    for kind, sql in stream:
        plan = planner.plan(sql)
        table = catalog.table(plan.table)
        ans = engine.answer(plan, "dashboard")
        got, want = plan.group_cells(ans.values), plan.group_cells(exact.answers(table, plan.queries))
        ok = np.isfinite(got) & np.isfinite(want)
        out.append((kind, float(np.abs(got[ok] - want[ok]).mean()), ans.outcome))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--trials", type=int, default=1, help="independent runs (new noise, new stream order)")
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--delta", type=float, default=1e-3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--since", default="",
                    help="narrow the declared `ts` range of events to start here (YYYY-MM-DD) and drop older rows: "
                         "the matrix mechanism's strategy search inverts a Gram matrix per hourly cell")
    ap.add_argument("--no-plot", action="store_true")
    ap.add_argument("--trace", type=float, default=0.0, help="dump the stack every N seconds (slow runs)")
    args = ap.parse_args()
    if args.trace:
        import faulthandler

        faulthandler.dump_traceback_later(args.trace, repeat=True)

    cfg = load_config(_config(args.since))
    catalog = cfg.catalog
    settings = replace(engine_settings(cfg, progress=False), epsilon=args.epsilon, delta=args.delta,
                       epoch="manual", epoch_seconds=None)
    tmp = tempfile.mkdtemp(prefix="tsmae-")
    pg = EmbeddedPostgres(Path(tmp))
    pg.start()
    try:
        t0 = time.perf_counter()
        ensure_events_table(pg.dsn(), EventsSpec(rows=args.rows))
        if args.since:
            import psycopg

            with psycopg.connect(pg.dsn(), autocommit=True) as conn:
                conn.execute("DELETE FROM events WHERE ts < %s::timestamptz", (args.since,))
        print(f"events: {args.rows:,} rows generated in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
        # max_cells=0: every linear query's exact answer comes from the database (cached per query), since
        # the snapshot's histogram shortcut refuses a SUM over a measure (amount, duration_s).
        exact = SnapshotExactSource(PostgresExactSource(pg.dsn()), max_cells=0)
        planner = sqlparser.Planner(catalog)
        cache = StrategyCache()
        rows: dict[str, list[tuple[str, float, str]]] = {"lapras": [], "independent": []}
        timings: dict[str, float] = {"mm_and_stream_s": 0.0, "independent_s": 0.0}
        for trial in range(args.trials):
            rng = np.random.default_rng([args.seed, trial])
            stream, p_sql = build_stream(rng)
            qs: dict[str, LinearQuery] = {}
            for sql in p_sql:
                for q in planner.plan(sql).queries:
                    if not q.is_zero:
                        qs.setdefault(q.key, q)
            pred = Prediction(tuple(qs.values()), STREAM, None)
            print(f"trial {trial + 1}: P planned ({len(p_sql)} statements)", file=sys.stderr)
            for name, p in (("lapras", pred), ("independent", Prediction((), STREAM, None))):
                engine = Engine(catalog, MemoryLedger(), exact, settings,
                                rng=np.random.default_rng([args.seed, trial, name == "lapras"]), strategies=cache)
                t1 = time.perf_counter()
                rows[name] += run_stream(engine, planner, stream, catalog, exact, p)
                timings["mm_and_stream_s" if name == "lapras" else "independent_s"] += time.perf_counter() - t1
            print(f"trial {trial + 1}/{args.trials}: |P| = {len(qs)} linear queries", file=sys.stderr)
        exact.close()
    finally:
        pg.destroy()
    report(rows, args, timings)
    return 0


def report(rows: dict[str, list[tuple[str, float, str]]], args: argparse.Namespace,
           timings: dict[str, float]) -> None:
    kinds = list(_panels()) + list(_ad_hoc())
    table = []
    print(f"\n(epsilon, delta) = ({args.epsilon}, {args.delta}), {args.rows:,} rows, {STREAM} statements x "
          f"{args.trials} trial(s); MAE = mean over statements of the mean |error| over their cells")
    print(f"{'statement kind':40} {'n':>4} {'MAE LAPRAS':>11} {'MAE indep.':>11} {'ratio':>6}")
    for k in kinds:
        a = [e for kk, e, _ in rows["lapras"] if kk == k]
        b = [e for kk, e, _ in rows["independent"] if kk == k]
        ma, mb = float(np.mean(a)), float(np.mean(b))
        table.append({"kind": k, "n": len(a), "mae_lapras": ma, "mae_independent": mb, "ratio": ma / mb})
        print(f"{k:40} {len(a):4d} {ma:11.2f} {mb:11.2f} {ma / mb:6.3f}")
    la = np.array([e for _, e, _ in rows["lapras"]])
    ib = np.array([e for _, e, _ in rows["independent"]])
    med = {"median_lapras": float(np.median(la)), "median_independent": float(np.median(ib)),
           "mean_lapras": float(la.mean()), "mean_independent": float(ib.mean()),
           "median_per_statement_ratio": float(np.median(la / ib))}
    outcomes = {n: {o: sum(1 for _, _, oo in r if oo == o) for o in sorted({oo for _, _, oo in r})}
                for n, r in rows.items()}
    print(f"overall median MAE: LAPRAS {med['median_lapras']:.2f}, independent {med['median_independent']:.2f} "
          f"(ratio {med['median_lapras'] / med['median_independent']:.3f}); median per-statement ratio "
          f"{med['median_per_statement_ratio']:.3f}")
    print(f"outcomes: {outcomes}")
    print(f"wall seconds: {', '.join(f'{k} {v:.1f}' for k, v in timings.items())}")
    RESULTS.mkdir(exist_ok=True)
    doc = {"epsilon": args.epsilon, "delta": args.delta, "rows": args.rows, "stream": STREAM,
           "trials": args.trials, "kinds": table, "overall": med, "outcomes": outcomes, "timings": timings}
    (RESULTS / "timeseries_mae.json").write_text(json.dumps(doc, indent=1) + "\n")
    if not args.no_plot:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(9, 4.5))
        x = np.arange(len(table))
        ax.bar(x - 0.2, [t["mae_lapras"] for t in table], 0.4, label="LAPRAS (P by matrix mechanism)")
        ax.bar(x + 0.2, [t["mae_independent"] for t in table], 0.4, label="independent Gaussian")
        ax.set_xticks(x, [t["kind"] for t in table], rotation=20, ha="right", fontsize=8)
        ax.set_yscale("log")  # sums of money and counts differ by three orders of magnitude
        ax.set_ylabel("mean absolute error (log)")
        ax.set_title(f"events dashboard stream, {STREAM} statements, (eps, delta) = ({args.epsilon}, {args.delta})")
        ax.legend()
        fig.tight_layout()
        fig.savefig(RESULTS / "timeseries_mae.png", dpi=110)
        print(f"plot: {RESULTS / 'timeseries_mae.png'}")


if __name__ == "__main__":
    raise SystemExit(main())
