"""Measurements shared across P's marginals (lapras.strategy.share): nested and overlapping marginals
measured once on their union, chosen by the optimiser's computed error, released with a computed
sensitivity, answered without bias."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import numpy as np
import pytest
from scipy.stats import chi2

from lapras import Engine, EngineSettings, MemoryLedger, Prediction
from lapras.exact import HistogramExactSource
from lapras.matrix_mechanism import MMGroup, joint_sensitivity, plan_groups, release_mm
from lapras.mechanisms import Cost
from lapras.strategy import KronStrategy, ProductQuery, block_vector
from lapras.strategy.share import (
    Key,
    Marginal,
    Workload,
    embed,
    share_marginals,
    shared_workloads,
    union_workload,
)
from tests.fixtures.engine_helpers import CATALOG, plan

SIZES = {"a": 10, "b": 3, "c": 40}


def _onehot(n: int, i: int) -> np.ndarray:
    v = np.zeros(n)
    v[i] = 1.0
    return v


def _range(n: int, lo: int, hi: int) -> np.ndarray:
    v = np.zeros(n)
    v[lo : hi + 1] = 1.0
    return v


def _workloads() -> dict[Key, Workload]:
    """P of a dashboard: counts by b, by (a, b) for a = 2, a range of a, and one cell of (a, c)."""
    by_b = [[(1.0, [_onehot(3, j)])] for j in range(3)]
    by_ab = [[(1.0, [_onehot(10, 2), _onehot(3, j)])] for j in range(3)]
    by_a = [[(1.0, [_range(10, 0, 4)])], [(1.0, [_range(10, 5, 9)])]]
    by_ac = [[(1.0, [_onehot(10, 1), _range(40, 10, 19)])]]
    return {("t", ("b",)): ((3,), by_b), ("t", ("a", "b")): ((10, 3), by_ab), ("t", ("a",)): ((10,), by_a),
            ("t", ("a", "c")): ((10, 40), by_ac)}


def _dense(strategy: KronStrategy) -> np.ndarray:
    """The strategy's full matrix over its marginal's cells (small marginals only)."""
    cols = []
    shape = strategy.block_sizes
    for idx in itertools.product(*(range(n) for n in shape)):
        x = np.zeros(shape)
        x[idx] = 1.0
        cols.append(strategy.measure(x))
    return np.stack(cols, axis=1)


def test_embedded_queries_are_the_same_linear_functions() -> None:
    """A query embedded in a union marginal gives on the union's histogram what it gives on its own."""
    rng = np.random.default_rng(1)
    x = rng.integers(0, 50, (10, 3)).astype(float)
    q = [(2.0, [_range(3, 1, 2)]), (-1.0, [_onehot(3, 0)])]
    union, (shape, [e]) = union_workload([(("b",), ((3,), [q]))] + [(("a",), ((10,), []))])
    assert union == ("a", "b") and shape == (10, 3)
    own = sum(w * float(vs[0] @ x.sum(axis=0)) for w, vs in q)
    assert sum(w * float(block_vector(vs) @ x.ravel()) for w, vs in e) == pytest.approx(own)
    assert embed(q, ("b",), ("a", "b"), SIZES)[0][1][0].tolist() == [1.0] * 10


def test_merging_lowers_the_release_error_and_never_raises_it() -> None:
    """Nested and overlapping marginals are merged, the small union only (a, c has 400 cells > max_cells
    here); the optimised release of the merged groups has a lower total error than the separate one
    (the total variance at any budget is sigma^2 (sum_g sqrt(c_g))^2)."""
    work = _workloads()
    members = share_marginals(work, max_cells=64)
    assert members[("t", ("a", "b"))] and set(members[("t", ("a", "b"))]) == {("a",), ("b",), ("a", "b")}
    assert members[("t", ("a", "c"))] == (("a", "c"),)
    merged = shared_workloads(work, members)
    assert sum(len(qs) for _, qs in merged.values()) == sum(len(qs) for _, qs in work.values())
    apart = plan_groups(work, rng=np.random.default_rng(3), time_limit=None)
    shared = plan_groups(merged, rng=np.random.default_rng(3), time_limit=None)
    total = [sum(math.sqrt(g.unit_error) for g in gs) ** 2 for gs in (apart, shared)]
    assert total[1] < 0.95 * total[0], total
    # With nothing to share (disjoint attributes, or unions too large), the groups stay as they were.
    assert share_marginals(work, max_cells=2) == {k: (k[1],) for k in work}


