"""L2 sensitivities under add/remove-one-unit: the only module that computes them.

One row moves a histogram by one unit vector, so a query matrix's sensitivity is its largest column norm.
A table with a privacy unit keeps at most k rows per unit (``TableSchema.unit_rows``): one unit moves the
histogram by a non-negative integer vector of L1 norm at most k, whose image has L2 norm at most k times
the largest column norm (the triangle inequality), with equality when all k rows fall in one cell; so every
sensitivity over such a table is exactly k times the row-level one. Per-group bounds (at most c rows in one
of a statement's disjoint groups, at most g groups, ``GroupAxis.total`` in all: g c when
``max_rows_per_group`` is declared, else min(g c, k)) replace k by :func:`axis_unit_norm` (docs/bounding.md).
Matrices are never formed densely where structure gives the norm directly: Kronecker products multiply
their blocks' norms, stacked releases over the same table add squared norms.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from lapras.errors import StatementTooComplex
from lapras.factored import TooMuchWork, box_sums, factor, families, family_weights
from parser.bind.distinct_caps import unit_change_caps
from parser.model.linear import LinearQuery
from parser.model.schema import TableSchema
from parser.pushdown.bounding import GroupAxis


def l2_sensitivity(matrix: np.ndarray) -> float:
    """Largest column L2 norm of a dense query matrix (rows = queries, columns = histogram cells)."""
    m = np.atleast_2d(np.asarray(matrix, dtype=np.float64))
    if m.size == 0:
        return 0.0
    return float(np.sqrt(np.max(np.einsum("ij,ij->j", m, m))))


def kron_sensitivity(factors: Sequence[np.ndarray]) -> float:
    """Sensitivity of ``A1 (x) A2 (x) ...``: column norms of a Kronecker product multiply."""
    return float(math.prod(l2_sensitivity(a) for a in factors))


def stacked_sensitivity(parts: Iterable[tuple[str, float]], unit_rows: Mapping[str, int] | None = None,
                        unit_tables: Mapping[str, str] | None = None) -> float:
    """Sensitivity of blocks released together, given (table, row-level block sensitivity) per block.

    Each block's norm is scaled by its table's per-unit bound (``unit_rows``: k, or g for a derived
    histogram of units or values present; 1 where absent). Blocks over tables of the same privacy unit (a
    table and the tables derived from it, ``unit_tables``: derived -> protected) see the same unit: their
    squared norms add. Blocks over different protected tables never share a unit, so the release's
    sensitivity is the largest table's.
    """
    per_table: dict[str, float] = {}
    k = unit_rows or {}
    base = unit_tables or {}
    for table, s in parts:
        t = base.get(table, table)
        per_table[t] = per_table.get(t, 0.0) + (k.get(table, 1) * s) ** 2
    return max((math.sqrt(v) for v in per_table.values()), default=0.0)


def histogram_sensitivity(unit_bound: int, presence: bool = False) -> float:
    """Sensitivity of a fresh release of one disjoint histogram (a GROUP BY's cells, each row divided by its
    own sensitivity): a unit of up to ``unit_bound`` = k rows moves it by at most k in L2 (all k rows in one
    cell); over a derived histogram of units present (``presence``) one unit adds 1 to at most g cells: sqrt(g).
    The reference a predicted query's release is compared with when the budget is split."""
    return math.sqrt(unit_bound) if presence else float(unit_bound)


