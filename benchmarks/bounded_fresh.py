"""Fresh DP statements on a table with contribution bounding (privacy unit, k rows per unit), before and
after the per-epoch materialisation of the bounded rows (issue 14), side by side in one run.

A dev cluster (``--shards 0``: one PostgreSQL; or N shards behind a postgres_fdw coordinator) holding
`events` with R rows, declared with ``privacy_unit = "user_id"`` and ``max_rows_per_unit = K``; two real
``lapras-proxy serve`` processes on it sharing one ledger: one with ``[lapras] bounding = "live"`` (the
per-unit window in every fresh statement, as before), one with ``bounding = "epoch"`` (the default until issue 23:
the bounded rows materialised once per epoch). Per statement, each a new constant (so every answer is a
fresh release), in turn:

  epoch_ms        through the proxy with bounding = "epoch"
  direct_ms       the same SQL sent straight to the upstream, no bounding (what the user runs without the
                  proxy; the issue's reference)
  live_ms         through the proxy with bounding = "live" (first ``--window-n`` statements: it is slow)
  window_ms       that proxy's exact SQL straight to the upstream: the window, row text computed once
  window_old_ms   the same with the window as it was spelled before (row text computed twice per row)

and once: the materialisation's time (its ``build_seconds`` in ``lapras.bounded_tables`` and the wall time
from the epoch proxy's start to the row appearing), and EXPLAIN ANALYZE of the old and new window.

Usage: python benchmarks/bounded_fresh.py [--rows 1000000] [--shards 0] [--n 9] [--window-n 5] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import psycopg  # noqa: E402
import scale  # noqa: E402
import serve  # noqa: E402

from proxy.upstream.events_data import CATEGORIES  # noqa: E402

K = 10


def config_text(dsn: str, port: int, bounding: str, k: int) -> str:
    text = scale.config_text(dsn, port)
    text = text.replace('[tables.events]\nschema = "public"\n',
                        f'[tables.events]\nschema = "public"\nprivacy_unit = "user_id"\nmax_rows_per_unit = {k}\n', 1)
    return re.sub(r'(?m)^bounding = "[a-z]+"', f'bounding = "{bounding}"', text, count=1)


def statements(n: int, offset: int) -> list[str]:
    return [f"SELECT count(*), sum(duration_s) FROM events WHERE category = '{CATEGORIES[i % 8][0]}' "
            f"AND duration_s < {30 + 14 * i + offset}" for i in range(n)]


def old_window_sql(table: Any) -> str:
    """The window as ``parser.pushdown.sql.table_ref`` wrote it before this change (``r::text`` twice per row)."""
    from parser.pushdown.bounding import bounding_seed
    from pgcore.identifiers import quote_ident

    unit = quote_ident(table.privacy_unit)
    return (f"(SELECT * FROM (SELECT r.*, row_number() OVER (PARTITION BY r.{unit} ORDER BY "
            f"hashtextextended(r::text, {bounding_seed(table)}), r::text) AS lapras_unit_row "
            f"FROM public.events AS r WHERE r.{unit} IS NOT NULL) AS u "
            f"WHERE u.lapras_unit_row <= {int(table.max_rows_per_unit)}) AS events")


def _ms(conn: psycopg.Connection, sql: str) -> float:
    t0 = time.perf_counter()
    conn.execute(sql).fetchall()
    return (time.perf_counter() - t0) * 1000


def _wait_built(dsn: str, timeout: float) -> tuple[float, float]:
    """(wall seconds until the materialisation's row appeared, its build_seconds)."""
    t0 = time.monotonic()
    with psycopg.connect(dsn, autocommit=True) as conn:
        while time.monotonic() - t0 < timeout:
            if conn.execute("SELECT to_regclass('lapras.bounded_tables')").fetchone()[0] is not None:
                row = conn.execute("SELECT build_seconds FROM lapras.bounded_tables").fetchone()
                if row is not None:
                    return time.monotonic() - t0, float(row[0])
            time.sleep(0.2)
    raise RuntimeError("no materialisation within the timeout")


def run(dsn: str, n: int, window_n: int, k: int, work: Path) -> dict[str, Any]:
    import parser.pushdown.sql as psql
    from parser import plan_query
    from proxy.config import load_config

    out: dict[str, Any] = {"k": k}
    ports = [serve.free_port(), serve.free_port()]
    paths = []
    for bounding, port in zip(("live", "epoch"), ports, strict=True):
        p = work / f"config_{bounding}.toml"
        p.write_text(config_text(dsn, port, bounding, k))
        paths.append(p)
    cfg = load_config(paths[0])
    events = cfg.catalog.table("events")
    assert events is not None and events.privacy_unit == "user_id"
    direct = psycopg.connect(dsn, autocommit=True)
    for s in psql.EXACT_SESSION_SQL:
        direct.execute(s)
    _ms(direct, "SELECT count(*) FROM events")  # warm the buffer cache for everyone
    live = scale.Proxy(paths[0], work / "state_live", ports[0])
    t0 = time.monotonic()
    epoch = scale.Proxy(paths[1], work / "state_epoch", ports[1])
    started = time.monotonic() - t0
    try:
        wall, build = _wait_built(dsn, 3600)
        out["epoch_proxy_start_s"] = round(started, 2)
        out["materialise_wall_s"] = round(started + wall, 2)
        out["materialise_build_s"] = round(build, 2)
        print(f"materialised in {build:.1f} s (epoch proxy started in {started:.1f} s)", flush=True)
        via_live = psycopg.connect(scale.Proxy.dsn(live), autocommit=True)
        via_epoch = psycopg.connect(scale.Proxy.dsn(epoch), autocommit=True)
        via_epoch.execute(statements(1, 3_001)[0]).fetchall()  # connections and noise warm
        records = []
        for i, (a, b) in enumerate(zip(statements(n, 0), statements(n, 7), strict=True)):
            rec: dict[str, Any] = {"sql": a}
            rec["epoch_ms"] = _ms(via_epoch, a)
            rec["direct_ms"] = _ms(direct, a)
            if i < window_n:
                rec["live_ms"] = _ms(via_live, b)
                exact_sql = psql.answers_sql(events, plan_query(b, cfg.catalog).queries)
                rec["window_ms"] = _ms(direct, exact_sql)
                old = exact_sql.replace(psql.table_ref(events), old_window_sql(events))
                assert old != exact_sql
                rec["window_old_ms"] = _ms(direct, old)
            records.append(rec)
            print("  " + " ".join(f"{k}={v:.1f}" for k, v in rec.items() if k != "sql"), flush=True)
        out["records"] = records
        ref = psql.table_ref(events)
        for name, sql in (("explain_window_new", f"SELECT count(*) FROM {ref}"),
                          ("explain_window_old", f"SELECT count(*) FROM {old_window_sql(events)}")):
            plan = direct.execute("EXPLAIN (ANALYZE, COSTS OFF) " + sql).fetchall()
            out[name] = [r[0] for r in plan]
        via_live.close()
        via_epoch.close()
    finally:
        live.stop()
        epoch.stop()
        direct.close()
    return out


def summary(out: dict[str, Any]) -> dict[str, float]:
    recs = out["records"]
    med: dict[str, float] = {}
    for f in ("epoch_ms", "direct_ms", "live_ms", "window_ms", "window_old_ms"):
        xs = [r[f] for r in recs if f in r]
        med[f] = statistics.median(xs) if xs else float("nan")
    med["epoch_over_direct"] = statistics.median(r["epoch_ms"] / r["direct_ms"] for r in recs)
    med["target_ms"] = 1.3 * med["direct_ms"] + 5
    med["live_over_epoch"] = med["live_ms"] / med["epoch_ms"]
    med["window_old_over_new"] = statistics.median(r["window_old_ms"] / r["window_ms"] for r in recs
                                                   if "window_ms" in r)
    return med


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--shards", type=int, default=0)
    ap.add_argument("--n", type=int, default=9, help="fresh statements through the epoch proxy and direct")
    ap.add_argument("--window-n", type=int, default=5, help="of which also through the live (window) proxy")
    ap.add_argument("--k", type=int, default=K, help="max_rows_per_unit")
    scale.add_upstream_args(ap, "/var/tmp/lapras-bounded-fresh")
    args = ap.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="lapras-bounded-"))
    with scale.events_upstream(args.dsn, Path(args.state_root) / f"s{args.shards}", args.shards, args.rows) as dsn:
        out = run(dsn, args.n, args.window_n, args.k, work)
    out.update(rows=args.rows, shards=args.shards, load_average=os.getloadavg())
    med = summary(out)
    out["medians"] = med
    scale.print_medians(f"{args.rows:,} rows, {args.shards} shard(s), k = {args.k}; medians:", med)
    print(f"materialisation: {out['materialise_build_s']} s build, {out['materialise_wall_s']} s from start")
    print("EXPLAIN ANALYZE, window before:\n  " + "\n  ".join(out["explain_window_old"]))
    print("EXPLAIN ANALYZE, window now:\n  " + "\n  ".join(out["explain_window_new"]))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
