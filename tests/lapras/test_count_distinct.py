"""COUNT(DISTINCT) on a real PostgreSQL: units present per cell, each unit bounded to g cells in the
pushed-down SQL (``parser.pushdown.sql.unit_cells_sql``), the same cells whatever the physical order."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import psycopg
import pytest
from scipy.stats import chi2

import parser as sqlparser
from lapras import Engine, EngineSettings, MemoryLedger, Prediction
from lapras.exact import PostgresExactSource
from lapras.mechanisms.sensitivity import statement_sensitivity
from parser.model.schema import Attribute, Catalog, IntType, TableSchema
from parser.pushdown.sql import cell_expr, unit_cells_sql
from tests.fixtures.engine_helpers import CachedExactSource, fresh_engine
from tests.fixtures.visits_data import visits_fixture

K, G = 6, 2
ROWLEVEL = TableSchema("visits", (Attribute("a", IntType(0, 9)), Attribute("c", IntType(0, 39))))
UNIT = replace(ROWLEVEL, privacy_unit="user_id", max_rows_per_unit=K)
BOUNDED = replace(UNIT, max_groups_per_unit=G)


def _rows(seed: int = 11) -> list[tuple[int, int, int]]:
    """1,500 light users with 1-3 rows in one or two values of ``a``, 15 heavy users with 200 rows over
    every value of ``a``."""
    rng = np.random.default_rng(seed)
    out = []
    for u in range(1500):
        home = [int(x) for x in rng.integers(0, 10, size=2)]
        out += [(u, home[int(rng.integers(0, 2))], int(rng.integers(0, 40))) for _ in range(int(rng.integers(1, 4)))]
    for u in range(1500, 1515):
        out += [(u, int(rng.integers(0, 10)), int(rng.integers(0, 40))) for _ in range(200)]
    return out


data = visits_fixture(_rows, "distinct")


def _cells(dsn: str, table: TableSchema, where: str | None = None) -> list[tuple[int, int]]:
    sql = unit_cells_sql(table, [cell_expr(table.attributes[0])], where)
    with psycopg.connect(dsn) as conn:
        return sorted((int(u), int(a)) for u, a in conn.execute(sql).fetchall())


def test_each_unit_is_kept_in_at_most_g_cells_the_same_ones_in_any_order(data) -> None:  # type: ignore[no-untyped-def]
    rows, first, second = data
    kept = _cells(first, BOUNDED)
    per_unit: dict[int, set[int]] = {}
    for u, a in kept:
        per_unit.setdefault(u, set()).add(a)
    assert max(len(v) for v in per_unit.values()) == G
    assert kept == _cells(second, BOUNDED)
    # Without g the k kept rows bound the cells; every kept cell is one the unit has rows in.
    unbounded = _cells(first, UNIT)
    assert set(kept) <= set(unbounded)
    assert max(sum(1 for u, _ in unbounded if u == x) for x in range(1500, 1515)) <= K
    real = {(u, a) for u, a, _ in rows}
    assert set(unbounded) <= real
    light = {(u, a) for u, a, _ in rows if u < 1500}
    assert {p for p in kept if p[0] < 1500} == light  # light users are in at most 2 cells: all kept
    # A filter applies before the bound: the cells kept are among the rows that pass it.
    assert all(a >= 5 for _, a in _cells(first, BOUNDED, "a >= 5"))


WIDE = replace(UNIT, max_rows_per_unit=1000)  # no unit exceeds the bounds: every row, every cell kept
WIDE_G = replace(WIDE, max_groups_per_unit=G)


def _plan(sql: str, table: TableSchema):  # type: ignore[no-untyped-def]
    return sqlparser.plan_query(sql, Catalog((table,)))


def _pg(dsn: str, sql: str) -> list[tuple]:
    with psycopg.connect(dsn) as conn:
        return conn.execute(sql).fetchall()


@pytest.mark.parametrize("sql, pg", [
    ("SELECT a, COUNT(DISTINCT user_id) FROM visits GROUP BY a",
     "SELECT a, count(DISTINCT user_id) FROM visits GROUP BY a ORDER BY a"),
    ("SELECT a, COUNT(DISTINCT user_id) FROM visits WHERE c BETWEEN 5 AND 24 GROUP BY a",
     "SELECT a, count(DISTINCT user_id) FROM visits WHERE c BETWEEN 5 AND 24 GROUP BY a ORDER BY a"),
    ("SELECT a, COUNT(DISTINCT c) FROM visits WHERE c < 30 GROUP BY a",
     "SELECT a, count(DISTINCT c) FROM visits WHERE c < 30 GROUP BY a ORDER BY a"),
    ("SELECT COUNT(DISTINCT user_id) FILTER (WHERE a > 3), COUNT(DISTINCT a) FROM visits",
     "SELECT count(DISTINCT user_id) FILTER (WHERE a > 3), count(DISTINCT a) FROM visits"),
    # Grouped by expressions over two columns (joint cells): each key's cells are the axis's CASE.
    ("SELECT a + c / 10 AS k, COUNT(DISTINCT user_id) FROM visits GROUP BY 1",
     "SELECT a + c / 10 AS k, count(DISTINCT user_id) FROM visits GROUP BY 1 ORDER BY 1"),
    ("SELECT CASE WHEN a < 5 AND c >= 20 THEN 1 ELSE 2 END, a, COUNT(DISTINCT c) FROM visits GROUP BY 1, 2",
     "SELECT CASE WHEN a < 5 AND c >= 20 THEN 1 ELSE 2 END, a, count(DISTINCT c) FROM visits "
     "WHERE NOT (a >= 5 AND c >= 20 AND false) GROUP BY 1, 2 ORDER BY 1, 2"),
])
def test_exact_linear_answers_equal_postgres_when_no_unit_exceeds_the_bound(data, sql, pg) -> None:  # type: ignore[no-untyped-def]
    _, dsn, _ = data
    p = _plan(sql, WIDE)
    assert all(q.source is not None for q in p.queries)
    src = PostgresExactSource(dsn)
    got = p.rows(src.answers(WIDE, p.queries), None)
    src.close()
    want = [tuple(int(v) for v in r) for r in _pg(dsn, pg)]
    assert [tuple(int(v) for v in r) for r in got] == want


def test_bounded_figure_when_units_exceed_g(data) -> None:  # type: ignore[no-untyped-def]
    """With g = 2 each unit counts in at most 2 groups: light users (in at most 2 values of a) all count,
    the 15 heavy ones in exactly 2 groups each, never more than PostgreSQL's own distinct count."""
    rows, dsn, second = data
    sql = "SELECT a, COUNT(DISTINCT user_id) FROM visits GROUP BY a"
    p = _plan(sql, WIDE_G)
    src = PostgresExactSource(dsn)
    got = src.answers(WIDE_G, p.queries)
    np.testing.assert_array_equal(got, PostgresExactSource(second).answers(WIDE_G, p.queries))
    src.close()
    exact = np.array([r[1] for r in _pg(dsn, sql.replace("COUNT(DISTINCT", "count(DISTINCT") + " ORDER BY a")])
    light = np.zeros(10)
    for a in range(10):
        light[a] = len({u for u, x, _ in rows if x == a and u < 1500})
    assert (light <= got).all() and (got <= exact).all()
    assert got.sum() == light.sum() + 15 * G
    assert exact.sum() > got.sum()  # the bound bit: heavy users are in all 10 groups


