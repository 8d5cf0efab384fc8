"""``[lapras] bounding = "statement"`` on the real embedded PostgreSQL: each unit's k rows are chosen among
the rows a statement reads (after its WHERE), so a windowed answer is PostgreSQL's answer over exactly those
bounded rows, and a window in which every unit has at most k rows is answered without bias (the epoch's
bounding over the whole year kept about half of them)."""

from __future__ import annotations

import numpy as np
import psycopg
import pytest

import parser as sqlparser
from lapras.exact import PostgresExactSource
from lapras.snapshot import SnapshotExactSource
from parser.model.schema import Attribute, Catalog, IntType, TableSchema
from parser.pushdown.bounding import bounding_seed
from parser.pushdown.sql import EXACT_SESSION_SQL
from tests.fixtures.engine_helpers import events_database

K = 3
EVENTS = TableSchema("events", (Attribute("day", IntType(0, 363)), Attribute("kind", IntType(0, 4)),
                                Attribute("amount", IntType(0, 99))), privacy_unit="user_id", max_rows_per_unit=K)


@pytest.fixture(scope="module")
def mixed(embedded_pg) -> str:  # type: ignore[no-untyped-def]
    """Light units (1-6 rows over the year) and heavy ones (80 rows, many the same): most statements'
    filters keep more than k rows of a heavy unit and at most k of a light one; and rows with no unit."""
    rng = np.random.default_rng(3)
    rows: list[tuple[int | None, int, int, int]] = []
    for u in range(800):
        rows += [(u, int(rng.integers(0, 364)), int(rng.integers(0, 5)), int(rng.integers(0, 100)))
                 for _ in range(int(rng.integers(1, 7)))]
    for u in range(800, 830):
        rows += [(u, int(rng.integers(0, 364)), int(rng.integers(0, 2)), int(rng.integers(50, 100))) for _ in range(60)]
        rows += [(u, 100, 1, 7)] * 20
    rows += [(None, 5, 1, 1)] * 10
    return events_database(embedded_pg, "stmt_mixed", rows)


def _reference(dsn: str, where: str, select: str, group: str | None) -> dict[tuple[object, ...], list[float]]:
    """PostgreSQL's own answer to ``SELECT group, select FROM events WHERE where GROUP BY group`` over each
    unit's k rows among those ``where`` keeps (smallest seeded hash of the whole row's text first)."""
    bounded = (f"(SELECT user_id, day, kind, amount FROM (SELECT e.*, row_number() OVER (PARTITION BY e.user_id "
               f"ORDER BY hashtextextended(e::text, {bounding_seed(EVENTS)}), e::text) AS n FROM events e "
               f"WHERE e.user_id IS NOT NULL AND ({where})) AS b WHERE n <= {K}) AS events")
    sql = (f"SELECT {group + ', ' if group else ''}{select} FROM {bounded}"
           + (f" GROUP BY {group}" if group else ""))
    with psycopg.connect(dsn, autocommit=True) as conn:
        for s in EXACT_SESSION_SQL:
            conn.execute(s)
        rows = conn.execute(sql).fetchall()
    n = 1 if group else 0
    return {tuple(r[:n]): [float(v or 0) for v in r[n:]] for r in rows}


def _statements(rng: np.random.Generator, n: int) -> list[tuple[str, str, str | None]]:
    out: list[tuple[str, str, str | None]] = []
    for _ in range(n):
        lo = int(rng.integers(0, 330))
        hi = lo + int(rng.integers(1, 60))
        kind = int(rng.integers(0, 5))
        where = str(rng.choice([f"day BETWEEN {lo} AND {hi}", f"day >= {lo} AND kind = {kind}",
                                f"(day < {lo} OR day > {hi}) AND amount < 80", f"kind <> {kind}",
                                f"day BETWEEN {lo} AND {hi} OR kind = {kind}"]))
        group = [None, "kind", "day"][int(rng.integers(0, 3))]
        # A per-day count reads its union marginal (many groups: one GROUP BY scan, sums in numpy).
        out.append((where, "count(*)" if group == "day" else "count(*), sum(amount)", group))
    return out