def test_only_the_listed_tables_are_merged() -> None:
    """Groups over a table left out of ``tables`` (a derived histogram of units present, a table bounded per
    statement) stay as they are, whatever merging would gain."""
    work = _workloads()
    other = {("u", m): w for (_, m), w in work.items()}
    members = share_marginals({**work, **other}, tables={"t"}, max_cells=64)
    assert all(ms == (k[1],) for k, ms in members.items() if k[0] == "u")
    assert any(len(ms) > 1 for k, ms in members.items() if k[0] == "t")


def test_every_marginal_stays_in_exactly_one_group() -> None:
    """Two pairs with the same union (``(a, b, d) + (c, d)`` and ``(a, c) + (b, c, d)``): once the better one
    is merged, the union exists and the other pair may not merge into it (it would replace the group);
    no marginal is lost or measured twice. The errors are given: pair one 0.1, pair two 0.2, one marginal
    1, anything else 100 (so only the two pairs gain)."""
    margs = [("a", "b", "d"), ("c", "d"), ("a", "c"), ("b", "c", "d")]
    work = {("t", m): ((2,) * len(m), [[(float(i + 1), [np.ones(2)] * len(m))]]) for i, m in enumerate(margs)}

    given: dict[tuple[int, ...], float] = {(1, 2): 0.1, (3, 4): 0.2}

    def error(shape: Sequence[int], qs: Sequence[ProductQuery]) -> float:
        ids = tuple(sorted(int(q[0][0]) for q in qs))
        return given.get(ids, 1.0 if len(ids) == 1 else 100.0)

    members = share_marginals(work, error=error)
    assert sorted(m for ms in members.values() for m in ms) == sorted(margs)
    assert members[("t", ("a", "b", "c", "d"))] == (("a", "b", "d"), ("c", "d"))
    assert sum(len(qs) for _, qs in shared_workloads(work, members).values()) == len(margs)


def test_merged_release_sensitivity_is_computed_over_the_joint_data_vector() -> None:
    """The joint sensitivity the release is calibrated with bounds the largest column norm of the stacked,
    weighted strategies over every cell of the table's domain (one row moves one cell of each group's
    marginal), computed here densely; it is attained (no slack bought with budget)."""
    work = _workloads()
    merged = shared_workloads(work, share_marginals(work, max_cells=64))
    groups = plan_groups(merged, rng=np.random.default_rng(4), time_limit=None)
    mats = [(g, g.weight * _dense(g.strategy)) for g in groups]
    worst = 0.0
    for cell in itertools.product(*(range(SIZES[a]) for a in ("a", "b", "c"))):
        at = dict(zip(("a", "b", "c"), cell, strict=True))
        col2 = 0.0
        for g, m in mats:
            flat = np.ravel_multi_index(tuple(at[a] for a in g.marginal), g.shape)
            col2 += float(m[:, flat] @ m[:, flat])
        worst = max(worst, math.sqrt(col2))
    assert joint_sensitivity(groups) >= worst * (1 - 1e-9)
    assert joint_sensitivity(groups) == pytest.approx(worst, rel=1e-9)


