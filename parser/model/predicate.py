"""Canonical sets of histogram cells: reduced ordered decision diagrams whose paths are disjoint boxes.

A predicate over a table is a set of cells of the product domain. It is stored as a reduced ordered
multi-valued decision diagram (ROMDD) over a fixed attribute order (the table's attribute names, sorted):
each node tests one attribute and partitions its cells into index-range sets, each leading to a distinct
child; edges to the empty set are omitted and a node whose single edge covers every cell is skipped. For a
fixed order the reduced diagram of a set is unique, so two predicates denote the same set of cells iff
they compare equal, and an attribute appears in the diagram iff the set depends on it (``age >= 17`` on
17..90 vanishes). The root-to-TRUE paths are pairwise disjoint boxes: the canonical disjoint union of
boxes the linear queries expose. Nothing here ever enumerates the full product domain.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from .limits import Budget

Ranges = tuple[tuple[int, int], ...]
"""Sorted, disjoint, non-adjacent inclusive index ranges."""


class Node:
    """One decision node: ``level`` indexes the space's attribute order; ``edges`` are (ranges, child)."""

    __slots__ = ("level", "edges", "_hash", "levels", "n_paths")

    def __init__(self, level: int, edges: tuple[tuple[Ranges, Pred], ...]) -> None:
        self.level = level
        self.edges = edges
        self._hash = hash((level, edges))
        # Its support and box count, computed once (a GROUP BY's queries share their lower nodes).
        self.levels: frozenset[int] | None = None
        self.n_paths = -1

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if not isinstance(other, Node) or self._hash != other._hash:
            return False
        return self.level == other.level and self.edges == other.edges

    def __repr__(self) -> str:
        return f"Node({self.level}, {self.edges!r})"


Pred = Node | bool
"""A predicate: a Node, or a terminal (True: every cell, False: no cell)."""

_BIG = 1 << 30


def _level(p: Pred) -> int:
    return p.level if isinstance(p, Node) else _BIG


def runs(mask: np.ndarray) -> Ranges:
    """The inclusive index runs where a 1-d boolean array is True (vectorised)."""
    m = np.concatenate(([False], np.asarray(mask, dtype=bool).reshape(-1), [False]))
    edges = np.flatnonzero(m[1:] != m[:-1])
    return tuple((int(a), int(b) - 1) for a, b in zip(edges[::2], edges[1::2], strict=True))


def merge_ranges(indices: Sequence[tuple[int, int]]) -> Ranges:
    """Sort and coalesce overlapping or adjacent ranges."""
    out: list[list[int]] = []
    for lo, hi in sorted(indices):
        if lo > hi:
            continue
        if out and lo <= out[-1][1] + 1:
            out[-1][1] = max(out[-1][1], hi)
        else:
            out.append([lo, hi])
    return tuple((a, b) for a, b in out)


def _merged(rs: list[tuple[int, int]]) -> Ranges:
    """``merge_ranges``, without its sort for the common single range."""
    if len(rs) == 1 and rs[0][0] <= rs[0][1]:
        return (rs[0],)
    return merge_ranges(rs)


