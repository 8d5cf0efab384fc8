"""A statement's linear queries as boxes over a segmented grid: work follows its structure, not its domain.

Every linear query is a weighted sum of disjoint boxes, each a product of per-attribute index ranges (the
SUM attribute's weights multiply its axis). Over the union of the statement's attributes, each axis is
cut into *segments* at every range end, so each box is a product of whole segments: a *sub-box* of
segment intervals. On that (usually small) grid:

- the squared column norms of the statement's matrix are one difference array (each sub-box adds its
  weight at its 2^d corners) followed by a running sum per axis;
- exact answers on a marginal histogram are prefix sums read at each sub-box's 2^d corners.

The work, ``grid cells + sub-boxes x 2^d`` (:attr:`Factored.work`), is known before any of it is done.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from parser.model.linear import LinearQuery, value_weights
from parser.model.schema import TableSchema


class TooMuchWork(ValueError):
    """The factored form itself would exceed the work limit (raised before it is built)."""


@dataclass(frozen=True)
class Factored:
    """Sub-box ``i`` spans segments ``[lo[i, a], hi[i, a])`` on each attribute ``a`` of ``attrs``, belongs to
    query ``owner[i]`` and carries that query's ``scale`` as ``weight[i]``; ``cuts[a]`` are the segment
    starts on the attribute's full axis."""

    attrs: tuple[str, ...]
    cuts: tuple[np.ndarray, ...]
    lo: np.ndarray
    hi: np.ndarray
    owner: np.ndarray
    weight: np.ndarray
    n_queries: int

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(len(c) for c in self.cuts)

    @property
    def cells(self) -> int:
        return math.prod(self.shape)

    @property
    def work(self) -> int:
        """Steps of one pass: every grid cell once per axis plus every sub-box corner."""
        return self.cells * max(len(self.attrs), 1) + len(self.owner) * 2 ** len(self.attrs)


def factor(table: TableSchema, queries: Sequence[LinearQuery], max_work: int | None = None) -> Factored:
    """Segment the union marginal of ``queries`` and list their sub-boxes.

    Raises :class:`TooMuchWork` when the sub-boxes or the grid alone would exceed ``max_work``, before
    either is materialised.
    """
    used = {a for q in queries for a in q.marginal}
    attrs = tuple(a.name for a in table.attributes if a.name in used)
    pos = {a: i for i, a in enumerate(attrs)}
    d = len(attrs)
    sizes = [table.shape((a,))[0] for a in attrs]
    corners = 2**d
    los: list[list[int]] = []
    his: list[list[int]] = []
    owner: list[int] = []
    for qi, q in enumerate(queries):
        for box in q.boxes:
            lo, hi = [0] * d, [n - 1 for n in sizes]
            multi: list[tuple[int, tuple[tuple[int, int], ...]]] = []
            for name, ranges in box:
                if len(ranges) == 1:
                    lo[pos[name]], hi[pos[name]] = ranges[0]
                else:
                    multi.append((pos[name], tuple(ranges)))
            # The box's sub-box count is known before they are listed: refuse before building any of them
            # (one box of four 50-range unions is 6 million sub-boxes).
            n_sub = math.prod(len(r) for _, r in multi)
            if max_work is not None and (len(owner) + n_sub) * corners > max_work:
                raise TooMuchWork(f"more than {max_work // corners} sub-boxes")
            if not multi:
                los.append(lo)
                his.append(hi)
                owner.append(qi)
            else:
                # A box holding a union of ranges on some axis: one sub-box per combination.
                for combo in itertools.product(*(r for _, r in multi)):
                    for (k, _), (a, b) in zip(multi, combo, strict=True):
                        lo[k], hi[k] = a, b
                    los.append(list(lo))
                    his.append(list(hi))
                    owner.append(qi)
    lo_a = np.array(los, dtype=np.int64).reshape(len(owner), d)
    hi_a = np.array(his, dtype=np.int64).reshape(len(owner), d) + 1
    # Segment starts: every range start and every position just past a range end.
    cuts = [np.unique(np.concatenate([[0], lo_a[:, k], hi_a[:, k]])) for k in range(d)]
    cuts = [c[c < n] for c, n in zip(cuts, sizes, strict=True)]
    cells = math.prod(len(c) for c in cuts)
    if max_work is not None and cells * max(d, 1) > max_work:
        raise TooMuchWork(f"{cells} grid cells")
    for k in range(d):
        # Range ends are cuts (or the axis end): map positions to segment indices.
        lo_a[:, k] = np.searchsorted(cuts[k], lo_a[:, k])
        hi_a[:, k] = np.searchsorted(cuts[k], hi_a[:, k])
    sub_owner = np.array(owner, dtype=np.int64)
    scale = np.array([q.scale for q in queries], dtype=np.float64)
    return Factored(attrs, tuple(cuts), lo_a, hi_a, sub_owner, scale[sub_owner], len(queries))


