"""Issue 18's BI corpus (tests/fixtures/bi_corpus/): the share of statements answered, per statement shape
and per tool, through a real proxy, compared with PostgreSQL's exact answers.

    python benchmarks/corpus_share.py [--out benchmarks/results/corpus_share]

Starts an embedded PostgreSQL in a temporary directory, fills the corpus table (20,000 generated rows),
starts `lapras-proxy serve` on the corpus config (epsilon = 1, delta = 1e-6, S = 300) and sends every
statement over psycopg. Per statement: answered within its stated error (every COUNT/SUM output within 5
stated standard errors of PostgreSQL's answer), answered but off, value list answered, refused (with its
SQLSTATE). Prints a table per shape and per tool, the refusals grouped by reason (what the other parts of
#18 still have to cover), and writes a PNG and a JSON next to --out.
"""

from __future__ import annotations

import argparse
import collections
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

import serve  # noqa: E402


def _corpus() -> Any:
    from tests.fixtures import bi_corpus

    return bi_corpus


def run(corpus: Any, root: Path) -> list[Any]:
    import psycopg

    import parser as sqlparser
    from proxy.config import load_config

    with serve.embedded_database(root / "pg", "bicorpus") as dsn:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(corpus.ddl())
            conn.execute(corpus.fill_sql())
        port = serve_port()
        cfg = root / "config.toml"
        cfg.write_text(corpus.config_toml(dsn, port))
        planner = sqlparser.Planner(load_config(cfg).catalog)
        proc, _ = serve.start(cfg, root / "state")
        try:
            results = []
            with psycopg.connect(f"host=127.0.0.1 port={port} user=analyst dbname=bi sslmode=disable",
                                 autocommit=True) as conn, \
                    psycopg.connect(dsn + " options='-c TimeZone=UTC'", autocommit=True) as exact:
                conn.execute("SET lapras.show_stderr = on")
                for stmt in corpus.CORPUS:
                    t0 = time.perf_counter()
                    r = corpus.run_one(stmt, conn, exact, planner)
                    r.seconds = time.perf_counter() - t0
                    results.append(r)
            return results
        finally:
            serve.stop(proc)


def serve_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def outcome(r: Any) -> str:
    if r.outcome == "answered":
        return "answered" if r.within_error else "answered, off"
    if r.outcome == "values":
        return "value list" if not r.misses else "value list, incomplete"
    return "refused as classified" if r.sqlstate == r.stmt.expect else "refused"


def table(results: list[Any], key: str) -> list[tuple[str, int, int, int, int]]:
    """(group, statements, aggregates, aggregates answered within error, value lists answered)."""
    rows = []
    for group in sorted({getattr(r.stmt, key) for r in results}):
        rs = [r for r in results if getattr(r.stmt, key) == group]
        aggs = [r for r in rs if r.stmt.aggregate]
        rows.append((group, len(rs), len(aggs), sum(r.within_error for r in aggs),
                     sum(outcome(r) == "value list" for r in rs if r.stmt.expect == "values")))
    return rows


def report(results: list[Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in ("shape", "tool"):
        rows = table(results, key)
        print(f"\nBy {key}\n\n| {key} | statements | aggregates | answered within error | share | "
              "value lists answered |\n|---|---:|---:|---:|---:|---:|")
        for group, n, aggs, ok, vals in rows:
            share = f"{ok / aggs:.0%}" if aggs else "-"
            vl = sum(1 for r in results if getattr(r.stmt, key) == group and r.stmt.expect == "values")
            print(f"| {group} | {n} | {aggs} | {ok} | {share} | {f'{vals}/{vl}' if vl else '-'} |")
        out[key] = [dict(zip(("group", "statements", "aggregates", "within_error", "values_answered"), r,
                             strict=True)) for r in rows]
    aggs = [r for r in results if r.stmt.aggregate]
    ok = sum(r.within_error for r in aggs)
    checked = sum(r.checked for r in aggs)
    print(f"\nAll: {len(results)} statements, {len(aggs)} aggregates, {ok} answered within their stated error "
          f"({ok / len(aggs):.1%}); {checked} outputs compared with PostgreSQL")
    refused = collections.Counter((r.sqlstate, _reason(r.message)) for r in results
                                  if r.outcome == "refused" and r.stmt.expect in ("answer", "values"))
    print("\nAggregates and value lists refused, by reason\n\n| SQLSTATE | reason | statements |\n|---|---|---:|")
    for (state, reason), n in refused.most_common():
        print(f"| {state} | {reason} | {n} |")
    off = [r for r in aggs if r.outcome == "answered" and r.misses]
    for r in off:
        print(f"answered but off: {r.stmt.tool} {r.stmt.shape}: {r.misses[0]}")
    slow = sorted(results, key=lambda r: -r.seconds)[:5]
    print("\nSlowest statements (s, through the proxy):")
    for r in slow:
        print(f"  {r.seconds:.2f}  {r.stmt.tool} {r.stmt.shape}: {r.stmt.sql[:100]}")
    out.update(statements=len(results), aggregates=len(aggs), within_error=ok, checked=checked,
               refused={f"{s} {m}": n for (s, m), n in refused.items()},
               seconds={"total": sum(r.seconds for r in results), "median": sorted(r.seconds for r in results)
                        [len(results) // 2]})
    return out


def _reason(message: str) -> str:
    """The refusal's message without the names and literals of the statement."""
    text = message.split(" is not supported")[0] if " is not supported" in message else message
    for marker in ("GROUP BY expression part", "expression", "MIN of", "MAX of", "column", "comparison",
                   "permission denied: a list of the values"):
        if text.startswith(marker) or marker in text[:40]:
            return marker
    return text[:60]


def plot(results: list[Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(13, 5.5), gridspec_kw={"width_ratios": [3, 1]})
    kinds = ["answered", "value list", "refused as classified", "refused", "answered, off",
             "value list, incomplete"]
    colors = {"answered": "#2a9d8f", "value list": "#8ab17d", "refused as classified": "#adb5bd",
              "refused": "#e76f51", "answered, off": "#6d597a", "value list, incomplete": "#b5838d"}
    for ax, key in zip(axes, ("shape", "tool"), strict=True):
        groups = sorted({getattr(r.stmt, key) for r in results})
        bottom = [0] * len(groups)
        for kind in kinds:
            counts = [sum(1 for r in results if getattr(r.stmt, key) == g and outcome(r) == kind) for g in groups]
            if any(counts):
                ax.barh(groups, counts, left=bottom, color=colors[kind], label=kind)
                bottom = [b + c for b, c in zip(bottom, counts, strict=True)]
        ax.set_xlabel("statements")
        ax.set_title(f"by {key}")
        ax.invert_yaxis()
    axes[0].legend(loc="lower right", fontsize=8)
    fig.suptitle("Issue 18 BI corpus through the proxy (answered = every COUNT/SUM within 5 stated stderrs)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks/results/corpus_share",
                    help="prefix of the .json and .png written")
    args = ap.parse_args()
    corpus = _corpus()
    root = Path(tempfile.mkdtemp(prefix="lapras-corpus-"))
    try:
        results = run(corpus, root)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    summary = report(results)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps(summary, indent=1))
    plot(results, args.out.with_suffix(".png"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
