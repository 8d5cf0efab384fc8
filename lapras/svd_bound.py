"""The SVD lower bound of Li and Miklau on the matrix mechanism's error, for reporting a strategy's quality.

For a workload W (m queries over n cells) answered by any strategy A under L2 sensitivity (Gaussian
noise), ``||A||_{1->2}^2 ||W A^+||_F^2 >= (sigma_1 + ... + sigma_r)^2 / n`` where sigma_i are W's
singular values (Li & Miklau, "Optimal error of query sets under the differentially private matrix
mechanism", ICDT 2013). At the same noise scale and sensitivity, the total squared error of the best
possible strategy is therefore at least that bound; a strategy's ``unit_error`` (its total squared error
per unit noise at sensitivity 1) divided by the bound says how far from optimal it is (1 = optimal).

The singular values come from the m x m Gram matrix ``W W^T``, built from the queries' product form
(Kronecker factors per attribute), never from a dense n-cell matrix.

``design_bound`` weights the cells by a searched distribution instead of 1 / n: still a lower bound over all
strategies, and one that stays meaningful for P's queries embedded in the union of their marginals
(millions of cells), where measurements shared across marginals count (``benchmarks/p_floor.py``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from lapras.strategy import ProductQuery

MAX_TERMS = 6000  # product terms of a workload whose Gram matrix is computed (larger: no bound reported)
MAX_SUPPORT_CELLS = 1 << 22  # marginals whose weighed cells are counted (larger: n = all cells, a looser bound)


def workload_gram(queries: Sequence[ProductQuery]) -> np.ndarray | None:
    """``W W^T`` of product queries (each a weighted sum of Kronecker products), or None when too large."""
    terms = [(qi, w, vs) for qi, q in enumerate(queries) for w, vs in q]
    if not terms or len(terms) > MAX_TERMS:
        return None
    d = len(terms[0][2])
    g = np.outer([t[1] for t in terms], [t[1] for t in terms])
    for a in range(d):
        v = np.stack([np.asarray(t[2][a], dtype=np.float64) for t in terms])
        g *= v @ v.T
    m = np.zeros((len(queries), len(terms)))
    m[[t[0] for t in terms], np.arange(len(terms))] = 1.0
    return m @ g @ m.T


def support_size(queries: Sequence[ProductQuery], shape: Sequence[int]) -> int:
    """Cells some query weighs (W's non-zero columns); the whole marginal when it is too large to list."""
    if math.prod(shape) > MAX_SUPPORT_CELLS:
        return math.prod(shape)
    acc = np.zeros(tuple(shape), dtype=bool)
    for q in queries:
        for w, vs in q:
            if w == 0:
                continue
            term = np.ones((), dtype=bool)
            for v in vs:
                term = np.logical_and.outer(term, np.asarray(v) != 0)
            acc |= term
    return int(acc.sum())


def svd_bound(queries: Sequence[ProductQuery], shape: Sequence[int]) -> float | None:
    """``(sum of W's singular values)^2 / n``: the least total squared error of the workload's answers per
    unit noise variance at sensitivity 1 over all strategies; None when the workload is too large.

    n counts the cells some query weighs: the bound holds on that sub-domain, and it is the tighter one
    (a strategy gains nothing from measuring cells no query reads: by the Schur complement, the variance
    of the read cells' estimate is never smaller with the other cells in the model). On the full marginal
    a single count over k of n cells would get the bound k / n instead of its optimum 1."""
    gram = workload_gram(queries)
    if gram is None:
        return None
    eig = np.linalg.eigvalsh((gram + gram.T) / 2)
    total = float(np.sqrt(np.clip(eig, 0.0, None)).sum())
    return total**2 / max(support_size(queries, shape), 1)


def _term_factors(queries: Sequence[ProductQuery]) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
    """Per product term: its query's index, its weight, and per attribute the stacked term vectors."""
    terms = [(qi, w, vs) for qi, q in enumerate(queries) for w, vs in q if w != 0]
    owner = np.array([t[0] for t in terms], dtype=np.int64)
    weights = np.array([t[1] for t in terms], dtype=np.float64)
    d = len(terms[0][2]) if terms else 0
    return owner, weights, [np.stack([np.asarray(t[2][a], dtype=np.float64) for t in terms]) for a in range(d)]


def design_bound(queries: Sequence[ProductQuery], iters: int = 300, tol: float = 1e-7) -> float | None:
    """See :func:`design`: the bound alone."""
    found = design(queries, iters, tol)
    return None if found is None else found[0] ** 2


def design(queries: Sequence[ProductQuery], iters: int = 300,
           tol: float = 1e-7) -> tuple[float, list[np.ndarray]] | None:
    """A lower bound on the total squared error of the workload's answers per unit noise variance at
    sensitivity 1, over ALL strategies, that stays meaningful on a large product domain (P's marginals
    embedded in their union, millions of cells), where the plain bound's ``/ n`` makes it vanish.

    For any distribution p over the cells, ``||A||_{1->2}^2 >= sum_j p_j ||a_j||^2``, hence (Li and
    Miklau's argument with that weighting) every strategy's error is at least ``||W diag(sqrt p)||_*^2`` =
    ``(trace (W P W^T)^(1/2))^2``; the best p gives the exact optimum (the gamma_F factorisation norm's
    dual; uniform p on n cells is :func:`svd_bound`). Every p gives a valid bound, so p is searched over
    product distributions (one per attribute: ``W P W^T`` stays in Kronecker form) by the multiplicative
    fixed point of design theory, which keeps each attribute's p on its simplex (F is homogeneous of
    degree 1/2 in each factor, so ``sum_i p_i dF/dp_i = F / 2``), accepting only steps that raise F.
    Returns F (the bound is F^2) and the product distribution (one vector per attribute); None when the
    workload has more than ``MAX_TERMS`` product terms.

    At the best p over all distributions the bound is attained: the strategy ``A = G^(-1/4) W`` (G = W P W^T,
    one row per query) has ``||A||_{1->2}^2 = max_j w_j^T G^(-1/2) w_j = F`` and error ``trace(G^(1/2)) = F``
    per unit sensitivity, so its error is F^2; with p restricted to products, that maximum over the cells
    says how close this strategy comes (``benchmarks/p_floor.py --attain``)."""
    terms = sum(len(q) for q in queries)
    if not queries or terms > MAX_TERMS:
        return None
    owner, weights, vecs = _term_factors(queries)
    if not len(owner):
        return 0.0, []
    m = len(queries)
    e = np.zeros((m, len(owner)))
    e[owner, np.arange(len(owner))] = 1.0
    ww = np.outer(weights, weights)
    # Start from each attribute's cells some term weighs, uniformly (the plain bound's support there).
    ps = []
    for v in vecs:
        s = (np.abs(v) > 0).any(axis=0).astype(np.float64)
        ps.append(s / s.sum() if s.sum() > 0 else np.full(v.shape[1], 1.0 / v.shape[1]))

    def spectrum(mats: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The Gram matrix's eigenvalues, eigenvectors and which eigenvalues are not numerically zero."""
        full = ww.copy()
        for mat in mats:
            full *= mat
        gram = e @ full @ e.T
        lam, u = np.linalg.eigh((gram + gram.T) / 2)
        return lam, u, lam > max(float(lam.max()), 0.0) * 1e-12

    def objective(ps: list[np.ndarray]) -> tuple[float, list[np.ndarray]]:
        mats = [(v * p) @ v.T for v, p in zip(vecs, ps, strict=True)]
        lam, _, keep = spectrum(mats)
        f = float(np.sqrt(lam[keep]).sum())
        return f, mats

    def gradients(ps: list[np.ndarray], mats: list[np.ndarray]) -> list[np.ndarray]:
        lam, u, keep = spectrum(mats)
        k = (u[:, keep] / np.sqrt(lam[keep])) @ u[:, keep].T  # G^(-1/2) on its range
        c = 0.5 * (e.T @ k @ e) * ww
        out = []
        for a, v in enumerate(vecs):
            others = c.copy()
            for b, mat in enumerate(mats):
                if b != a:
                    others *= mat
            out.append(np.einsum("ti,ti->i", v, others @ v))
        return out

    f, mats = objective(ps)
    step = 1.0
    for _ in range(iters):
        grads = gradients(ps, mats)
        improved = False
        while step > 1e-3:
            trial = []
            for p, g in zip(ps, grads, strict=True):
                q = p * np.power(np.maximum(g, 0.0) / max(f / 2, 1e-300), step)
                trial.append(q / q.sum() if q.sum() > 0 else p)
            f_new, mats_new = objective(trial)
            if f_new > f:
                improved = True
                break
            step /= 2
        if not improved:
            break
        gain = f_new - f
        ps, f, mats = trial, f_new, mats_new
        step = min(1.0, step * 2)
        if gain <= tol * f:
            break
    return f, ps
