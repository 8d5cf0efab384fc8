"""Rows of ``marginal_sql`` -> the dense marginal histogram over the declared domain."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from ..model.schema import TableSchema


def to_dense(table: TableSchema, attrs: Sequence[str], rows: Iterable[Sequence[object]]) -> np.ndarray:
    """Counts per cell, axes in ``attrs`` order (C order); each row is (value per attr..., count)."""
    attrs = tuple(attrs)
    doms = []
    for name in attrs:
        attr = table.attribute(name)
        if attr is None:
            raise KeyError(name)
        doms.append(attr.domain)
    hist = np.zeros(table.shape(attrs), dtype=np.float64)
    # A marginal has many rows but few distinct values per column: each value's cell is looked up once.
    # Keyed by (type, value) so that True and 1 (equal, same hash) are never confused.
    memo: list[dict[tuple[type, object], int]] = [{} for _ in doms]
    index: list[list[int]] = [[] for _ in doms]
    counts: list[float] = []
    for row in rows:
        for d, m, out, v in zip(doms, memo, index, row[:-1], strict=True):
            key = (type(v), v)
            i = m.get(key)
            if i is None:
                i = d.index_of(v)
                if i is None:
                    raise ValueError(f"value {v!r} outside the declared domain; was the SQL from marginal_sql?")
                m[key] = i
            out.append(i)
        counts.append(float(row[-1]))  # type: ignore[arg-type]
    if not doms:  # the total: one row holding COUNT(*)
        hist[()] += sum(counts)
    elif counts:
        np.add.at(hist, tuple(np.asarray(ix, dtype=np.intp) for ix in index), np.asarray(counts))
    return hist