def test_sensitivity_is_computed_from_the_per_unit_cell_bound() -> None:
    by_group = _plan("SELECT a, COUNT(DISTINCT user_id) FROM visits GROUP BY a", BOUNDED).queries
    assert statement_sensitivity(BOUNDED, by_group) == pytest.approx(np.sqrt(G))  # g ones, one per group
    assert statement_sensitivity(UNIT, by_group[:1]) == pytest.approx(1.0)
    unbounded = _plan("SELECT a, COUNT(DISTINCT user_id) FROM visits GROUP BY a", UNIT).queries
    assert statement_sensitivity(UNIT, unbounded) == pytest.approx(np.sqrt(K))  # g unset: k rows, k cells
    # Distinct values: a unit's g cells may all fall in one group's sum.
    values = _plan("SELECT a, COUNT(DISTINCT c) FROM visits GROUP BY a", BOUNDED).queries
    assert statement_sensitivity(BOUNDED, values) == pytest.approx(G)
    assert statement_sensitivity(ROWLEVEL, _plan("SELECT a, COUNT(DISTINCT c) FROM visits GROUP BY a",
                                                 ROWLEVEL).queries) == pytest.approx(1.0)
    # Released beside counts of the same table: the same unit moves both, squares add.
    both = _plan("SELECT a, COUNT(*), COUNT(DISTINCT user_id) FROM visits GROUP BY a", BOUNDED).queries
    assert statement_sensitivity(BOUNDED, both) == pytest.approx(np.sqrt(K**2 + G))


