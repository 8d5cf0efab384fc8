"""Back-test figures for the predictor (issue 6): the shared Adult BI log and synthetic workloads.

    /work/venv/bin/python benchmarks/predictor_backtest.py [--data ../shared/data/querylogs] [--out benchmarks/results]

Writes predictor_backtest.json (one record per log, mode and day), predictor_backtest.md (the tables) and
predictor_backtest.png (per-day recall, precision and S). The truth file is read for evaluation only.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from predictor.backtest import DayResult, backtest, format_table, load_truth  # noqa: E402
from predictor.logs import read_log  # noqa: E402
from predictor.utility import CostModel  # noqa: E402


def _catalog() -> Any:
    """The configured catalog (parser canonical keys), when the proxy's config loader is available."""
    try:
        from proxy.config import load_config

        return load_config(REPO / "config.toml").catalog
    except Exception:  # noqa: BLE001 - the benchmark still runs with sqlglot keys
        return None


def _md_head(*lines: str) -> list[str]:
    """A markdown section: ``lines``, the last a table's header row, then the table's separator row."""
    return [*lines, "|" + "---|" * (lines[-1].count("|") - 1)]


def _summary(days: list[DayResult]) -> dict[str, float]:
    k = len(days)
    rr = [r.recurring_recall for r in days if r.recurring_recall is not None]
    rs = [r.recurring_share for r in days if r.recurring_share is not None]
    return {
        "recall": round(sum(r.recall for r in days) / k, 4),
        "recurring_recall_min": round(min(rr), 4) if rr else float("nan"),
        "recurring_share": round(sum(rs) / len(rs), 4) if rs else float("nan"),
        "precision": round(sum(r.precision for r in days) / k, 4),
        "precision_min": round(min(r.precision for r in days), 4),
        "s_mean_abs_err": round(sum(abs(r.s_estimate - r.s_true) / r.s_true for r in days) / k, 4),
        "s_median_abs_err": round(
            statistics.median(abs(r.s_estimate - r.s_true) / r.s_true for r in days), 4
        ),
        "s_err_of_mean": round(sum(r.s_estimate for r in days) / sum(r.s_true for r in days) - 1, 4),
        "rho_estimate": round(sum(r.rho_estimate for r in days) / k, 4),
    }


def adult(data: Path, catalog: Any) -> tuple[list[dict[str, Any]], list[str]]:
    truth = load_truth(data / "adult_bi_21d.truth.csv")
    records: list[dict[str, Any]] = []
    md: list[str] = []
    for name in ("adult_bi_21d.log", "adult_bi_21d.csv"):
        statements, stats = read_log(data / name)
        md.append(f"Read: {stats.summary().replace(str(data) + '/', '')}\n")
        for keys, cat in (("sqlglot", None), ("parser", catalog)):
            if keys == "parser" and cat is None:
                continue
            for mode in ("rolling", "fixed"):
                t0 = time.perf_counter()
                res = backtest(statements, truth=truth, mode=mode, train_epochs=14, catalog=cat)
                elapsed = time.perf_counter() - t0
                days = [r for r in res if r.epoch >= 14]
                title = (
                    f"{name}, keys: {keys}, "
                    + (
                        "trained on the days before each day"
                        if mode == "rolling"
                        else "trained once on days 1-14"
                    )
                    + f" ({elapsed:.1f} s for {len(res)} back-test days)"
                )
                md += [f"### {title}\n", "```", format_table(days), "```", ""]
                for r in days:
                    records.append({"log": name, "keys": keys, "mode": mode, **r.as_record()})
                records.append({"log": name, "keys": keys, "mode": mode, "summary": _summary(days)})
    return records, md


def sweep(data: Path) -> tuple[list[dict[str, Any]], list[str]]:
    """Fixed thresholds vs the expected-utility cut-off (rolling, stderr log)."""
    statements, _ = read_log(data / "adult_bi_21d.log")
    truth = load_truth(data / "adult_bi_21d.truth.csv")
    rows: list[dict[str, Any]] = []
    settings: list[tuple[str, CostModel | None, float | None]] = [
        (f"utility: {split}", CostModel.for_split(split), None)
        for split in ("auto", "matrix_heavy", "equal", "query_heavy", "reserve_heavy")
    ] + [(f"fixed {t:.2f}", None, t) for t in (0.1, 0.3, 0.5, 0.7, 0.9)]
    for label, cost, thr in settings:
        days = [r for r in backtest(statements, truth=truth, cost=cost, threshold=thr) if r.epoch >= 14]
        rows.append({"cut": label, **_summary(days), "p_size": sum(r.p_size for r in days) / len(days)})
    md = _md_head(
        "### Cut-off: expected utility under each budget split vs fixed thresholds (stderr log, days 15-21)\n",
        "| cut | recall | recurring recall (min) | precision (mean) | precision (min) | mean abs S err | mean P size |",
    )
    md += [
        f"| {r['cut']} | {r['recall']:.3f} | {r['recurring_recall_min']:.3f} | {r['precision']:.3f} | "
        f"{r['precision_min']:.3f} | {r['s_mean_abs_err']:.1%} | {r['p_size']:.1f} |"
        for r in rows
    ]
    return rows, md + [""]


