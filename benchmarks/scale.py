"""Scale: the proxy in front of a sharded PostgreSQL (the dev cluster) as the events table grows.

For each (rows, shards) cell it starts `lapras-proxy dev-cluster` (shards = 0: one plain PostgreSQL with the
same data), starts the real `lapras-proxy serve` in front of its coordinator, and measures side by side:

  fresh_p50_ms      a new DP statement through the proxy (plan, exact answer pushed down, noise, ledger)
  direct_p50_ms     the same aggregate as a user would send it straight to the coordinator, no proxy
  exact_p50_ms      the proxy's own exact-answer SQL sent straight to the coordinator (one aggregate per
                    shard, grouped by the partition key), i.e. the database's share of fresh_p50_ms
  repeated_p50_ms   a released statement asked again (answered from memory, no new noise)
  mm_prep_s         a new epoch with a 100-query prediction P (matrix mechanism: strategy, marginals, noise)
  proxy_rss_mb      the proxy process's resident memory after the measurements (it never pulls rows)
  explain_pushdown  EXPLAIN of the exact SQL runs one aggregate per shard, asynchronously, no coordinator
                    partial aggregate

`events` is declared with the columns the proxy can plan today (category, country, duration_s); rows are
one per event without contribution bounding, as the issue's comparison asks.

Usage: python benchmarks/scale.py [--quick] --json PATH [--plot PATH] [--rows 1000000,10000000]
       [--shards 0,1,2,4] [--state-root DIR]
--quick runs 1M rows on 2 shards (about 3 minutes). Prints a table; writes the records and a PNG plot.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import psycopg  # noqa: E402
import serve  # noqa: E402  (benchmarks/serve.py, beside this script)

from proxy.devcluster.cluster import DevCluster  # noqa: E402
from proxy.upstream.events_data import CATEGORIES, COUNTRIES  # noqa: E402

EVENTS_DECLARATION = """
[tables.events]
schema = "public"
description = "generated event log (dev cluster); the columns the proxy plans today"