@pytest.mark.slow
def test_released_noise_matches_the_sigma_of_the_computed_sensitivity(data) -> None:  # type: ignore[no-untyped-def]
    """Over independent epochs, (released - bounded exact) / stated stderr is chi-square with as many degrees
    of freedom as answers (two-sided, false-failure rate 1e-4), and the stated stderr is sqrt(g) times that
    of one row-level count per group (sensitivity 1) released at the same point of the stream."""
    _, dsn, _ = data
    exact = CachedExactSource(dsn)
    sql = "SELECT a, COUNT(DISTINCT user_id) FROM visits GROUP BY a"
    p = _plan(sql, BOUNDED)
    truth = exact.answers(BOUNDED, p.queries)
    ref = _plan("SELECT a, COUNT(*) FROM visits GROUP BY a", ROWLEVEL)
    ref_exact = CachedExactSource(dsn)
    stat, df, errs, sds = 0.0, 0, [], []
    for _ in range(60):
        a = fresh_engine(BOUNDED, exact).answer(p, "u")
        b = fresh_engine(ROWLEVEL, ref_exact).answer(ref, "u")
        np.testing.assert_allclose(a.stderrs, np.sqrt(G) * b.stderrs, rtol=1e-9)
        stat += float((((a.values - truth) / a.stderrs) ** 2).sum())
        df += len(truth)
        errs.extend(a.values - truth)
        sds.extend(a.stderrs)
    assert chi2.ppf(0.5e-4, df) < stat < chi2.ppf(1 - 0.5e-4, df)
    assert np.std(errs) == pytest.approx(np.mean(sds), rel=0.15)


def test_predicted_count_distinct_is_served_from_the_matrix_mechanism_release(data) -> None:  # type: ignore[no-untyped-def]
    """P holds COUNT(DISTINCT user_id) by a (a derived histogram) beside COUNT(*) by a: the epoch's one MM
    release measures both histograms, read from PostgreSQL, calibrated with the units' and rows' bounds
    added in squares; the statements are then answered from it at no further cost, near the bounded truth."""
    _, dsn, _ = data
    sqls = ["SELECT a, COUNT(DISTINCT user_id) FROM visits GROUP BY a", "SELECT a, COUNT(*) FROM visits GROUP BY a"]
    plans = [_plan(s, BOUNDED) for s in sqls]
    pred = [q for p in plans for q in p.queries]
    src = PostgresExactSource(dsn)
    eng = Engine(Catalog((BOUNDED,)), MemoryLedger(), src,
                 EngineSettings(split="matrix_heavy", rho_estimate=1.0, joint_max_cells=0, mm_time_limit=2.0),
                 predictions=lambda _catalog: Prediction(pred, 10, 1.0))
    rel = eng._mm
    assert rel is not None and {g.table for g in rel.groups} == {"visits", plans[0].queries[0].table}
    # The joint sensitivity adds the row histogram's (k x its strategy's column norm) and the units' (at most
    # g ones: presence_sensitivity of its strategy) in squares.
    from lapras.mechanisms.sensitivity import presence_sensitivity
    rows_g = next(g for g in rel.groups if g.table == "visits")
    units_g = next(g for g in rel.groups if g.table != "visits")
    units_s = presence_sensitivity(units_g.strategy.mats, G)
    assert units_s <= G * units_g.strategy.sensitivity + 1e-9
    want = np.sqrt((K * rows_g.weight * rows_g.strategy.sensitivity) ** 2 + (units_g.weight * units_s) ** 2)
    from lapras.mechanisms import Gaussian
    cost = eng.ledger.mm_release(eng._epoch.id).cost  # type: ignore[union-attr]
    sigma = Gaussian.calibrate(cost, want, sum(g.strategy.rows for g in rel.groups)).sigma
    assert rel.sigma == pytest.approx(sigma, rel=1e-9)
    for p in plans:
        a = eng.answer(p, "u")
        assert a.outcome == "good" and a.cost is None and np.isfinite(a.stderrs).all()
        truth = src.answers(BOUNDED, p.queries)
        assert np.abs(a.values - truth).max() < 6 * a.stderrs.max()
    assert eng.ledger.current_epoch().state.b == 0  # type: ignore[union-attr]
    src.close()


