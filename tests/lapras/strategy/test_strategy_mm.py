"""Strategies and the matrix mechanism: Kronecker algebra against dense matrices, optimisers, stated errors."""

from __future__ import annotations

import math
import time
from datetime import datetime

import numpy as np
import pytest
from scipy.stats import chi2

from lapras.allocation import auto_split
from lapras.matrix_mechanism import (
    MMRelease,
    expected_query_variance,
    expected_relative_variance,
    group_weights,
    joint_sensitivity,
    plan_groups,
    release_mm,
)
from lapras.mechanisms import Cost, Gaussian
from lapras.mechanisms.sensitivity import l2_sensitivity
from lapras.strategy import (
    KronStrategy,
    exact_strategy,
    identity_strategy,
    kron_strategy,
    p_identity,
    workload_error,
)
from lapras.strategy.optimize import (
    _completed_objective,
    _pidentity_objective,
    axis_atoms,
    completed_block,
    lift,
)


def _range(n: int, a: int, b: int) -> np.ndarray:
    v = np.zeros(n)
    v[a:b + 1] = 1
    return v


def _ranges(rng: np.random.Generator, n: int, k: int) -> np.ndarray:
    w = np.zeros((k, n))
    for i in range(k):
        a, b = sorted(rng.integers(0, n, 2))
        w[i, a:b + 1] = 1
    return w


def test_pidentity_gradient_matches_finite_differences() -> None:
    rng = np.random.default_rng(3)
    w = _ranges(rng, 20, 30)
    g = w.T @ w
    th = rng.uniform(size=(3, 20))
    f, grad = _pidentity_objective(th.ravel(), g, 3)
    a = np.vstack([np.eye(20), th])
    a /= np.linalg.norm(a, axis=0)
    assert f == pytest.approx(np.trace(g @ np.linalg.inv(a.T @ a)), rel=1e-10)
    num = np.zeros(th.size)
    for k in range(th.size):
        e = np.zeros(th.size)
        e[k] = 1e-6
        num[k] = (_pidentity_objective(th.ravel() + e, g, 3)[0] - _pidentity_objective(th.ravel() - e, g, 3)[0]) / 2e-6
    assert np.allclose(num, grad, atol=1e-5 * np.abs(grad).max())


def test_optimisers_beat_identity_on_ranges() -> None:
    rng = np.random.default_rng(4)
    w = _ranges(rng, 32, 40)
    g = w.T @ w
    ident = np.trace(g)
    errs = {}
    for name, a in (("pid", p_identity(g, p=8, rng=rng)), ("sdp", exact_strategy(g))):
        assert l2_sensitivity(a) <= 1 + 1e-6
        errs[name] = np.trace(g @ np.linalg.pinv(a.T @ a))
        assert errs[name] < 0.8 * ident
    # The SDP optimum is at least as good as p-Identity (up to solver tolerance).
    assert errs["sdp"] <= 1.02 * errs["pid"]


def test_kron_algebra_matches_dense() -> None:
    rng = np.random.default_rng(5)
    a1, a2 = rng.normal(size=(7, 5)), rng.normal(size=(4, 3))
    s = KronStrategy([a1, a2], [(0,), (1,)])
    x = rng.normal(size=(5, 3))
    dense = np.kron(a1, a2)
    assert np.allclose(s.measure(x), dense @ x.ravel())
    y = rng.normal(size=28)
    assert np.allclose(s.least_squares(y).ravel(), np.linalg.pinv(dense) @ y)
    assert s.sensitivity == pytest.approx(l2_sensitivity(dense))
    q = [(2.0, [_range(5, 1, 3), _range(3, 0, 1)]), (1.0, [_range(5, 4, 4), _range(3, 2, 2)])]
    wv = 2 * np.kron(_range(5, 1, 3), _range(3, 0, 1)) + np.kron(_range(5, 4, 4), _range(3, 2, 2))
    assert s.query_variance(q) == pytest.approx(wv @ np.linalg.pinv(dense.T @ dense) @ wv)
    assert s.estimate(s.least_squares(y), q) == pytest.approx(wv @ np.linalg.pinv(dense) @ y)


