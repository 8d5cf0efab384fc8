"""The SVD lower bound of Li and Miklau on the matrix mechanism's error, for reporting a strategy's quality.

For a workload W (m queries over n cells) answered by any strategy A under L2 sensitivity (Gaussian
noise), ``||A||_{1->2}^2 ||W A^+||_F^2 >= (sigma_1 + ... + sigma_r)^2 / n`` where sigma_i are W's
singular values (Li & Miklau, "Optimal error of query sets under the differentially private matrix
mechanism", ICDT 2013). At the same noise scale and sensitivity, the total squared error of the best
possible strategy is therefore at least that bound; a strategy's ``unit_error`` (its total squared error
per unit noise at sensitivity 1) divided by the bound says how far from optimal it is (1 = optimal).

The singular values come from the m x m Gram matrix ``W W^T``, built from the queries' product form
(Kronecker factors per attribute), never from a dense n-cell matrix.
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