def _check(src: object, dsn: str, where: str, select: str, group: str | None) -> None:
    sql = f"SELECT {group + ', ' if group else ''}{select} FROM events WHERE {where}" + (
        f" GROUP BY {group}" if group else "")
    plan = sqlparser.plan_query(sql, Catalog((EVENTS,)))
    got = src.answers(EVENTS, plan.queries)  # type: ignore[attr-defined]
    want = _reference(dsn, where, select, group)
    for key, slots in zip(plan.group_keys or [()], plan.slots, strict=True):
        expect = want.get(tuple(key), [0.0] * len(slots))
        np.testing.assert_allclose([got[i] for i in slots], expect, err_msg=sql)


def test_exact_answers_are_postgres_over_the_rows_bounded_after_the_where(mixed: str) -> None:
    """Random filtered statements (scalar, by kind, by day: the per-day ones read a union marginal), through
    the source as it is configured by default, through the epoch snapshot wrapper, and with an epoch set
    (an unfiltered statement then reads the epoch's materialisation: the same rows)."""
    plain = PostgresExactSource(mixed)
    assert plain.bounding == "statement"
    wrapped = SnapshotExactSource(PostgresExactSource(mixed))
    wrapped.new_epoch(1)
    for where, select, group in _statements(np.random.default_rng(7), 40):
        for src in (plain, wrapped):
            _check(src, mixed, where, select, group)
    for src in (plain, wrapped):
        _check(src, mixed, "TRUE", "count(*), sum(amount)", "kind")
    assert len(wrapped.inner.bounded.built) == 1  # type: ignore[attr-defined]
    plain.close()
    wrapped.inner.close()  # type: ignore[attr-defined]


def test_each_unit_keeps_at_most_k_rows_among_those_read(mixed: str) -> None:
    """The red-team check of the bound, per statement: a heavy unit alone in a filter counts k rows."""
    src = PostgresExactSource(mixed)
    one = sqlparser.plan_query("SELECT count(*) FROM events WHERE day = 100 AND kind = 1 AND amount = 7",
                               Catalog((EVENTS,)))
    assert src.answers(EVENTS, one.queries)[0] == 30 * K  # 30 heavy units with 20 such rows each
    src.close()


@pytest.fixture(scope="module")
def fortnightly(embedded_pg) -> str:  # type: ignore[no-untyped-def]
    """1,000 units with one row every 14 days all year (26 rows each, random phase): any 28-day window
    holds exactly 2 rows of every unit."""
    rng = np.random.default_rng(11)
    rows = []
    for u in range(1000):
        phase = int(rng.integers(0, 14))
        rows += [(u, d, int(rng.integers(0, 5)), int(rng.integers(0, 100))) for d in range(phase, 364, 14)]
    return events_database(embedded_pg, "stmt_fortnight", rows)


def test_a_windowed_count_is_the_truth_where_epoch_bounding_kept_half(fortnightly: str) -> None:
    table = TableSchema("events", EVENTS.attributes, privacy_unit="user_id", max_rows_per_unit=13)
    catalog = Catalog((table,))
    count = sqlparser.plan_query("SELECT count(*) FROM events WHERE day BETWEEN 200 AND 227", catalog).queries
    daily = sqlparser.plan_query("SELECT day, count(*) FROM events WHERE day BETWEEN 200 AND 227 GROUP BY day",
                                 catalog).queries
    statement, epoch = PostgresExactSource(fortnightly), PostgresExactSource(fortnightly, bounding="epoch")
    epoch.new_epoch(1)
    assert statement.answers(table, count)[0] == 2000  # every row of the window
    assert statement.answers(table, daily).sum() == 2000
    kept = epoch.answers(table, count)[0]
    assert 0.4 * 2000 < kept < 0.6 * 2000  # 13 of a unit's 26 rows over the year, about half in the window
    statement.close()
    epoch.close()