@pytest.mark.slow
def test_gowalla_scale_kron_strategy_is_structured() -> None:
    """256 x 256 rectangles: per-axis blocks only, never a dense 65536-column matrix."""
    rng = np.random.default_rng(6)
    qs = []
    for _ in range(30):
        (a, b), (c, d) = sorted(rng.integers(0, 256, 2)), sorted(rng.integers(0, 256, 2))
        qs.append([(1.0, [_range(256, a, b), _range(256, c, d)])])
    s = kron_strategy((256, 256), qs, rng=rng, maxiter=10, rounds=1)
    assert [m.shape[1] for m in s.mats] == [256, 256]
    assert workload_error(s, qs) < 0.2 * workload_error(identity_strategy((256, 256)), qs)


def test_group_weights_minimise_total_error() -> None:
    c = np.array([1.0, 9.0, 4.0])
    a = group_weights(c)
    assert np.sum(a**2) == pytest.approx(1.0)
    best = np.sum(c / a**2)
    rng = np.random.default_rng(0)
    for _ in range(200):
        b = rng.uniform(0.05, 1, 3)
        b /= np.linalg.norm(b)
        assert np.sum(c / b**2) >= best * (1 - 1e-12)


def _mm_fixture(rng: np.random.Generator):  # type: ignore[no-untyped-def]
    w1 = [[(1.0, [_range(12, a, b)])] for a, b in (sorted(rng.integers(0, 12, 2)) for _ in range(15))]
    w2 = [[(1.0, [_range(6, a, b), _range(30, c, d)])]
          for (a, b), (c, d) in ((sorted(rng.integers(0, 6, 2)), sorted(rng.integers(0, 30, 2))) for _ in range(15))]
    groups = plan_groups({("t", ("b",)): ((12,), w1), ("t", ("a", "c")): ((6, 30), w2)}, rng=rng)
    return groups, w1, w2


@pytest.mark.slow  # 400 releases of a two-group MM strategy: a statistical run
def test_mm_release_stated_error_matches_empirical() -> None:
    """Answers' empirical squared errors over repeated releases match their stated variances.

    Sum over 400 releases of (error / stated stderr)^2 is chi-square with 400 degrees of freedom for each
    query; we test the pooled statistic of one query per group at false-failure rate 1e-4 (two-sided)."""
    rng = np.random.default_rng()
    groups, w1, w2 = _mm_fixture(rng)
    assert joint_sensitivity(groups) == pytest.approx(1.0)
    x1, x2 = rng.integers(0, 50, 12).astype(float), rng.integers(0, 50, (6, 30)).astype(float)
    truth1 = float(w1[0][0][1][0] @ x1)
    truth2 = float(w2[0][0][1][0] @ x2 @ w2[0][0][1][1])
    stat, reps = 0.0, 400
    for _ in range(reps):
        rel = release_mm(groups, [x1, x2], Cost(mu=0.5))
        for marg, q, truth in ((("b",), w1[0], truth1), (("a", "c"), w2[0], truth2)):
            sizes = {"a": 6, "b": 12, "c": 30}
            est = rel.estimate("t", marg, q, sizes)
            assert est is not None
            stat += (est[0] - truth) ** 2 / est[1]
    df = 2 * reps
    assert chi2.ppf(0.5e-4, df) < stat < chi2.ppf(1 - 0.5e-4, df)


def test_mm_release_roundtrip_and_subquery_estimates() -> None:
    rng = np.random.default_rng(8)
    groups, _, _ = _mm_fixture(rng)
    rel = release_mm(groups, [np.ones(12), np.ones((6, 30))], Cost(eps=0.5, delta=1e-4))
    back = MMRelease.from_bytes(rel.meta(), rel.to_bytes(), rel.cost)
    q = [(1.0, [_range(30, 3, 9)])]  # a query on (c) only: in the span of the (a, c) group
    sizes = {"a": 6, "b": 12, "c": 30, "d": 3}
    a = rel.estimate("t", ("c",), q, sizes)
    b = back.estimate("t", ("c",), q, sizes)
    assert a is not None and b is not None and a == pytest.approx(b)
    assert rel.estimate("t", ("d",), [(1.0, [np.ones(3)])], sizes) is None
    assert math.isfinite(a[1])