def test_presence_bound_against_brute_force() -> None:
    """presence_sensitivity is an upper bound on max ||A x|| over 0/1 x with at most g ones (checked by
    enumeration on small Kronecker strategies), is sqrt(g) times the column norm for the identity, and never
    exceeds the general g x column norm."""
    import itertools

    from lapras.mechanisms.sensitivity import kron_sensitivity, presence_sensitivity

    rng = np.random.default_rng(3)
    cases = [[np.eye(4), np.eye(3)], [np.tril(np.ones((4, 4))), np.eye(2)],
             [rng.normal(size=(3, 3)), rng.normal(size=(2, 2))], [np.abs(rng.normal(size=(5, 4)))]]
    for blocks in cases:
        a = blocks[0]
        for b in blocks[1:]:
            a = np.kron(a, b)
        n = a.shape[1]
        for g in (1, 2, 3):
            true = max(np.linalg.norm(a[:, list(c)].sum(axis=1)) for r in range(1, g + 1)
                       for c in itertools.combinations(range(n), r))
            bound = presence_sensitivity(blocks, g)
            assert true <= bound + 1e-9 and bound <= g * kron_sensitivity(blocks) + 1e-9
    assert presence_sensitivity([np.eye(4), np.eye(3)], 4) == pytest.approx(2.0)


def test_the_unit_is_named_as_postgresql_names_it() -> None:
    odd = replace(UNIT, privacy_unit="User ID")
    for sql in ('SELECT a, COUNT(DISTINCT "User ID") FROM visits GROUP BY a',
                'SELECT COUNT(DISTINCT v."User ID"::text) FROM visits v'):
        assert all(q.source is not None for q in _plan(sql, odd).queries)
    assert _plan("SELECT COUNT(DISTINCT USER_ID) FROM visits", UNIT).queries[0].source is not None
    for sql, table in (('SELECT COUNT(DISTINCT "USER_ID") FROM visits', UNIT),
                       ("SELECT COUNT(DISTINCT user_id) FROM visits", odd),
                       ("SELECT user_id, COUNT(*) FROM visits GROUP BY 1", UNIT),
                       ("SELECT SUM(user_id) FROM visits", UNIT)):
        with pytest.raises(sqlparser.Refusal) as err:
            _plan(sql, table)
        assert err.value.sqlstate == "42703"
    with pytest.raises(sqlparser.Refusal) as err:
        _plan("SELECT COUNT(DISTINCT x.user_id) FROM visits", UNIT)
    assert err.value.sqlstate == "42P01"


def test_group_by_order_does_not_make_another_query(data) -> None:  # type: ignore[no-untyped-def]
    """COUNT(DISTINCT) GROUP BY a, c and GROUP BY c, a count over one derived histogram: the same linear
    queries, so the second statement is a free repeat of the first (same answers, nothing more spent)."""
    _, dsn, _ = data
    ab = _plan("SELECT a, c / 10 AS d, COUNT(DISTINCT user_id) FROM visits GROUP BY a, c / 10", BOUNDED)
    ba = _plan("SELECT c / 10 AS d, a, COUNT(DISTINCT user_id) FROM visits GROUP BY c / 10, a", BOUNDED)
    assert {q.key for q in ab.queries} == {q.key for q in ba.queries}
    assert ab.queries[0].table == ba.queries[0].table
    src = PostgresExactSource(dsn)
    eng = Engine(Catalog((BOUNDED,)), MemoryLedger(), src, EngineSettings(joint_max_cells=0))
    try:
        first = eng.answer(ab, "u")
        spent = eng.ledger.current_epoch().spent_units  # type: ignore[union-attr]
        assert spent > 0 and first.outcome != "repeat"
        second = eng.answer(ba, "u")
        assert second.outcome == "repeat"
        assert eng.ledger.current_epoch().spent_units == spent  # type: ignore[union-attr]
        # The same group (a, d) has the same value in both answers, and it is the bounded truth's.
        by_key = {q.key: v for q, v in zip(ab.queries, first.values, strict=True)}
        assert [by_key[q.key] for q in ba.queries] == list(second.values)
        truth = src.answers(BOUNDED, ab.queries)
        assert np.abs(first.values - truth).max() < 6 * first.stderrs.max()
    finally:
        eng.close()
        src.close()
