"""Wide schemas (issue 18): start-up time and peak memory of the proxy for a 150-table config (50 to 300
columns a table, mixed types) beside a 1-table config, and the planning cost of one statement on a
300-column table beside a 5-column table of the same catalog.

    python benchmarks/wide_schema.py [--starts 3] [--repeat 30] [--out benchmarks/results/wide_schema.json]

An embedded PostgreSQL is started in a temporary directory and holds the tables (no rows: start-up reads
no data). Each config starts a real `lapras-proxy serve` against it; "start-up" is the time from the
process start to its ready line (config loaded and checked, catalog database created or reused, engine
and ledger opened, port listening), "peak RSS" the process's VmHWM at that moment. Starts alternate
between the two configs (the first one of each creates its catalog database; later ones reuse it), and
the medians are quoted. Planning is measured in-process on the 151-table catalog with a fresh literal per
run (so no cache answers), alternating between the two tables; medians and their ratio.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

import serve  # noqa: E402


def _generator() -> Any:
    """tests/fixtures/wide_schema_config.py (the schema the lean test loads too)."""
    from tests.fixtures import wide_schema_config

    return wide_schema_config


W = _generator()


def start_once(config: Path, state: Path) -> tuple[float, float]:
    """(seconds to the ready line, peak RSS in MiB at that moment) of one `serve`."""
    proc, elapsed = serve.start(config, state)
    try:
        return elapsed, serve.peak_rss_mib(proc.pid)
    finally:
        serve.stop(proc)


def planning(config: Path, repeat: int) -> dict[str, Any]:
    """Median planning time of one statement on the 300-column table and on the 5-column table."""
    import parser as sqlparser
    from proxy.config import load_config

    t0 = time.perf_counter()
    catalog = load_config(config).catalog
    load_s = time.perf_counter() - t0
    planner = sqlparser.Planner(catalog)
    sql = ('SELECT "Col 3 (text)", COUNT(*), SUM("Col 1 (num)") FROM "{t}" '
           'WHERE "Col 0 (int)" BETWEEN 10 AND {hi} GROUP BY 1')
    times: dict[str, list[float]] = {"Wide_0": [], "Narrow": []}
    for i in range(repeat):
        for table in times:
            text = sql.format(t=table, hi=11 + i % 89)
            t = time.perf_counter()
            planner.plan(text)
            times[table].append(time.perf_counter() - t)
    wide, narrow = statistics.median(times["Wide_0"]), statistics.median(times["Narrow"])
    return {"config_load_s": load_s, "plan_300_cols_ms": wide * 1e3, "plan_5_cols_ms": narrow * 1e3,
            "ratio": wide / narrow}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--starts", type=int, default=3, help="starts of each config (alternating)")
    ap.add_argument("--repeat", type=int, default=30, help="plans of each statement")
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks/results/wide_schema.json")
    args = ap.parse_args()


    root = Path(tempfile.mkdtemp(prefix="lapras-wide-"))
    try:
        with serve.embedded_database(root / "pg", "wide") as dsn:
            wide = W.widths()
            t0 = time.perf_counter()
            W.create_tables(dsn, wide)
            print(f"created {len(wide)} tables, {sum(wide.values()):,} columns in {time.perf_counter() - t0:.1f} s",
                  file=sys.stderr)
            configs = {"150 tables": dict(wide), "1 table": {"Wide_0": wide["Wide_0"]}}
            paths = {}
            for label, tables in configs.items():
                path = root / f"{label.replace(' ', '_')}.toml"
                path.write_text(W.config_text(dsn, serve.free_port(), tables))
                paths[label] = path
            starts: dict[str, list[tuple[float, float]]] = {k: [] for k in configs}
            for _ in range(args.starts):
                for label in configs:
                    starts[label].append(start_once(paths[label], root / f"state-{label.replace(' ', '_')}"))
            plan = planning(paths["150 tables"], args.repeat)
    finally:
        shutil.rmtree(root, ignore_errors=True)

    result: dict[str, Any] = {"columns_150": sum(wide.values()), "starts": args.starts, "planning": plan}
    print(f"\nStart-up ({args.starts} starts each, alternating; first start creates the catalog database)\n")
    print("| config | columns | first start (s) | median start (s) | median peak RSS (MiB) |")
    print("|---|---:|---:|---:|---:|")
    for label, runs in starts.items():
        cols = sum(configs[label].values())
        first, med = runs[0][0], statistics.median(r[0] for r in runs)
        rss = statistics.median(r[1] for r in runs)
        result[label] = {"columns": cols, "first_start_s": first, "median_start_s": med, "median_rss_mib": rss,
                         "runs": runs}
        print(f"| {label} | {cols:,} | {first:.1f} | {med:.1f} | {rss:.0f} |")
    print(f"\nConfig load and check, 150 tables: {plan['config_load_s']:.2f} s\n")
    print(f"Planning one statement ({args.repeat} plans each, medians, alternating)\n")
    print("| table | columns | plan (ms) |\n|---|---:|---:|")
    print(f"| Wide_0 | 300 | {plan['plan_300_cols_ms']:.1f} |\n| Narrow | 5 | {plan['plan_5_cols_ms']:.1f} |")
    print(f"\nratio 300 / 5 columns: {plan['ratio']:.2f}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