def _merged_release_fixture() -> tuple[list[MMGroup], list[np.ndarray], list[tuple[Marginal, ProductQuery, float]]]:
    work = _workloads()
    merged = shared_workloads(work, share_marginals(work, max_cells=64))
    groups = plan_groups(merged, rng=np.random.default_rng(5), time_limit=None)
    x = np.random.default_rng(6).integers(0, 60, (10, 3, 40)).astype(float)
    hists = [x.sum(axis=tuple(i for i, a in enumerate(("a", "b", "c")) if a not in g.marginal)) for g in groups]
    checks: list[tuple[Marginal, ProductQuery, float]] = [
        (("b",), q, float(q[0][1][0] @ x.sum(axis=(0, 2)))) for q in work[("t", ("b",))][1]]
    checks += [(("a",), q, float(q[0][1][0] @ x.sum(axis=(1, 2)))) for q in work[("t", ("a",))][1]]
    return groups, hists, checks


def test_merged_estimates_are_exact_on_noiseless_measurements() -> None:
    """The estimate of a coarse query is a linear function of the union's measurements that returns its
    exact answer on noise-free ones: with zero-mean noise it is unbiased (the statistical twin below)."""
    groups, hists, checks = _merged_release_fixture()
    assert sorted(g.marginal for g in groups) == [("a", "b"), ("a", "c")]
    rel = release_mm(groups, hists, Cost(mu=1.0))
    rel.y = [g.strategy.measure(h) for g, h in zip(groups, hists, strict=True)]  # the noise taken out
    for marg, q, truth in checks:
        est = rel.estimate("t", marg, q, SIZES)
        assert est is not None and est[0] == pytest.approx(truth, rel=1e-9, abs=1e-7)


@pytest.mark.slow  # 1,000 releases: a statistical run
def test_answers_from_the_merged_measurement_are_unbiased() -> None:
    """Over 1,000 releases of the merged groups on a fixed synthetic table, each coarse query's estimate
    from the union's measurement has mean error within 4.9 standard errors of zero (its stated variance /
    1,000; false-failure rate 1e-6 per query, 5 queries: < 1e-5) and its stated variance matches the
    empirical one (chi-square with 1,000 degrees of freedom, two-sided 1e-5 per query)."""
    groups, hists, checks = _merged_release_fixture()
    reps = 1000
    errs = np.zeros((reps, len(checks)))
    var = np.zeros(len(checks))
    for r in range(reps):
        rel = release_mm(groups, hists, Cost(mu=1.0))
        for j, (marg, q, truth) in enumerate(checks):
            est = rel.estimate("t", marg, q, SIZES)
            assert est is not None
            errs[r, j] = est[0] - truth
            var[j] = est[1]
    for j in range(len(checks)):
        assert abs(errs[:, j].mean()) < 4.9 * math.sqrt(var[j] / reps)
        stat = float((errs[:, j] ** 2).sum() / var[j])
        assert chi2.ppf(0.5e-5, reps) < stat < chi2.ppf(1 - 0.5e-5, reps)


def test_engine_answers_p_from_a_merged_release(exact: HistogramExactSource) -> None:
    """Through the engine: P over (b), (a, b) and (a) is released as one group over (a, b) and every
    predicted statement is answered from it, free, with a finite stated error."""
    sqls = ["SELECT b, count(*) FROM t GROUP BY b", "SELECT b, count(*) FROM t WHERE a = 2 GROUP BY b",
            "SELECT count(*) FROM t WHERE a < 5", "SELECT count(*) FROM t WHERE a >= 5"]
    preds = [q for s in sqls for q in plan(s).queries]
    eng = Engine(CATALOG, MemoryLedger(), exact, EngineSettings(split="matrix_heavy", rho_estimate=1.0),
                 predictions=lambda _catalog: Prediction(preds, 20, 1.0))
    for s in sqls:
        a = eng.answer(plan(s), "u")
        assert a.outcome == "good" and a.cost is None and np.isfinite(a.stderrs).all()
    rel = [r for r in eng.ledger.releases(eng.ledger.current_epoch().id) if r.kind == "mm"]  # type: ignore[union-attr]
    assert len(rel) == 1
    groups = rel[0].meta["groups"]  # type: ignore[index]
    assert [g["marginal"] for g in groups] == [["a", "b"]]
    assert sorted(map(tuple, groups[0]["members"])) == [("a",), ("a", "b"), ("b",)]