def group_bound_norm(k: int, c: int, g: int, groups: int | None = None) -> float:
    """Largest sqrt(sum_G n_G^2) over a unit's rows per group n_G, integers with n_G <= c, sum n_G <= k and at
    most g (and at most ``groups``, the statement's) groups with n_G > 0: the factor by which one unit's
    change in a statement whose groups are disjoint blocks exceeds the largest column norm.

    Sum n_G^2 is convex, so its maximum over the polytope {0 <= n <= c, sum n <= k} on a support of s <= g
    groups is at a vertex: floor(k / c) groups at c (at most s of them) and the remainder in one more.
    With c >= k or g = 1 that is k or min(c, k); with g c <= k it is sqrt(g) c."""
    k, c, g = int(k), min(int(c), int(k)), int(g) if groups is None else min(int(g), int(groups))
    if k <= 0 or c <= 0 or g <= 0:
        return 0.0
    full = min(g, k // c)
    rest = k - full * c if full < g else 0
    return math.sqrt(full * c * c + rest * rest)


def axis_unit_norm(table: TableSchema, axis: GroupAxis) -> float:
    """``group_bound_norm`` for the rows ``grouped_rows_sql`` keeps over ``axis``: c rows per group, g groups
    and ``GroupAxis.total`` in all (g c with c declared: no cut to k). The one place a GROUP BY's per-group
    bound is computed, for fresh statements and P's release groups alike."""
    return group_bound_norm(axis.total(table), axis.rows(table), axis.units(table), axis.count)


def statement_sensitivity(table: TableSchema, queries: Sequence[LinearQuery], max_work: int | None = None,
                          unit_norm: float | None = None) -> float:
    """Largest column L2 norm of a statement's query matrix with each row divided by its own sensitivity
    (the release adds noise sigma * s_i to row i), computed exactly in factored form.

    A query's boxes are disjoint, so its squared vector is the sum of its boxes' squared indicators; the
    squared column norms are then a sum of box indicators over the segmented union marginal
    (:mod:`lapras.factored`), never a loop over cells. Raises :class:`StatementTooComplex` (54000) when
    the work exceeds ``max_work``, before any of it is done.

    ``unit_norm``: the largest norm of one unit's rows-per-column vector when the exact answers bound
    rows per group instead of k rows per unit (per-group bounds over disjoint groups,
    :func:`group_bound_norm`); it replaces k for a statement over one protected table (never over derived
    histograms), and may exceed it.
    """
    by_table: dict[str, tuple[TableSchema, list[LinearQuery]]] = {}
    for q in queries:
        t = q.source if q.source is not None else table
        by_table.setdefault(t.name, (t, []))[1].append(q)
    if len(by_table) <= 1 and table.derived is None and all(q.source is None for q in queries):
        # unit_norm may exceed k: per-group bounds put no total cap k on a GROUP BY (g c rows in all).
        scale = table.unit_rows if unit_norm is None else unit_norm
        return scale * _row_sensitivity(table, queries, max_work)
    # Histograms of one table (rows, units present per group, values present) move together when one unit
    # changes: their squared sensitivities add.
    return math.sqrt(sum(derived_sensitivity(t, qs, max_work) ** 2 if t.derived is not None
                         else (t.unit_rows * _row_sensitivity(t, qs, max_work)) ** 2 for t, qs in by_table.values()))


def derived_sensitivity(table: TableSchema, queries: Sequence[LinearQuery], max_work: int | None = None) -> float:
    """Sensitivity over a derived histogram (``parser.bind.distinct``: units or distinct values present per
    group), from what one unit can change in it (``parser.bind.distinct_caps``): an integer vector x over the
    cells with 0 <= x_c <= m_c (1 for units present; min(g, values the cell's rows can hold) for distinct
    values of a column with a public list) and sum_c x_c <= g, every such x reached by some pair of
    neighbouring tables. The sensitivity is then exactly max ||A x|| over those x (A: the queries, each
    divided by its own sensitivity).

    When the queries are counts over disjoint cell sets S_q (a statement's groups: one cell each), (A x)_q is
    +-y_q with y_q = sum of x over S_q, and the y reachable are exactly the integers 0 <= y_q <= M_q =
    min(g, sum of m_c over S_q) with sum_q y_q <= g. sum y_q^2 is convex and increasing, and the greedy y
    (the largest M_q first, each filled until g is spent) weakly majorises every reachable y (its j largest
    entries sum to min(g, the j largest M_q), which no reachable y exceeds), so it is the maximum:
    :func:`capped_norm`. Units present: sqrt(min(g, groups)); distinct values of a column with 5 values, g =
    12: 5 without groups, sqrt(5^2 + 5^2 + 2^2) over days. Otherwise (queries overlapping, or summing
    weighted cells) the general bound: x has total at most g, so ||A x|| <= g times the largest column norm
    (the triangle inequality)."""
    live = [q for q in queries if q.sensitivity > 0 and not q.is_zero]
    if not live:
        return 0.0
    g = table.unit_rows
    caps = _count_caps(table, live)
    if caps is not None:
        return capped_norm(caps, g)
    return g * _row_sensitivity(table, live, max_work)


def capped_norm(caps: np.ndarray | Sequence[int], total: int) -> float:
    """Largest sqrt(sum_q y_q^2) over integers 0 <= y_q <= caps_q with sum_q y_q <= total: the largest caps
    filled first until the total is spent (the greedy vector weakly majorises every feasible one, and the
    sum of squares is Schur-convex and increasing on y >= 0)."""
    c = np.sort(np.minimum(np.asarray(caps, dtype=np.float64), total))[::-1]
    spent = np.concatenate(([0.0], np.cumsum(c)[:-1]))
    y = np.clip(total - spent, 0.0, c)
    return float(np.sqrt(np.sum(y * y)))


MAX_CAP_CELLS = 1_000_000
"""Most derived cells :func:`_count_caps` lists for a statement's queries; past them the general bound."""


def _count_caps(table: TableSchema, queries: Sequence[LinearQuery]) -> np.ndarray | None:
    """Per distinct query, the most one unit can move it once divided by its sensitivity, M_q = min(g, sum
    of the caps of its cells), when every query is a count with one weight (its sensitivity) over cells that
    no other query reads; None otherwise (the general bound applies)."""
    names = [a.name for a in table.attributes]
    sizes = [a.domain.size for a in table.attributes]
    if math.prod(sizes) >= 2**62:
        return None
    uniq = list({q.key: q for q in queries}.values())  # a query asked twice is one answer
    points: list[list[int]] = []  # cells of one-cell boxes (a statement's groups), listed without a grid
    cells: list[np.ndarray] = []
    point_of: list[int] = []
    owners: list[np.ndarray] = []
    listed = 0
    for i, q in enumerate(uniq):
        if q.value is not None or q.measure or abs(q.scale) != q.sensitivity:
            return None
        for box in q.boxes:
            pinned = dict(box)
            point = [_single_index(pinned.get(a), n) for a, n in zip(names, sizes, strict=True)]
            if None not in point:
                points.append(point)  # type: ignore[arg-type]
                point_of.append(i)
                continue
            axes = [np.concatenate([np.arange(lo, hi + 1) for lo, hi in pinned[a]]) if a in pinned
                    else np.arange(n) for a, n in zip(names, sizes, strict=True)]
            listed += math.prod(len(x) for x in axes)
            if listed + len(points) > MAX_CAP_CELLS:
                return None
            cells.append(np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1).reshape(-1, len(names)))
            owners.append(np.full(len(cells[-1]), i))
    cells.insert(0, np.array(points, dtype=np.int64).reshape(len(points), len(names)))
    owners.insert(0, np.array(point_of, dtype=np.int64))
    keys = np.concatenate(cells).astype(np.int64)
    flat = np.ravel_multi_index(tuple(keys.T), sizes) if names else np.zeros(len(keys), dtype=np.int64)
    if len(np.unique(flat)) < len(flat):
        return None  # two queries share a cell
    per_query = np.bincount(np.concatenate(owners), weights=unit_change_caps(table, keys), minlength=len(uniq))
    return np.minimum(per_query, table.unit_rows)