def test_the_release_of_p_bounds_each_unit_among_the_cells_p_reads(fortnightly: str) -> None:
    """P's release over the day marginal reads each unit's k rows among the days P's window covers: the
    predicted windowed count is answered from it without bias (epoch bounding over the year kept about
    half); a count over other days of the same marginal is never estimated from that release (its histogram
    holds no rows there) and is answered fresh; the release's cells survive the ledger's bytes."""
    from lapras import Engine, EngineSettings, MemoryLedger, Prediction
    from lapras.matrix_mechanism import MMRelease

    table = TableSchema("events", EVENTS.attributes, privacy_unit="user_id", max_rows_per_unit=13)
    catalog = Catalog((table,))
    window = sqlparser.plan_query("SELECT day, count(*) FROM events WHERE day BETWEEN 200 AND 227 GROUP BY day",
                                  catalog)
    other = sqlparser.plan_query("SELECT count(*) FROM events WHERE day BETWEEN 100 AND 127", catalog)
    src = PostgresExactSource(fortnightly)
    eng = Engine(catalog, MemoryLedger(), src,
                 EngineSettings(epsilon=1e4, split="matrix_heavy", rho_estimate=1.0, joint_max_cells=0,
                                mm_time_limit=2.0),
                 predictions=lambda _c: Prediction(tuple(q for q in window.queries if not q.is_zero), 10, 1.0))
    rel = eng._mm
    assert rel is not None and len(rel.groups) == 1
    cells = rel.group_cells(0)
    assert cells is not None and cells.sum() == 28 and cells[200:228].all()
    stored = eng.ledger.mm_release(eng._epoch.id)  # type: ignore[union-attr]
    again = MMRelease.from_bytes(stored.meta["groups"], stored.payload, stored.cost)  # type: ignore[union-attr,index]
    assert (again.group_cells(0) == cells).all()
    a = eng.answer(window, "u")
    assert a.outcome == "good" and a.cost is None
    assert abs(a.values.sum() - 2000) < 2000 * 0.02  # every row of the window (epoch bounding: about half)
    b = eng.answer(other, "u")
    assert b.outcome == "bad" and abs(b.values[0] - 2000) < 2000 * 0.02
    src.close()


def test_the_row_filter_holds_every_row_a_query_reads(mixed: str) -> None:
    """``bounding_filter`` keeps every row some query reads (checked by PostgreSQL on the data), and only
    those where it is the exact union (a GROUP BY under one WHERE: one box; a few boxes: their union);
    a statement too large to unite exactly gets the per-column hull (a superset)."""
    from parser.pushdown.rowfilter import bounding_filter
    from parser.pushdown.sql import predicate_sql

    wide = TableSchema("events", EVENTS.attributes, privacy_unit="user_id", max_rows_per_unit=K)
    cases = [("SELECT day, count(*) FROM events WHERE day BETWEEN 10 AND 40 AND amount < 50 GROUP BY day", True),
             ("SELECT day, count(*) FROM events WHERE day BETWEEN 192 AND 225 OR kind = 2 GROUP BY day", True),
             ("SELECT kind, count(*) FROM events WHERE amount % 7 = 1 AND day < 300 GROUP BY kind", True),
             ("SELECT day, count(*) FROM events WHERE (day < 100 AND amount % 3 = 0) OR "
              "(day > 300 AND amount % 3 = 1) GROUP BY day", False)]
    with psycopg.connect(mixed, autocommit=True) as conn:
        for sql, exact in cases:
            qs = [q for q in sqlparser.plan_query(sql, Catalog((wide,))).queries if not q.is_zero]
            where = bounding_filter(wide, qs)
            assert where is not None, sql
            union = " OR ".join(f"({predicate_sql(wide, q)})" for q in qs)
            outside = conn.execute(f"SELECT count(*) FROM events WHERE ({union}) AND NOT ({where})").fetchone()[0]
            extra = conn.execute(f"SELECT count(*) FROM events WHERE ({where}) AND NOT ({union})").fetchone()[0]
            assert outside == 0, sql
            assert (extra == 0) == exact, (sql, extra)
