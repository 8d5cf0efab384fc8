"""P's release bounded per group (docs/bounding.md, ``lapras.release_bounds``) on the real embedded
PostgreSQL: a predicted GROUP BY statement on a table with c < k is released as its fresh answer would be,
each unit's rows cut to c per group in g groups (g c in all, no cut to k: docs/bounding.md), at sensitivity
``group_bound_norm(g c, c, g)`` = sqrt(g) c times the strategy's column norm instead of k times it, when the strategy measures the groups apart (checked on the
strategy); its noise-free answer from P is the fresh statement's exactly; one unit moves the release by at
most the joint sensitivity; and a statement with other groups is never estimated from such a group.
No test here draws noise it checks statistically (false-failure rate 0)."""

from __future__ import annotations

import numpy as np
import pytest

import parser as sqlparser
from lapras import Engine
from lapras.engine import prediction_from_sql
from lapras.engine.calibrate import free_estimates
from lapras.exact import PostgresExactSource
from lapras.matrix_mechanism import MMRelease, joint_sensitivity
from lapras.mechanisms.sensitivity import axis_unit_norm, group_bound_norm
from lapras.release_bounds import splits_groups
from lapras.strategy import KronStrategy, identity_strategy
from parser.model.schema import Attribute, Catalog, IntType, TableSchema
from parser.pushdown.bounding import GroupAxis, statement_groups
from tests.fixtures.engine_helpers import events_database, light_units, release_engine, release_histograms

K, C = 10, 3
G = K  # max_groups_per_unit unset: g = k
EVENTS = TableSchema("events", (Attribute("day", IntType(0, 363)), Attribute("kind", IntType(0, 4)),
                                Attribute("amount", IntType(0, 99))), privacy_unit="user_id", max_rows_per_unit=K,
                     max_rows_per_group=C)
CATALOG = Catalog((EVENTS,))
DAILY = "SELECT day, count(*) FROM events WHERE day BETWEEN 200 AND 227 GROUP BY day"
BY_KIND = "SELECT kind, count(*) FROM events WHERE day BETWEEN 200 AND 227 GROUP BY kind"
TOTAL = "SELECT count(*) FROM events WHERE day BETWEEN 200 AND 227"
HEAVY = 120


def _rows(drop: int | None = None) -> list[tuple[int | None, int, int, int]]:
    """120 heavy units with 2-5 rows every day of the window (c = 3 a day in g = 10 days cut them)
    and 600 light ones with 1-6 rows over the year; ``drop``: without that unit (a neighbouring database)."""
    rng = np.random.default_rng(11)
    rows: list[tuple[int | None, int, int, int]] = []
    for u in range(HEAVY):
        for d in range(196, 232):
            rows += [(u, d, int(rng.integers(0, 5)), int(rng.integers(0, 100))) for _ in range(int(rng.integers(2, 6)))]
    rows += light_units(rng, HEAVY)
    return [r for r in rows if r[0] != drop]


@pytest.fixture(scope="module")
def neighbours(embedded_pg) -> tuple[str, str]:
    """The window's database and its neighbour without heavy unit 5."""
    return (events_database(embedded_pg, "group_bounds_release", _rows()),
            events_database(embedded_pg, "group_bounds_release_minus", _rows(drop=5)))


@pytest.fixture(scope="module")
def window(neighbours: tuple[str, str]) -> str:
    return neighbours[0]


def _engine(src: PostgresExactSource, sqls: list[str]) -> Engine:
    return release_engine(CATALOG, src, prediction_from_sql(sqls, 10, 1.0, CATALOG))




def _queries(sql: str) -> list:  # type: ignore[type-arg]
    return [q for q in sqlparser.plan_query(sql, CATALOG).queries if not q.is_zero]


def test_a_predicted_group_by_is_released_at_its_fresh_bound_with_its_fresh_rows(window: str) -> None:
    """P of the window by day and by kind: two groups over the same cells (one per statement's groups), each
    bounded per group at N(30, 3, 10) = sqrt(10) 3 = 9.49 (by day) instead of k = 10; the release is calibrated on
    those bounds; each statement's noise-free answer from P equals the fresh statement's (c = 3 rows a day of
    a heavy unit in at most g = 10 days), and the proxy answers both from P."""
    src = PostgresExactSource(window)
    eng = _engine(src, [DAILY, BY_KIND])
    rel = eng._mm
    assert rel is not None and len(rel.groups) == 2
    n = group_bound_norm(G * C, C, G)
    assert n == pytest.approx(9.4868, abs=1e-4)
    assert {g.axis.attr for g in rel.groups if g.axis is not None} == {"day", "kind"}
    # by day: 10 of the 28 days at 3 rows; by kind: all 5 kinds at 3 rows (sqrt(5) 3 = 6.71)
    norms = [group_bound_norm(G * C, C, G, g.axis.count) for g in rel.groups if g.axis is not None]
    assert sorted(norms) == pytest.approx([float(np.sqrt(5) * 3), n])
    assert [g.fresh_norm for g in rel.groups] == pytest.approx(norms)
    assert joint_sensitivity(rel.groups, {"events": K}) == pytest.approx(
        float(np.sqrt(sum((g.weight * g.strategy.sensitivity * m) ** 2 for g, m in zip(rel.groups, norms, strict=True)))))
    hists = release_histograms(src, rel, EVENTS)
    exact = MMRelease(rel.groups, [g.strategy.measure(x) for g, x in zip(rel.groups, hists, strict=True)],
                      rel.sigma, rel.cost, rel.cells)
    for sql in (DAILY, BY_KIND):
        qs = _queries(sql)
        noise_free, var = free_estimates(EVENTS, qs, exact, qs)
        assert np.isfinite(var).all(), sql
        fresh = src.answers(EVENTS, qs)
        assert np.allclose(noise_free, fresh, rtol=1e-9, atol=1e-6), sql
        a = eng.answer(sqlparser.plan_query(sql, CATALOG), "u")
        assert a.outcome == "good" and a.cost is None and a.predicted, sql
    # the cut is real: a heavy unit adds at most 3 rows a day in 10 days, below its 2-5 a day in 28
    daily = src.answers(EVENTS, _queries(DAILY))
    assert daily.sum() < HEAVY * 28 * 2
    src.close()


