"""What one privacy unit can change in a derived histogram (``parser.bind.distinct``), cell by cell: the caps
of its change vector, read from the statement's definition and the declared domains, never from data.

How the histogram is built (``parser.pushdown.sql.derived_marginal_sql``): each unit u has a set K_u of
kept pairs, the distinct (cell, value) pairs of its rows that the WHERE/FILTER keeps (the value: the counted
column's, read as its cell where a cell holds one stored value, ``parser.pushdown.cellsql.counted_expr``;
a NULL value is never counted), at most g of them (``unit_cells_sql``: those of smallest seeded hash of u and
the pair), chosen from u's own rows only. A cell's count is the number of distinct values among all units'
pairs in it. Units present are the same with the unit itself as the only value.

Adding a unit u (removing one is the same change negated) leaves every other unit's pairs as they were, so
cell c's count grows by x_c = the number of values of u's pairs in c that no other unit holds there: an
integer with

    0 <= x_c <= m_c = min(g, |V_c|),    sum_c x_c <= |K_u| <= g,

where V_c is the set of values a kept row of c can hold. For units present |V_c| = 1 (u itself). For
distinct values, :func:`unit_change_caps` reads V_c from the statement: the counted column's non-NULL cells
that some box of the WHERE/FILTER allows together with c's group on every plain axis, within c's group
where the statement groups by the counted column itself. Every kept row lies in one box and in its group,
and its counted value is its cell, so V_c holds every value u can add there: the caps are sound. They are
reached: with no other unit in these cells, a unit with rows of x_c distinct values of V_c in each cell c
(at most g pairs, so all kept) moves c by exactly x_c, for any x within the caps. (V_c is a superset, still
sound, where an axis is an expression over several columns or two axes group one column: some of its values
may then be unreachable.) Where a cell holds many stored values (hours, bins) or no list is public (private
keys), the number of distinct values is not bounded by the domain: m_c = g.
"""

from __future__ import annotations

import numpy as np

from ..model.predicate import Ranges
from ..model.schema import TableSchema

__all__ = ["MAX_CAP_WORK", "unit_change_caps"]

MAX_CAP_WORK = 20_000_000
"""Most mask entries :func:`unit_change_caps` combines; past them every cell keeps g (sound, looser)."""


def unit_change_caps(table: TableSchema, keys: np.ndarray) -> np.ndarray:
    """Per cell of the derived ``table`` (each row of ``keys``: the cell's key index on each axis, in the
    table's attribute order g0, g1, ...), m_c: the most one unit can add to or remove from its count. The
    caps hold together with a total of g = ``table.unit_rows`` over all cells (the module's argument)."""
    d = table.derived
    g = int(table.unit_rows)
    n = len(keys)
    if d.counted is None:
        return np.full(n, min(g, 1), dtype=np.int64)
    col = d.base.attribute(d.counted)
    if col is None or not col.domain.distinct_cells:
        return np.full(n, g, dtype=np.int64)
    size = col.domain.base_size  # non-NULL cells: a NULL is never counted
    boxes = d.within.boxes if d.within is not None else ((),)
    plain = [(j, ax) for j, ax in enumerate(d.axes) if not ax.joint]  # an expression's groups: not intersected
    widths = {ax.attr: d.base.attribute(ax.attr).domain.size for _, ax in plain}
    work = len(boxes) * n * size + sum(len(boxes) * (widths[ax.attr] + sum(map(len, ax.cells)) + n)
                                       for _, ax in plain)
    if work > MAX_CAP_WORK:
        return np.full(n, g, dtype=np.int64)
    held = np.stack([_mask(dict(b).get(d.counted), size) for b in boxes])  # box x value
    allowed = np.ones((len(boxes), n), dtype=bool)  # box b admits a row of cell i
    values = np.ones((n, size), dtype=bool)  # cell i's own restriction of the counted column
    for j, ax in plain:
        width = widths[ax.attr]
        owner = np.array([k for k, rs in enumerate(ax.cells) for _ in rs], dtype=np.int64)
        lo, hi = (np.array([r[i] for rs in ax.cells for r in rs], dtype=np.int64) for i in (0, 1))
        for b, box in enumerate(boxes):
            # Key k meets the box when one of its ranges holds a cell the box allows (prefix sums).
            inside = np.concatenate(([0], np.cumsum(_mask(dict(box).get(ax.attr), width))))
            meets = np.bincount(owner, weights=inside[hi + 1] - inside[lo], minlength=len(ax.cells)) > 0
            allowed[b] &= meets[keys[:, j]]
        if ax.attr == d.counted:
            for k in np.unique(keys[:, j]):
                values[keys[:, j] == k] &= _mask(ax.cells[k], width)[:size]
    reach = (allowed.T.astype(np.float64) @ held.astype(np.float64)) > 0  # cell x value
    return np.minimum((reach & values).sum(axis=1), g).astype(np.int64)


def _mask(ranges: Ranges | None, width: int) -> np.ndarray:
    """The cells ``ranges`` (None: all of them) as a boolean vector over ``width`` cells."""
    if ranges is None:
        return np.ones(width, dtype=bool)
    out = np.zeros(width, dtype=bool)
    for lo, hi in ranges:
        out[lo:hi + 1] = True
    return out
