"""Where a fresh DP statement's milliseconds go, beside PostgreSQL's own answer to the same SQL.

One PostgreSQL (the dev cluster with --shards 0, or --dsn of a running one) holding `events`; the real
`lapras-proxy serve` in front of it; and, in this process, an engine on the same ledger and database.
Per statement, side by side, each a new constant (so every proxy/engine answer is fresh):

  proxy_ms        the statement through the proxy (wire, parse, plan, exact SQL, noise, ledger commit)
  direct_ms       the same SQL sent straight to PostgreSQL (what the user runs without the proxy)
  exact_ms        the proxy's exact-answer SQL sent straight to PostgreSQL (its database share)
  exact_cells_ms  the same answers over cell expressions only (the exact SQL before plain-column conditions)
  plan_ms         parse + plan, cold (no plan cache), in process
  engine_ms       Engine.answer in process, split into engine_exact_ms (the exact SQL round trip),
                  engine_ledger_ms (the epoch's row lock, the policy, the fsync'd commit) and the rest
                  (sensitivity, free estimates, noise)

Usage: python benchmarks/fresh_profile.py [--rows 1000000] [--n 15] [--json PATH] [--dsn DSN]
Prints medians and the ratio proxy / direct; with --json writes the per-statement records too.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import psycopg  # noqa: E402
import scale  # noqa: E402
import serve  # noqa: E402

from proxy.upstream.events_data import CATEGORIES  # noqa: E402


def statements(n: int, offset: int) -> list[str]:
    """The scale benchmark's fresh shape: a kind's count and total duration under a duration bound."""
    return [f"SELECT count(*), sum(duration_s) FROM events WHERE category = '{CATEGORIES[i % 8][0]}' "
            f"AND duration_s < {30 + 14 * i + offset}" for i in range(n)]


class Timer:
    def __init__(self) -> None:
        self.ms = 0.0

    @contextlib.contextmanager
    def span(self) -> Iterator[None]:
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.ms += (time.perf_counter() - t0) * 1000


def _ms(conn: psycopg.Connection, sql: str) -> float:
    t0 = time.perf_counter()
    conn.execute(sql).fetchall()
    return (time.perf_counter() - t0) * 1000


def run(dsn: str, n: int, work: Path) -> list[dict[str, Any]]:
    import parser.pushdown.sql as psql
    from lapras.engine import Engine
    from lapras.exact import PostgresExactSource
    from lapras.ledger.postgres import PostgresLedger
    from parser import plan_query
    from proxy.config import load_config
    from proxy.dp.engine_factory import engine_settings

    port = serve.free_port()
    cfg_path = work / "config.toml"
    cfg_path.write_text(scale.config_text(dsn, port))
    cfg = load_config(cfg_path)
    events = cfg.catalog.table("events")
    assert events is not None
    proxy = scale.Proxy(cfg_path, work / "state", port)
    exact = PostgresExactSource(dsn)
    engine = Engine(cfg.catalog, PostgresLedger(dsn), exact, engine_settings(cfg, progress=False), None)
    t_exact, t_ledger = Timer(), Timer()
    answers, locked = exact.answers, engine.ledger.locked

    def timed_answers(*a: Any, **k: Any) -> Any:
        with t_exact.span():
            return answers(*a, **k)

    @contextlib.contextmanager
    def timed_locked(*a: Any, **k: Any) -> Iterator[Any]:
        with t_ledger.span(), locked(*a, **k) as tx:
            yield tx

    exact.answers = timed_answers  # type: ignore[method-assign]
    engine.ledger.locked = timed_locked  # type: ignore[method-assign]
    records: list[dict[str, Any]] = []
    try:
        direct = psycopg.connect(dsn, autocommit=True)
        for s in psql.EXACT_SESSION_SQL:
            direct.execute(s)
        via = psycopg.connect(scale.Proxy.dsn(proxy), autocommit=True)
        _ms(direct, "SELECT count(*) FROM events")  # warm the buffer cache for everyone
        engine.answer(plan_query(statements(1, 3_001)[0], cfg.catalog))  # noise sampler and connections warm
        for a, b in zip(statements(n, 0), statements(n, 7), strict=True):
            rec: dict[str, Any] = {"sql": a}
            plan = plan_query(a, cfg.catalog)
            exact_sql = psql.answers_sql(events, plan.queries)
            cells_sql = psql.answers_sql(events, plan.queries, cells_only=True)
            rec["proxy_ms"] = _ms(via, a)
            rec["direct_ms"] = _ms(direct, a)
            rec["exact_ms"] = _ms(direct, exact_sql)
            rec["exact_cells_ms"] = _ms(direct, cells_sql)
            t0 = time.perf_counter()
            pb = plan_query(b, cfg.catalog)
            rec["plan_ms"] = (time.perf_counter() - t0) * 1000
            t_exact.ms = t_ledger.ms = 0.0
            t0 = time.perf_counter()
            ans = engine.answer(pb)
            rec["engine_ms"] = (time.perf_counter() - t0) * 1000
            assert ans.outcome == "bad", ans.outcome  # a fresh release, as the proxy's
            rec["engine_exact_ms"], rec["engine_ledger_ms"] = t_exact.ms, t_ledger.ms
            rec["engine_rest_ms"] = rec["engine_ms"] - t_exact.ms - t_ledger.ms
            records.append(rec)
            print("  " + " ".join(f"{k}={v:.1f}" for k, v in rec.items() if k != "sql"), flush=True)
        via.close()
        direct.close()
    finally:
        proxy.stop()
        engine.close()
    return records


FIELDS = ("proxy_ms", "direct_ms", "exact_ms", "exact_cells_ms", "plan_ms", "engine_ms", "engine_exact_ms",
          "engine_ledger_ms", "engine_rest_ms")


def summary(records: list[dict[str, Any]]) -> dict[str, float]:
    med = {f: statistics.median(r[f] for r in records) for f in FIELDS}
    med["proxy_over_direct"] = statistics.median(r["proxy_ms"] / r["direct_ms"] for r in records)
    med["exact_over_direct"] = statistics.median(r["exact_ms"] / r["direct_ms"] for r in records)
    med["cells_over_direct"] = statistics.median(r["exact_cells_ms"] / r["direct_ms"] for r in records)
    return med


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--n", type=int, default=15, help="statements (medians of these)")
    scale.add_upstream_args(ap, "/var/tmp/lapras-fresh-profile")
    args = ap.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="lapras-profile-"))
    with scale.events_upstream(args.dsn, Path(args.state_root) / "single", 0, args.rows) as dsn:
        records = run(dsn, args.n, work)
    med = summary(records)
    scale.print_medians(f"medians of {len(records)} statements, {args.rows:,} rows, one PostgreSQL:", med)
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": args.rows, "medians": med, "records": records}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
