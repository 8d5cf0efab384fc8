"""The SVD lower bound (Li and Miklau) computed from product queries: equal to the dense formula, tight
where the optimum is known, and never above what a strategy the engine plans achieves."""

from __future__ import annotations

import numpy as np

from lapras.matrix_mechanism import plan_groups
from lapras.svd_bound import svd_bound, workload_gram


def _dense(q, shape):  # type: ignore[no-untyped-def]
    out = np.zeros(shape)
    for w, vs in q:
        t = np.asarray(w, dtype=float)
        for v in vs:
            t = np.multiply.outer(t, v)
        out += t
    return out.ravel()


def _ranges(rng: np.random.Generator, k: int, shape: tuple[int, int]) -> list:  # type: ignore[type-arg]
    qs = []
    for _ in range(k):
        vs = []
        for n in shape:
            lo, hi = sorted(rng.integers(0, n, 2))
            v = np.zeros(n)
            v[lo:hi + 1] = 1
            vs.append(v)
        qs.append([(1.0, vs)])
    return qs


def test_gram_and_bound_match_the_dense_formula() -> None:
    rng = np.random.default_rng(3)
    shape = (6, 5)
    qs = _ranges(rng, 7, shape) + [[(1.0, [np.ones(6), np.eye(5)[1]]), (2.0, [np.eye(6)[0], np.ones(5)])]]
    w = np.stack([_dense(q, shape) for q in qs])
    gram = workload_gram(qs)
    assert gram is not None and np.allclose(gram, w @ w.T)
    support = int((np.abs(w).sum(axis=0) > 0).sum())
    expected = np.linalg.svd(w, compute_uv=False).sum() ** 2 / support
    assert np.isclose(svd_bound(qs, shape), expected)


def test_bound_is_tight_for_the_identity_and_a_single_count() -> None:
    eye = [[(1.0, [np.eye(4)[i], np.eye(3)[j]])] for i in range(4) for j in range(3)]
    assert np.isclose(svd_bound(eye, (4, 3)), 12.0)  # identity: total error n at unit noise
    one = [[(1.0, [np.r_[0, 1, 1, 0.0], np.ones(3)])]]
    assert np.isclose(svd_bound(one, (4, 3)), 1.0)  # one count: answered directly, error 1


def test_planned_strategies_are_never_below_the_bound() -> None:
    rng = np.random.default_rng(5)
    shape = (8, 6)
    workloads = {("t", ("a", "b")): (shape, _ranges(rng, 12, shape))}
    (g,) = plan_groups(workloads, rng=np.random.default_rng(1), time_limit=10.0)
    bound = svd_bound(workloads[("t", ("a", "b"))][1], shape)
    assert bound is not None and g.unit_error >= bound * (1 - 1e-9)