def synthetic() -> tuple[list[dict[str, Any]], list[str]]:
    """The generalisation scenarios of tests/predictor (other schedules and literal patterns, with noise)."""
    from tests.fixtures import predictor_synth as synth

    R, const = synth.Recurring, synth.const
    start = synth.START
    regions = ["north", "south", "east", "west"]
    scenarios: dict[str, tuple[list[Any], int, int]] = {
        "weekly + business days + every other day": (
            [R(const(f"SELECT COUNT(*) FROM w WHERE s = {i}"), synth.weekly(0)) for i in range(4)]
            + [R(const(f"SELECT COUNT(*) FROM b WHERE s = {i}"), synth.business) for i in range(5)]
            + [R(const(f"SELECT COUNT(*) FROM a WHERE s = {i}"), synth.every(2)) for i in range(4)],
            35,
            21,
        ),
        "counter, date, sliding range, weekly week number": (
            [
                R(
                    lambda d: f"SELECT SUM(amount) FROM sales WHERE batch_id = {1000 + d}",
                    synth.daily,
                    kind="report",
                ),
                R(
                    lambda d: (
                        f"SELECT COUNT(*) FROM visits WHERE day = '{start.fromordinal(start.toordinal() + d - 1)}'"
                    ),
                    synth.daily,
                    kind="report",
                ),
                R(
                    lambda d: f"SELECT COUNT(*) FROM claims WHERE units BETWEEN {5 * d} AND {5 * d + 9}",
                    synth.daily,
                    kind="report",
                ),
                R(
                    lambda d: f"SELECT SUM(units) FROM sales WHERE week = {10 + d // 7}",
                    synth.weekly(0),
                    kind="report",
                ),
            ]
            + [R(const(f"SELECT COUNT(*) FROM o WHERE s = {i}"), synth.daily) for i in range(5)],
            28,
            21,
        ),
        "cycles over text and numbers": (
            [
                R(
                    lambda d: f"SELECT SUM(amount) FROM sales WHERE region = '{regions[d % 4]}'",
                    synth.daily,
                    kind="report",
                ),
                R(lambda d: f"SELECT COUNT(*) FROM claims WHERE grade = {d % 5}", synth.daily, kind="report"),
            ]
            + [R(const(f"SELECT COUNT(*) FROM o WHERE s = {i}"), synth.daily) for i in range(4)],
            24,
            14,
        ),
        "busy ad hoc templates (80 a day) + 2 counters": (
            [R(const(f"SELECT COUNT(*) FROM o WHERE s = {i}"), synth.daily) for i in range(5)]
            + [
                R(
                    lambda d, k=k: f"SELECT SUM(amount) FROM sales WHERE batch = {k * 1000 + d}",
                    synth.daily,
                    kind="report",
                )
                for k in range(2)
            ],
            18,
            14,
        ),
        "flaky panels (q = 0.8) and heavy noise": (
            [R(const(f"SELECT COUNT(*) FROM o WHERE s = {i}"), synth.daily, q=0.8) for i in range(10)],
            21,
            14,
        ),
    }
    rows: list[dict[str, Any]] = []
    md = _md_head("### Synthetic workloads (10-25 ad hoc one-offs a day)\n",
                  "| scenario | test days | recurring recall (min) | recall | recurring share | precision (mean) | "
                  "mean abs S err |")
    import tempfile

    for name, (items, days, min_train) in scenarios.items():
        adhoc = 80 if "busy" in name else 25 if "noise" in name else 10
        rows_ = synth.generate(items, days, adhoc_per_day=adhoc, seed=7)
        with tempfile.TemporaryDirectory() as tmp:
            log = Path(tmp) / "pg.log"
            log.write_text(synth.to_stderr(rows_))
            truth = Path(tmp) / "truth.csv"
            truth.write_text(synth.to_truth(rows_))
            statements, _ = read_log(log)
            res = backtest(statements, min_train=min_train, truth=load_truth(truth))
        s = _summary(res)
        rows.append({"scenario": name, "days": len(res), **s})
        md.append(
            f"| {name} | {len(res)} | {s['recurring_recall_min']:.3f} | {s['recall']:.3f} | "
            f"{s['recurring_share']:.3f} | {s['precision']:.3f} | {s['s_mean_abs_err']:.1%} |"
        )
    return rows, md + [""]


