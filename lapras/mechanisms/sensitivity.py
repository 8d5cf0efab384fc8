"""L2 sensitivities under add/remove-one-row: the only module that computes them.

One row moves a histogram by one unit vector, so a query matrix's sensitivity is its largest column norm.
Matrices are never formed densely where structure gives the norm directly: Kronecker products multiply
their blocks' norms, stacked releases over the same table add squared norms.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np

from parser.linear import LinearQuery
from parser.schema import TableSchema


def l2_sensitivity(matrix: np.ndarray) -> float:
    """Largest column L2 norm of a dense query matrix (rows = queries, columns = histogram cells)."""
    m = np.atleast_2d(np.asarray(matrix, dtype=np.float64))
    if m.size == 0:
        return 0.0
    return float(np.sqrt(np.max(np.einsum("ij,ij->j", m, m))))


def kron_sensitivity(factors: Sequence[np.ndarray]) -> float:
    """Sensitivity of ``A1 (x) A2 (x) ...``: column norms of a Kronecker product multiply."""
    return float(math.prod(l2_sensitivity(a) for a in factors))


def stacked_sensitivity(parts: Iterable[tuple[str, float]]) -> float:
    """Sensitivity of blocks released together, given (table, block sensitivity) per block.

    Blocks over the same table see the same row: their squared norms add. Blocks over different tables
    never share a row, so the release's sensitivity is the largest table's.
    """
    per_table: dict[str, float] = {}
    for table, s in parts:
        per_table[table] = per_table.get(table, 0.0) + s * s
    return math.sqrt(max(per_table.values(), default=0.0))


def statement_sensitivity(table: TableSchema, queries: Sequence[LinearQuery]) -> float:
    """Largest column L2 norm of a statement's query matrix with each row divided by its own sensitivity
    (the release adds noise sigma * s_i to row i).

    Computed exactly on the union of the queries' marginals when it is small; otherwise bounded by
    sqrt(number of rows), never underestimated.
    """
    queries = [q for q in queries if q.sensitivity > 0]
    if not queries:
        return 0.0
    attrs = tuple(sorted({a for q in queries for a in q.marginal}))
    shape = table.shape(attrs)
    if math.prod(shape) > 4_000_000:
        return math.sqrt(len(queries))
    acc = np.zeros(shape)
    for q in queries:
        v = (q.vector(table) / q.sensitivity) ** 2
        acc += v.reshape([shape[k] if a in q.marginal else 1 for k, a in enumerate(attrs)])
    return float(math.sqrt(acc.max()))