def test_one_unit_moves_the_release_by_at_most_its_per_group_sensitivity(neighbours: tuple[str, str]) -> None:
    """Red team: removing a heavy unit (2-5 rows every day) changes each group's histogram by at most c = 3
    rows per group and g c = 30 in all, and the weighted measurements by at most the joint sensitivity the
    release is calibrated on (per group N(g c, c, g) times its column norm, added in squares), which is below
    the k bound's."""
    src, minus = PostgresExactSource(neighbours[0]), PostgresExactSource(neighbours[1])
    eng = _engine(src, [DAILY, BY_KIND])
    rel = eng._mm
    assert rel is not None
    moved = []
    for g, x, y in zip(rel.groups, release_histograms(src, rel, EVENTS), release_histograms(minus, rel, EVENTS), strict=True):
        d = np.abs(x - y)
        assert 0 < d.sum() <= G * C
        axis = g.axis
        assert axis is not None
        along = g.marginal.index(axis.attr)
        per_cell = d.sum(axis=tuple(a for a in range(d.ndim) if a != along))
        assert per_cell.max() <= C  # every group here is one cell of its column
        moved.append(g.weight * g.strategy.measure(x - y))
    shift = float(np.linalg.norm(np.concatenate(moved)))
    bound = joint_sensitivity(rel.groups, {"events": K})
    k_bound = float(np.sqrt(sum((g.weight * g.strategy.sensitivity * K) ** 2 for g in rel.groups)))
    assert shift <= bound + 1e-9 < k_bound
    src.close()
    minus.close()


def test_a_statement_with_other_groups_is_not_answered_from_a_group_bounded_per_group(window: str) -> None:
    """The window's total reads the same cells as the daily group, but a unit's rows there are cut to k, not
    to c per day: it is answered fresh, never from the daily group (whose rows it would undercount)."""
    src = PostgresExactSource(window)
    eng = _engine(src, [DAILY])
    rel = eng._mm
    assert rel is not None and rel.groups[0].axis is not None
    qs = _queries(TOTAL)
    _, var = free_estimates(EVENTS, qs, rel, qs)
    assert not np.isfinite(var).any()
    assert eng.answer(sqlparser.plan_query(TOTAL, CATALOG), "u").outcome == "bad"
    src.close()


def test_a_strategy_that_mixes_groups_keeps_the_k_bound() -> None:
    """The check is on the strategy: the identity over days measures them apart; adding a row that sums two
    days does not, so such a group is charged k, not N(g c, c, g)."""
    qs = _queries(DAILY)
    axis = statement_groups(EVENTS, qs)
    assert isinstance(axis, GroupAxis) and axis.attr == "day" and axis.count == 28
    assert axis_unit_norm(EVENTS, axis) == pytest.approx(group_bound_norm(G * C, C, G))
    shape = (364,)
    cells = np.zeros(shape, dtype=bool)
    cells[200:228] = True
    ident = identity_strategy(shape)
    assert splits_groups(ident, ("day",), shape, axis, cells)
    mixed = np.vstack([np.eye(364), np.zeros((1, 364))])
    mixed[-1, 210:212] = 1.0
    assert not splits_groups(KronStrategy([mixed], [(0,)]), ("day",), shape, axis, cells)
    # cells outside every group (rows the grouped reading would drop) are never read per group
    wider = cells.copy()
    wider[150] = True
    assert not splits_groups(ident, ("day",), shape, axis, wider)


def test_the_stored_release_keeps_its_per_group_bounds(window: str) -> None:
    """Another process reads the release from the ledger: each group's groups (``axis``) and bound come back
    with it, so it estimates the predicted statement alike and still refuses the window's total."""
    src = PostgresExactSource(window)
    eng = _engine(src, [DAILY, BY_KIND])
    rel = eng._mm
    assert rel is not None
    back = MMRelease.from_bytes(rel.meta(), rel.to_bytes(), rel.cost)
    for a, b in zip(rel.groups, back.groups, strict=True):
        assert a.axis == b.axis and a.axis is not None and a.fresh_norm == b.fresh_norm
    assert joint_sensitivity(back.groups, {"events": K}) == pytest.approx(joint_sensitivity(rel.groups, {"events": K}))
    qs = _queries(DAILY)
    assert np.array_equal(free_estimates(EVENTS, qs, rel, qs)[0], free_estimates(EVENTS, qs, back, qs)[0])
    total = _queries(TOTAL)
    assert not np.isfinite(free_estimates(EVENTS, total, back, total)[1]).any()
    src.close()
