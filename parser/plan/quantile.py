"""Order statistics from noisy counts: MIN, MAX, median and percentiles of an ordered attribute.

A quantile is not a linear query, but the CDF it reads is. The attribute's non-NULL cells are covered by a
tree of intervals (``Tree``, public: it depends on the domain size only); each node is one COUNT, so the
engine measures it like any other linear query (charged once, stored, repeated free, predicted nodes
served by the matrix mechanism). One row lies in one node per level: the L2 sensitivity of the whole tree
is sqrt(levels), computed by the engine from the query matrix as always.

Post-processing (no privacy cost): the node counts are made consistent by least squares (one fixed
projection per tree), negative leaves are clipped, and the quantile is read from the cumulative sums.
The node standard errors give the variance of every CDF point, hence a 95% interval for each quantile
(``Quantile.rank_interval``: it covers at its level on any data, sparse tails and whole cells included).
MIN and MAX are quantiles near 0 and 1 (``P_EXTREME``), read from the same CDF with their own interval,
never the outermost cell with more rows than noise (which missed most of a column's range).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import Decimal
from functools import lru_cache
from typing import Any

import numpy as np

from pgcore.pgtypes import FLOAT8, NUMERIC

from ..scalar import Env, Expr, Vector

MAX_LEAVES = 512
"""Leaves of the tree at most; larger domains group adjacent cells into equal-width blocks (a quantile
inside a block is interpolated, an error of at most one block width)."""
P_EXTREME = 0.001
"""MIN and MAX are percentile_disc(P_EXTREME) and percentile_disc(1 - P_EXTREME): values with about a
thousandth of the rows beyond them. A lone outlier is never released (its count drowns in noise), the
estimate lands within a few cells of the true extreme wherever the rows near it outnumber the noise, and
below 1,000 rows it is the exact extreme when the counts are exact."""
Z95 = 1.959963984540054


@dataclass(frozen=True)
class Tree:
    """Intervals over ``n_cells`` cells: ``leaves`` (cell ranges) and ``nodes`` (leaf ranges, root first)."""

    n_cells: int
    branching: int
    leaves: tuple[tuple[int, int], ...]
    nodes: tuple[tuple[int, int], ...]

    @property
    def levels(self) -> int:
        return 1 if self.branching == 0 else int(round(math.log(self._padded, self.branching))) + 1

    @property
    def _padded(self) -> int:
        n = 1
        while n < len(self.leaves):
            n *= self.branching
        return n

    def node_cells(self, i: int) -> tuple[int, int]:
        """Cell index range of node ``i``."""
        lo, hi = self.nodes[i]
        return self.leaves[lo][0], self.leaves[hi][1]

    @property
    def projection(self) -> np.ndarray:
        """(leaves x nodes): node counts -> least-squares leaf counts."""
        return _projection(self)

    @property
    def cumulative(self) -> np.ndarray:
        """(leaves x nodes): node counts -> least-squares CDF at the end of each leaf."""
        return _cumulative(self)


@lru_cache(maxsize=64)
def _projection(tree: Tree) -> np.ndarray:
    a = np.zeros((len(tree.nodes), len(tree.leaves)))
    for i, (lo, hi) in enumerate(tree.nodes):
        a[i, lo : hi + 1] = 1.0
    return np.linalg.pinv(a)


@lru_cache(maxsize=64)
def _cumulative(tree: Tree) -> np.ndarray:
    return np.cumsum(_projection(tree), axis=0)


def _prefix_cost(n: int, b: int) -> float:
    """Mean number of nodes x levels needed for a prefix [0, k): the variance of a CDF point, in units of one
    node's variance at sensitivity 1, before least squares (which only improves it). Chooses ``b``."""
    if b == 0:
        return (n + 1) / 2.0  # leaves only, one level
    levels, padded = 1, 1
    while padded < n:
        padded *= b
        levels += 1
    total = 0
    for k in range(1, n + 1):
        used, rest, width = 0, k, padded
        while rest and width >= 1:
            used += rest // width
            rest %= width
            width //= b
        total += used
    return levels * total / n


