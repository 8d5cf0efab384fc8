"""What a relayed catalog query costs over going straight to PostgreSQL, before and after a change.

One client (asyncpg, a prepared pg_attribute/pg_class lookup with two parameters, binary results), one
embedded PostgreSQL, measured in rounds that interleave:

  - direct:        straight to the schema-only catalog database (Unix socket): the baseline
  - byte relay:    through a bare asyncio byte relay (TCP in, the database's socket out, no parsing): what any
                   relaying process pays on this machine, the pass-through floor
  - proxy:         through `lapras-proxy serve` of this checkout
  - baseline:      (with --baseline DIR) through `lapras-proxy serve` of another checkout, e.g. the commit
                   before a change (`git worktree add /tmp/before HEAD~3`), on the same database

Per round and path (each round starting with the next path): p50 of --queries statements after 20 of
warm-up, and the proxy processes' CPU per
statement (user + system, from /proc). The summary is the median over rounds of each path's p50, and each
path's overhead over direct. Interleaving rounds puts every path under the same machine load; on a busy
machine take more rounds.

Usage: python benchmarks/catalog_overhead.py [--rounds 5] [--queries 2000] [--baseline DIR] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
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
sys.path.insert(0, str(REPO / "benchmarks"))

import proxy_latency as pl  # noqa: E402  (the latency benchmark's set-up, relay and measurement)
import serve  # noqa: E402


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process (every thread)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _start_proxy(repo: Path, config: Path, state: Path) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-m", "proxy.ops.cli", "serve", "--config", str(config),
                             "--state-dir", str(state)], cwd=repo, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env={**os.environ, "PYTHONPATH": str(repo)})
    assert proc.stdout is not None
    seen: list[str] = []
    deadline = time.monotonic() + 180
    for line in proc.stdout:
        seen.append(line)
        if "ready" in line:
            return proc
        if time.monotonic() > deadline:
            break
    proc.kill()
    raise RuntimeError(f"the proxy of {repo} did not start:\n" + "".join(seen))


async def _rounds(paths: dict[str, tuple[Any, int | None]], rounds: int, queries: int) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {name: [] for name in paths}
    await asyncio.sleep(3)   # the proxies' start-up work in the background (P's release) settles
    order = list(paths.items())
    for r in range(rounds):
        # Each round starts with another path, so that no path always follows the same one.
        for name, (connect, pid) in order[r % len(order):] + order[:r % len(order)]:
            c0 = _cpu_s(pid) if pid else 0.0
            m = await pl._measure(connect, pl.METADATA_SQL, pl.METADATA_ARGS, 1, queries)
            if pid:
                m["cpu_us_per_statement"] = (_cpu_s(pid) - c0) / (queries + 20) * 1e6
            out[name].append(m)
            cpu = f"  cpu {m['cpu_us_per_statement']:.0f} us/statement" if pid else ""
            print(f"  round {r}  {name:<11} p50 {m['p50_ms']:.3f} ms  p99 {m['p99_ms']:.3f} ms{cpu}", flush=True)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--queries", type=int, default=2000, help="statements per path and round")
    ap.add_argument("--baseline", type=Path, help="another checkout whose proxy is measured alongside")
    ap.add_argument("--out", type=Path, help="write the figures as JSON")
    args = ap.parse_args(argv)
    import uvloop

    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    import asyncpg
    from psycopg.conninfo import conninfo_to_dict

    from proxy.catalog.relay import ensure_shadow
    from proxy.ops.app import CATALOG_DB_SUFFIX
    from proxy.upstream.embedded import EmbeddedPostgres

    root = Path(tempfile.mkdtemp(prefix="lapras-catalog-overhead-"))
    pg = EmbeddedPostgres(root / "pg")
    procs: list[subprocess.Popen[str]] = []
    try:
        pg.start()
        import psycopg

        cfg = serve.shipped_tables(pg)
        ports: dict[str, int] = {}
        pids: dict[str, int] = {}
        for name, repo in (("proxy", REPO), ("baseline", args.baseline)):
            if repo is None:
                continue
            ports[name] = serve.free_port()
            config = root / f"{name}.toml"
            config.write_text(serve.config_text(pg.dsn("adult"), ports[name]))
            procs.append(_start_proxy(repo.resolve(), config, root / f"state-{name}"))
            pids[name] = procs[-1].pid
        for attempt in range(3):   # the proxies' own background refresh may touch the same catalog rows
            try:
                info = conninfo_to_dict(asyncio.run(ensure_shadow(pg.dsn(), cfg.server.database + CATALOG_DB_SUFFIX,
                                                                  cfg.catalog)))
                break
            except psycopg.errors.InternalError:
                if attempt == 2:
                    raise
                time.sleep(1)
        relay_port = serve.free_port()
        relay = subprocess.Popen([sys.executable, "-c", pl.BYTE_RELAY, str(info.get("host")),
                                  str(info.get("port") or 5432), str(relay_port)], stdout=subprocess.PIPE, text=True)
        procs.append(relay)
        assert relay.stdout is not None and "ready" in relay.stdout.readline()

        def db(host: str, port: int, user: Any, password: Any, database: Any) -> Any:
            return lambda: asyncpg.connect(host=host, port=port, user=user, password=password, database=database,
                                           ssl=False)

        paths: dict[str, tuple[Any, int | None]] = {
            "direct": (db(str(info.get("host")), int(info.get("port") or 5432), info.get("user"),
                          info.get("password"), info.get("dbname")), None),
            "byte relay": (db("127.0.0.1", relay_port, info.get("user"), info.get("password"), info.get("dbname")),
                           relay.pid),
        }
        for name, port in ports.items():
            paths[name] = (db("127.0.0.1", port, "analyst", "lapras", "adult"), pids[name])
        print(f"{args.rounds} rounds of {args.queries} statements per path, 1 client", flush=True)
        per = asyncio.run(_rounds(paths, args.rounds, args.queries))
    finally:
        for p in procs:
            if p.poll() is None:
                serve.stop(p)
        pg.destroy()
        shutil.rmtree(root, ignore_errors=True)

    direct = statistics.median(m["p50_ms"] for m in per["direct"])
    summary = {}
    print("\n| path | p50 ms (median of rounds) | over direct ms | CPU us/statement |\n|---|---:|---:|---:|")
    for name, ms in per.items():
        p50 = statistics.median(m["p50_ms"] for m in ms)
        cpu = statistics.median(m["cpu_us_per_statement"] for m in ms) if "cpu_us_per_statement" in ms[0] else None
        summary[name] = {"p50_ms": p50, "over_direct_ms": p50 - direct, "cpu_us_per_statement": cpu}
        print(f"| {name} | {p50:.3f} | {p50 - direct:+.3f} | {'' if cpu is None else f'{cpu:.0f}'} |")
    load = os.getloadavg()
    print(f"\nload average at the end {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f}")
    if args.out:
        args.out.write_text(json.dumps({"summary": summary, "rounds": per, "load_average": load,
                                        "baseline": str(args.baseline) if args.baseline else None,
                                        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
