"""Load benchmark: 32 clients hold a real proxy busy for minutes; throughput, latency, errors, RSS growth.

By default it starts its own `lapras-proxy serve` (embedded PostgreSQL with the Adult table under a
temporary state dir, a budget large enough not to run out during the run) and samples the proxy process's
resident memory every two seconds. With --target it loads an already running proxy instead (pass --pid to
sample its memory).

The statement mix per client: repeated DP queries from a fixed pool (released answers served again),
new DP queries (random range counts: fresh noise and ledger writes), and metadata (version, SHOW
lapras.budget, SET, a catalog query). Errors are every ErrorResponse except the expected budget refusal
(53400) and every lost connection; a healthy run has none.

    python benchmarks/load.py [--minutes 3] [--clients 32] [--target HOST:PORT --pid PID]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import psutil
import psycopg
import serve  # benchmarks/serve.py, beside this script

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results"
ADULT_CSV = REPO.parent / "shared" / "data" / "adult.csv"

REPEATED = [
    "SELECT COUNT(*) FROM adult WHERE sex = 1",
    "SELECT COUNT(*) FROM adult WHERE age BETWEEN 30 AND 39",
    "SELECT race, COUNT(*) FROM adult GROUP BY race",
    "SELECT AVG(hours_per_week) FROM adult WHERE income_gt_50k = 1",
    "SELECT sex, SUM(hours_per_week) FROM adult GROUP BY sex",
    "SELECT COUNT(*) FROM adult WHERE education_num >= 13 AND income_gt_50k = 1",
    "SELECT relationship, COUNT(*) FROM adult WHERE age < 30 GROUP BY relationship",
    "SELECT COUNT(*) FROM adult WHERE hours_per_week > 40",
]
METADATA = [
    "SELECT version()",
    "SHOW lapras.budget",
    "SET application_name = 'load'",
    "SELECT column_name, data_type FROM information_schema.columns WHERE table_name = 'adult'",
]
EXPECTED_REFUSALS = {"53400"}


def new_query(rng: random.Random) -> str:
    """A random range count over (age, hours_per_week), half with an equality on a small attribute."""
    a = rng.randint(17, 85)
    b = rng.randint(a, 90)
    h = rng.randint(1, 90)
    k = rng.randint(h, 98)
    extra = ""
    if rng.random() < 0.5:
        col, hi = rng.choice([("sex", 1), ("race", 4), ("income_gt_50k", 1)])
        extra = f" AND {col} = {rng.randint(0, hi)}"
    return (f"SELECT COUNT(*) FROM adult WHERE age BETWEEN {a} AND {b} "
            f"AND hours_per_week BETWEEN {h} AND {k}{extra}")


@dataclass
class Tally:
    """Per-kind latencies and outcome counts, shared by all clients of one event loop."""

    latencies: dict[str, list[float]] = field(default_factory=lambda: {"repeated": [], "new": [], "metadata": []})
    outcomes: Counter[str] = field(default_factory=Counter)
    errors: Counter[str] = field(default_factory=Counter)
    reconnects: int = 0


async def client_loop(n: int, conninfo: str, deadline: float, tally: Tally, mix: tuple[float, float]) -> None:
    """One client: a session that keeps sending the statement mix until the deadline."""
    rng = random.Random(os.getpid() * 1000 + n)
    conn: psycopg.AsyncConnection[Any] | None = None
    while time.monotonic() < deadline:
        if conn is None or conn.closed:
            try:
                conn = await psycopg.AsyncConnection.connect(conninfo, autocommit=True)
            except psycopg.OperationalError as exc:
                tally.errors[f"connect: {str(exc).strip()[:80]}"] += 1
                await asyncio.sleep(0.5)
                continue
            tally.reconnects += 1
        r = rng.random()
        kind = "repeated" if r < mix[0] else "new" if r < mix[0] + mix[1] else "metadata"
        sql = (rng.choice(REPEATED) if kind == "repeated" else new_query(rng) if kind == "new"
               else rng.choice(METADATA))
        t0 = time.perf_counter()
        try:
            cur = await conn.execute(sql.encode())
            if cur.description is not None:
                await cur.fetchall()
            tally.outcomes["ok"] += 1
        except psycopg.Error as exc:
            state = exc.sqlstate or ("08006" if conn.closed else "?")
            if state in EXPECTED_REFUSALS:
                tally.outcomes[f"refused {state}"] += 1
            else:
                tally.errors[f"{state} {kind}: {str(exc).strip().splitlines()[0][:80]}"] += 1
        except Exception as exc:  # a malformed answer (e.g. a value its column type cannot hold)
            tally.errors[f"client {kind}: {type(exc).__name__}: {str(exc)[:80]}"] += 1
        tally.latencies[kind].append((time.perf_counter() - t0) * 1000)
    if conn is not None:
        await conn.close()


class MemorySampler(threading.Thread):
    """Samples the RSS of a process (and its children) every `interval` seconds."""

    def __init__(self, pid: int, interval: float = 2.0) -> None:
        super().__init__(daemon=True)
        self.proc = psutil.Process(pid)
        self.interval = interval
        self.samples: list[tuple[float, float]] = []
        self.stop = threading.Event()

    def rss_mb(self) -> float:
        procs = [self.proc, *self.proc.children(recursive=True)]
        return sum(p.memory_info().rss for p in procs if p.is_running()) / 2**20

    def run(self) -> None:
        t0 = time.monotonic()
        while not self.stop.is_set():
            try:
                self.samples.append((time.monotonic() - t0, self.rss_mb()))
            except psutil.Error:
                return
            self.stop.wait(self.interval)


def _slope(t: np.ndarray, m: np.ndarray) -> float | None:
    return float(np.polyfit(t / 60, m, 1)[0]) if len(t) >= 3 else None


def memory_growth(samples: list[tuple[float, float]]) -> dict[str, Any]:
    """RSS after warm-up (first 20% of the run skipped), least-squares slopes in MB per minute over the run
    after warm-up and over its second half (bounded caches fill early; a leak keeps the late slope up),
    and the samples themselves."""
    if len(samples) < 4:
        return {"rss_start_mb": None, "rss_end_mb": None, "rss_max_mb": None, "growth_mb": None,
                "slope_mb_per_min": None, "late_slope_mb_per_min": None, "samples": []}
    t = np.array([s[0] for s in samples])
    m = np.array([s[1] for s in samples])
    keep = t >= 0.2 * t[-1]
    late = t >= 0.5 * t[-1]
    slope, late_slope = _slope(t[keep], m[keep]), _slope(t[late], m[late])
    return {"rss_start_mb": round(float(m[keep][0]), 1), "rss_end_mb": round(float(m[-1]), 1),
            "rss_max_mb": round(float(m.max()), 1), "growth_mb": round(float(m[-1] - m[keep][0]), 1),
            "slope_mb_per_min": None if slope is None else round(slope, 2),
            "late_slope_mb_per_min": None if late_slope is None else round(late_slope, 2),
            "samples": [[round(a, 1), round(b, 1)] for a, b in samples]}


def _config_text(port: int) -> str:
    text = (REPO / "config.toml").read_text()
    text = text.replace('listen = "127.0.0.1:6432"', f'listen = "127.0.0.1:{port}"')
    # A budget that outlasts the run: the benchmark measures the machinery, not budget exhaustion.
    text = text.replace("epsilon = 1.0\n", "epsilon = 10000.0\n", 1)
    text = text.replace("stream_length = 200 ", "stream_length = 1000000 ", 1)
    text = text.replace("queries_per_minute = 6000 ", "queries_per_minute = 1000000 ", 1)
    return text


def start_proxy(workdir: Path) -> tuple[subprocess.Popen[str], int]:
    """Start `lapras-proxy serve` on a free port with an embedded database; returns (process, port)."""
    port = serve.free_port()
    cfg = workdir / "config.toml"
    cfg.write_text(_config_text(port))
    data = ["--data", str(ADULT_CSV)] if ADULT_CSV.exists() else []
    proc, _ = serve.start(cfg, workdir / "state", timeout=180, extra_args=data)
    return proc, port


def _pct(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"p50": None, "p90": None, "p99": None}
    p = np.percentile(np.asarray(values), [50, 90, 99])
    return {"p50": round(float(p[0]), 2), "p90": round(float(p[1]), 2), "p99": round(float(p[2]), 2)}


async def run_load(conninfo: str, clients: int, seconds: float, mix: tuple[float, float]) -> Tally:
    """Run all clients on one event loop until `seconds` have passed."""
    tally = Tally()
    deadline = time.monotonic() + seconds
    await asyncio.gather(*(client_loop(i, conninfo, deadline, tally, mix) for i in range(clients)))
    return tally


def report(tally: Tally, seconds: float, clients: int, memory: dict[str, Any]) -> dict[str, Any]:
    """Everything measured, as plain data."""
    everything = [x for v in tally.latencies.values() for x in v]
    return {
        "clients": clients, "seconds": round(seconds, 1), "statements": len(everything),
        "throughput_per_s": round(len(everything) / seconds, 1),
        "latency_ms": _pct(everything),
        "latency_ms_by_kind": {k: {"n": len(v), **_pct(v)} for k, v in tally.latencies.items()},
        "outcomes": dict(tally.outcomes), "errors": dict(tally.errors),
        "connections_opened": tally.reconnects, "memory": memory,
        "machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0],
                    "loadavg": [round(x, 1) for x in os.getloadavg()]},
    }


def markdown(doc: dict[str, Any]) -> str:
    """The result as the Markdown table kept in benchmarks/results/load.md."""
    mem = doc["memory"]
    lines = [f"# Load: {doc['clients']} clients for {doc['seconds']:.0f} s ({doc['machine']['cpus']} CPUs)", "",
             f"- statements: {doc['statements']} ({doc['throughput_per_s']} per second)",
             f"- errors: {sum(doc['errors'].values())} {doc['errors'] or ''}",
             f"- outcomes: {doc['outcomes']}",
             f"- proxy RSS after warm-up {mem['rss_start_mb']} MB, at the end {mem['rss_end_mb']} MB, "
             f"max {mem['rss_max_mb']} MB; slope {mem['slope_mb_per_min']} MB/min after warm-up, "
             f"{mem['late_slope_mb_per_min']} MB/min over the second half",
             f"- machine load average at the end: {doc['machine'].get('loadavg')}", "",
             "| kind | n | p50 ms | p90 ms | p99 ms |", "|---|---:|---:|---:|---:|"]
    for kind, v in [*doc["latency_ms_by_kind"].items(), ("all", {"n": doc["statements"], **doc["latency_ms"]})]:
        lines.append(f"| {kind} | {v['n']} | {v['p50']} | {v['p90']} | {v['p99']} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, default=3.0)
    ap.add_argument("--clients", type=int, default=32)
    ap.add_argument("--target", metavar="HOST:PORT", help="load a running proxy instead of starting one")
    ap.add_argument("--pid", type=int, help="with --target: the proxy's process id, to sample its memory")
    ap.add_argument("--user", default="analyst")
    ap.add_argument("--password", default="lapras")
    ap.add_argument("--mix", default="0.5,0.3", help="shares of repeated and new DP queries (rest: metadata)")
    ap.add_argument("--out", default=str(RESULTS / "load"), help="result path prefix (.json and .md)")
    args = ap.parse_args(argv)
    mix_parts = [float(x) for x in args.mix.split(",")]
    mix = (mix_parts[0], mix_parts[1])
    workdir = Path(tempfile.mkdtemp(prefix="lapras-load-"))
    proc = None
    try:
        if args.target:
            host, _, port_text = args.target.rpartition(":")
            port, pid = int(port_text), args.pid
        else:
            proc, port = start_proxy(workdir)
            host, pid = "127.0.0.1", proc.pid
        conninfo = (f"host={host} port={port} user={args.user} password={args.password} dbname=adult "
                    f"sslmode=disable")
        sampler = MemorySampler(pid) if pid else None
        if sampler:
            sampler.start()
        t0 = time.monotonic()
        tally = asyncio.run(run_load(conninfo, args.clients, args.minutes * 60, mix))
        seconds = time.monotonic() - t0
        if sampler:
            sampler.stop.set()
            sampler.join()
        memory = memory_growth(sampler.samples if sampler else [])
        doc = report(tally, seconds, args.clients, memory)
        if proc is not None and proc.poll() is not None:
            doc["errors"]["proxy exited"] = 1
    finally:
        if proc is not None and proc.poll() is None:
            serve.stop(proc)
        shutil.rmtree(workdir, ignore_errors=True)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(doc, indent=1) + "\n")
    out.with_suffix(".md").write_text(markdown(doc))
    print(markdown(doc))
    return 1 if doc["errors"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
