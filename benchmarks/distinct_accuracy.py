"""COUNT(DISTINCT) on `events`: the bias of the per-unit group bound g against the noise it buys, and the
noise of the distinct-count bound before and after per-cell caps.

Part ``groups``: each user counts in at most g groups (``max_groups_per_unit``), read from all their rows (k =
10 bounds rows for counts and sums only), so a statement of one COUNT(DISTINCT user_id) per group has
sensitivity sqrt(g) (``lapras.mechanisms.sensitivity``). A small g means less noise but undercounts users
present in more than g groups. For g in 1, 2, 4, 8, 12 (the shipped value) and 20 the script prints, per
dashboard statement, the bias (mean over groups of the bounded exact figure minus PostgreSQL's own
COUNT(DISTINCT)), the noise sigma when the whole (1, 1e-3) budget of an epoch is spent on that one
statement, their RMSE, and the seconds PostgreSQL takes for the bounded exact answer beside the same
statement's COUNT(*) (its k-row bound).

Part ``values`` (shipped g = 12, November 2026 by day): COUNT(DISTINCT category) and COUNT(DISTINCT user_id)
with the sensitivity this release computes (one unit adds at most min(g, values a cell can hold) to a cell,
g in all: ``parser.bind.distinct_caps``) beside the former one (g for distinct values, sqrt(min(g, groups))
for units present), and the RMSE of each against PostgreSQL's own figure. The generated rows end on
2026-12-01 whatever the day of the run. Writes ``results/distinct_accuracy.json``
(``distinct_accuracy_PART.json`` for one part).

    .venv/bin/python benchmarks/distinct_accuracy.py [--rows 200000] [--part groups|values|all]

Operator-side benchmark: exact values are only used here to measure errors.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import parser as sqlparser  # noqa: E402
from lapras.accounting import Budget  # noqa: E402
from lapras.exact import PostgresExactSource  # noqa: E402
from lapras.mechanisms import Gaussian  # noqa: E402
from lapras.mechanisms.sensitivity import statement_sensitivity  # noqa: E402
from parser.model.schema import Catalog, TableSchema  # noqa: E402
from parser.pushdown.sql import EXACT_SESSION_SQL  # noqa: E402  # noqa: E402
from proxy.config import load_config  # noqa: E402  # noqa: E402
from proxy.upstream.embedded import EmbeddedPostgres  # noqa: E402
from proxy.upstream.events_data import EventsSpec, ensure_events_table  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
STATEMENTS = {
    "users by category": "SELECT category, COUNT(DISTINCT user_id) FROM events GROUP BY category",
    "users by country": "SELECT country, COUNT(DISTINCT user_id) FROM events GROUP BY country",
    "users by month": "SELECT date_trunc('month', ts), COUNT(DISTINCT user_id) FROM events GROUP BY 1",
    "users by category, November": "SELECT category, COUNT(DISTINCT user_id) FROM events "
                                   "WHERE ts >= '2026-11-01' AND ts < '2026-12-01' GROUP BY category",
}
GS = (1, 2, 4, 8, 12, 20)
NOVEMBER = "ts >= '2026-11-01' AND ts < '2026-12-01'"
FIVE = "category IN ('page_view', 'search', 'add_to_cart', 'purchase', 'share')"
VALUES = {
    "categories, November": f"SELECT COUNT(DISTINCT category) FROM events WHERE {NOVEMBER}",
    "categories by day": f"SELECT date_trunc('day', ts), COUNT(DISTINCT category) FROM events WHERE {NOVEMBER} GROUP BY 1",
    "5 categories by day": f"SELECT date_trunc('day', ts), COUNT(DISTINCT category) FROM events "
                           f"WHERE {NOVEMBER} AND {FIVE} GROUP BY 1",
    "users by day": f"SELECT date_trunc('day', ts), COUNT(DISTINCT user_id) FROM events WHERE {NOVEMBER} GROUP BY 1",
    "countries by category": f"SELECT category, COUNT(DISTINCT country) FROM events WHERE {NOVEMBER} GROUP BY 1",
}
END = datetime(2026, 12, 1, tzinfo=UTC)  # the generated span ends here whatever the day of the run


def former_sensitivity(queries: list, g: int) -> float:  # type: ignore[type-arg]
    """The bound before per-cell caps, for one query per cell: g for a histogram of distinct values (all g
    of a unit's pairs in one cell), sqrt(min(g, cells)) for units present; histograms add in squares."""
    by: dict[str, tuple[bool, set[str]]] = {}
    for q in queries:
        if not q.is_zero:
            by.setdefault(q.source.name, (q.source.derived.counted is None, set()))[1].add(q.key)
    return float(np.sqrt(sum(min(g, len(keys)) if present else g * g for present, keys in by.values())))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--part", choices=("groups", "values", "all"), default="all")
    args = ap.parse_args()
    cfg = load_config(ROOT / "config.toml")
    events = next(t for t in cfg.catalog.tables if t.name == "events")
    budget = Budget("gdp", 1.0, 1e-3)
    cost = budget.cost_of(budget.units)
    tmp = tempfile.mkdtemp(prefix="distinct-")
    pg = EmbeddedPostgres(Path(tmp))
    pg.start()
    out: list[dict[str, object]] = []
    values: list[dict[str, object]] = []
    try:
        ensure_events_table(pg.dsn(), EventsSpec(rows=args.rows, end=END))
        src = PostgresExactSource(pg.dsn())
        with psycopg.connect(pg.dsn(), autocommit=True) as conn:
            for stmt in EXACT_SESSION_SQL:
                conn.execute(stmt)
            for name, sql in (STATEMENTS.items() if args.part != "values" else ()):
                raw_by = {r[0]: float(r[-1]) for r in conn.execute(sql.replace("COUNT(DISTINCT", "count(DISTINCT"))}
                count_sql = sql.replace("COUNT(DISTINCT user_id)", "COUNT(*)")
                for g in GS:
                    table = replace(events, max_groups_per_unit=g)
                    plan = sqlparser.plan_query(sql, Catalog((table,)))
                    t0 = time.perf_counter()
                    bounded = src.answers(table, plan.queries)
                    t_distinct = time.perf_counter() - t0
                    count_plan = sqlparser.plan_query(count_sql, Catalog((table,)))
                    t0 = time.perf_counter()
                    src.answers(table, count_plan.queries)
                    t_count = time.perf_counter() - t0
                    # PostgreSQL's own figure per group of the plan (a group without rows: 0).
                    live = np.array([raw_by.get(row[0], 0.0) for row in plan.rows(bounded, None)])
                    bias = float(np.mean(bounded - live))
                    sens = statement_sensitivity(table, plan.queries)
                    sigma = Gaussian.calibrate(cost, sens, len(plan.queries)).sigma
                    out.append({"statement": name, "g": g, "groups": len(plan.queries), "sensitivity": sens,
                                "mean_users": float(live.mean()), "bias": bias, "sigma": sigma,
                                "rmse": float(np.sqrt(np.mean((bounded - live) ** 2) + sigma**2)),
                                "exact_s": t_distinct, "count_exact_s": t_count})
            for name, sql in (VALUES.items() if args.part != "groups" else ()):
                values.append(_values_row(conn, src, events, name, sql, cost))
        src.close()
    finally:
        pg.destroy()
    if values:
        _print_values(args.rows, values)
    if out:
        _print_groups(args.rows, events.max_rows_per_unit, out)
    RESULTS.mkdir(exist_ok=True)
    name = "distinct_accuracy.json" if args.part == "all" else f"distinct_accuracy_{args.part}.json"
    (RESULTS / name).write_text(json.dumps({"rows": args.rows, "results": out, "values": values}, indent=1))
    return 0


def _values_row(conn: psycopg.Connection, src: PostgresExactSource, events: TableSchema, name: str, sql: str,
                cost: object) -> dict[str, object]:
    """One statement at the shipped g: bias against PostgreSQL's own COUNT(DISTINCT), sigma and RMSE with the
    former and the current sensitivity."""
    raw_by = {r[0]: float(r[-1]) for r in conn.execute(sql.replace("COUNT(DISTINCT", "count(DISTINCT"))}
    plan = sqlparser.plan_query(sql, Catalog((events,)))
    bounded = src.answers(events, plan.queries)
    live = np.array([raw_by.get(row[0], 0.0) for row in plan.rows(bounded, None)])
    bias2 = float(np.mean((bounded - live) ** 2))
    row: dict[str, object] = {"statement": name, "groups": len(plan.queries), "mean": float(live.mean()),
                              "bias": float(np.mean(bounded - live))}
    for label, sens in (("before", former_sensitivity(list(plan.queries), events.unit_cells)),
                        ("after", statement_sensitivity(events, plan.queries))):
        sigma = Gaussian.calibrate(cost, sens, len(plan.queries)).sigma  # type: ignore[arg-type]
        row[label] = {"sensitivity": sens, "sigma": sigma, "rmse": float(np.sqrt(bias2 + sigma**2))}
    return row


def _print_values(rows: int, values: list[dict[str, object]]) -> None:
    print(f"\n{rows:,} events rows, g = 12, November 2026; sigma: the whole (1, 1e-3) epoch budget on one statement")
    print(f"{'statement':24} {'groups':>6} {'mean':>8} {'bias':>6} {'sens before':>11} {'after':>6} "
          f"{'RMSE before':>11} {'after':>6}")
    for r in values:
        b, a = r["before"], r["after"]
        print(f"{r['statement']:24} {r['groups']:>6} {r['mean']:>8.1f} {r['bias']:>6.1f} "  # type: ignore[index]
              f"{b['sensitivity']:>11.2f} {a['sensitivity']:>6.2f} {b['rmse']:>11.2f} {a['rmse']:>6.2f}")  # type: ignore[index]


def _print_groups(rows: int, k: int, out: list[dict[str, object]]) -> None:
    print(f"\n{rows:,} events rows, k = {k}; sigma: the whole (1, 1e-3) epoch budget "
          "on one statement (gdp)")
    print(f"{'statement':30} {'g':>3} {'sens':>6} {'mean users':>11} {'bias':>9} {'sigma':>7} {'rmse':>8} "
          f"{'exact s':>8} {'COUNT(*) s':>10}")
    for r in out:
        print(f"{r['statement']:30} {r['g']:>3} {r['sensitivity']:>6.3f} {r['mean_users']:>11.1f} "
              f"{r['bias']:>9.1f} {r['sigma']:>7.2f} {r['rmse']:>8.2f} {r['exact_s']:>8.3f} "
              f"{r['count_exact_s']:>10.3f}")


if __name__ == "__main__":
    sys.exit(main())