[tables.events.columns]
category = {{ type = "text", values = {categories} }}
country = {{ type = "text", values = {countries} }}
duration_s = {{ type = "int", min = 0, max = 3600 }}
"""


def config_text(upstream_dsn: str, port: int) -> str:
    text = serve.config_text(upstream_dsn, port)
    text = re.sub(r"(?m)^statement_timeout_s = [^\n#]+", "statement_timeout_s = 600.0 ", text)
    text = re.sub(r"(?m)^stream_length = \d+", "stream_length = 1000", text)
    # The shipped config declares events with its privacy unit; this benchmark declares its own (below).
    text = re.sub(r"(?ms)^\[tables\.events(\.[a-z]+)?\]\n.*?(?=^\[(?!tables\.events)|\Z)", "", text)
    # Nor does the cluster hold the shop demo (orders and its public dimensions): not declared here.
    text = re.sub(r"(?ms)^\[(tables\.orders|public_tables\.\w+)(\.[a-z]+)?\]\n.*?(?=^\[(?!tables\.orders)|\Z)", "",
                  text)
    return text + EVENTS_DECLARATION.format(categories=json.dumps([c[0] for c in CATEGORIES]),
                                            countries=json.dumps([c[0] for c in COUNTRIES]))


def fresh_statements(n: int) -> list[str]:
    """n distinct statements of one dashboard shape (count and total duration of a kind, filtered)."""
    return [f"SELECT count(*), sum(duration_s) FROM events WHERE category = '{CATEGORIES[i % 8][0]}' "
            f"AND duration_s < {30 + 41 * i}" for i in range(n)]


def prediction_queries(catalog: Any, n: int = 100) -> list[Any]:
    """A 100-query P a dashboard would give: counts by category, by country, and by country per kind."""
    import parser as sqlparser

    texts = ["SELECT category, count(*) FROM events GROUP BY category",
             "SELECT country, count(*) FROM events GROUP BY country"]
    texts += [f"SELECT country, count(*) FROM events WHERE category = '{c[0]}' GROUP BY country"
              for c in CATEGORIES]
    seen: dict[str, Any] = {}
    for text in texts:
        for q in sqlparser.plan_query(text, catalog).queries:
            seen.setdefault(q.key, q)
    return list(seen.values())[:n]


class Proxy:
    """The real `lapras-proxy serve` process."""

    def __init__(self, config: Path, state: Path, port: int) -> None:
        self.port = port
        self.proc, _ = serve.start(config, state, timeout=600)

    def dsn(self) -> str:
        return f"host=127.0.0.1 port={self.port} user=analyst password=lapras dbname=adult sslmode=disable"

    def rss_mb(self) -> float:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return float("nan")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def pushed_down(plan_text: str, shards: int) -> bool:
    """EXPLAIN shows one whole aggregate per shard and no partial aggregate on the coordinator (a single
    shard's scan is not asynchronous: there is nothing to overlap it with)."""
    if shards == 0:
        return True
    return plan_text.count("Relations: Aggregate on") == shards and "Partial" not in plan_text


def _timed(conn: psycopg.Connection, sql: str) -> float:
    t0 = time.perf_counter()
    conn.execute(sql).fetchall()
    return (time.perf_counter() - t0) * 1000


def _p50(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def start_events_cluster(state: Path, shards: int, rows: int) -> tuple[DevCluster, str, float]:
    """A fresh dev cluster in ``state`` (any earlier one there removed) with ``rows`` events rows and the
    shipped config's adult table; returns it, the coordinator's DSN and the seconds it took."""
    from proxy.config import load_config

    state.parent.mkdir(parents=True, exist_ok=True)
    os.chmod(state.parent, 0o755)  # the clusters' service account walks through it
    cluster = DevCluster(state)
    cluster.stop(remove=True)
    adult = load_config(REPO / "config.toml").catalog.table("adult")
    t0 = time.monotonic()
    dsn = cluster.start(shards, rows, [adult] if adult is not None else [])
    return cluster, dsn, time.monotonic() - t0


def add_upstream_args(ap: argparse.ArgumentParser, state_root: str) -> None:
    """The options of a benchmark over `events`: --dsn (an upstream to use) and --state-root (where the dev
    cluster started without one lives), and --json (where the figures go)."""
    ap.add_argument("--dsn", help="a running upstream with `events` (else a dev cluster is started)")
    ap.add_argument("--json", metavar="PATH")
    ap.add_argument("--state-root", default=state_root, metavar="DIR")


@contextmanager
def events_upstream(dsn: str | None, state: Path, shards: int, rows: int) -> Iterator[str]:
    """``dsn``, or else the DSN of a dev cluster started in ``state`` with ``shards`` (0: one PostgreSQL) and
    ``rows`` events rows (:func:`start_events_cluster`), stopped and removed afterwards."""
    if dsn is not None:
        yield dsn
        return
    cluster, dsn, load_s = start_events_cluster(state, shards, rows)
    print(f"{_label(shards)}, {rows:,} events rows loaded in {load_s:.0f} s", flush=True)
    try:
        yield dsn
    finally:
        cluster.stop(remove=True)


def print_medians(title: str, med: dict[str, float]) -> None:
    """The medians as a one-row markdown table under ``title``."""
    print(f"\n{title}")
    print("| " + " | ".join(med) + " |")
    print("|" + "---|" * len(med))
    print("| " + " | ".join(f"{v:.2f}" for v in med.values()) + " |")


def run_cell(rows: int, shards: int, state_root: Path, n_fresh: int, repeats: int) -> dict[str, Any]:
    from lapras.engine import Engine, Prediction
    from lapras.exact import PostgresExactSource
    from lapras.ledger.postgres import PostgresLedger
    from parser import plan_query
    from parser.pushdown.sql import answers_sql
    from proxy.config import load_config
    from proxy.dp.engine_factory import engine_settings

    cluster, dsn, load_s = start_events_cluster(state_root / f"events-{rows}-{shards}", shards, rows)
    print(f"  cluster of {shards} shard(s) with {rows:,} rows ready in {load_s:.0f} s", flush=True)
    work = Path(tempfile.mkdtemp(prefix="lapras-scale-"))
    port = serve.free_port()
    cfg_path = work / "config.toml"
    cfg_path.write_text(config_text(dsn, port))
    cfg = load_config(cfg_path)
    events = cfg.catalog.table("events")
    assert events is not None
    rec: dict[str, Any] = {"rows": rows, "shards": shards, "load_s": round(load_s, 1)}
    proxy = Proxy(cfg_path, work / "state", port)
    try:
        direct = psycopg.connect(dsn, autocommit=True)
        exact = PostgresExactSource(dsn)
        key = exact.partition_key(events)
        via = psycopg.connect(proxy.dsn(), autocommit=True)
        _timed(direct, "SELECT count(*) FROM events")            # warm the caches once for everyone
        fresh, plain, pushed = [], [], []
        for sql in fresh_statements(n_fresh):
            plan = plan_query(sql, cfg.catalog)
            exact_sql = answers_sql(events, plan.queries, key)
            # Side by side, one statement at a time: the proxy, then the user's SQL, then the proxy's SQL.
            fresh.append(_timed(via, sql))
            plain.append(_timed(direct, sql))
            pushed.append(_timed(direct, exact_sql))
        repeated = [_timed(via, fresh_statements(1)[0]) for _ in range(repeats)]
        rec.update(fresh_p50_ms=round(_p50(fresh), 2), direct_p50_ms=round(_p50(plain), 2),
                   exact_p50_ms=round(_p50(pushed), 2), repeated_p50_ms=round(_p50(repeated), 3))
        plan_text = "\n".join(r[0] for r in direct.execute("EXPLAIN (VERBOSE) " + exact_sql).fetchall())
        rec["explain_pushdown"] = pushed_down(plan_text, shards)
        rec["explain_async_scans"] = plan_text.count("Async Foreign Scan")
        rec["explain"] = plan_text.splitlines()[:8]
        rec["proxy_rss_mb"] = round(proxy.rss_mb(), 1)
        via.close()
        direct.close()
        exact.close()
    finally:
        proxy.stop()
    try:
        engine = Engine(cfg.catalog, PostgresLedger(dsn), PostgresExactSource(dsn),
                        engine_settings(cfg, progress=False), None)
        p = prediction_queries(cfg.catalog)
        t0 = time.monotonic()
        engine.new_epoch(Prediction(tuple(p)))
        rec["mm_prep_s"] = round(time.monotonic() - t0, 2)
        rec["mm_queries"] = len(p)
        engine.close()
    except Exception as exc:   # reported, not fatal: the other figures of the cell stand
        rec["mm_prep_s"] = None
        rec["mm_error"] = f"{type(exc).__name__}: {exc}"
    cluster.stop(remove=True)
    shutil.rmtree(work, ignore_errors=True)
    return rec


def table(records: list[dict[str, Any]]) -> str:
    head = ("| rows | shards | fresh p50 (ms) | direct p50 (ms) | fresh / direct | exact SQL p50 (ms) | "
            "repeated p50 (ms) | MM prep, 100-query P (s) | proxy RSS (MB) | pushed down |")
    lines = [head, "|" + "---|" * 10]
    for r in records:
        ratio = r["fresh_p50_ms"] / r["direct_p50_ms"] if r.get("direct_p50_ms") else float("nan")
        lines.append(f"| {r['rows']:,} | {r['shards']} | {r['fresh_p50_ms']:.1f} | {r['direct_p50_ms']:.1f} | "
                     f"{ratio:.2f} | {r['exact_p50_ms']:.1f} | {r['repeated_p50_ms']:.3f} | "
                     f"{r.get('mm_prep_s')} | {r['proxy_rss_mb']:.0f} | {r['explain_pushdown']} |")
    return "\n".join(lines)


def _label(shards: int) -> str:
    return "1 PostgreSQL" if shards == 0 else f"{shards} shard{'s' if shards > 1 else ''}"


def plot(records: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = sorted({r["rows"] for r in records})
    fig, axes = plt.subplots(1, len(sizes), figsize=(5.5 * len(sizes), 4.2), squeeze=False)
    for ax, size in zip(axes[0], sizes, strict=True):
        cells = sorted((r for r in records if r["rows"] == size), key=lambda r: r["shards"])
        xs = range(len(cells))
        w = 0.27
        ax.bar([x - w for x in xs], [r["fresh_p50_ms"] for r in cells], w, label="fresh DP query via proxy")
        ax.bar(list(xs), [r["direct_p50_ms"] for r in cells], w, label="same aggregate, direct")
        ax.bar([x + w for x in xs], [r["exact_p50_ms"] for r in cells], w, label="proxy's exact SQL, direct")
        ax.set_xticks(list(xs), [_label(r["shards"]) for r in cells])
        ax.set_yscale("log")
        ax.set_ylabel("p50 latency (ms)")
        ax.set_title(f"events, {size:,} rows")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="1M rows on 2 shards (about 3 minutes)")
    ap.add_argument("--json", required=True, metavar="PATH", help="where to write the records")
    ap.add_argument("--plot", metavar="PATH", help="PNG plot (default: next to --json)")
    ap.add_argument("--rows", default="1000000,10000000", help="events rows per cell, comma-separated")
    ap.add_argument("--shards", default="0,1,2,4", help="shard counts, comma-separated (0 = one PostgreSQL)")
    ap.add_argument("--fresh", type=int, default=11, help="fresh statements per cell (median of these)")
    ap.add_argument("--repeats", type=int, default=50, help="repeats of a released statement")
    ap.add_argument("--state-root", default="/var/tmp/lapras-scale", metavar="DIR",
                    help="where the clusters live while measured (removed after each cell)")
    args = ap.parse_args(argv)
    rows = [1_000_000] if args.quick else [int(x) for x in args.rows.split(",")]
    shards = [2] if args.quick else [int(x) for x in args.shards.split(",")]
    state_root = Path(args.state_root)
    state_root.mkdir(parents=True, exist_ok=True)
    os.chmod(state_root, 0o755)   # the service account must reach the cluster directories inside
    out = Path(args.json)
    out.parent.mkdir(parents=True, exist_ok=True)
    records: list[dict[str, Any]] = []
    t0 = time.monotonic()
    for r in rows:
        for s in shards:
            print(f"cell: {r:,} rows, {s} shard(s)", flush=True)
            records.append(run_cell(r, s, state_root, args.fresh, args.repeats))
            out.write_text(json.dumps(records, indent=1) + "\n")    # kept as cells finish
            print(table(records[-1:]).splitlines()[-1], flush=True)
    print(table(records))
    plot(records, Path(args.plot) if args.plot else out.with_suffix(".png"))
    print(f"wrote {out} in {time.monotonic() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
