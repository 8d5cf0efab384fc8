"""Per-group bounds for a group of P's release whose queries are GROUP-BY-shaped (docs/bounding.md).

Under ``bounding = "statement"`` a fresh GROUP BY statement bounds each unit to c rows per group, g groups
and ``GroupAxis.total`` rows in all, and its noise is calibrated on ``axis_unit_norm`` times its column norm. A
release group of P made of the same statement's queries gets the same bound when its histogram is read the
same way (``grouped_rows_sql`` over the group's cells) *and* its strategy keeps the groups apart: when no
column of the strategy for a cell of one group has a non-zero inner product with a column for a cell of
another, a unit's change splits into orthogonal per-group parts, each at most ``n_G ||A||_col``. That is
checked here on the strategy itself (computed, never assumed); otherwise the group keeps the k bound.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from lapras.strategy import KronStrategy
from parser.pushdown.bounding import GroupAxis

# An inner product this small against the largest is rounding, not a shared measurement.
ORTHOGONAL_TOL = 1e-9


def group_of_cells(axis: GroupAxis, size: int) -> np.ndarray:
    """Per cell of the axis' column, the index of the group it is in (-1: in none)."""
    gid = np.full(size, -1, dtype=np.int64)
    for i, ranges in enumerate(axis.sets):
        for lo, hi in ranges:
            gid[lo:hi + 1] = i
    return gid


def splits_groups(strategy: KronStrategy, marginal: Sequence[str], shape: Sequence[int], axis: GroupAxis,
                  cells: np.ndarray) -> bool:
    """Whether ``strategy`` (over ``marginal``) measures the axis' groups apart on ``cells`` (the cells the
    group's histogram holds rows of): every cell there is in a group, no atom of the strategy holds cells
    of two groups, and the columns of atoms of different groups are orthogonal in the block holding the
    axis' column (the Kronecker product's inner product is then 0 for cells of different groups)."""
    if axis.attr not in marginal:
        return False
    j = list(marginal).index(axis.attr)
    block = next(b for b, axes in enumerate(strategy.groups) if j in axes)
    axes = strategy.groups[block]
    others = tuple(a for a in range(len(shape)) if a not in axes)
    live = np.asarray(cells, dtype=bool).any(axis=others) if others else np.asarray(cells, dtype=bool)
    live = live.reshape(-1)
    # the axis' cell of each of the block's cells (row-major over the block's axes)
    block_shape = [int(shape[a]) for a in axes]
    attr_cell = np.unravel_index(np.arange(live.size), block_shape)[axes.index(j)]
    gid = group_of_cells(axis, int(shape[j]))[attr_cell]
    if (gid[live] < 0).any():
        return False
    labels = strategy.labels[block] if strategy.labels is not None else None
    atom = np.arange(live.size) if labels is None else np.asarray(labels)
    atoms = int(strategy.mats[block].shape[1])
    atom_gid = np.full(atoms, -1, dtype=np.int64)
    for a, g in zip(atom[live], gid[live], strict=True):
        if atom_gid[a] not in (-1, g):
            return False  # one atom (one column) holds cells of two groups
        atom_gid[a] = g
    used = np.flatnonzero(atom_gid >= 0)
    m = strategy.mats[block][:, used]
    gram = np.abs(m.T @ m)
    apart = atom_gid[used][:, None] != atom_gid[used][None, :]
    return not bool((gram[apart] > ORTHOGONAL_TOL * max(float(gram.max()), 1e-300)).any())

