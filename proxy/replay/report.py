"""Summaries of a replay: counts by outcome, latency percentiles, standard errors, budget burn; table,
JSON and a PNG chart."""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from .runner import OUTCOMES, ReplayResult


def _percentiles(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"p50": None, "p90": None, "p99": None, "max": None}
    arr = np.asarray(values, dtype=float)
    p50, p90, p99 = np.percentile(arr, [50, 90, 99])
    return {"p50": float(p50), "p90": float(p90), "p99": float(p99), "max": float(arr.max())}


def summarize(result: ReplayResult) -> dict[str, Any]:
    """Everything the table, the JSON and the tests look at, as plain data."""
    counts = Counter(r.outcome for r in result.results)
    refused = Counter(r.sqlstate or "?" for r in result.results if r.outcome == "refused")
    errors = Counter(r.sqlstate or "?" for r in result.results if r.outcome == "error")
    query_counts = Counter(o for r in result.results for o in r.query_outcomes)
    latencies = [r.latency_ms for r in result.results]
    by_outcome = {o: _percentiles([r.latency_ms for r in result.results if r.outcome == o])
                  for o in OUTCOMES if counts.get(o)}
    stderrs = [s for r in result.results for s in r.stderrs if np.isfinite(s)]
    se = _percentiles(stderrs)
    se["count"] = len(stderrs)
    se["mean"] = float(np.mean(stderrs)) if stderrs else None
    start = result.budget[0][1] if result.budget else None
    end = result.budget[-1][1] if result.budget else None
    n = len(result.results)
    return {
        "statements": len(result.statements),
        "finished": n,
        "clients": result.clients,
        "speed": result.speed,
        "wall_s": round(result.wall_s, 3),
        "throughput_per_s": round(n / result.wall_s, 2) if result.wall_s > 0 else None,
        "outcomes": {o: counts.get(o, 0) for o in OUTCOMES},
        "query_outcomes": dict(sorted(query_counts.items())),
        "refused_by_sqlstate": dict(sorted(refused.items())),
        "errors_by_sqlstate": dict(sorted(errors.items())),
        "latency_ms": _percentiles(latencies),
        "latency_ms_by_outcome": by_outcome,
        "stderr": se,
        "budget": {"start": start, "end": end,
                   "burned": (start - end) if start is not None and end is not None else None,
                   "samples": [[pos, value] for pos, value in result.budget]},
        "aborted": result.aborted,
    }


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def format_table(summary: dict[str, Any]) -> str:
    """A plain-text report for the terminal."""
    n = summary["finished"] or 1
    lines = [f"replayed {summary['finished']} of {summary['statements']} statements with "
             f"{summary['clients']} clients in {summary['wall_s']:.1f} s "
             f"({summary['throughput_per_s']} statements/s, speed {summary['speed']:g})", ""]
    lines.append(f"{'outcome':<10} {'count':>7} {'share':>7} {'p50 ms':>9} {'p90 ms':>9} {'p99 ms':>9}")
    for outcome, count in summary["outcomes"].items():
        lat = summary["latency_ms_by_outcome"].get(outcome, {})
        lines.append(f"{outcome:<10} {count:>7} {100 * count / n:>6.1f}% {_ms(lat.get('p50')):>9} "
                     f"{_ms(lat.get('p90')):>9} {_ms(lat.get('p99')):>9}")
    lat = summary["latency_ms"]
    lines.append(f"{'all':<10} {summary['finished']:>7} {'100.0%':>7} {_ms(lat['p50']):>9} "
                 f"{_ms(lat['p90']):>9} {_ms(lat['p99']):>9}")
    if summary["query_outcomes"]:
        parts = ", ".join(f"{k} {v}" for k, v in summary["query_outcomes"].items())
        lines.append(f"\nprovenance reported by the proxy: {parts}")
    if summary["refused_by_sqlstate"]:
        parts = ", ".join(f"{k} x{v}" for k, v in summary["refused_by_sqlstate"].items())
        lines.append(f"refused by SQLSTATE: {parts}")
    if summary["errors_by_sqlstate"]:
        parts = ", ".join(f"{k} x{v}" for k, v in summary["errors_by_sqlstate"].items())
        lines.append(f"errors by SQLSTATE: {parts}")
    se = summary["stderr"]
    if se["count"]:
        lines.append(f"standard errors ({se['count']} answers): p50 {se['p50']:.3g}, p90 {se['p90']:.3g}, "
                     f"p99 {se['p99']:.3g}, max {se['max']:.3g}, mean {se['mean']:.3g}")
    b = summary["budget"]
    if b["start"] is not None:
        lines.append(f"budget remaining: {b['start']:.6g} at start, {b['end']:.6g} at end "
                     f"(burned {b['burned']:.6g})")
    else:
        lines.append("budget: SHOW lapras.budget gave no number")
    if summary["aborted"]:
        lines.append(f"ABORTED: {summary['aborted']}")
    return "\n".join(lines)


