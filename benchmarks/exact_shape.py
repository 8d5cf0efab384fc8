"""The exact SQL's shape for a GROUP BY whose groups are periodic sets of cells (Metabase's
``extract(hour from ts)``, ``extract(dow from ts)``): one aggregate per group listing every cell range
(``parser.pushdown.sql.answers_sql``) beside one GROUP BY over the cells and sums in numpy
(``parser.pushdown.sql.marginal_sql`` + ``lapras.factored.answers_from_marginal``), side by side on the BI corpus
table (tests/fixtures/bi_corpus/) in an embedded PostgreSQL. Both must give the same exact answers.

Usage: python benchmarks/exact_shape.py [--rows 20000] [--n 3] [--per-query-n 1]
Prints, per statement: queries, ranges written, SQL text size, median ms of each shape and the ratio.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import numpy as np  # noqa: E402
import psycopg  # noqa: E402
import serve  # noqa: E402  (benchmarks/serve.py, beside this script)

from lapras.exact import PostgresExactSource, statement_ranges  # noqa: E402
from lapras.factored import answers_from_marginal  # noqa: E402
from parser import LinearQuery, Planner, TableSchema  # noqa: E402
from parser.pushdown.sql import answers_sql_batches  # noqa: E402  # noqa: E402  # noqa: E402
from proxy.config import load_config  # noqa: E402  # noqa: E402  # noqa: E402
from tests.fixtures import bi_corpus as corpus  # noqa: E402

MC = corpus.mc("Created (UTC)")
STATEMENTS = {
    "extract(hour)": corpus._mb_group(f"CAST(extract(hour from {MC}) AS integer)", "Created (UTC)", "count(*)"),
    "extract(dow)": corpus._mb_group(f"CAST(extract(dow from {MC}) AS integer) + 1", "Created (UTC)", "count(*)"),
    "date_trunc(month)": corpus._mb_group(f"date_trunc('month', {MC})", "Created (UTC)", "count(*)"),
}


def timed(fn: Callable[[], np.ndarray], n: int) -> tuple[float, np.ndarray]:
    """Median milliseconds of ``n`` calls, and the last call's answers."""
    times: list[float] = []
    out = np.zeros(0)
    for _ in range(n):
        t0 = time.perf_counter()
        out = fn()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times), out


def per_query(src: PostgresExactSource, stmts: list[str]) -> np.ndarray:
    """The answers from one aggregate per query (``answers_sql``), as before."""
    return np.asarray([float(v) for s in stmts for v in src._conn().execute(s).fetchone()])


def from_marginal(src: PostgresExactSource, table: TableSchema, qs: list[LinearQuery],
                  attrs: tuple[str, ...]) -> np.ndarray:
    """The answers from one GROUP BY over the cells of the union marginal."""
    return answers_from_marginal(table, qs, src.marginal(table, attrs))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=corpus.ROWS)
    ap.add_argument("--n", type=int, default=3, help="runs of the marginal shape")
    ap.add_argument("--per-query-n", type=int, default=1, help="runs of the per-query shape (slow)")
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="lapras-exact-shape-"))
    with serve.embedded_database(root / "pg", "shape") as dsn:
        with psycopg.connect(dsn, autocommit=True) as c:
            c.execute(corpus.ddl())
            c.execute(corpus.fill_sql(args.rows))
            c.execute("ANALYZE")
        cfg = root / "config.toml"
        cfg.write_text(corpus.config_toml(dsn, 1))
        catalog = load_config(cfg).catalog
        planner = Planner(catalog)
        src = PostgresExactSource(dsn)
        print(f"rows={args.rows}  marginal n={args.n}  per-query n={args.per_query_n}")
        print(f"{'statement':<18} {'queries':>7} {'ranges':>7} {'sql_kB':>7} {'per_query_ms':>12} "
              f"{'marginal_ms':>11} {'ratio':>7}")
        for name, sql in STATEMENTS.items():
            plan = planner.plan(sql)
            table = catalog.table(plan.table, plan.schema)
            assert table is not None
            qs = [q for q in plan.queries if not q.is_zero]
            stmts = answers_sql_batches(table, qs, partial_by=src.partition_key(table))
            attrs = tuple(a.name for a in table.attributes if any(a.name in q.marginal for q in qs))

            t_sql, a = timed(partial(per_query, src, stmts), args.per_query_n)
            t_m, b = timed(partial(from_marginal, src, table, qs, attrs), args.n)
            assert np.array_equal(a, b), (name, a, b)
            print(f"{name:<18} {len(qs):>7} {statement_ranges(qs):>7} {sum(map(len, stmts)) / 1000:>7.1f} "
                  f"{t_sql:>12.1f} {t_m:>11.1f} {t_sql / t_m:>6.1f}x")
        src.close()


if __name__ == "__main__":
    main()
