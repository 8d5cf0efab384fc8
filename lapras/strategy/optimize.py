"""Strategy selection for one marginal: minimise the workload's total variance trace(W^T W (A^T A)^-1).

Derived from the matrix-mechanism papers (Li et al. 2010; McKenna et al. 2018, HDMM), written here:

- Workload atoms: on each axis, cells that every query term weights alike are one *atom*. A strategy only
  needs to tell atoms apart, so every optimiser works on the reduced domain (a range over 99 values is 3
  atoms, not 99 cells); the result is lifted back as ``A = [I; B Agg] D``: the identity on every cell keeps
  A full rank (any query on the marginal stays estimable), ``B`` measures atoms, ``D`` scales columns to
  unit norm. The objective of such a strategy is computed on atoms alone (:func:`_completed_objective`).
- ``completed_block``: optimises B by L-BFGS on an analytic gradient (Woodbury keeps every step
  O(r^2 p) for r atoms, p rows of B), under a deadline; the best iterate so far is kept when it expires.
- ``kron_strategy``: one block per attribute, optimised by alternating minimisation (the other blocks fixed,
  block j's objective is its own with a Gram weighted by the other blocks' per-term variances), and one
  joint block over small marginals; the identity is always a candidate and the lowest stated error wins.
- ``exact_strategy`` (cvxpy SDP) and ``p_identity`` stay as references for tests and benchmarks: the SDP
  can take minutes on 64 cells, so preparation never calls it.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence

import numpy as np
from scipy.optimize import minimize
from threadpoolctl import threadpool_limits

from lapras.strategy.kron import KronStrategy, ProductQuery, block_vector, identity_strategy

# Axes over more cells than this are measured on their workload atoms (``KronStrategy`` labels), not
# cells: a dense block over every cell and its pseudo-inverse would cost minutes (8,760 hours of a year).
# Their atoms are optimised like cells when there are at most this many, else measured by the identity.
MAX_BLOCK_CELLS = 1024
# A joint block over the whole marginal (captures cross-attribute structure a Kronecker product cannot)
# when the marginal has at most this many cells.
JOINT_MAX_CELLS = 256


class Deadline:
    """A monotonic-clock deadline shared by the optimisers of one marginal (None = no limit)."""

    def __init__(self, seconds: float | None) -> None:
        self.end = math.inf if seconds is None else time.monotonic() + seconds

    def expired(self) -> bool:
        return time.monotonic() >= self.end


class _Expired(Exception):
    pass


def axis_atoms(vmat: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Atoms of one axis from its (terms x cells) matrix: (atom of each cell, a cell of each atom, sizes)."""
    _, first, labels, sizes = np.unique(np.ascontiguousarray(vmat.T), axis=0, return_index=True,
                                        return_inverse=True, return_counts=True)
    return np.asarray(labels).ravel(), first, sizes.astype(np.float64)


def coarse_labels(shape: Sequence[int], queries: Sequence[ProductQuery],
                  stop: int | None = None) -> list[np.ndarray | None]:
    """Per axis: the atom of each cell where the axis has more than MAX_BLOCK_CELLS cells, else None.

    Refined 256 terms at a time (never a terms x cells matrix: 8,760 hourly terms on 8,760 hours would be
    600 MB); with ``stop``, an axis stops refining once it has more atoms than that."""
    terms = [vs for q in queries for _, vs in q]
    out: list[np.ndarray | None] = []
    for a, n in enumerate(shape):
        if n <= MAX_BLOCK_CELLS:
            out.append(None)
            continue
        labels = np.zeros(n, dtype=np.int64)
        for i in range(0, len(terms), 256):
            block = np.column_stack([labels.astype(np.float64)] + [np.asarray(vs[a], dtype=np.float64)
                                                                  for vs in terms[i : i + 256]]) + 0.0
            seen: dict[bytes, int] = {}  # rows by their bytes (+ 0.0 makes -0.0 read as 0.0); np.unique(axis=0)
            labels = np.fromiter((seen.setdefault(row.tobytes(), len(seen)) for row in block),  # sorts 100x slower
                                 dtype=np.int64, count=n)
            if stop is not None and int(labels.max()) + 1 > stop:
                break
        out.append(labels)
    return out