def weekly_volume() -> tuple[list[dict[str, Any]], list[str]]:
    """S on logs with a weekly pattern (issue 14): business-day dashboards, analysts who mostly work Monday
    to Friday, a Monday panel set; the last week of 5, each day predicted from the days before it, with the
    calendar-aware volume forecast and (side by side, same run) the flat one it replaces."""
    from tests.fixtures import predictor_synth as synth

    R, const = synth.Recurring, synth.const
    items = (
        [R(const(f"SELECT COUNT(*) FROM orders WHERE status = {i}"), synth.business) for i in range(30)]
        + [R(const(f"SELECT COUNT(*) FROM stock WHERE site = {i}"), synth.daily) for i in range(5)]
        + [R(const(f"SELECT SUM(amount) FROM sales WHERE region_id = {i}"), synth.weekly(0)) for i in range(10)]
    )
    import tempfile

    rows: list[dict[str, Any]] = []
    md = _md_head(
        "### Weekly pattern: S over the last week of a 5-week log (issue 14)\n",
        "30 business-day panels, 5 daily, 10 Monday-only; one-offs per day Mon-Sun 25/20/20/20/15/3/2 "
        "(binomial). Each of days 29-35 predicted from the days before it.\n",
        "| seed | mean abs S err (calendar) | mean abs S err (flat) | model chosen | per day: S est / flat / true |",
    )
    for seed in range(5):
        log_rows = synth.generate(items, 35, seed=seed, adhoc_by_weekday=(25, 20, 20, 20, 15, 3, 2))
        with tempfile.TemporaryDirectory() as tmp:
            log = Path(tmp) / "pg.log"
            log.write_text(synth.to_stderr(log_rows))
            statements, _ = read_log(log)
            res = backtest(statements, min_train=28)
        err = sum(abs(r.s_estimate - r.s_true) / r.s_true for r in res) / len(res)
        flat = sum(abs((r.s_flat or 0) - r.s_true) / r.s_true for r in res) / len(res)
        models = sorted({r.s_model for r in res})
        rows.append({"seed": seed, "s_mean_abs_err": round(err, 4), "s_mean_abs_err_flat": round(flat, 4),
                     "models": models, "days": [r.as_record() for r in res]})
        per_day = ", ".join(f"{r.s_estimate}/{r.s_flat}/{r.s_true}" for r in res)
        md.append(f"| {seed} | {err:.1%} | {flat:.1%} | {', '.join(models)} | {per_day} |")
    return rows, md + [""]


def plot(records: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2))
    for log, style in (("adult_bi_21d.log", "-"), ("adult_bi_21d.csv", ":")):
        days = [
            r
            for r in records
            if r.get("log") == log
            and r.get("mode") == "rolling"
            and r.get("keys") == "sqlglot"
            and "day" in r
        ]
        x = [r["day"][5:] for r in days]
        tag = "stderr" if log.endswith(".log") else "csvlog"
        axes[0].plot(
            x,
            [r["recurring_recall"] for r in days],
            "g" + style,
            marker="o",
            label=f"recurring recall ({tag})",
        )
        axes[0].plot(x, [r["recall"] for r in days], "b" + style, marker="s", label=f"recall ({tag})")
        axes[0].plot(x, [r["recurring_share"] for r in days], "k" + style, label=f"recurring share ({tag})")
        axes[0].plot(x, [r["precision"] for r in days], "r" + style, marker="^", label=f"precision ({tag})")
        if tag == "stderr":
            axes[1].plot(x, [r["s_true"] for r in days], "k-", marker="o", label="S true")
            axes[1].plot(x, [r["s_estimate"] for r in days], "b--", marker="s", label="S estimate")
            axes[1].fill_between(
                x,
                [0.85 * r["s_estimate"] for r in days],
                [1.15 * r["s_estimate"] for r in days],
                color="b",
                alpha=0.1,
                label="estimate +-15%",
            )
    axes[0].set_ylim(0.4, 1.02)
    axes[0].set_title("Adult BI log, days 15-21 (trained on the days before)")
    axes[0].legend(fontsize=7, loc="lower left")
    axes[1].set_title("Stream length S per day")
    axes[1].legend(fontsize=8)
    for ax in axes:
        ax.set_xlabel("day")
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data" / "querylogs")
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    md = ["# Predictor back-test\n", "Generated by `benchmarks/predictor_backtest.py`.\n"]
    records: list[dict[str, Any]] = []
    if (args.data / "adult_bi_21d.log").exists():
        rec, text = adult(args.data, _catalog())
        records += rec
        md += ["## Adult BI log (21 days)\n", *text]
        rows, text = sweep(args.data)
        records += [{"sweep": r} for r in rows]
        md += text
    else:
        md.append("(shared data absent: Adult back-test skipped)\n")
    rows, text = synthetic()
    records += [{"synthetic": r} for r in rows]
    md += ["## Generalisation\n", *text]
    rows, text = weekly_volume()
    records += [{"weekly_volume": r} for r in rows]
    md += text
    (args.out / "predictor_backtest.json").write_text(json.dumps(records, indent=1) + "\n")
    (args.out / "predictor_backtest.md").write_text("\n".join(md) + "\n")
    if any("day" in r for r in records):
        plot(records, args.out / "predictor_backtest.png")
    print("\n".join(md))
    return 0


if __name__ == "__main__":
    sys.exit(main())