def _single_index(ranges: Sequence[tuple[int, int]] | None, size: int) -> int | None:
    """The one cell index ``ranges`` (None: the whole axis) holds, or None when it holds more than one."""
    if ranges is None:
        return 0 if size == 1 else None
    return ranges[0][0] if len(ranges) == 1 and ranges[0][0] == ranges[0][1] else None


PRESENCE_MAX_BLOCK = 4096
"""Largest strategy block whose Gram matrix :func:`presence_sensitivity` forms (n x n floats)."""


def presence_sensitivity(blocks: Sequence[np.ndarray], g: int, aggregated: bool = False) -> float:
    """Largest ||A x|| over 0/1 vectors x with at most g ones, A = kron(blocks) (an upper bound): a
    strategy over a units-present histogram, where one unit adds 1 to at most g cells.

    ||A x||^2 sums <a_c, a_c'> over the pairs of x's cells: at most g times the largest squared column norm
    (the diagonal, prod of the blocks' d_i) plus g (g - 1) times the largest |inner product| of two
    distinct columns, a product over blocks: distinct cells differ on some block i, whose factor is at most
    o_i = the largest |off-diagonal| of B_i^T B_i, and every factor is at most d_j (Cauchy-Schwarz). So
    identity-like strategies pay sqrt(g) and overlapping ones at most g, the general bound. ``aggregated``: the strategy
    sums cells into atoms first (no longer a 0/1 vector): the general bound g x column norm."""
    general = g * kron_sensitivity(blocks)
    n = math.prod(int(b.shape[1]) for b in blocks)
    g = min(g, n)
    if aggregated or any(b.shape[1] > PRESENCE_MAX_BLOCK for b in blocks):
        return general
    d, o = [], []
    for b in blocks:
        gram = np.asarray(b, dtype=np.float64).T @ np.asarray(b, dtype=np.float64)
        d.append(float(np.max(np.diagonal(gram))) if gram.size else 0.0)
        np.fill_diagonal(gram, 0.0)
        o.append(float(np.max(np.abs(gram))) if gram.size else 0.0)
    diag = math.prod(d)
    off = max((o[i] * math.prod(d[j] for j in range(len(d)) if j != i) for i in range(len(d))), default=0.0)
    return min(general, math.sqrt(g * diag + g * (g - 1) * off))


