"""Proxy latency and throughput: pass-through metadata query (proxy vs direct) and a repeated DP query.

Starts an embedded PostgreSQL (Adult table: ../shared/data when present, else demo rows) and the real
`lapras-proxy serve` process in front of it, then for 1, 8 and 32 concurrent asyncpg clients measures
per-query latency (p50/p99) and throughput of:

  - metadata via proxy:   a catalog query relayed to the schema-only catalog database
  - metadata direct:      the same query straight to that PostgreSQL database (the baseline)
  - metadata byte relay:  the same query through a bare byte relay (asyncio, TCP in, the database's
                          socket out, no parsing): the floor any relaying proxy pays on this machine
  - repeated DP query:    one COUNT answered from released state after its first run (no new noise)

Usage: python benchmarks/proxy_latency.py [--queries 2000] [--out benchmarks/results]
Writes proxy_latency.json and proxy_latency.md there and prints the table.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import serve  # noqa: E402  (benchmarks/serve.py, beside this script)

METADATA_SQL = ("SELECT a.attname, a.atttypid FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_class c "
                "ON c.oid = a.attrelid WHERE c.relname = $1 AND a.attnum = $2")
METADATA_ARGS = ("adult", 1)
DP_SQL = "SELECT COUNT(*) FROM adult WHERE age > $1"
DP_ARGS = (40,)
CLIENT_COUNTS = (1, 8, 32)


BYTE_RELAY = """
import asyncio, sys
async def pipe(r, w):
    try:
        while data := await r.read(65536):
            w.write(data)
    finally:
        w.close()
async def handle(cr, cw):
    host, port = sys.argv[1], int(sys.argv[2])
    br, bw = await (asyncio.open_unix_connection(f"{host}/.s.PGSQL.{port}") if host.startswith("/")
                    else asyncio.open_connection(host, port))
    await asyncio.gather(pipe(cr, bw), pipe(br, cw))
async def main():
    server = await asyncio.start_server(handle, "127.0.0.1", int(sys.argv[3]))
    print("ready", flush=True)
    await server.serve_forever()
try:
    import uvloop
    uvloop.install()
except ImportError:
    pass
