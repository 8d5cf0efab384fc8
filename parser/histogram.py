"""Rows of ``marginal_sql`` -> the dense marginal histogram over the declared domain."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from .schema import TableSchema


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
    for row in rows:
        idx = []
        for d, v in zip(doms, row[:-1], strict=True):
            i = d.index_of(v)
            if i is None:
                raise ValueError(f"value {v!r} outside the declared domain; was the SQL from marginal_sql?")
            idx.append(i)
        hist[tuple(idx)] += float(row[-1])  # type: ignore[arg-type]
    return hist