def _pointwise_bound(queries: Sequence[LinearQuery]) -> float | None:
    """An upper bound of the statement's normalised L2 sensitivity, for when the exact computation is too
    much work: sqrt(most queries at one point) when every query is one box pinning the attributes all of them
    constrain to single cells (the groups of a GROUP BY over many columns, one point each): a row lies at
    one point, so it reaches only that point's queries, each by at most its own sensitivity (1 once
    normalised). None when the queries are not of that form (the general computation applies)."""
    shared: set[str] | None = None
    for q in queries:
        if len(q.boxes) != 1:
            return None
        pinned = {a for a, rs in q.boxes[0] if len(rs) == 1 and rs[0][0] == rs[0][1]}
        shared = pinned if shared is None else shared & pinned
        if not shared:
            return None
    assert shared is not None
    order = sorted(shared)
    per_point: dict[tuple[int, ...], int] = {}
    for q in queries:
        box = dict(q.boxes[0])
        point = tuple(box[a][0][0] for a in order)
        per_point[point] = per_point.get(point, 0) + 1
    return math.sqrt(max(per_point.values()))


def _row_sensitivity(table: TableSchema, queries: Sequence[LinearQuery], max_work: int | None) -> float:
    queries = [q for q in queries if q.sensitivity > 0 and not q.is_zero]
    if not queries:
        return 0.0
    if len(queries) == 1:
        return 1.0  # one row divided by its own sensitivity (its largest weight; its boxes are disjoint)
    try:
        f = factor(table, queries, max_work)
    except TooMuchWork as e:
        pointwise = _pointwise_bound(queries)  # a GROUP BY over many columns: bounded without the grid
        if pointwise is not None:
            return pointwise
        raise StatementTooComplex(
            "statement too complex: computing its sensitivity needs more work than the limit allows",
            detail=f"{len(queries)} linear queries: {e} (max_statement_work = {max_work})",
            hint="group by fewer or coarser columns, or split the statement into several") from None
    sens = np.array([q.sensitivity for q in queries])
    coef = (f.weight / sens[f.owner]) ** 2
    total = np.zeros(f.shape)
    for value, rows in families(f, queries).items():
        part = box_sums(f, rows, coef[rows])
        if value is not None:
            # Every sub-box summing this attribute spans whole segments of it and shares its weights, so
            # within a segment their squared sum peaks at the segment's largest squared weight.
            k = f.attrs.index(value[0])
            w2 = family_weights(table, value) ** 2
            part = part * np.maximum.reduceat(w2, f.cuts[k]).reshape([-1 if i == k else 1 for i in range(len(f.attrs))])
        total += part
    return math.sqrt(float(total.max()))
