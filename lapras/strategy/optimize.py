"""Strategy selection for one marginal: minimise the workload's total variance trace(W^T W (A^T A)^-1).

Derived from the matrix-mechanism papers (Li et al. 2010; McKenna et al. 2018, HDMM), written here:

- ``exact_strategy``: the convex optimum over Gram matrices X = A^T A with unit diagonal (sensitivity 1),
  minimise trace(G X^-1) as a semidefinite program in cvxpy; A = X^(1/2). For a few hundred cells.
- ``p_identity``: A = [I; Theta] D with Theta >= 0 (p x n) and D normalising columns, optimised with
  L-BFGS-B on an analytic gradient; the Woodbury identity keeps every step O(n^2 p + n^3) at worst.
- ``kron_strategy``: one block per attribute, optimised by alternating minimisation: with the other
  blocks fixed, the objective restricted to block j is trace(G_j X_j^-1) with a Gram G_j weighted by the
  other blocks' per-query variances, which p-Identity (large axes) or the exact SDP (small ones) solve.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
from scipy.optimize import minimize

from lapras.strategy.kron import KronStrategy, ProductQuery, block_vector


def _pidentity_objective(theta_flat: np.ndarray, g: np.ndarray, p: int) -> tuple[float, np.ndarray]:
    """trace(G (A^T A)^-1) for A = [I; Theta] D, and its gradient, in O(n^2 p) (no n x n inverse)."""
    n = g.shape[0]
    th = theta_flat.reshape(p, n)
    # M = I + Theta^T Theta; Woodbury: M^-1 = I - Theta^T S^-1 Theta with S = I_p + Theta Theta^T,
    # and Theta M^-1 = S^-1 Theta.
    s_inv_th = np.linalg.solve(np.eye(p) + th @ th.T, th)
    minv = np.eye(n) - th.T @ s_inv_th
    d = np.sqrt(1.0 + np.einsum("ij,ij->j", th, th))
    gt = g * np.outer(d, d)
    pg = s_inv_th @ gt  # S^-1 Theta G~
    f = float(np.trace(gt) - np.einsum("ij,ij->", pg, th))
    theta_y = pg - (pg @ th.T) @ s_inv_th  # Theta M^-1 G~ M^-1
    z = (g * minv) @ d
    grad = 2.0 * th * (z / d)[None, :] - 2.0 * theta_y
    return f, grad.ravel()


def pidentity_matrix(theta: np.ndarray) -> np.ndarray:
    """Strategy [I; Theta] with every column scaled to unit norm."""
    n = theta.shape[1]
    a = np.vstack([np.eye(n), theta])
    return a / np.linalg.norm(a, axis=0)[None, :]


def p_identity(
    g: np.ndarray, p: int | None = None, rng: np.random.Generator | None = None, maxiter: int = 200,
    init: np.ndarray | None = None,
) -> np.ndarray:
    """p-Identity strategy minimising trace(G (A^T A)^-1) for a workload Gram matrix ``g``."""
    n = g.shape[0]
    p = p if p is not None else max(1, n // 16)
    scale = float(np.trace(g)) / n or 1.0
    gs = g / scale  # keep L-BFGS well scaled whatever the workload size
    rng = rng if rng is not None else np.random.default_rng()
    x0 = init if init is not None and init.shape == (p, n) else rng.uniform(0, 1, size=(p, n))
    res = minimize(
        _pidentity_objective, x0.ravel(), args=(gs, p), jac=True, method="L-BFGS-B",
        bounds=[(0, None)] * (p * n), options={"maxiter": maxiter},
    )
    theta = res.x.reshape(p, n)
    # Never do worse than the identity (Theta = 0).
    if float(np.trace(gs)) <= res.fun:
        theta = np.zeros((p, n))
    return pidentity_matrix(theta)


def exact_strategy(g: np.ndarray) -> np.ndarray:
    """Convex optimum: X = argmin trace(G X^-1) s.t. diag(X) <= 1, X PSD; returns A = X^(1/2).

    Solved as the SDP  min trace(Z)  s.t.  [[Z, R^T], [R, X]] PSD  with G = R R^T (R of G's numerical rank),
    which SCS handles in about a second for 60 cells.
    """
    import cvxpy as cp

    n = g.shape[0]
    scale = float(np.trace(g)) / n or 1.0
    # A small ridge keeps X full rank, so every query on the marginal stays estimable (free estimates).
    w, v = np.linalg.eigh(g / scale + 1e-4 * np.eye(n))
    keep = w > 1e-6 * w.max()
    r_mat = v[:, keep] * np.sqrt(w[keep])[None, :]
    r = r_mat.shape[1]
    m = cp.Variable((n + r, n + r), PSD=True)
    x = m[r:, r:]
    prob = cp.Problem(cp.Minimize(cp.trace(m[:r, :r])), [m[:r, r:] == r_mat.T, cp.diag(x) <= 1])
    prob.solve(solver=cp.SCS, eps=1e-6)
    xv = np.asarray(x.value, dtype=np.float64)
    ew, ev = np.linalg.eigh((xv + xv.T) / 2)
    a = (ev * np.sqrt(np.clip(ew, 1e-9, None))[None, :]) @ ev.T
    return a / float(np.max(np.linalg.norm(a, axis=0)))


def workload_error(strategy: KronStrategy, queries: Sequence[ProductQuery]) -> float:
    """Total variance of the workload's least-squares answers per unit noise variance (sensitivity 1)."""
    s2 = strategy.sensitivity**2
    return s2 * float(sum(strategy.query_variance(q) for q in queries))


def kron_strategy(
    shape: Sequence[int], queries: Sequence[ProductQuery], *, cvx_max_cells: int = 64, rounds: int = 3,
    rng: np.random.Generator | None = None, maxiter: int = 200, single_block: bool | None = None,
    p_fraction: float = 0.25, on_block: Callable[[float], None] | None = None,
) -> KronStrategy:
    """Optimised strategy for the queries of one marginal (one block if small, else one per axis).

    A marginal of at most ``cvx_max_cells`` cells is one block with the exact SDP optimum; otherwise every
    attribute is a block optimised by p-Identity with p = ``p_fraction`` n (``on_block(fraction done)`` runs
    after each block, for progress bars). Unions of boxes are optimised as if each box were its own query (separable
    surrogate); the variances reported later are exact.
    """
    cells = math.prod(shape)
    if single_block is None:
        single_block = cells <= cvx_max_cells
    groups: list[tuple[int, ...]] = [tuple(range(len(shape)))] if single_block else [(i,) for i in range(len(shape))]
    sizes = [math.prod(shape[a] for a in g) for g in groups]
    # Terms as rows: per block a (T x n_j) matrix of block vectors, and the squared term weights.
    terms = [(w, vs) for q in queries for w, vs in q]
    w2 = np.array([w * w for w, _ in terms])
    vmats = [np.stack([block_vector([vs[a] for a in g]) for _, vs in terms]) for g in groups]
    mats: list[np.ndarray] = [np.eye(n) for n in sizes]
    covs = [np.eye(n) for n in sizes]
    n_rounds = 1 if len(groups) == 1 else rounds
    for _ in range(n_rounds):
        for j, n in enumerate(sizes):
            weights = w2.copy()
            for k in range(len(groups)):
                if k != j:
                    weights *= np.einsum("ti,ij,tj->t", vmats[k], covs[k], vmats[k])
            g = (vmats[j] * weights[:, None]).T @ vmats[j]
            if np.count_nonzero(g - np.diag(np.diag(g))) == 0:
                mats[j] = np.eye(n)  # only point queries on this block: the identity is optimal
            elif single_block and n <= cvx_max_cells:
                mats[j] = exact_strategy(g)  # the exact optimum for a small marginal
            else:
                mats[j] = p_identity(g, p=max(1, round(p_fraction * n)), rng=rng, maxiter=maxiter)
            covs[j] = np.linalg.pinv(mats[j].T @ mats[j], hermitian=True)
            if on_block is not None:
                on_block(1.0 / (n_rounds * len(groups)))
    strat = KronStrategy(list(mats), groups, "optimised")
    ident = KronStrategy([np.eye(n) for n in sizes], groups, "identity")
    return strat if workload_error(strat, queries) <= workload_error(ident, queries) else ident