asyncio.run(main())
"""
"""A bare relay of bytes (argv: database host or socket directory, its port, the port to listen on)."""


def _percentile(sorted_ms: list[float], q: float) -> float:
    if not sorted_ms:
        return float("nan")
    i = min(len(sorted_ms) - 1, max(0, round(q * (len(sorted_ms) - 1))))
    return sorted_ms[i]


async def _measure(connect: Any, sql: str, args: tuple, clients: int, total: int) -> dict[str, Any]:
    """Run `total` executions of one prepared statement spread over `clients` connections."""
    conns = [await connect() for _ in range(clients)]
    per_client = max(1, total // clients)
    lat: list[float] = []
    try:
        stmts = [await c.prepare(sql) for c in conns]
        for s in stmts:                      # warm-up: connection, statement cache, released answer
            for _ in range(20):
                await s.fetchval(*args)

        async def worker(stmt: Any) -> None:
            perf = time.perf_counter
            for _ in range(per_client):
                t0 = perf()
                await stmt.fetchval(*args)
                lat.append(perf() - t0)

        t0 = time.perf_counter()
        await asyncio.gather(*(worker(s) for s in stmts))
        wall = time.perf_counter() - t0
    finally:
        for c in conns:
            await c.close()
    ms = sorted(x * 1000 for x in lat)
    return {"clients": clients, "queries": len(ms), "p50_ms": _percentile(ms, 0.5),
            "p99_ms": _percentile(ms, 0.99), "mean_ms": statistics.fmean(ms), "qps": len(ms) / wall}


async def _run(proxy_port: int, catalog_dsn: str, total: int, relay_port: int) -> list[dict[str, Any]]:
    import asyncpg
    from psycopg.conninfo import conninfo_to_dict

    info = conninfo_to_dict(catalog_dsn)

    def via_proxy() -> Any:
        return asyncpg.connect(host="127.0.0.1", port=proxy_port, user="analyst", password="lapras",
                               database="adult", ssl=False)

    def direct() -> Any:
        return asyncpg.connect(host=info.get("host"), port=int(info.get("port") or 5432), user=info.get("user"),
                               password=info.get("password"), database=info.get("dbname"), ssl=False)

    def via_relay() -> Any:
        return asyncpg.connect(host="127.0.0.1", port=relay_port, user=info.get("user"),
                               password=info.get("password"), database=info.get("dbname"), ssl=False)

    rows: list[dict[str, Any]] = []
    for clients in CLIENT_COUNTS:
        n = max(total, 50 * clients)
        for name, connect, sql, args in (("metadata via proxy", via_proxy, METADATA_SQL, METADATA_ARGS),
                                         ("metadata direct", direct, METADATA_SQL, METADATA_ARGS),
                                         ("metadata byte relay", via_relay, METADATA_SQL, METADATA_ARGS),
                                         ("repeated DP query", via_proxy, DP_SQL, DP_ARGS)):
            r = await _measure(connect, sql, args, clients, n)
            r["workload"] = name
            rows.append(r)
            print(f"  {name:<20} {clients:>3} clients  p50 {r['p50_ms']:.3f} ms  p99 {r['p99_ms']:.3f} ms  "
                  f"{r['qps']:,.0f} q/s", flush=True)
    return rows


def _table(rows: list[dict[str, Any]]) -> str:
    lines = ["| workload | clients | queries | p50 ms | p99 ms | mean ms | queries/s |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['workload']} | {r['clients']} | {r['queries']} | {r['p50_ms']:.3f} | "
                     f"{r['p99_ms']:.3f} | {r['mean_ms']:.3f} | {r['qps']:,.0f} |")
    return "\n".join(lines)


def _overheads(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for clients in CLIENT_COUNTS:
        p = next(r for r in rows if r["workload"] == "metadata via proxy" and r["clients"] == clients)
        d = next(r for r in rows if r["workload"] == "metadata direct" and r["clients"] == clients)
        b = next(r for r in rows if r["workload"] == "metadata byte relay" and r["clients"] == clients)
        out.append({"clients": clients, "passthrough_overhead_p50_ms": p["p50_ms"] - d["p50_ms"],
                    "passthrough_overhead_p99_ms": p["p99_ms"] - d["p99_ms"],
                    "byte_relay_overhead_p50_ms": b["p50_ms"] - d["p50_ms"]})
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--queries", type=int, default=2000, help="queries per workload and client count")
    ap.add_argument("--out", default=str(REPO / "benchmarks" / "results"))
    ap.add_argument("--workers", type=int, default=1,
                    help="proxy processes sharing the port (lapras-proxy serve --workers); default 1")
    args = ap.parse_args(argv)
    try:
        import uvloop

        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    except ImportError:
        pass

    from proxy.upstream.embedded import EmbeddedPostgres

    root = Path(tempfile.mkdtemp(prefix="lapras-bench-"))
    pg = EmbeddedPostgres(root / "pg")
    proc: subprocess.Popen[str] | None = None
    relay: subprocess.Popen[str] | None = None
    try:
        pg.start()
        csv = REPO.parent / "shared" / "data" / "adult.csv"
        cfg = serve.shipped_tables(pg, csv if csv.exists() else None)
        port = serve.free_port()
        (root / "config.toml").write_text(serve.config_text(pg.dsn("adult"), port))
        proc = subprocess.Popen([sys.executable, "-m", "proxy.ops.cli", "serve", "--config", str(root / "config.toml"),
                                 "--state-dir", str(root / "state"), "--workers", str(args.workers)], cwd=REPO, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        assert proc.stdout is not None
        deadline = time.monotonic() + 120
        seen: list[str] = []
        for line in proc.stdout:
            seen.append(line)
            if "ready" in line:
                break
            if time.monotonic() > deadline:
                raise RuntimeError("the proxy did not start:\n" + "".join(seen))
        else:
            raise RuntimeError("the proxy exited during start-up:\n" + "".join(seen))
        from proxy.catalog.relay import ensure_shadow
        from proxy.ops.app import CATALOG_DB_SUFFIX

        catalog_dsn = asyncio.run(ensure_shadow(pg.dsn(), cfg.server.database + CATALOG_DB_SUFFIX, cfg.catalog))
        print(f"proxy on 127.0.0.1:{port}, PostgreSQL {pg.dsn()}; {args.queries} queries per cell")
        from psycopg.conninfo import conninfo_to_dict

        cat = conninfo_to_dict(catalog_dsn)
        relay_port = serve.free_port()
        relay = subprocess.Popen([sys.executable, "-c", BYTE_RELAY, str(cat.get("host")), str(cat.get("port") or 5432),
                                  str(relay_port)], stdout=subprocess.PIPE, text=True)
        assert relay.stdout is not None and "ready" in relay.stdout.readline()
        rows = asyncio.run(_run(port, catalog_dsn, args.queries, relay_port))
    finally:
        if relay is not None:
            relay.kill()
            relay.wait(10)
        if proc is not None and proc.poll() is None:
            serve.stop(proc)
        pg.destroy()
        shutil.rmtree(root, ignore_errors=True)

    over = _overheads(rows)
    dp8 = next(r for r in rows if r["workload"] == "repeated DP query" and r["clients"] == 8)
    targets = {
        "passthrough_overhead_p50_ms_under_0.5": all(o["passthrough_overhead_p50_ms"] < 0.5 for o in over
                                                     if o["clients"] == 1),
        "dp_p50_ms_under_1": all(r["p50_ms"] < 1.0 for r in rows
                                 if r["workload"] == "repeated DP query" and r["clients"] == 1),
        "dp_qps_8_clients_at_least_1500": dp8["qps"] >= 1500,
    }
    load = os.getloadavg()
    result = {"machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                          "platform": platform.platform(), "load_average_1_5_15": load},
              "queries_per_cell": args.queries, "proxy_workers": args.workers, "metadata_sql": METADATA_SQL, "dp_sql": DP_SQL,
              "rows": rows, "passthrough_overhead": over, "targets_met": targets,
              "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = "proxy_latency" if args.workers == 1 else f"proxy_latency_workers{args.workers}"
    (out / f"{stem}.json").write_text(json.dumps(result, indent=2) + "\n")
    md = ["# Proxy latency", "", f"{os.cpu_count()} CPUs, Python {platform.python_version()}, "
          f"{args.queries} queries per cell, {args.workers} proxy process(es), asyncpg clients (prepared statements, binary results); "
          f"load average at the end {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f}.", "",
          _table(rows), "", "| clients | pass-through overhead p50 ms | p99 ms | bare byte relay's p50 ms |",
          "|---:|---:|---:|---:|"]
    md += [f"| {o['clients']} | {o['passthrough_overhead_p50_ms']:.3f} | {o['passthrough_overhead_p99_ms']:.3f} | "
           f"{o['byte_relay_overhead_p50_ms']:.3f} |" for o in over]
    md += ["", "Targets: " + ", ".join(f"{k}: {'met' if v else 'NOT met'}" for k, v in targets.items()), ""]
    (out / f"{stem}.md").write_text("\n".join(md))
    print()
    print("\n".join(md))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
