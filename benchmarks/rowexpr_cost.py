"""Planning cost of per-row expressions over declared cells (issue 18): IN lists of hundreds of values,
CASE buckets over a 3,600-cell column, per-cell SUM weights, predicates over several columns.

    python benchmarks/rowexpr_cost.py [--repeat N] [--against REF [--rounds R]]

Per statement, the median (and minimum) over ``--repeat`` runs of a cold plan (a fresh Planner and an
empty bucket cache: sqlglot parse, analysis with every expression evaluated on the cells, binding to
canonical linear queries), and of sqlglot's parse alone, so ``plan - parse`` is the proxy's own work.
With ``--against REF`` the parser of git revision REF is measured too, alternating the two trees in
separate processes ``--rounds`` times (medians of the rounds, side by side; REF may refuse a form).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent

IN_INT = ", ".join(str(i) for i in range(0, 3600, 3))  # 1,200 values
IN_TEXT = ", ".join(f"'{i}'" for i in range(0, 3600, 3))
IN_NAMES = ", ".join(f"'name {i}'" for i in range(0, 1000, 1))  # 1,000 values
CASE = ("CASE WHEN s < 60 THEN 'minute' WHEN s < 600 THEN 'ten' WHEN s < 1800 THEN 'half' "
        "WHEN s < 3000 THEN 'long' ELSE 'hour' END")

STATEMENTS = {
    "reference: count by k, filtered": "SELECT k, count(*) FROM t WHERE n >= 30 AND n < 40 GROUP BY k",
    "s IN (1,200 ints)": f"SELECT count(*) FROM t WHERE s IN ({IN_INT})",
    "s + 0 IN (1,200 ints)": f"SELECT count(*) FROM t WHERE s + 0 IN ({IN_INT})",
    "CAST(s AS TEXT) IN (1,200 texts)": f"SELECT count(*) FROM t WHERE CAST(s AS TEXT) IN ({IN_TEXT})",
    "lower(name) IN (1,000 names)": f"SELECT count(*) FROM t WHERE lower(name) IN ({IN_NAMES})",
    "name LIKE on 1,000 names": "SELECT count(*) FROM t WHERE name LIKE '%7%' AND name ILIKE 'NAME 1%'",
    "CASE over 3,600 cells, key": f"SELECT {CASE} AS b, count(*) FROM t GROUP BY 1",
    "CASE over 3,600 cells, filter": f"SELECT count(*) FROM t WHERE {CASE} = 'half'",
    "SUM(CASE ... THEN s * 2 ...)": "SELECT sum(CASE WHEN s < 600 THEN s * 2 ELSE 0 END) FROM t",
    "SUM(s * s), AVG(s / 60)": "SELECT sum(s * s), avg(s / 60) FROM t",
    "SUM(n * k) (split over k)": "SELECT sum(n * k) FROM t",
    "WHERE n + k > 10": "SELECT count(*) FROM t WHERE n + k > 10",
    "WHERE n > s (367,200 pairs)": "SELECT count(*) FROM t WHERE n > s",
}


def catalog() -> Any:
    from parser import Attribute, Catalog, TableSchema  # the package's API: trees before and after issue 28
    from parser.coltypes import IntType, TextType

    t = TableSchema("t", (
        Attribute("n", IntType(0, 100, nullable=True)),
        Attribute("k", IntType(1, 4)),
        Attribute("s", IntType(0, 3599)),
        Attribute("name", TextType(values=tuple(f"Name {i}" for i in range(1000)))),
    ))
    return Catalog((t,))


def median_and_min_ms(fn: Callable[[], object], repeat: int) -> tuple[float, float]:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times), min(times)


def measure(repeat: int) -> dict[str, Any]:
    """Every figure for the parser importable from sys.path (run in a worker process per tree)."""
    import sqlglot

    from parser import Planner, Refusal

    try:
        from parser.analysis.cells import clear_cell_cache
    except ImportError:  # an older tree without the bucket cache
        def clear_cell_cache() -> None:
            return None

    cat = catalog()
    out: dict[str, Any] = {}
    for name, sql in STATEMENTS.items():
        def cold(sql: str = sql) -> object:
            clear_cell_cache()
            return Planner(cat).plan(sql)

        try:
            plan = cold()
        except Refusal as r:
            out[name] = {"refused": f"{r.sqlstate}"}
            continue
        plan_ms, plan_min = median_and_min_ms(cold, repeat)
        parse_ms, _ = median_and_min_ms(lambda sql=sql: sqlglot.parse_one(sql, read="postgres"), repeat)
        out[name] = {"plan_ms": plan_ms, "plan_min_ms": plan_min, "parse_ms": parse_ms,
                     "queries": len(plan.queries)}  # type: ignore[attr-defined]
    return out


def _worker(root: Path, repeat: int) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--worker", str(root), "--repeat", str(repeat)]
    done = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def _cell(runs: list[dict[str, Any]], name: str, key: str) -> float | None:
    vals = [r[name][key] for r in runs if key in r[name]]
    return statistics.median(vals) if vals else None


def compare(ref: str, rounds: int, repeat: int) -> None:
    import ref_tree  # benchmarks/ref_tree.py, beside this script

    old, new = ref_tree.alternate(ref, rounds, lambda root: _worker(root, repeat), "rowexpr-cost-")
    print(f"cold plan, medians of {rounds} alternating rounds x {repeat} runs; {ref} vs this tree")
    print(f"{'statement':32s} {'plan ' + ref[:10]:>16s} {'plan this':>11s} {'ratio':>7s} {'parse':>9s} {'queries':>8s}")
    for name in STATEMENTS:
        o, n = _cell(old, name, "plan_ms"), _cell(new, name, "plan_ms")
        p = _cell(new, name, "parse_ms")
        before = f"{o:13.1f} ms" if o is not None else f"{'refused ' + old[0][name].get('refused', ''):>16s}"
        after = f"{n:8.1f} ms" if n is not None else f"{'refused':>11s}"
        ratio = f"{n / o:7.3f}" if o and n else f"{'':7s}"
        q = new[0][name].get("queries", "")
        print(f"{name:32s} {before} {after} {ratio} {p or 0:6.1f} ms {q:>8}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--against", help="git revision whose parser to measure side by side")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        sys.path.insert(0, args.worker)
        print(json.dumps(measure(args.repeat)))
        return 0
    if args.against:
        compare(args.against, args.rounds, args.repeat)
        return 0
    sys.path.insert(0, str(REPO))
    res = measure(args.repeat)
    print(f"{'statement':32s} {'cold plan':>10s} {'min':>8s} {'parse':>9s} {'plan-parse':>11s} {'queries':>8s}")
    for name, r in res.items():
        if "refused" in r:
            print(f"{name:32s} refused {r['refused']}")
            continue
        print(f"{name:32s} {r['plan_ms']:7.1f} ms {r['plan_min_ms']:5.1f} ms {r['parse_ms']:6.1f} ms "
              f"{r['plan_ms'] - r['parse_ms']:8.1f} ms {r['queries']:8d}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