class Space:
    """The ordered attributes of one table and their domain sizes; builds and combines predicates.

    With a ``budget`` (``with_budget``) every node merge counts against one statement's planning work,
    so a condition whose diagram explodes is refused instead of holding a worker.
    """

    def __init__(self, attrs: Sequence[str], sizes: Sequence[int], budget: Budget | None = None) -> None:
        self.attrs = tuple(attrs)
        self.sizes = tuple(sizes)
        self.level_of = {a: i for i, a in enumerate(self.attrs)}
        self.budget = budget
        self.memos: dict[Callable[[bool, bool], bool], dict[tuple[Pred, Pred], Pred]] | None = None

    def with_budget(self, budget: Budget | None) -> Space:
        """The same space, counting its work against ``budget``."""
        out = Space.__new__(Space)
        out.attrs, out.sizes, out.level_of, out.budget = self.attrs, self.sizes, self.level_of, budget
        # One statement's operations share their results (the diagrams are canonical, so a pair's result
        # never changes): a GROUP BY's groups meet the same lower nodes again and again.
        out.memos = {_and: {}, _or: {}, _diff: {}}
        return out

    # -- construction -------------------------------------------------------------------------------

    def _node(self, level: int, segments: Sequence[tuple[int, int, Pred]]) -> Pred:
        """Reduce a level's segments (covering cells in order) into the canonical node."""
        groups: dict[Pred, list[tuple[int, int]]] = {}
        for lo, hi, child in segments:
            if child is False:
                continue
            groups.setdefault(child, []).append((lo, hi))
        if not groups:
            return False
        if len(groups) == 1:
            (child, rs), = groups.items()
            merged = _merged(rs)
            if merged == ((0, self.sizes[level] - 1),):
                return child
            return Node(level, ((merged, child),))
        # Ranges of different groups are disjoint, so sorting never compares children.
        edges = sorted((_merged(rs), child) for child, rs in groups.items())
        return Node(level, tuple(edges))

    def cells(self, attr: str, ranges: Sequence[tuple[int, int]]) -> Pred:
        """The set of cells whose ``attr`` index lies in ``ranges`` (other attributes free)."""
        level = self.level_of[attr]
        n = self.sizes[level]
        clipped = [(max(lo, 0), min(hi, n - 1)) for lo, hi in ranges]
        return self._node(level, [(lo, hi, True) for lo, hi in merge_ranges(clipped)])

    def table(self, attrs: Sequence[str], mask: np.ndarray) -> Pred:
        """The set of cells where ``mask`` (a boolean array over the product of ``attrs``, which are in the
        space's order) is True, other attributes free: rows of equal sub-tables share one child."""
        if not mask.any():
            return False
        if mask.all():
            return True
        if len(attrs) == 1:
            return self.cells(attrs[0], runs(mask))
        if self.budget is not None:
            self.budget.tick(mask.size)
        rows = mask.reshape(mask.shape[0], -1)
        packed = np.packbits(rows, axis=1)
        first: dict[bytes, int] = {}
        inverse = np.array([first.setdefault(r.tobytes(), i) for i, r in enumerate(packed)])
        segments: list[tuple[int, int, Pred]] = []
        for j in first.values():
            child = self.table(attrs[1:], rows[j].reshape(mask.shape[1:]))
            if child is not False:
                segments.extend((lo, hi, child) for lo, hi in runs(inverse == j))
        return self._node(self.level_of[attrs[0]], sorted(segments, key=lambda t: t[0]))

    def _segments(self, p: Pred, level: int) -> list[tuple[int, int, Pred]]:
        """``p`` seen at ``level`` as segments covering 0..size-1 (False in the gaps)."""
        n = self.sizes[level]
        if not isinstance(p, Node) or p.level != level:
            return [(0, n - 1, p)]
        flat = sorted((lo, hi, child) for rs, child in p.edges for lo, hi in rs)
        out: list[tuple[int, int, Pred]] = []
        pos = 0
        for lo, hi, child in flat:
            if lo > pos:
                out.append((pos, lo - 1, False))
            out.append((lo, hi, child))
            pos = hi + 1
        if pos < n:
            out.append((pos, n - 1, False))
        return out

    def _apply(self, op: Callable[[bool, bool], bool], u: Pred, v: Pred, memo: dict[tuple[Pred, Pred], Pred]) -> Pred:
        if isinstance(u, bool) and isinstance(v, bool):
            return op(u, v)
        short = _shortcut(op, u, v)
        if short is not None:
            return short
        key = (u, v)
        hit = memo.get(key)
        if hit is not None:
            return hit
        level = min(_level(u), _level(v))
        if _flat_at(u, level) and _flat_at(v, level):
            # One attribute's index sets on both sides (IN lists, ranges, their NULL complements): combined
            # as masks in numpy, not segment by segment (an IN list of 10,000 values is 20,000 segments).
            result = self._flat(level, op, u, v)
            memo[key] = result
            return result
        su, sv = self._segments(u, level), self._segments(v, level)
        b = self.budget
        if b is not None:  # Budget.tick, inlined (the hottest loop of planning): work ~ segments swept
            b.steps += len(su) + len(sv)
            if b.steps >= b.next_check:
                b.checkpoint()
        # Sweep the two segmentations together; both cover 0..n-1.
        out: list[tuple[int, int, Pred]] = []
        i = j = 0
        pos = 0
        while i < len(su) and j < len(sv):
            hi = min(su[i][1], sv[j][1])
            out.append((pos, hi, self._apply(op, su[i][2], sv[j][2], memo)))
            pos = hi + 1
            if su[i][1] == hi:
                i += 1
            if sv[j][1] == hi:
                j += 1
        result = self._node(level, out)
        memo[key] = result
        return result

    def _flat(self, level: int, op: Callable[[bool, bool], bool], u: Pred, v: Pred) -> Pred:
        n = self.sizes[level]
        if self.budget is not None:
            self.budget.tick(2 + (len(u.edges[0][0]) if isinstance(u, Node) else 0)
                             + (len(v.edges[0][0]) if isinstance(v, Node) else 0))
        a, b = _mask_of(u, n), _mask_of(v, n)
        m = a & b if op is _and else (a | b if op is _or else a & ~b)
        if not m.any():
            return False
        if m.all():
            return True
        return Node(level, ((runs(m), True),))

    def _memo(self, op: Callable[[bool, bool], bool]) -> dict[tuple[Pred, Pred], Pred]:
        return {} if self.memos is None else self.memos[op]

    def and_(self, u: Pred, v: Pred) -> Pred:
        return self._join(_and, False, u, v)

    def or_(self, u: Pred, v: Pred) -> Pred:
        return self._join(_or, True, u, v)

    def _join(self, op: Callable[[bool, bool], bool], zero: bool, u: Pred, v: Pred) -> Pred:
        """``u op v`` for AND (``zero`` False) or OR (``zero`` True): ``zero`` absorbs, its negation is
        the identity, so those cases and ``u == v`` need no walk."""
        if u is zero or v is zero:
            return zero
        if u is (not zero):
            return v
        if v is (not zero) or u == v:
            return u
        return self._apply(op, u, v, self._memo(op))

    def diff(self, u: Pred, v: Pred) -> Pred:
        """Cells in ``u`` and not in ``v``."""
        if u is False or v is True:
            return False
        if v is False:
            return u
        return self._apply(_diff, u, v, self._memo(_diff))

    def restrict(self, p: Pred, attr: str, ranges: Ranges) -> Pred:
        """``p AND attr in ranges``; only the nodes above ``attr``'s level are rebuilt (GROUP BY cells)."""
        level = self.level_of[attr]
        memo: dict[int, Pred] = {}

        def go(q: Pred) -> Pred:
            if q is False:
                return False
            if not isinstance(q, Node) or q.level > level:
                return self._node(level, [(lo, hi, q) for lo, hi in ranges])
            if q.level == level:
                segs = [(max(lo, a), min(hi, b), child) for rs, child in q.edges for lo, hi in rs for a, b in ranges
                        if max(lo, a) <= min(hi, b)]
                return self._node(level, segs)
            hit = memo.get(id(q))
            if hit is not None:
                return hit
            if self.budget is not None:
                self.budget.tick(len(q.edges))
            out = self._node(q.level, [(lo, hi, go(child)) for rs, child in q.edges for lo, hi in rs])
            memo[id(q)] = out
            return out

        return go(p)

    def not_(self, u: Pred) -> Pred:
        return self.diff(True, u)

    def all_of(self, preds: Sequence[Pred]) -> Pred:
        return self._join_all(_and, False, preds)

    def any_of(self, preds: Sequence[Pred]) -> Pred:
        return self._join_all(_or, True, preds)

    def _join_all(self, op: Callable[[bool, bool], bool], zero: bool, preds: Sequence[Pred]) -> Pred:
        """``preds`` joined by ``op`` (see ``_join``), stopping at the first ``zero``."""
        acc: Pred = not zero
        for p in preds:
            acc = self._join(op, zero, acc, p)
            if acc is zero:
                break
        return acc

    # -- inspection ---------------------------------------------------------------------------------

    def support(self, p: Pred, boxes: Sequence[dict[int, Ranges]] | None = None) -> tuple[str, ...]:
        """Attributes the set depends on, in the space's (sorted) order. Given ``boxes(p)``, read from them:
        every node of a reduced diagram lies on a path to TRUE, so its level is in some box."""
        levels = _levels(p) if boxes is None else set().union(*boxes)
        return tuple(self.attrs[i] for i in sorted(levels))

    def count_boxes(self, p: Pred) -> int:
        """How many disjoint boxes ``boxes(p)`` yields (root-to-TRUE paths), counted without listing them."""
        return _n_paths(p)

    def boxes(self, p: Pred) -> Iterator[dict[int, Ranges]]:
        """The root-to-TRUE paths as disjoint boxes: level -> index ranges (absent levels are free)."""
        b = self.budget
        for box in _paths(p):
            if b is not None:
                b.tick(10)  # a box costs about ten diagram steps downstream (its query key, its SQL)
            yield box


