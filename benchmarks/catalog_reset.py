"""Cost of resetting a pooled catalog backend between clients (DISCARD ALL, then the statement is prepared
again), measured side by side with a backend that stays with its client.

Starts its own embedded PostgreSQL with the shadow catalog database, then relays one metadata query
through a one-backend pool, alternating blocks: the same client every time (no reset) and two clients
taking turns (a reset before every statement). Prints medians per statement and their ratio.

Usage: python benchmarks/catalog_reset.py [--rounds 20] [--block 200]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

SQL = ("SELECT a.attname, a.atttypid FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_class c "
       "ON c.oid = a.attrelid WHERE c.relname = 'adult' AND a.attnum = 1")


async def measure(dsn: str, rounds: int, block: int) -> dict[str, list[float]]:
    from psycopg.conninfo import conninfo_to_dict

    from proxy.catalog.pgclient import BackendPool

    info = {k: str(v) for k, v in conninfo_to_dict(dsn).items() if v is not None}
    pool = BackendPool(info, {"client_encoding": "UTF8"}, size=1)
    times: dict[str, list[float]] = {"same client": [], "clients alternate": []}
    try:
        for r in range(rounds):
            for name in (list(times) if r % 2 == 0 else list(reversed(times))):
                for i in range(block):
                    owner = 1 if name == "same client" else 1 + i % 2
                    t0 = time.perf_counter()
                    conn = await pool.acquire(owner)
                    try:
                        await conn.relay(SQL, [], [], [], [], False)
                    finally:
                        pool.release(conn)
                    times[name].append((time.perf_counter() - t0) * 1e3)
    finally:
        await pool.close()
    return times


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--block", type=int, default=200)
    args = ap.parse_args()

    from proxy.catalog.relay import ensure_shadow
    from proxy.config import load_config
    from proxy.upstream.embedded import EmbeddedPostgres

    root = Path(tempfile.mkdtemp(prefix="lapras-reset-"))
    pg = EmbeddedPostgres(root / "pg")
    try:
        pg.start()
        cfg = load_config(REPO / "config.toml")
        dsn = asyncio.run(ensure_shadow(pg.dsn(), "bench_lapras_catalog", cfg.catalog))
        times = asyncio.run(measure(dsn, args.rounds, args.block))
    finally:
        pg.destroy()
    print(f"{args.rounds} rounds of {args.block} statements per case, alternating, one backend")
    print("| case | statements | p50 ms | p90 ms |")
    print("|---|---:|---:|---:|")
    for name, t in times.items():
        q = statistics.quantiles(t, n=10)
        print(f"| {name} | {len(t)} | {statistics.median(t):.3f} | {q[8]:.3f} |")
    same, alt = (statistics.median(t) for t in times.values())
    print(f"reset cost per client switch: {alt - same:.3f} ms p50 (ratio {alt / same:.2f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
