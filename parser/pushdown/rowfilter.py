"""The row filter a statement's contribution bound runs after (``[lapras] bounding = "statement"``).

``bounding_filter``: a public condition holding on every row some query of a fresh statement reads (the
union of their cells, or its per-column hull when that union is too large to write); ``cells_filter``: the
rows of a set of cells of one marginal (the cells P's queries read in one group of the matrix mechanism's
release). Each unit's k rows are then chosen among the rows the filter keeps (``parser.pushdown.bounding``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..model.linear import LinearQuery, space_of
from ..model.predicate import Ranges, merge_ranges
from ..model.schema import TableSchema
from .cellsql import attr_sql
from .sql import _boxes_sql

__all__ = ["MAX_BOUNDING_BOXES", "MAX_BOUNDING_WORK", "bounding_filter", "cells_filter"]

MAX_BOUNDING_BOXES = 64
"""Most boxes ``bounding_filter`` writes for a statement's union of cells; more: their per-column hull."""
MAX_BOUNDING_WORK = 4096
"""Most cell ranges (over the distinct boxes) ``bounding_filter`` unites in the predicate space; more:
their per-column hull."""


def bounding_filter(table: TableSchema, queries: Sequence[LinearQuery]) -> str | None:
    """The row filter a statement's contribution bound runs after (``[lapras] bounding = "statement"``): a
    condition on the stored columns that holds on every row some query reads. It is the union of the
    queries' cells when that is at most ``MAX_BOUNDING_BOXES`` boxes, else the per-column hull of their
    boxes (a superset: rows outside every query may then take some of a unit's k, never more). A public
    function of the statement, never of the data. None when some query reads every row; ``FALSE`` when
    none reads any."""
    live = [q for q in queries if not q.is_zero]
    if not live:
        return "FALSE"
    boxes = {tuple(sorted(box)) for q in live for box in q.boxes}
    if any(not box for box in boxes):
        return None  # a box with no condition: some query reads every row
    single = _one_box_union(table, boxes)
    if single is not None:
        return single or None
    space = space_of(table)
    if sum(len(rs) for box in boxes for _, rs in box) <= MAX_BOUNDING_WORK:
        union = space.any_of([space.all_of([space.cells(a, rs) for a, rs in box]) for q in live for box in q.boxes])
        if union is True:
            return None
        if union is False:
            return "FALSE"
        if space.count_boxes(union) <= MAX_BOUNDING_BOXES:
            return _boxes_sql(table, space.attrs, space.boxes(union))
    hull: dict[str, list[tuple[int, int]]] = {}
    free: set[str] = set()
    for q in live:
        for box in q.boxes:
            pinned = dict(box)
            for a in table.attributes:
                if a.name in pinned:
                    hull.setdefault(a.name, []).extend(pinned[a.name])
                else:
                    free.add(a.name)
    conds = []
    for name, rs in hull.items():
        attr = table.attribute(name)
        assert attr is not None
        if name not in free and (c := attr_sql(attr, merge_ranges(rs))) != "TRUE":
            conds.append(c)
    return " AND ".join(f"({c})" for c in conds) if conds else None


def _one_box_union(table: TableSchema, boxes: set[tuple[tuple[str, Ranges], ...]]) -> str | None:
    """The union of ``boxes`` as SQL when they all hold the same conditions on every column but one (a
    GROUP BY's groups under one WHERE): that one box, its column's ranges merged (``""``: every row), in
    time linear in the boxes; else None."""
    names = {a for box in boxes for a, _ in box}
    for attr in sorted(names):
        rests = {tuple(c for c in box if c[0] != attr) for box in boxes}
        if len(rests) != 1:
            continue
        conds = [(a, rs) for a, rs in next(iter(rests))]
        if all(any(a == attr for a, _ in box) for box in boxes):
            conds.append((attr, merge_ranges([r for box in boxes for a, rs in box if a == attr for r in rs])))
        parts = []
        for a, rs in conds:
            column = table.attribute(a)
            assert column is not None
            if (c := attr_sql(column, rs)) != "TRUE":
                parts.append(c)
        return " AND ".join(f"({c})" for c in parts)
    return None


def cells_filter(table: TableSchema, attrs: Sequence[str], cells: np.ndarray) -> str | None:
    """A condition keeping exactly the rows whose cell of the marginal ``attrs`` is in ``cells`` (a boolean
    array over it, axes in that order), or None when that is every cell or more than
    ``MAX_BOUNDING_BOXES`` boxes (the caller then reads every row)."""
    if cells.all():
        return None
    if not cells.any():
        return "FALSE"
    space = space_of(table)
    order = sorted(range(len(attrs)), key=lambda i: space.level_of[attrs[i]])
    pred = space.table([attrs[i] for i in order], np.transpose(cells, order))
    if pred is True or space.count_boxes(pred) > MAX_BOUNDING_BOXES:
        return None
    return _boxes_sql(table, space.attrs, space.boxes(pred))