def write_json(summary: dict[str, Any], result: ReplayResult, path: str) -> None:
    """The summary plus one compact record per statement (outcome, SQLSTATE, latency, stderrs)."""
    doc = dict(summary)
    doc["per_statement"] = [
        {"i": r.index, "outcome": r.outcome, "sqlstate": r.sqlstate, "latency_ms": round(r.latency_ms, 3),
         "stderr": r.stderrs or None, "client": r.client}
        for r in sorted(result.results, key=lambda r: r.index)]
    text = json.dumps(doc, indent=1, default=str)
    if path == "-":
        sys.stdout.write(text + "\n")
    else:
        Path(path).write_text(text + "\n", encoding="utf-8")


_COLOURS = {"answered": "tab:red", "from_p": "tab:green", "free": "tab:blue", "refused": "tab:gray",
            "error": "black"}


def write_chart(result: ReplayResult, path: str) -> None:
    """Budget remaining and cumulative outcomes over the stream, and the latency histogram, in one PNG."""
    import matplotlib  # heavy (about half a second): only a chart needs it

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # after use("Agg"): no display needed

    fig, (ax_budget, ax_outcomes, ax_latency) = plt.subplots(1, 3, figsize=(15, 4.2))
    if result.budget:
        xs, ys = zip(*result.budget, strict=True)
        ax_budget.step(xs, ys, where="post", color="tab:purple")
    ax_budget.set_xlabel("statements finished")
    ax_budget.set_ylabel("budget remaining")
    ax_budget.set_title("Budget burn (SHOW lapras.budget)")
    ax_budget.set_ylim(bottom=0)

    ordered = sorted(result.results, key=lambda r: r.index)
    for outcome in OUTCOMES:
        cum = np.cumsum([r.outcome == outcome for r in ordered])
        if cum.size and cum[-1]:
            ax_outcomes.plot(np.arange(1, cum.size + 1), cum, label=outcome, color=_COLOURS[outcome])
    ax_outcomes.set_xlabel("stream position")
    ax_outcomes.set_ylabel("statements")
    ax_outcomes.set_title("Outcomes along the stream (cumulative)")
    ax_outcomes.legend(loc="upper left")

    lat = np.asarray([r.latency_ms for r in result.results if r.latency_ms > 0], dtype=float)
    if lat.size:
        bins = np.logspace(np.log10(lat.min()), np.log10(lat.max() * 1.01 + 1e-9), 40)
        ax_latency.hist(lat, bins=bins, color="tab:orange")
        ax_latency.set_xscale("log")
        for q, style in ((50, "-"), (99, "--")):
            v = float(np.percentile(lat, q))
            ax_latency.axvline(v, color="k", linestyle=style, linewidth=1, label=f"p{q} {v:.1f} ms")
        ax_latency.legend()
    ax_latency.set_xlabel("latency (ms)")
    ax_latency.set_ylabel("statements")
    ax_latency.set_title("Latency")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
