"""Kronecker-structured strategy matrices and the workload algebra they need.

A strategy over a marginal with axes (n_1, ..., n_d) is ``A = A_1 (x) ... (x) A_k`` where each block
``A_j`` acts on a contiguous group of axes (one block per attribute for HDMM-style Kronecker strategies,
or a single block over the flattened marginal for the exact convex optimum on small marginals). Nothing
here forms the full Kronecker product: measuring, least squares (``(A_1 (x) A_2)^+ = A_1^+ (x) A_2^+``)
and variances all work block by block.

A *product query* is a list of ``(weight, [v_1, ..., v_d])`` terms: the vector ``sum_t w_t v_t1 (x) ...``
(a union of disjoint boxes, or a SUM weighting), exactly what ``LinearQuery.factors`` returns.

A block may act on *atoms* instead of cells: ``A_j = M_j Agg_j`` where ``Agg_j`` sums the cells of each atom
(``labels[j]`` gives every cell's atom). That is how an axis of thousands of cells (a year of hours) is
measured when the workload only tells a few hundred atoms apart. It is the same Gaussian mechanism on a
linear map of the histogram: one row moves one cell, hence one atom, so the sensitivity is ``M_j``'s largest
column norm; every query constant on atoms is estimated as from the cell-level strategy ``M_j`` would be on
the coarsened histogram (``(M Agg)^+ = Agg^+ M^+``, ``Agg^+ = Agg^T diag(1/sizes)``), and queries that
split an atom are outside the row space (not estimable from the release; answered online). Estimates stay
in atom space: a query vector is reduced to its mean per atom before the algebra.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
from scipy.sparse import csr_matrix

from lapras.mechanisms.sensitivity import kron_sensitivity

ProductQuery = list[tuple[float, list[np.ndarray]]]


def queries_digest(head: str, queries: Sequence[ProductQuery]) -> str:
    """A digest of ``head`` and the product queries, independent of their order (cache keys of workloads)."""
    parts = []
    for q in queries:
        h = hashlib.blake2b(digest_size=16)
        for w, vecs in q:
            h.update(np.float64(w).tobytes())
            for v in vecs:
                h.update(np.ascontiguousarray(v, dtype=np.float64).tobytes())
        parts.append(h.digest())
    top = hashlib.blake2b(head.encode(), digest_size=16)
    for p in sorted(parts):
        top.update(p)
    return top.hexdigest()


def block_vector(vectors: Sequence[np.ndarray]) -> np.ndarray:
    """Kronecker product of per-axis vectors (C order, matching ``reshape`` of the marginal)."""
    if len(vectors) == 1:
        return np.asarray(vectors[0])
    out = np.ones(1)
    for v in vectors:
        out = np.kron(out, v)
    return out


def _is_identity(m: np.ndarray) -> bool:
    """An identity block (its own pseudo-inverse; a dense pinv of thousands of cells takes minutes)."""
    n = m.shape[0]
    return m.shape == (n, n) and np.count_nonzero(m) == n and bool(np.all(np.diagonal(m) == 1.0))


@dataclass
class KronStrategy:
    """``A = kron(mats[j] Agg_j)``; ``groups[j]`` lists the marginal axes block ``j`` covers (contiguous, in
    order); ``labels[j]`` (None: no aggregation) maps each of the block's cells to an atom."""

    mats: list[np.ndarray]
    groups: list[tuple[int, ...]]
    name: str = "kron"
    labels: list[np.ndarray | None] | None = None
    _cache: dict[str, object] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if self.labels is None:
            self.labels = [None] * len(self.mats)
        else:
            self.labels = [None if lab is None else np.asarray(lab, dtype=np.int64) for lab in self.labels]

    @property
    def _labels(self) -> list[np.ndarray | None]:
        assert self.labels is not None
        return self.labels

    @property
    def block_sizes(self) -> list[int]:
        """Cells per block (what a histogram's axes give)."""
        return [m.shape[1] if lab is None else len(lab) for m, lab in zip(self.mats, self._labels, strict=True)]

    @cached_property
    def atom_sizes(self) -> list[np.ndarray | None]:
        return [None if lab is None else np.bincount(lab, minlength=m.shape[1]).astype(np.float64)
                for m, lab in zip(self.mats, self._labels, strict=True)]

    def reduce(self, j: int, v: np.ndarray) -> np.ndarray:
        """Block ``j``'s query vector as the algebra sees it: per atom, its mean over the atom's cells."""
        lab = self._labels[j]
        if lab is None:
            return v
        sizes = self.atom_sizes[j]
        assert sizes is not None
        return np.bincount(lab, weights=v, minlength=len(sizes)) / sizes

    def _aggregate(self, j: int, t: np.ndarray) -> np.ndarray:
        """Sum the cells of each atom along axis ``j`` of ``t``."""
        lab = self._labels[j]
        if lab is None:
            return t
        r = self.mats[j].shape[1]
        agg = csr_matrix((np.ones(len(lab)), (lab, np.arange(len(lab)))), shape=(r, len(lab)))
        moved = np.moveaxis(t, j, 0)
        out = np.asarray(agg @ moved.reshape(len(lab), -1)).reshape((r, *moved.shape[1:]))
        return np.moveaxis(out, 0, j)

    @property
    def sensitivity(self) -> float:
        """Largest column norm of the Kronecker product: the product of the blocks' largest column norms."""
        return kron_sensitivity(self.mats)

    @property
    def rows(self) -> int:
        return int(math.prod(m.shape[0] for m in self.mats))

    @cached_property
    def gram_pinvs(self) -> list[np.ndarray]:
        """(M_j^T M_j)^+ per block: the covariance of the least-squares estimate, up to sigma^2."""
        return [m if eye else np.linalg.pinv(m.T @ m, hermitian=True) for m, eye in zip(self.mats, self.identities, strict=True)]

    @cached_property
    def pinvs(self) -> list[np.ndarray]:
        return [m if eye else np.linalg.pinv(m) for m, eye in zip(self.mats, self.identities, strict=True)]

    def _apply(self, mats: Sequence[np.ndarray], t: np.ndarray) -> np.ndarray:
        """Apply one matrix per block along the block's (flattened) axis of ``t``."""
        t = t.reshape([m.shape[1] for m in mats])
        for j, m in enumerate(mats):
            t = np.moveaxis(np.tensordot(m, t, axes=([1], [j])), 0, j)
        return t

    def measure(self, x: np.ndarray) -> np.ndarray:
        """``A x`` for a marginal histogram ``x`` (any shape with the right number of cells), flattened."""
        t = np.asarray(x, dtype=np.float64).reshape(self.block_sizes)
        for j in range(len(self.mats)):
            t = self._aggregate(j, t)
        return self._apply(self.mats, t).ravel()

    def least_squares(self, y: np.ndarray) -> np.ndarray:
        """``M^+ y`` shaped by blocks' columns (cells, or atoms of aggregated blocks): the minimum-variance
        unbiased estimate of the (coarsened) marginal, read by :meth:`estimate`."""
        return self._apply(self.pinvs, np.asarray(y, dtype=np.float64).reshape([m.shape[0] for m in self.mats]))

    def blocks_of(self, query: ProductQuery) -> list[tuple[float, list[np.ndarray]]]:
        """Regroup a product query's per-axis vectors into per-block vectors (reduced to atoms)."""
        return [(w, [self.reduce(j, block_vector([vs[a] for a in g])) for j, g in enumerate(self.groups)])
                for w, vs in query]

    def query_variance(self, query: ProductQuery) -> float:
        """``w^T (A^T A)^+ w``: the estimate's variance per unit noise variance."""
        terms = self.blocks_of(query)
        ws = np.array([w for w, _ in terms])
        acc = np.outer(ws, ws)
        for j, x in enumerate(self.gram_pinvs):
            v = np.stack([vs[j] for _, vs in terms])
            acc = acc * (v @ v.T if self.identities[j] else v @ x @ v.T)
        return float(acc.sum())

    @cached_property
    def identities(self) -> list[bool]:
        """Which blocks are the identity (on cells or atoms): their algebra needs no matrix product."""
        return [_is_identity(m) for m in self.mats]

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
        return [eye or bool(np.allclose(p @ m, np.eye(m.shape[1]), atol=1e-8))
                for m, p, eye in zip(self.mats, self.pinvs, self.identities, strict=True)]

    def in_row_space(self, query: ProductQuery, tol: float = 1e-8) -> bool:
        """Whether the query is estimable (``A^+ A w = w``): always true for full-column-rank blocks without
        atoms; an aggregated block also needs the query constant on each atom."""
        aggregated = [j for j, lab in enumerate(self._labels) if lab is not None]
        for _, vs in query:
            for j in aggregated:
                v = block_vector([vs[a] for a in self.groups[j]])
                lab = self._labels[j]
                assert lab is not None
                if np.linalg.norm(self.reduce(j, v)[lab] - v) > tol * max(1.0, float(np.linalg.norm(v))):
                    return False
        if all(self.full_rank):
            return True
        for _, vs in self.blocks_of(query):
            for m, p, v in zip(self.mats, self.pinvs, vs, strict=True):
                if np.linalg.norm(p @ (m @ v) - v) > tol * max(1.0, float(np.linalg.norm(v))):
                    return False
        return True

    def to_arrays(self) -> dict[str, np.ndarray]:
        out = {f"m{j}": m for j, m in enumerate(self.mats)}
        out.update({f"l{j}": lab.astype(np.int32) for j, lab in enumerate(self._labels) if lab is not None})
        out["groups"] = np.array([len(g) for g in self.groups])
        return out

    @staticmethod
    def from_arrays(d: Mapping[str, np.ndarray], name: str = "kron") -> KronStrategy:
        sizes = [int(s) for s in d["groups"]]
        groups, start = [], 0
        for s in sizes:
            groups.append(tuple(range(start, start + s)))
            start += s
        labels = [np.asarray(d[f"l{j}"]) if f"l{j}" in d else None for j in range(len(sizes))]
        return KronStrategy([np.asarray(d[f"m{j}"]) for j in range(len(sizes))], groups, name, labels)


def identity_strategy(shape: Sequence[int], labels: Sequence[np.ndarray | None] | None = None) -> KronStrategy:
    """The identity on every axis: measures each cell once (each atom once, on an axis with ``labels``)."""
    labs: list[np.ndarray | None] = list(labels) if labels is not None else [None] * len(shape)
    mats = [np.eye(n if lab is None else int(lab.max()) + 1) for n, lab in zip(shape, labs, strict=True)]
    return KronStrategy(mats, [(i,) for i in range(len(shape))], "identity", labs)
