"""Kronecker-structured strategy matrices and the workload algebra they need.

A strategy over a marginal with axes (n_1, ..., n_d) is ``A = A_1 (x) ... (x) A_k`` where each block
``A_j`` acts on a contiguous group of axes (one block per attribute for HDMM-style Kronecker strategies,
or a single block over the flattened marginal for the exact convex optimum on small marginals). Nothing
here forms the full Kronecker product: measuring, least squares (``(A_1 (x) A_2)^+ = A_1^+ (x) A_2^+``)
and variances all work block by block.

A *product query* is a list of ``(weight, [v_1, ..., v_d])`` terms: the vector ``sum_t w_t v_t1 (x) ...``
(a union of disjoint boxes, or a SUM weighting), exactly what ``LinearQuery.factors`` returns.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from lapras.mechanisms.sensitivity import kron_sensitivity

ProductQuery = list[tuple[float, list[np.ndarray]]]


def block_vector(vectors: Sequence[np.ndarray]) -> np.ndarray:
    """Kronecker product of per-axis vectors (C order, matching ``reshape`` of the marginal)."""
    if len(vectors) == 1:
        return np.asarray(vectors[0])
    out = np.ones(1)
    for v in vectors:
        out = np.kron(out, v)
    return out


@dataclass
class KronStrategy:
    """``A = kron(mats)``; ``groups[j]`` lists the marginal axes block ``j`` covers (contiguous, in order)."""

    mats: list[np.ndarray]
    groups: list[tuple[int, ...]]
    name: str = "kron"
    _cache: dict[str, object] = field(default_factory=dict, repr=False)

    @property
    def block_sizes(self) -> list[int]:
        return [m.shape[1] for m in self.mats]

    @property
    def sensitivity(self) -> float:
        """Largest column norm of the Kronecker product: the product of the blocks' largest column norms."""
        return kron_sensitivity(self.mats)

    @property
    def rows(self) -> int:
        return int(math.prod(m.shape[0] for m in self.mats))

    @cached_property
    def gram_pinvs(self) -> list[np.ndarray]:
        """(A_j^T A_j)^+ per block: the covariance of the least-squares estimate, up to sigma^2."""
        return [np.linalg.pinv(m.T @ m, hermitian=True) for m in self.mats]

    @cached_property
    def pinvs(self) -> list[np.ndarray]:
        return [np.linalg.pinv(m) for m in self.mats]

    def _apply(self, mats: Sequence[np.ndarray], t: np.ndarray) -> np.ndarray:
        """Apply one matrix per block along the block's (flattened) axis of ``t``."""
        t = t.reshape([m.shape[1] for m in mats])
        for j, m in enumerate(mats):
            t = np.moveaxis(np.tensordot(m, t, axes=([1], [j])), 0, j)
        return t

    def measure(self, x: np.ndarray) -> np.ndarray:
        """``A x`` for a marginal histogram ``x`` (any shape with the right number of cells), flattened."""
        return self._apply(self.mats, np.asarray(x, dtype=np.float64)).ravel()

    def least_squares(self, y: np.ndarray) -> np.ndarray:
        """``A^+ y`` shaped by blocks (the minimum-variance unbiased estimate of the marginal)."""
        return self._apply(self.pinvs, np.asarray(y, dtype=np.float64).reshape([m.shape[0] for m in self.mats]))

    def blocks_of(self, query: ProductQuery) -> list[tuple[float, list[np.ndarray]]]:
        """Regroup a product query's per-axis vectors into per-block vectors."""
        return [(w, [block_vector([vs[a] for a in g]) for g in self.groups]) for w, vs in query]

    def query_variance(self, query: ProductQuery) -> float:
        """``w^T (A^T A)^+ w``: the estimate's variance per unit noise variance."""
        terms = self.blocks_of(query)
        ws = np.array([w for w, _ in terms])
        acc = np.outer(ws, ws)
        for j, x in enumerate(self.gram_pinvs):
            v = np.stack([vs[j] for _, vs in terms])
            acc = acc * (v @ x @ v.T)
        return float(acc.sum())

    def estimate(self, xhat: np.ndarray, query: ProductQuery) -> float:
        """``w^T xhat`` for a block-shaped estimate ``xhat``."""
        total = 0.0
        for w, vs in self.blocks_of(query):
            t = xhat
            for v in vs:
                t = np.tensordot(v, t, axes=([0], [0]))
            total += w * float(t)
        return total

    @cached_property
    def full_rank(self) -> list[bool]:
        return [bool(np.allclose(p @ m, np.eye(m.shape[1]), atol=1e-8)) for m, p in zip(self.mats, self.pinvs, strict=True)]

    def in_row_space(self, query: ProductQuery, tol: float = 1e-8) -> bool:
        """Whether the query is estimable (``A^+ A w = w``): always true for full-column-rank blocks."""
        if all(self.full_rank):
            return True
        for _, vs in self.blocks_of(query):
            for m, p, v in zip(self.mats, self.pinvs, vs, strict=True):
                if np.linalg.norm(p @ (m @ v) - v) > tol * max(1.0, float(np.linalg.norm(v))):
                    return False
        return True

    def to_arrays(self) -> dict[str, np.ndarray]:
        out = {f"m{j}": m for j, m in enumerate(self.mats)}
        out["groups"] = np.array([len(g) for g in self.groups])
        return out

    @staticmethod
    def from_arrays(d: dict[str, np.ndarray], name: str = "kron") -> KronStrategy:
        sizes = [int(s) for s in d["groups"]]
        groups, start = [], 0
        for s in sizes:
            groups.append(tuple(range(start, start + s)))
            start += s
        return KronStrategy([np.asarray(d[f"m{j}"]) for j in range(len(sizes))], groups, name)


def identity_strategy(shape: Sequence[int]) -> KronStrategy:
    """The identity on every axis: measures each cell once."""
    return KronStrategy([np.eye(n) for n in shape], [(i,) for i in range(len(shape))], "identity")