@lru_cache(maxsize=256)
def build_tree(n_cells: int) -> Tree:
    """The tree over ``n_cells`` cells with the lowest CDF variance among branchings 2..16 and a flat
    histogram (which needs no tree at all for tiny domains)."""
    width = max(1, math.ceil(n_cells / MAX_LEAVES))
    leaves = tuple((s, min(s + width, n_cells) - 1) for s in range(0, n_cells, width))
    n = len(leaves)
    best = min([0, *range(2, 17)], key=lambda b: (_prefix_cost(n, b), b))
    if best == 0:
        return Tree(n_cells, 0, leaves, tuple((i, i) for i in range(n)))
    nodes: list[tuple[int, int]] = []
    span = 1
    while span < n:
        span *= best
    while span >= 1:
        nodes.extend((s, min(s + span, n) - 1) for s in range(0, n, span))
        span //= best
    return Tree(n_cells, best, leaves, tuple(nodes))


@lru_cache(maxsize=256)
def _band(tree: Tree, p: float, node_err: bytes) -> np.ndarray:
    """1.96 standard errors of CDF(j) - p N per leaf, from the node errors (least squares included)."""
    cum = tree.cumulative  # (leaves x nodes)
    err = np.frombuffer(node_err, dtype=np.float64)
    return Z95 * np.sqrt(((cum - p * cum[-1]) ** 2) @ err**2)