def test_lifted_objective_and_gradient_match_dense() -> None:
    """The atom-level objective equals trace(G (A^T A)^+) of the lifted strategy; the gradient is exact."""
    rng = np.random.default_rng(11)
    r, p = 6, 3
    u = rng.normal(size=(5, r))
    g = u.T @ u
    m = rng.integers(1, 5, r).astype(float)
    b = rng.normal(size=(p, r))
    f, grad = _completed_objective(b.ravel(), g, m, p)
    labels = np.repeat(np.arange(r), m.astype(int))
    agg = np.zeros((r, len(labels)))
    agg[labels, np.arange(len(labels))] = 1
    a = lift(b, labels)
    assert l2_sensitivity(a) == pytest.approx(1.0)
    assert f == pytest.approx(np.trace(agg.T @ g @ agg @ np.linalg.pinv(a.T @ a)), rel=1e-9)
    num = np.array([(_completed_objective(b.ravel() + e, g, m, p)[0] - _completed_objective(b.ravel() - e, g, m, p)[0])
                    / 2e-6 for e in np.eye(p * r) * 1e-6])
    assert np.allclose(num, grad, atol=1e-5 * np.abs(grad).max())


def test_atom_optimiser_matches_the_sdp_optimum() -> None:
    rng = np.random.default_rng(12)
    w = _ranges(rng, 24, 5)
    g = w.T @ w
    labels, first, m = axis_atoms(w)
    assert len(m) < 24  # ranges collapse into atoms
    u = w[:, first]
    a = lift(completed_block(u.T @ u, m), labels)
    err = np.trace(g @ np.linalg.pinv(a.T @ a))
    s = exact_strategy(g)
    assert err <= 1.01 * np.trace(g @ np.linalg.pinv(s.T @ s))
    assert np.allclose(np.linalg.pinv(a) @ a, np.eye(24), atol=1e-8)  # full rank: every query estimable


def test_time_limit_bounds_the_optimiser_and_states_the_error() -> None:
    """A marginal too big to optimise in the limit still gets a valid strategy with its exact error."""
    rng = np.random.default_rng(13)
    qs = [[(1.0, [w1, w2])] for w1, w2 in zip(_ranges(rng, 600, 300), _ranges(rng, 500, 300), strict=True)]
    t0 = time.perf_counter()
    s = kron_strategy((600, 500), qs, time_limit=0.3, rng=rng)
    took = time.perf_counter() - t0
    assert s.name.endswith("-timed-out")
    assert took < 0.3 + 10  # the deadline, one objective step and the exact error of each candidate
    err = workload_error(s, qs)
    assert err <= workload_error(identity_strategy((600, 500)), qs) * (1 + 1e-9)
    assert s.sensitivity == pytest.approx(1.0)


def test_large_axis_is_measured_on_its_atoms() -> None:
    """An axis over more than MAX_BLOCK_CELLS cells (a year of hours) is measured on the workload's atoms:
    the algebra equals the dense strategy ``M Agg`` (variances, estimates, sensitivity), predicted queries
    stay estimable, a query splitting an atom does not, and it is fast (no pinv over every cell)."""
    from lapras.strategy.optimize import MAX_BLOCK_CELLS

    n = MAX_BLOCK_CELLS + 76  # 1,100 cells
    rng = np.random.default_rng(5)
    days = [(24 * d, 24 * d + 23) for d in range(0, 44, 2)]  # daily counts over alternate days
    weeks = [(168 * w, 168 * w + 167) for w in range(6)]
    qs = [[(1.0, [_range(n, a, b), np.ones(2)])] for a, b in days + weeks]
    qs += [[(1.0, [_range(n, a, b), np.eye(2)[k]])] for k in range(2) for a, b in days[:5]]
    t0 = time.monotonic()
    s = kron_strategy((n, 2), qs, rng=rng, time_limit=20)
    assert time.monotonic() - t0 < 20
    assert s.labels is not None and s.labels[0] is not None and s.labels[1] is None
    r = s.mats[0].shape[1]
    assert r < 100  # the atoms, not 1,100 cells
    agg = np.zeros((r, n))
    agg[s.labels[0], np.arange(n)] = 1
    dense = np.kron(s.mats[0] @ agg, s.mats[1])
    assert s.sensitivity == pytest.approx(l2_sensitivity(dense), rel=1e-12)
    dense_pinv = np.linalg.pinv(dense, rcond=1e-10)
    x = rng.poisson(3.0, size=(n, 2)).astype(float)
    y = s.measure(x)
    assert np.allclose(y, dense @ x.ravel())
    xhat = s.least_squares(y)
    for q in qs:
        w = sum(wt * np.kron(vs[0], vs[1]) for wt, vs in q)
        assert s.in_row_space(q)
        assert s.query_variance(q) == pytest.approx(float(np.sum((dense_pinv.T @ w) ** 2)), rel=1e-8)
        assert s.estimate(xhat, q) == pytest.approx(float(w @ x.ravel()), rel=1e-9)  # noiseless: exact
    split = [(1.0, [_range(n, 5, 30), np.ones(2)])]  # cuts the first day's atom
    assert not s.in_row_space(split)
    back = KronStrategy.from_arrays(s.to_arrays(), s.name)
    assert np.allclose(back.measure(x), y) and back.query_variance(qs[0]) == pytest.approx(s.query_variance(qs[0]))
    # Daily counts cost one atom each, not 24 cells: far below the identity on cells.
    assert workload_error(s, qs) < 0.2 * workload_error(identity_strategy((n, 2)), qs)


