"""MIN and MAX a dashboard can use (issue 23): how close the DP MIN/MAX land to the true extremes over many
epochs, and how many rows a range filter built from [MIN, MAX] keeps.

An embedded PostgreSQL holds `events` with 100,000 users (the demo generator, a fixed end: the whole of
2026) and `adult`. Each statement is planned by the parser, answered exactly by the engine's exact source,
and released EPOCHS times with the engine's calibration (statement_sensitivity, Gaussian.calibrate at the
grant of one fresh statement of the shipped config, lattice draws from a seeded simulation stream): one
release per simulated epoch, all read at once by the planner's post-processing (rows, NOTICE intervals).
Prints, per statement: the share of epochs within the tolerance of the true extremes (11 days: 3% of the
declared year; 5 years for age), the share of rows inside [MIN, MAX] (worst epoch), how often the declared
bound was returned, and how often the stated 95% interval covered PostgreSQL's percentile_disc(0.001) /
(0.999) (what MIN and MAX are).

    .venv/bin/python benchmarks/minmax.py [--users 100000] [--rows 1000000] [--epochs 200]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from bisect import bisect_left, bisect_right
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import psycopg

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from parser.plan.quantile import P_EXTREME  # noqa: E402  # noqa: E402  # noqa: E402
from parser.pushdown.sql import EXACT_SESSION_SQL, table_ref  # noqa: E402  # noqa: E402  # noqa: E402
from proxy.config import load_config  # noqa: E402  # noqa: E402  # noqa: E402
from proxy.upstream.demo_data import ensure_table  # noqa: E402  # noqa: E402
from proxy.upstream.embedded import EmbeddedPostgres  # noqa: E402  # noqa: E402
from proxy.upstream.events_data import EventsSpec, ensure_events_table  # noqa: E402  # noqa: E402
from tests.fixtures.simulated import released  # noqa: E402

MU = 0.02164  # the grant of one fresh statement under the shipped config (its NOTICE: cost=mu=0.02164)
END = datetime(2027, 1, 1, tzinfo=UTC)
CASES = [  # (label, sql, column, tolerance)
    ("MIN/MAX(ts), 100k users", "SELECT min(ts), max(ts) FROM events", "ts", timedelta(days=11)),
    ("MIN/MAX(ts) WHERE category = 'purchase'", "SELECT min(ts), max(ts) FROM events WHERE category = 'purchase'",
     "ts", timedelta(days=11)),
    ("MIN/MAX(age), adult", "SELECT min(age), max(age) FROM adult", "age", 5),
    ("MIN/MAX(age) WHERE sex = 0", "SELECT min(age), max(age) FROM adult WHERE sex = 0", "age", 5),
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--users", type=int, default=100_000)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--epochs", type=int, default=200)
    args = ap.parse_args()
    cfg = load_config(REPO / "config.toml")
    root = Path(tempfile.mkdtemp(prefix="lapras-minmax-"))
    pg = EmbeddedPostgres(root / "pg")
    pg.start()
    try:
        dsn = pg.dsn()
        t0 = time.monotonic()
        for table in cfg.catalog.tables:
            load = cfg.loads.get(table.name)
            assert load is not None, table.name  # the shipped config generates both demo tables
            if load.generator == "events":
                ensure_events_table(dsn, EventsSpec(rows=args.rows, users=args.users, end=END), table.schema, table.name)
            else:
                ensure_table(dsn, table, load, None)
        print(f"tables loaded in {time.monotonic() - t0:.1f} s ({args.rows} events rows, {args.users} users); "
              f"{args.epochs} epochs at mu = {MU} per statement\n")
        print("| statement | within tolerance | rows in [MIN, MAX] (worst) | declared bound returned (MIN, MAX) "
              "| 95% interval covers (MIN, MAX) |")
        print("|---|---|---|---|---|")
        for i, (label, sql, col, tol) in enumerate(CASES):
            plan, table, _, noisy, stderr = released(sql, dsn, cfg.catalog, MU, args.epochs, seed=i)
            where = sql.split(f"FROM {table.name}")[1]
            ref = table_ref(table)
            with psycopg.connect(dsn, autocommit=True) as conn:
                for stmt in EXACT_SESSION_SQL:
                    conn.execute(stmt)
                true_min, true_max = conn.execute(f"SELECT min({col}), max({col}) FROM {ref}{where}").fetchone()  # type: ignore[misc]
                p_min, p_max = conn.execute(
                    f"SELECT percentile_disc({P_EXTREME}) WITHIN GROUP (ORDER BY {col}), percentile_disc("
                    f"{1 - P_EXTREME}) WITHIN GROUP (ORDER BY {col}) FROM {ref}{where}").fetchone()  # type: ignore[misc]
                hist = conn.execute(f"SELECT {col}, count(*) FROM {ref}{where} GROUP BY 1 ORDER BY 1").fetchall()
            rows = [plan.rows(noisy[e], stderr)[0] for e in range(args.epochs)]
            values = [v for v, _ in hist]
            counts = np.array([n for _, n in hist], dtype=np.float64)
            cum = np.concatenate(([0.0], np.cumsum(counts)))
            # rows with lo <= value <= hi, from the exact value histogram (one query, not one per epoch)
            kept = [(cum[bisect_right(values, hi)] - cum[bisect_left(values, lo)]) / cum[-1] for lo, hi in rows]
            within = sum(abs(lo - true_min) <= tol and abs(hi - true_max) <= tol for lo, hi in rows)
            ivs = plan.intervals_of_releases(noisy, stderr)
            cover = [sum(r[k][3] <= t <= r[k][4] for r in ivs) for k, t in ((0, p_min), (1, p_max))]
            bounds = [sum(r[0] == _bound(plan, 0) for r in rows), sum(r[1] == _bound(plan, 1) for r in rows)]
            print(f"| {label} (true {true_min} .. {true_max}) | {within / args.epochs:.1%} | "
                  f"{np.mean(kept):.2%} ({min(kept):.2%}) | {bounds[0] / args.epochs:.0%}, {bounds[1] / args.epochs:.0%} "
                  f"| {cover[0] / args.epochs:.1%}, {cover[1] / args.epochs:.1%} |")
    finally:
        pg.destroy()
        shutil.rmtree(root, ignore_errors=True)


def _bound(plan: Any, i: int) -> object:
    """The declared bound MIN (i = 0) or MAX (i = 1) returns when its interval reaches it."""
    q = plan.template.outputs[i]
    if q.cells is not None:
        return q.cells[0][0 if i == 0 else -1]
    return q._typed(q.values[0] if i == 0 else (q.uppers[-1] if q.uppers is not None else q.values[-1]))


if __name__ == "__main__":
    main()
