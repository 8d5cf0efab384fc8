"""The SVD lower bound (Li and Miklau) computed from product queries: equal to the dense formula, tight
where the optimum is known, and never above what a strategy the engine plans achieves."""

from __future__ import annotations

import numpy as np

from lapras.matrix_mechanism import plan_groups
from lapras.svd_bound import design_bound, svd_bound, workload_gram


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


def _gamma_f(w: np.ndarray, iters: int = 4000) -> float:
    """max_p ||W diag(sqrt p)||_*^2 over ALL distributions p on the cells (dense; the exact optimum)."""
    p = np.full(w.shape[1], 1.0 / w.shape[1])
    f = 0.0
    for _ in range(iters):
        lam, u = np.linalg.eigh((w * p) @ w.T)
        keep = lam > lam.max() * 1e-12
        f = float(np.sqrt(lam[keep]).sum())
        k = (u[:, keep] / np.sqrt(lam[keep])) @ u[:, keep].T
        p = p * 0.5 * np.einsum("qi,qi->i", w, k @ w) / (f / 2)
        p /= p.sum()
    return f * f


def test_design_bound_is_a_lower_bound_close_to_the_optimum() -> None:
    """Deterministic (fixed seeds; false-failure rate 0): on random range and marginal workloads of a
    3-attribute domain, the product-p bound never exceeds the dense optimum max_p ||W P^1/2||_*^2 (a lower
    bound can not), nor the error of the identity or of measuring the workload itself, and comes within 10%
    of the optimum."""
    rng = np.random.default_rng(11)
    shape = (4, 3, 5)
    for _ in range(8):
        qs = []
        for _ in range(int(rng.integers(2, 8))):
            vs = []
            for n in shape:
                if rng.random() < 0.4:
                    vs.append(np.ones(n))
                else:
                    lo, hi = sorted(rng.integers(0, n, 2))
                    v = np.zeros(n)
                    v[lo:hi + 1] = 1
                    vs.append(v)
            qs.append([(float(rng.choice([1.0, 0.5])), vs)])
        w = np.stack([_dense(q, shape) for q in qs])
        bound = design_bound(qs)
        opt = _gamma_f(w)
        assert bound is not None and bound <= opt * (1 + 1e-6)
        assert bound >= 0.9 * opt
        identity = float((w**2).sum())  # A = I: sensitivity 1, error ||W||_F^2
        itself = float((w**2).sum(axis=0).max()) * np.linalg.matrix_rank(w)  # A = W: ||W||_{1->2}^2 rank
        assert bound <= min(identity, itself) * (1 + 1e-9)


def test_design_bound_is_tight_where_the_optimum_is_known() -> None:
    """Deterministic (false-failure rate 0): the identity on a product domain (optimum n, every cell once)
    and one count (1) exactly; two coarse counts and their common cell (the best p is not a product
    there) within 5% of the dense optimum, never above it."""
    eye = [[(1.0, [np.eye(4)[i], np.eye(3)[j]])] for i in range(4) for j in range(3)]
    assert np.isclose(design_bound(eye), 12.0, rtol=1e-4)
    assert np.isclose(design_bound([[(1.0, [np.r_[0, 1, 1, 0.0], np.ones(3)])]]), 1.0)
    qs = [[(1.0, [np.eye(4)[0], np.ones(3)])], [(1.0, [np.ones(4), np.eye(3)[0]])],
          [(1.0, [np.eye(4)[0], np.eye(3)[0]])]]
    w = np.stack([_dense(q, (4, 3)) for q in qs])
    bound = design_bound(qs)
    opt = _gamma_f(w)
    assert bound is not None and 0.95 * opt <= bound <= opt * (1 + 1e-6)


def test_design_bound_of_a_joint_release_is_never_above_the_planned_one() -> None:
    """Deterministic (fixed seeds; false-failure rate 0): two overlapping marginals released together by the
    engine's planner (one joint Gaussian, weights a_g) have total error (sum_g sqrt(c_g))^2 at unit noise
    and sensitivity; the bound of their queries embedded in the union domain is below it."""
    from lapras.strategy.share import union_workload

    rng = np.random.default_rng(7)
    sizes = {"a": 6, "b": 4, "c": 5}
    workloads = {}
    for marginal in (("a", "b"), ("b", "c")):
        shape = tuple(sizes[x] for x in marginal)
        workloads[("t", marginal)] = (shape, _ranges(rng, 5, shape))  # type: ignore[arg-type]
    groups = plan_groups(workloads, rng=np.random.default_rng(1), time_limit=10.0)
    planned = sum(np.sqrt(g.unit_error) for g in groups) ** 2
    _, (_, queries) = union_workload([(m, workloads[("t", m)]) for _, m in workloads])
    bound = design_bound(queries)
    assert bound is not None and 0 < bound <= planned