def test_mm_release_on_atoms_states_its_error_and_round_trips() -> None:
    """A release over a coarsened axis: estimates of P's queries have the stated variance (chi-square over
    repeated releases), survive to_bytes/from_bytes, and a query splitting an atom gets no free estimate."""
    from lapras.strategy.optimize import MAX_BLOCK_CELLS

    n = MAX_BLOCK_CELLS + 176
    rng = np.random.default_rng(9)
    qs = [[(1.0, [_range(n, 24 * d, 24 * d + 23)])] for d in range(40)]
    groups = plan_groups({("t", ("ts",)): ((n,), qs)}, rng=rng, time_limit=10)
    assert groups[0].strategy.labels is not None and groups[0].strategy.labels[0] is not None
    x = rng.integers(0, 20, n).astype(float)
    sizes = {"ts": n}
    stat, reps = 0.0, 300
    for _ in range(reps):
        rel = release_mm(groups, [x], Cost(mu=0.5))
        q = qs[int(rng.integers(0, len(qs)))]
        est = rel.estimate("t", ("ts",), q, sizes)
        assert est is not None
        stat += (est[0] - float(q[0][1][0] @ x)) ** 2 / est[1]
    assert chi2.ppf(0.5e-4, reps) < stat < chi2.ppf(1 - 0.5e-4, reps)
    back = MMRelease.from_bytes(rel.meta(), rel.to_bytes(), rel.cost)
    assert back.estimate("t", ("ts",), qs[3], sizes) == pytest.approx(rel.estimate("t", ("ts",), qs[3], sizes))
    assert rel.estimate("t", ("ts",), [(1.0, [_range(n, 5, 40)])], sizes) is None


def test_marginals_cut_into_too_many_atoms_are_answered_online() -> None:
    """P's marginals whose large axis it cuts into more than MAX_ATOMS atoms (every hour of a year) leave
    the release (no dense identity of that size is built or stored); coarser ones stay."""
    from lapras import matrix_mechanism as mm
    from parser.coltypes import TimestamptzType
    from parser.model.linear import LinearQuery
    from parser.model.schema import Attribute, Catalog, TableSchema

    hours = TimestamptzType(datetime(2026, 1, 1), datetime(2026, 12, 31, 23), "hour")
    table = TableSchema("ev", (Attribute("ts", hours),))
    n = hours.size
    hourly = [LinearQuery("ev", "public", ("ts",), ((("ts", ((h, h),)),),)) for h in range(n)]
    daily = [LinearQuery("ev", "public", ("ts",), ((("ts", ((24 * d, 24 * d + 23),)),),)) for d in range(365)]
    catalog = Catalog((table,))
    assert n > mm.MAX_ATOMS
    assert mm.p_workloads(catalog, hourly) == {}
    kept = mm.p_workloads(catalog, daily)
    assert list(kept) == [("ev", ("ts",))] and len(kept[("ev", ("ts",))][1]) == 365


def test_relative_variance_is_one_for_a_histogram_measured_by_the_identity() -> None:
    """A release of one disjoint histogram by the identity is a fresh release of that GROUP BY: relative
    variance 1 whatever the table's rows per unit (before, the split saw k^2 = 100 on a k = 10 table)."""
    cells = [[(1.0, [np.eye(12)[i]])] for i in range(12)]
    groups = plan_groups({("t", ("b",)): ((12,), cells)})
    assert groups[0].strategy.name == "identity"
    for k in (1, 10):
        v = expected_relative_variance(groups, Cost(mu=1.0), {"t": k})
        assert v == pytest.approx(1.0, rel=1e-3)
    # The release's absolute variance does carry k^2: what the split must not compare with a count's.
    assert expected_query_variance(groups, Cost(mu=1.0), {"t": 10}) == pytest.approx(100.0, rel=1e-3)


