"""A statement's groups at Bind: every group of the product of the GROUP BY dimensions with the cells it
covers, and those cells restricting a predicate (``GroupCells``), built once per key."""

from __future__ import annotations

import itertools

import numpy as np

from ..analysis.template import Template
from ..model.limits import Budget
from ..model.predicate import Pred, Ranges, Space
from ..model.schema import TableSchema
from .partition import has_selected_keys


def mask(shape: tuple[int, ...], ranges: tuple[tuple[int, int], ...]) -> np.ndarray:
    """A boolean array over a product of domains from runs of flat indices."""
    flat = np.zeros(int(np.prod(shape)), dtype=bool)
    for lo, hi in ranges:
        flat[lo:hi + 1] = True
    return flat.reshape(shape)


class GroupCells:
    """A group's cells restricting a predicate: a plain dimension's ranges of one attribute, or a joint
    dimension's runs over the product of its attributes (``analysis/joint.py``), built once per key."""

    def __init__(self, table: TableSchema, space: Space, budget: Budget) -> None:
        self.table, self.space, self.budget = table, space, budget
        # Masks over a joint product are vectorised: charged by the runs they hold (the boxes they become),
        # not the product's size (bounded at analysis by joint.MAX_GROUP_WORK).
        self.free = space.with_budget(None)
        self.preds: dict[tuple[tuple[str, ...], Ranges], Pred] = {}
        # Groups are listed in key order, so consecutive groups share their first dimensions' cells: each
        # prefix is restricted once (5 text keys: about 1.3 restrictions a group instead of 5).
        self.done: dict[tuple[Pred, str, Ranges], Pred] = {}

    def restrict(self, p: Pred, attr: str | tuple[str, ...], ranges: Ranges) -> Pred:
        if isinstance(attr, str):
            key3 = (p, attr, ranges)
            hit = self.done.get(key3)
            if hit is None:
                hit = self.done[key3] = self.space.restrict(p, attr, ranges)
            return hit
        key = (attr, ranges)
        cells = self.preds.get(key)
        if cells is None:
            self.budget.tick(10 * len(ranges))  # about one box a run, counted as the binder counts boxes
            self.budget.check_deadline()
            cells = self.free.table(attr, mask(self.table.shape(attr), ranges))
            self.preds[key] = cells
        return self.space.and_(p, cells)


def filtered_elsewhere(t: Template, support: tuple[str, ...]) -> bool:
    """True when a value list's WHERE reads columns other than its keys (filtered on its own keys only,
    it is the public domain's values and free)."""
    if has_selected_keys(t.table, t.group_attrs):
        return False  # its keys were released by partition selection under this very filter
    keys = set(t.group_attrs)
    return any(a not in keys for a in support)


def covers(cells: list[tuple[str | tuple[str, ...], Ranges]], selected: frozenset[tuple[int, ...]]) -> bool:
    """True when a group's cells include a released cell tuple."""
    per_dim = [[i for lo, hi in granges for i in range(lo, hi + 1)] for _, granges in cells]
    return any(combo in selected for combo in itertools.product(*per_dim))


def group_indices(t: Template) -> list[tuple[int, ...]]:
    """Per group of :func:`all_groups` (same order), its key index along each dimension."""
    return list(itertools.product(*(range(len(d.keys)) for d in t.groups)))


def all_groups(t: Template) -> list[tuple[tuple[object, ...], list[tuple[str | tuple[str, ...], Ranges]]]]:
    """Every group of the product of the GROUP BY dimensions, in key order (empty groups included): its key
    values and, per dimension, the attribute cells it covers (a joint dimension: its attributes' tuple and
    runs over their product)."""
    out: list[tuple[tuple[object, ...], list[tuple[str | tuple[str, ...], Ranges]]]] = [((), [])]
    for dim in t.groups:
        name: str | tuple[str, ...] = dim.attrs or dim.attr
        out = [(k + (key,), c + [(name, cells)]) for k, c in out for key, cells in zip(dim.keys, dim.cells,
                                                                                     strict=True)]
    return out