def _corner_index(f: Factored, rows: np.ndarray, pattern: tuple[int, ...]) -> tuple[np.ndarray, ...]:
    return tuple(np.where(bit, f.hi[rows, k], f.lo[rows, k]) for k, bit in enumerate(pattern))


def box_sums(f: Factored, rows: np.ndarray, coef: np.ndarray) -> np.ndarray:
    """Grid tensor: sum over the sub-boxes ``rows`` of ``coef`` times each one's indicator."""
    if not f.attrs:
        return np.array(float(np.sum(coef)))
    diff = np.zeros([n + 1 for n in f.shape])
    for pattern in itertools.product((0, 1), repeat=len(f.attrs)):
        sign = -1.0 if sum(pattern) % 2 else 1.0
        np.add.at(diff, _corner_index(f, rows, pattern), sign * coef)
    for k in range(len(f.attrs)):
        diff = np.cumsum(diff, axis=k)
    return diff[tuple(slice(0, n) for n in f.shape)]


def sums_over_boxes(f: Factored, rows: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """For each sub-box in ``rows``: the sum of ``grid`` (a tensor over the segments) inside it."""
    pre = np.asarray(grid, dtype=np.float64)
    if not f.attrs:
        return np.full(len(rows), float(pre.sum()))
    for k in range(len(f.attrs)):
        pre = np.cumsum(pre, axis=k)
    pre = np.pad(pre, [(1, 0)] * len(f.attrs))
    out = np.zeros(len(rows))
    for pattern in itertools.product((0, 1), repeat=len(f.attrs)):
        # Inclusion-exclusion: corners with fewer upper ends than d alternate in sign.
        sign = -1.0 if (len(f.attrs) - sum(pattern)) % 2 else 1.0
        out += sign * pre[_corner_index(f, rows, pattern)]
    return out


def segment_sum(f: Factored, hist: np.ndarray) -> np.ndarray:
    """A dense histogram over ``f.attrs`` summed within each attribute's segments."""
    for k, starts in enumerate(f.cuts):
        hist = np.add.reduceat(hist, starts, axis=k)
    return hist


Family = tuple[str, tuple[float, ...] | None] | None
"""A weighting of sub-boxes: (summed attribute, its explicit per-cell weights or None), or None for counts."""


def families(f: Factored, queries: Sequence[LinearQuery]) -> dict[Family, np.ndarray]:
    """Sub-box indices per weighting (None for counts): each family shares one weighting."""
    ids: dict[Family, int] = {}
    of_query = np.array([ids.setdefault((q.value, q.weights) if q.value else None, len(ids)) for q in queries],
                        dtype=np.int64)
    owner = of_query[f.owner]
    return {fam: np.flatnonzero(owner == i) for fam, i in ids.items()}


def family_weights(table: TableSchema, family: tuple[str, tuple[float, ...] | None]) -> np.ndarray:
    """The per-cell SUM weights of a family's attribute."""
    return value_weights(table, family[0], family[1])


def axis_weights(table: TableSchema, f: Factored, family: tuple[str, tuple[float, ...] | None]) -> np.ndarray:
    """The SUM weights of a family shaped to broadcast along its attribute's axis of a dense histogram."""
    k = f.attrs.index(family[0])
    return family_weights(table, family).reshape([-1 if i == k else 1 for i in range(len(f.attrs))])


def answers_from_marginal(table: TableSchema, queries: Sequence[LinearQuery], hist: np.ndarray,
                          f: Factored | None = None) -> np.ndarray:
    """Exact answers of ``queries`` on the dense histogram of their union marginal (axes in table order)."""
    f = f if f is not None else factor(table, queries)
    per_sub = np.zeros(len(f.owner))
    for value, rows in families(f, queries).items():
        h = np.asarray(hist, dtype=np.float64)
        if value is not None:
            h = h * axis_weights(table, f, value)
        per_sub[rows] = sums_over_boxes(f, rows, segment_sum(f, h))
    return np.bincount(f.owner, weights=per_sub * f.weight, minlength=f.n_queries)