def test_relative_variance_matches_empirical_over_repeated_releases() -> None:
    """The split's estimate of P's error (mean variance over P's queries relative to a fresh GROUP BY at
    the same cost) matches the mean squared error of 120 releases over a k = 10 table.

    Per release, m = mean over the 30 queries of (error^2 / fresh variance): E[m] = the stated relative
    variance. The mean of 120 independent m's is within 4.5 sample standard errors of it (false-failure
    rate below 1e-5 by the CLT; m is a mean of 30 scaled chi-squares, so the CLT is accurate here)."""
    rng = np.random.default_rng()
    groups, w1, w2 = _mm_fixture(rng)
    rows, cost = {"t": 10}, Cost(mu=0.5)
    stated = expected_relative_variance(groups, cost, rows)
    fresh = float(Gaussian.calibrate(cost, 10.0).variance())
    x1, x2 = rng.integers(0, 50, 12).astype(float), rng.integers(0, 50, (6, 30)).astype(float)
    sizes = {"a": 6, "b": 12, "c": 30}
    work = [(("b",), q, float(q[0][1][0] @ x1)) for q in w1]
    work += [(("a", "c"), q, float(q[0][1][0] @ x2 @ q[0][1][1])) for q in w2]
    ms = []
    for _ in range(120):  # 70 ms a release (its discrete Gaussian draws)
        rel = release_mm(groups, [x1, x2], cost, rows)
        errs = []
        for marg, q, truth in work:
            est = rel.estimate("t", marg, q, sizes)
            assert est is not None
            errs.append((est[0] - truth) ** 2 / fresh)
        ms.append(np.mean(errs))
    m = np.asarray(ms)
    assert abs(m.mean() - stated) < 4.5 * m.std(ddof=1) / math.sqrt(len(m))
    assert 1.0 < stated < 10.0  # two marginals share one release: dearer than one fresh GROUP BY, not k^2


def test_auto_split_funds_p_over_a_table_with_rows_per_unit() -> None:
    """Three disjoint panels over a k = 10 table, half the stream predicted: the release costs each query
    about 3 fresh GROUP BYs' variance, against the 10 predicted statements it answers, so P gets a real
    share; on main the split compared the release's absolute variance (k^2 = 100 times that) and gave 0."""
    panels = {("t", (m,)): ((n,), [[(1.0, [np.eye(n)[i]])] for i in range(n)])
              for m, n in (("a", 24), ("b", 20), ("c", 30))}
    groups = plan_groups(panels)
    v = expected_relative_variance(groups, Cost(mu=1.0), {"t": 10})
    assert 2.5 < v < 3.5
    split = auto_split(0.5, 20, v, "gdp")
    assert split.mm > 0.25


def test_auto_split_gives_p_nothing_when_the_release_is_no_cheaper() -> None:
    """Twelve one-query marginals: the joint release answers each at 12 fresh answers' variance, which
    costs more than the 5 predicted statements answered online would: P gets nothing."""
    panels = {("t", (f"m{i}",)): ((4,), [[(1.0, [np.ones(4)])]]) for i in range(12)}
    v = expected_relative_variance(plan_groups(panels), Cost(mu=1.0), {"t": 10})
    assert v == pytest.approx(12.0, rel=1e-2)
    assert auto_split(0.5, 10, v, "gdp").mm == 0.0


def test_the_release_progress_bar_stays_out_of_a_log_that_is_not_a_terminal(capsys) -> None:
    """`serve` writes its log to stderr, which an operator sends to a file or a journal: the matrix mechanism's
    bar redrew itself there with carriage returns glued to the log lines ("materialised in 1.2 s2026-12-07
    ..."). Without a terminal (capsys: stderr is a pipe) it writes nothing; deterministic (false-failure rate 0)."""
    from lapras.engine.release import _progress
    from lapras.settings import EngineSettings

    step = _progress(3, EngineSettings(progress=True))
    assert step is not None
    step(1.5)
    step(1.5)
    assert capsys.readouterr().err == ""