class Quantile(Expr):
    """An order statistic of attribute values ``values`` (one per cell) per group, from the node slots.

    ``kind``: ``"cont"`` (percentile_cont, median), ``"disc"`` (percentile_disc), ``"min"``, ``"max"``
    (percentile_disc at ``P_EXTREME`` and ``1 - P_EXTREME``). ``bounded``: an unfiltered MIN/MAX over the
    whole column (a BI tool's range slider) returns the outer end of its 95% interval (the column's declared
    bound whenever the interval reaches it), so a range filter built from [MIN, MAX] keeps all but at most
    about 2 x P_EXTREME of the rows.
    """

    def __init__(self, tree: Tree, slots: list[int], values: list[float], kind: str, fraction: float,
                 oid: int, name: str, uppers: list[float] | None = None,
                 cells: tuple[list[object], list[object]] | None = None, bounded: bool = False) -> None:
        self.tree, self.slots, self.values, self.kind, self.fraction = tree, slots, values, kind, fraction
        self.oid, self.name, self.bounded = oid, name, bounded
        self.rank_fraction = {"min": P_EXTREME, "max": 1.0 - P_EXTREME}.get(kind, fraction)
        # A binned measure's cells are intervals [values[c], uppers[c]): a rank inside one is placed
        # uniformly (as percentile_cont would over evenly spread rows), and an interval spans whole bins.
        # Without it every cell is the single value values[c].
        self.uppers = uppers
        # A temporal column's ``values`` are cell indices; ``cells`` gives each cell's start (the value
        # returned, as date_trunc to the resolution would) and last instant (a 95% interval's high end,
        # so the interval spans whole cells and covers every value inside them).
        self.cells = cells

    def meaning(self) -> str | None:
        """What a MIN or MAX answer is, for the NOTICE under show_stderr (None for percentiles)."""
        if self.kind not in ("min", "max"):
            return None
        side = "below" if self.kind == "min" else "above"
        text = (f"{self.name}: {self.kind.upper()} is percentile_disc({self.rank_fraction:g}) read from the noisy "
                f"CDF, the value with about {100 * P_EXTREME:g}% of the rows {side} it (never a lone outlier); "
                "its 95% interval is stated")
        if self.bounded:
            text += ("; over a whole column, the interval's outer end is returned (the declared bound whenever "
                     "the interval reaches it), so a range filter built from MIN and MAX keeps the rows")
        return text

    def ev(self, env: Env) -> Vector:
        assert env.aggs is not None
        errs = env.errs[:, self.slots] if env.errs is not None else None
        return [self._one(v, e)[0] for v, e in zip(self._leaves(env.aggs), self._errs(errs, env.n), strict=True)]

    def intervals(self, aggs: np.ndarray, errs: np.ndarray | None) -> list[tuple[object, object, object]]:
        """Per group: (estimate, low, high) of the 95% interval (None where there is no estimate)."""
        e = errs[:, self.slots] if errs is not None else None
        return [self._one(v, s) for v, s in zip(self._leaves(aggs), self._errs(e, aggs.shape[0]), strict=True)]

    # -- post-processing -------------------------------------------------------------------------------

    def _leaves(self, aggs: np.ndarray) -> np.ndarray:
        return aggs[:, self.slots] @ self.tree.projection.T

    def _errs(self, errs: np.ndarray | None, n: int) -> list[np.ndarray | None]:
        return [None] * n if errs is None else list(errs)

    def _value(self, leaf: int, share: float) -> float:
        """The value ``share`` of the way through leaf ``leaf`` (exact for one-cell leaves)."""
        lo, hi = self.tree.leaves[leaf]
        if self.uppers is not None:
            start = self.values[lo]
            return start + min(max(share, 0.0), 1.0) * (self.uppers[hi] - start)
        cell = lo + min(hi - lo, int(math.floor(max(share, 0.0) * (hi - lo + 1))))
        return self.values[cell]

    def _at_rank(self, counts: np.ndarray, cdf: np.ndarray, rank: float) -> float:
        j = int(np.searchsorted(cdf, rank, side="right"))
        j = min(j, len(cdf) - 1)
        before = cdf[j - 1] if j > 0 else 0.0
        return self._value(j, (rank - before) / counts[j] if counts[j] > 0 else 0.0)

    def _one(self, leaves: np.ndarray, node_err: np.ndarray | None) -> tuple[object, object, object]:
        # Least squares leaves are unbiased; clipping each at 0 would bias the CDF up across every sparse
        # leaf. The running maximum of the unbiased CDF is monotone and moves it only where noise dips.
        raw = np.cumsum(leaves)
        cdf = np.maximum.accumulate(raw)
        counts = np.diff(cdf, prepend=0.0)
        total = float(raw[-1])
        p = self.rank_fraction
        est: object
        if total <= 0:
            est = None  # no rows beyond noise: no estimate (NULL), but an interval all the same
        elif self.kind == "max":
            est = self._typed(self._from_top(raw, total, p))
        elif self.kind in ("disc", "min"):
            target = p * total
            j = int(np.searchsorted(cdf, target, side="left")) if p > 0 else int(np.flatnonzero(counts > 0)[0])
            j = min(j, len(cdf) - 1)
            before = cdf[j - 1] if j > 0 else 0.0
            share = 0.0 if self.kind == "min" or counts[j] <= 0 else (target - before) / counts[j]
            est = self._typed(self._value(j, share))
        else:
            r = p * max(total - 1.0, 0.0)
            lo_v, hi_v = self._at_rank(counts, cdf, math.floor(r)), self._at_rank(counts, cdf, math.ceil(r))
            est = lo_v + (r - math.floor(r)) * (hi_v - lo_v)
        if node_err is None:
            return est, est, est
        low_j, high_j = self.rank_interval(raw, node_err)
        low = self._typed(self._value(low_j, 0.0))
        high = self._typed(self._value(high_j, 1.0), end=True)
        # A range slider's MIN/MAX is the outer end of that interval: past it lie at most P_EXTREME of the
        # rows (with probability 97.5%), and it is the declared bound whenever the interval reaches it.
        if self.bounded and self.kind == "min":
            est = low
        elif self.bounded and self.kind == "max":
            est = self._typed(self._value(high_j, 1.0))
        if est is not None and self.cells is None and self.kind != "cont":
            num: Any = est  # numbers here (int, float or Decimal), as are low and high
            est = min(max(num, low), high)
        return est, low, high

    def rank_interval(self, raw: np.ndarray, node_err: np.ndarray) -> tuple[int, int]:
        """Leaves (first, last) of the 95% interval of the value at rank ``rank_fraction`` of one group.

        ``raw`` is the least-squares CDF at each leaf's end, ``node_err`` the standard error of each node.
        The true value sits in the first leaf ``j*`` whose true CDF reaches the rank (``F(j*) - pN >= 0``
        while ``F(j* - 1) - pN < 0``). With ``D(j) = F^(j) - pN^`` (noise on every node the CDF point and the
        total read, least squares included) and ``s(j)`` its standard error, the low end is the first leaf
        with ``D(j) + z s(j) >= 0`` and the high end the last leaf with ``D(j - 1) - z s(j - 1) < 0``. The
        low end passes ``j*`` only if ``D(j*)`` falls ``z s`` below its mean, the high end stops before ``j*``
        only if ``D(j* - 1)`` rises ``z s`` above its mean: 2.5% each, whatever the shape of the data
        (flat stretches and whole cells included), so the interval covers with probability >= 95%.
        Comparing each CDF point on its own (the first leaf with ``D - z s >= 0`` as the high end) misses
        far more often on a sparse tail: any of the flat leaves below the value may cross by noise.
        percentile_cont interpolates between the values at ranks floor(p(N-1)) and ceil(p(N-1)), whose
        CDF thresholds lie within (pN - 1, pN + 2): the tests allow that slack."""
        p = self.rank_fraction
        d = raw - p * raw[-1]
        band = self._band(node_err)
        low_slack, high_slack = (-1.0, 2.0) if self.kind == "cont" else (0.0, 1.0 if p == 0 else 0.0)
        up = np.flatnonzero(d + band >= low_slack)
        low = int(up[0]) if len(up) else len(raw) - 1
        below = np.flatnonzero(d - band < high_slack)
        high = min(int(below[-1]) + 1, len(raw) - 1) if len(below) else 0
        return low, max(low, high)

    def _band(self, node_err: np.ndarray) -> np.ndarray:
        """``z s(j)`` per leaf for these node errors (public: the noise scale only), kept for repeats."""
        return _band(self.tree, self.rank_fraction, np.ascontiguousarray(node_err, dtype=np.float64).tobytes())

    def _from_top(self, raw: np.ndarray, total: float, p: float) -> float:
        """percentile_disc(p) for p near 1 read from the top (MAX): the last leaf holding more than
        (1 - p) N of the rows at or above it, on the running maximum of the tail counts (as the CDF's
        running maximum from below for MIN, so both ends lean the same way: outwards), at the leaf's last
        cell (MIN: its first), so [MIN, MAX] spans whole leaves."""
        tail = total - np.concatenate(([0.0], raw[:-1]))  # rows in leaves >= j
        top = np.maximum.accumulate(tail[::-1])[::-1]
        need = (1.0 - p) * total
        ok = np.flatnonzero(top > need) if need > 0 else np.flatnonzero(np.diff(np.append(top, 0.0)) < 0)
        return self._value(int(ok[-1]) if len(ok) else 0, 1.0)

    def _typed(self, v: float | None, end: bool = False) -> object:
        if v is None:
            return None
        if self.cells is not None:
            return self.cells[1 if end else 0][int(round(v))]
        if self.oid == FLOAT8:
            return float(v)
        if self.oid == NUMERIC:
            return Decimal(f"{v:.6g}")
        return int(round(v))

    def stderr(self, aggs: np.ndarray, errs: np.ndarray | None) -> list[float | None]:
        """Half the 95% interval's width over 1.96, per group: a standard error for show_stderr."""
        out: list[float | None] = []
        if self.cells is not None:  # a date or instant has no numeric standard error; its interval is stated
            return [None] * aggs.shape[0]
        for _, lo, hi in self.intervals(aggs, errs):
            out.append(None if lo is None or hi is None else (float(hi) - float(lo)) / (2 * Z95))  # type: ignore[arg-type]
        return out
