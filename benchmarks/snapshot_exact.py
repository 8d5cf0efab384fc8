"""Exact-answer time with the per-epoch marginal snapshot on and off (`[lapras] snapshot`).

Starts the dev cluster (one PostgreSQL, or N shards) with the generated `events` table, then times the
engine's exact-answer step for a dashboard's fresh statements, one statement at a time, side by side:
`live` (one aggregate pushed down per statement: a table scan) against `epoch` (the marginal's histogram
read once per epoch, then a dot product in the proxy).

    python benchmarks/snapshot_exact.py [--rows 1000000] [--shards 0] [--statements 40] [--json PATH]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def _scale_module() -> Any:
    """benchmarks/scale.py's events declaration and dashboard statements (one definition of the workload)."""
    spec = importlib.util.spec_from_file_location("scale_bench", REPO / "benchmarks" / "scale.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--shards", type=int, default=0)
    ap.add_argument("--statements", type=int, default=40)
    ap.add_argument("--state", type=Path, default=None, help="dev cluster state dir (default: a temp dir)")
    ap.add_argument("--keep", action="store_true", help="leave the cluster running")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()

    from lapras.exact import PostgresExactSource
    from lapras.snapshot import SnapshotExactSource
    from parser import plan_query
    from proxy.config import load_config
    from proxy.devcluster.cluster import DevCluster

    scale = _scale_module()
    state = args.state or Path(tempfile.mkdtemp(prefix="lapras-snap-"))
    cluster = DevCluster(state)
    adult = load_config(REPO / "config.toml").catalog.table("adult")
    t0 = time.monotonic()
    dsn = cluster.start(args.shards, args.rows, [adult] if adult is not None else [])
    print(f"cluster of {args.shards} shard(s), {args.rows:,} events rows, ready in {time.monotonic() - t0:.0f} s")
    try:
        work = Path(tempfile.mkdtemp(prefix="lapras-snapcfg-"))
        (work / "config.toml").write_text(scale.config_text(dsn, 0))
        cfg = load_config(work / "config.toml")
        events = cfg.catalog.table("events")
        assert events is not None
        plans = [plan_query(s, cfg.catalog) for s in scale.fresh_statements(args.statements)]
        live = PostgresExactSource(dsn)
        snap = SnapshotExactSource(PostgresExactSource(dsn))
        snap.new_epoch(1)
        live.answers(events, plans[0].queries)  # warm the database's caches for both
        live_ms, snap_ms, first_ms = [], [], None
        for i, plan in enumerate(plans):
            t = time.perf_counter()
            a = live.answers(events, plan.queries)
            live_ms.append((time.perf_counter() - t) * 1e3)
            t = time.perf_counter()
            b = snap.answers(events, plan.queries)
            dt = (time.perf_counter() - t) * 1e3
            if i == 0:
                first_ms = dt  # the marginal's one read in this epoch
            else:
                snap_ms.append(dt)
            assert all(abs(x - y) <= 1e-6 * max(1.0, abs(x)) for x, y in zip(a, b, strict=True)), (a, b)
        rec = {"rows": args.rows, "shards": args.shards, "statements": len(plans),
               "live_p50_ms": round(statistics.median(live_ms), 3),
               "snapshot_first_ms": round(first_ms or 0.0, 2),
               "snapshot_hit_p50_ms": round(statistics.median(snap_ms), 3),
               "marginal_reads": snap.scans, "snapshot_hits": snap.hits}
        rec["live_over_hit"] = round(rec["live_p50_ms"] / rec["snapshot_hit_p50_ms"], 1)
        print("| rows | shards | live p50 (ms) | snapshot: first use (ms) | snapshot: later p50 (ms) | live / later |")
        print("|---|---|---|---|---|---|")
        print(f"| {args.rows:,} | {args.shards} | {rec['live_p50_ms']:.2f} | {rec['snapshot_first_ms']:.1f} | "
              f"{rec['snapshot_hit_p50_ms']:.3f} | {rec['live_over_hit']:.0f}x |")
        print(f"answers identical on all {len(plans)} statements; marginal reads: {snap.scans}, hits: {snap.hits}")
        if args.json is not None:
            args.json.parent.mkdir(parents=True, exist_ok=True)
            args.json.write_text(json.dumps(rec, indent=1) + "\n")
        live.close()
        snap.close()
    finally:
        if not args.keep:
            cluster.stop(remove=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