def _levels(p: Pred) -> frozenset[int]:
    if not isinstance(p, Node):
        return frozenset()
    if p.levels is None:
        p.levels = frozenset({p.level}).union(*(_levels(child) for _, child in p.edges))
    return p.levels


def _n_paths(p: Pred) -> int:
    if not isinstance(p, Node):
        return 1 if p else 0
    if p.n_paths < 0:
        p.n_paths = sum(_n_paths(child) for _, child in p.edges)
    return p.n_paths


def _paths(p: Pred) -> Iterator[dict[int, Ranges]]:
    if p is False:
        return
    if p is True:
        yield {}
        return
    for rs, child in p.edges:
        for rest in _paths(child):
            box = {p.level: rs}
            box.update(rest)
            yield box


def _flat_at(p: Pred, level: int) -> bool:
    """True when ``p`` is a terminal or one index set of the attribute at ``level`` (a node whose single
    edge leads to TRUE: reduced, all its cells share that child)."""
    return not isinstance(p, Node) or (p.level == level and len(p.edges) == 1 and p.edges[0][1] is True)


def _mask_of(p: Pred, n: int) -> np.ndarray:
    """The boolean mask over ``n`` cells of a terminal or a flat node (``_flat_at``)."""
    if not isinstance(p, Node):
        return np.full(n, p, dtype=bool)
    rs = np.asarray(p.edges[0][0], dtype=np.int64).reshape(-1, 2)
    delta = np.bincount(rs[:, 0], minlength=n + 1) - np.bincount(rs[:, 1] + 1, minlength=n + 1)
    return np.cumsum(delta[:n]) > 0


def _shortcut(op: Callable[[bool, bool], bool], u: Pred, v: Pred) -> Pred | None:
    """The result when one side is a terminal that decides it without a sweep (TRUE AND v is v), else None."""
    if op is _and:
        if u is True or v is True:
            return v if u is True else u
        return False if u is False or v is False else None
    if op is _or:
        if u is False or v is False:
            return v if u is False else u
        return True if u is True or v is True else None
    if v is False:
        return u
    return False if u is False or v is True else None


def _and(a: bool, b: bool) -> bool:
    return a and b


def _or(a: bool, b: bool) -> bool:
    return a or b


def _diff(a: bool, b: bool) -> bool:
    return a and not b