def _completed_objective(b_flat: np.ndarray, g: np.ndarray, m: np.ndarray, p: int) -> tuple[float, np.ndarray]:
    """trace(G~ K^-1) with K = diag(1/m) + B^T B, G~ = G o s s^T, s_a = sqrt(1 + |b_a|^2), and its gradient.

    This is trace(W^T W (A^T A)^-1) of the lifted ``A = [I; B Agg] D`` for a workload constant on atoms
    (G its Gram on atoms, m the atom sizes).
    """
    r = g.shape[0]
    b = b_flat.reshape(p, r)
    s = np.sqrt(1.0 + np.einsum("ij,ij->j", b, b))
    gs = g * np.outer(s, s)
    pm = b * m[None, :]
    q = np.linalg.solve(np.eye(p) + pm @ b.T, pm)  # Woodbury: K^-1 = diag(m) - (B m)^T S^-1 (B m)
    kinv = np.diag(m) - pm.T @ q
    f = float(np.einsum("ij,ji->", gs, kinv))
    bk = b @ kinv
    z = (g * kinv) @ s
    grad = 2.0 * b * (z / s)[None, :] - 2.0 * (bk @ gs) @ kinv
    return f, grad.ravel()


def completed_block(
    g: np.ndarray, m: np.ndarray, *, deadline: Deadline | None = None, maxiter: int = 200,
    rng: np.random.Generator | None = None, p: int | None = None,
) -> np.ndarray:
    """B (p x r) minimising the lifted strategy's error for atom Gram ``g`` and atom sizes ``m``.

    Returns an empty (0 x r) B (the identity) when nothing beats it; on an expired deadline the best
    iterate so far (every B is a valid strategy).
    """
    r = g.shape[0]
    f0 = float(np.dot(np.diag(g), m))  # B = 0: the identity
    if r == 0 or f0 == 0.0 or (deadline is not None and deadline.expired()):
        return np.zeros((0, r))
    scale = f0 / r
    gs = g / scale  # keep L-BFGS well scaled whatever the workload size
    w, v = np.linalg.eigh(gs)
    # B needs no more rows than the workload has directions (measured: p = rank(G) matches p = r); past
    # 128 atoms, r / 4 rows (HDMM's p-Identity choice) keep each step O(r^3 / 4).
    rank = int(np.count_nonzero(w > 1e-9 * max(float(w.max()), 1e-300)))
    p = min(r, p if p is not None else max(1, min(rank, r if r <= 128 else max(32, r // 4))))
    # Start from the measurements the workload itself suggests: B^T B ~ G^(1/2) (the optimum when only
    # the total column norm is constrained), scaled to outweigh the identity part.
    top = np.argsort(w)[::-1][:p]
    b0 = (np.sqrt(np.sqrt(np.clip(w[top], 0, None)))[:, None] * v[:, top].T)
    norm = float(np.sqrt(np.max(np.einsum("ij,ij->j", b0, b0)))) or 1.0
    b0 = b0 * (2.0 * math.sqrt(float(np.mean(m))) / norm)
    if rng is not None:
        b0 = b0 + 1e-3 * rng.standard_normal(b0.shape)
    best = {"f": f0 / scale, "x": np.zeros(p * r)}

    def fun(x: np.ndarray) -> tuple[float, np.ndarray]:
        if deadline is not None and deadline.expired():
            raise _Expired
        f, grad = _completed_objective(x, gs, m, p)
        if f < best["f"]:
            best["f"], best["x"] = f, x.copy()
        return f, grad

    try:
        minimize(fun, b0.ravel(), jac=True, method="L-BFGS-B", options={"maxiter": maxiter, "ftol": 1e-6})
    except _Expired:
        pass
    x = best["x"]
    if not np.any(x):
        return np.zeros((0, r))
    return x.reshape(p, r)


def lift(b: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """The full block ``[I; B Agg]`` with unit column norms, over the cells ``labels`` maps to atoms."""
    n = len(labels)
    a = np.vstack([np.eye(n), b[:, labels]]) if b.shape[0] else np.eye(n)
    return a / np.linalg.norm(a, axis=0)[None, :]


def _block_kinv(b: np.ndarray, m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(s, K^-1) of a lifted block: a term u on atoms has variance (u s)^T K^-1 (u s) per unit noise."""
    s = np.sqrt(1.0 + np.einsum("ij,ij->j", b, b))
    pm = b * m[None, :]
    kinv = np.diag(m) - pm.T @ np.linalg.solve(np.eye(b.shape[0]) + pm @ b.T, pm)
    return s, kinv


def _term_variances(u: np.ndarray, b: np.ndarray, m: np.ndarray) -> np.ndarray:
    s, kinv = _block_kinv(b, m)
    us = u * s[None, :]
    return np.einsum("ti,ij,tj->t", us, kinv, us)


def kron_strategy(
    shape: Sequence[int], queries: Sequence[ProductQuery], *, rounds: int = 2,
    rng: np.random.Generator | None = None, maxiter: int = 200, time_limit: float | None = None,
    joint_max_cells: int = JOINT_MAX_CELLS, on_block: Callable[[float], None] | None = None,
) -> KronStrategy:
    """The lowest-error strategy found for the queries of one marginal within ``time_limit`` seconds.

    Candidates: the identity; one lifted block per attribute (alternating minimisation, ``rounds``
    passes); one joint lifted block when the marginal has at most ``joint_max_cells`` cells. Unions of
    boxes are optimised as if each box were its own query (separable surrogate); the errors that choose
    between candidates, and those reported later, are exact. When the deadline expires, blocks not yet
    optimised stay the identity and optimised ones keep their best iterate, so the result is always a
    valid strategy with a computed error. ``on_block(fraction done)`` runs after each block.
    """
    # The blocks are small (atoms, not cells): BLAS threads only fight each other (5x slower on 2 busy
    # cores), so the optimisers run single-threaded.
    with threadpool_limits(limits=1):
        return _kron_strategy(shape, queries, rounds, rng, maxiter, time_limit, joint_max_cells, on_block)


def _kron_strategy(
    shape: Sequence[int], queries: Sequence[ProductQuery], rounds: int, rng: np.random.Generator | None,
    maxiter: int, time_limit: float | None, joint_max_cells: int, on_block: Callable[[float], None] | None,
) -> KronStrategy:
    deadline = Deadline(time_limit)
    d = len(shape)
    terms = [(w, vs) for q in queries for w, vs in q]
    joint = d > 1 and 0 < math.prod(shape) <= joint_max_cells
    n_rounds = rounds if d > 1 else 1
    steps = n_rounds * d + int(joint)

    def tick() -> None:
        if on_block is not None:
            on_block(1.0 / steps)

    if not terms:
        for _ in range(steps):
            tick()
        return identity_strategy(shape, coarse_labels(shape, queries))
    w2 = np.array([w * w for w, _ in terms])
    axes = []
    # Large axes are coarsened to their atoms: there, each atom is one cell of the coarsened histogram.
    coarse: list[np.ndarray | None] = []
    for a in range(d):
        vmat = np.stack([np.asarray(vs[a], dtype=np.float64) for _, vs in terms])
        labels, first, m = axis_atoms(vmat)
        if shape[a] > MAX_BLOCK_CELLS:
            coarse.append(labels)
            labels, m = np.arange(len(first)), np.ones(len(first))
        else:
            coarse.append(None)
        axes.append((labels, vmat[:, first], m))
    identity = identity_strategy(shape, coarse)
    bs = [np.zeros((0, len(m))) for _, _, m in axes]
    var = [(u**2 * m[None, :]).sum(axis=1) for _, u, m in axes]  # the identity's per-term variances
    for _ in range(n_rounds):
        for j, (_labels, u, m) in enumerate(axes):
            if len(m) <= MAX_BLOCK_CELLS and not deadline.expired():
                weights = w2.copy()
                for k in range(d):
                    if k != j:
                        weights *= var[k]
                g = (u * weights[:, None]).T @ u
                if np.all(m == 1) and not np.any(g - np.diag(np.diag(g))):
                    bs[j] = np.zeros((0, len(m)))  # point queries on single cells: the identity is optimal
                else:
                    bs[j] = completed_block(g, m, deadline=deadline, maxiter=maxiter, rng=rng)
                var[j] = _term_variances(u, bs[j], m)
            tick()
    candidates = [identity]
    if any(b.shape[0] for b in bs):
        candidates.append(KronStrategy([lift(b, labels) for b, (labels, _, _) in zip(bs, axes, strict=True)],
                                       [(i,) for i in range(d)], "kron" if d > 1 else "optimised", coarse))
    if joint:
        if not deadline.expired():
            vfull = np.stack([block_vector(vs) for _, vs in terms])
            labels, first, m = axis_atoms(vfull)
            u = vfull[:, first]
            b = completed_block((u * w2[:, None]).T @ u, m, deadline=deadline, maxiter=maxiter, rng=rng)
            if b.shape[0]:
                candidates.append(KronStrategy([lift(b, labels)], [tuple(range(d))], "joint"))
        tick()
    errors = [workload_error(c, queries) for c in candidates]
    best = candidates[int(np.argmin(errors))]
    if deadline.expired():
        best.name += "-timed-out"
    return best


def workload_error(strategy: KronStrategy, queries: Sequence[ProductQuery]) -> float:
    """Total variance of the workload's least-squares answers per unit noise variance (sensitivity 1)."""
    s2 = strategy.sensitivity**2
    return s2 * float(sum(strategy.query_variance(q) for q in queries))


# ------------------------------------------------------------------------ references (tests, benchmarks)

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
    import cvxpy as cp  # heavy (about a second to import): only this SDP needs it

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
