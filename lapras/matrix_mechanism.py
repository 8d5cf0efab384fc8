"""Matrix mechanism for the prediction set P: group by marginal, choose strategies, release once.

All groups are released together as ONE Gaussian mechanism: the joint strategy stacks ``a_g A_g`` over
each group's marginal of the same table. One row of the table moves one cell of every marginal, so the
joint L2 sensitivity is ``sqrt(sum_g a_g^2 s_g^2)`` (s_g = sensitivity of A_g). Choosing the weights is the
budget split across groups: group g's estimates have variance ``c_g sigma^2 / a_g^2`` in total, where
``c_g = trace(W_g^T W_g (A_g^T A_g)^-1) s_g^2``; minimising ``sum_g c_g / a_g^2`` subject to
``sum_g a_g^2 = 1`` gives ``a_g^2 = sqrt(c_g) / sum_h sqrt(c_h)`` (Cauchy-Schwarz) in either accounting
mode, since the whole release is calibrated once.
"""

from __future__ import annotations

import hashlib
import io
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from lapras.mechanisms import Cost, Gaussian
from lapras.mechanisms.sensitivity import histogram_sensitivity, presence_sensitivity, stacked_sensitivity
from lapras.strategy import KronStrategy, ProductQuery, identity_strategy, kron_strategy, workload_error
from lapras.strategy.optimize import JOINT_MAX_CELLS, coarse_labels
from parser.model.linear import LinearQuery
from parser.model.schema import Catalog
from parser.pushdown.bounding import GroupAxis, statement_groups

Marginal = tuple[str, ...]
GroupKey = tuple[str, Marginal] | tuple[str, Marginal, str]
"""A release group: (table, marginal), or (table, marginal, region) when P's queries of one marginal are
split by the cells their statements read (``p_workloads``'s ``statements``)."""
Workloads = dict[GroupKey, tuple[tuple[int, ...], list[ProductQuery]]]
# An axis that P cuts into more atoms than this leaves its marginal to online answers (see p_workloads).
MAX_ATOMS = 4096
# Every marginal gets at least this long, whatever the total limit (the identity is computed regardless).
MIN_SHARE_S = 0.25


@dataclass
class MMGroup:
    """One marginal of P: its strategy, its workload error per unit noise, and its weight in the release."""

    table: str
    marginal: Marginal
    shape: tuple[int, ...]
    strategy: KronStrategy
    unit_error: float
    n_queries: int
    weight: float = 1.0
    # Li and Miklau's SVD lower bound on unit_error over all strategies (lapras.svd_bound); None: not computed
    svd_error: float | None = None
    # P's marginals this group measures (lapras.strategy.share: nested and overlapping marginals merged into
    # their union); empty: its own marginal only
    members: tuple[Marginal, ...] = ()
    # Per-group bounds (lapras.release_bounds): the groups of the predicted GROUP BY statement whose queries
    # this group measures, when the release reads its histogram per group (c per group, g groups,
    # GroupAxis.total in all) and its strategy measures the groups apart; None: each unit's k rows
    axis: GroupAxis | None = None
    # The factor one unit moves the predicted statement's fresh answer by, over its column norm
    # (axis_unit_norm for a GROUP BY statement with per-group bounds; None: k): what the release
    # is charged with when ``axis`` is set, and what the split compares it with
    fresh_norm: float | None = None

    @property
    def optimality(self) -> float | None:
        """unit_error / its SVD lower bound (1 = no strategy does better); None when not computed."""
        return self.unit_error / self.svd_error if self.svd_error else None


def group_weights(errors: Sequence[float]) -> np.ndarray:
    """Weights a_g (sum a_g^2 = 1) minimising the total expected squared error of all groups."""
    r = np.sqrt(np.maximum(np.asarray(errors, dtype=np.float64), 0.0))
    if r.sum() == 0:
        return np.full(len(r), 1 / math.sqrt(max(len(r), 1)))
    return np.sqrt(r / r.sum())


def p_workloads(
    catalog: Catalog, queries: Sequence[LinearQuery], max_cells: int = 1 << 20,
    statements: Sequence[Sequence[str]] | None = None,
    axes: dict[GroupKey, GroupAxis] | None = None,
) -> Workloads:
    """P grouped by (table, marginal) as product queries, each divided by its sensitivity.

    Marginals over more than ``max_cells`` cells are left out: those predictions are answered online; so
    are marginals with an axis that P cuts into more than ``MAX_ATOMS`` atoms (a block measuring them would
    be a dense ``MAX_ATOMS``-square identity at least, stored with the release).

    ``statements`` (per predicted statement, the keys of its queries; ``bounding = "statement"``): on a
    table with a privacy unit, a marginal's queries are split further into one group per *region*, the
    cells one predicted statement's queries of that marginal read (statements reading the same cells share
    a group; a query asked by statements of several regions is in each). Each group's histogram bounds a
    unit's k rows among its region's cells (``workload_cells``), as the fresh statement does among the
    rows it reads, so a windowed query is not released from rows bounded over a year another statement of
    the marginal reads (docs/bounding.md). Queries of no listed statement keep one group per marginal.

    ``axes`` (filled when given): per region whose queries are GROUP-BY-shaped under the table's per-group
    bounds (``statement_groups``: disjoint groups of one column, not per-unit), those groups. Statements
    reading the same cells with different groups (a window's daily and hour-of-day counts) are then
    regions of their own, so each can be bounded per group as its fresh statement is.
    """
    out: Workloads = {}
    units_of: dict[str, tuple[GroupKey, tuple[int, ...], ProductQuery]] = {}
    linear: dict[str, LinearQuery] = {}
    for q in queries:
        t = q.source if q.source is not None else catalog.table(q.table)
        if t is None or q.is_zero or q.measure or any(t.attribute(a) is None for a in q.marginal):
            continue  # a SUM over a measure has no histogram form, a split cell (parser/bind/splits.py) no
            # declared one: answered online
        shape = t.shape(tuple(q.marginal))
        if math.prod(shape) > max_cells:
            continue
        # Each query enters the strategy objective divided by its sensitivity: a SUM over values up
        # to 90 must not buy its accuracy with the counts' (answers still use the true factors).
        unit: ProductQuery = [(w / q.sensitivity, vecs) for w, vecs in q.factors(t)]
        key: GroupKey = (q.table, tuple(q.marginal))
        if statements is not None and t.privacy_unit is not None and t.derived is None:
            units_of[q.key] = (key, tuple(shape), unit)
            linear[q.key] = q
            continue
        out.setdefault(key, (tuple(shape), []))[1].append(unit)
    if units_of:
        _split_by_region(out, units_of, statements or (), catalog, linear, axes)
    for key, (shape, units) in list(out.items()):
        if any(lab is not None and int(lab.max()) + 1 > MAX_ATOMS for lab in coarse_labels(shape, units, MAX_ATOMS)):
            del out[key]
    return out


def _split_by_region(out: Workloads, units_of: Mapping[str, tuple[GroupKey, tuple[int, ...], ProductQuery]],
                     statements: Sequence[Sequence[str]], catalog: Catalog | None = None,
                     linear: Mapping[str, LinearQuery] | None = None,
                     axes: dict[GroupKey, GroupAxis] | None = None) -> None:
    """Add to ``out`` one group per (table, marginal, region) of the queries in ``units_of`` (by key): a
    statement's region in a marginal is the union of the cells its queries there read, and (``axes``
    given) the groups its queries there split into under per-group bounds; the region's name is a digest
    of both (public: a function of the predicted SQL only)."""
    def axis_of(ks: Sequence[str]) -> GroupAxis | None:
        if axes is None or catalog is None or linear is None:
            return None
        table = catalog.table(linear[ks[0]].table)
        axis = statement_groups(table, [linear[k] for k in ks]) if table is not None else None
        return axis if axis is not None and not axis.per_unit and not axis.clamps else None

    placed: set[str] = set()
    members: dict[GroupKey, list[str]] = {}
    for keys in statements:
        by_marginal: dict[GroupKey, list[str]] = {}
        for k in dict.fromkeys(keys):
            if k in units_of:
                by_marginal.setdefault(units_of[k][0], []).append(k)
        for base, ks in by_marginal.items():
            shape = units_of[ks[0]][1]
            mask = workload_cells(shape, [units_of[k][2] for k in ks])
            axis = axis_of(ks)
            sign = "" if axis is None else repr((axis.attr, axis.sets))
            digest = hashlib.blake2b(np.packbits(mask).tobytes() + str(shape).encode() + sign.encode(),
                                     digest_size=8).hexdigest()
            region: GroupKey = (base[0], base[1], digest)
            have = members.setdefault(region, [])
            have.extend(k for k in ks if k not in have)
            placed.update(ks)
    for k, (base, _, _) in units_of.items():
        if k not in placed:
            members.setdefault(base, []).append(k)  # no statement listed it: one group per marginal
    for key, ks in members.items():
        out[key] = (units_of[ks[0]][1], [units_of[k][2] for k in ks])
        axis = axis_of(ks) if len(key) > 2 else None
        if axis is not None and axes is not None:
            axes[key] = axis


def plan_groups(
    workloads: Mapping[GroupKey, tuple[tuple[int, ...], Sequence[ProductQuery]]],
    *,
    joint_max_cells: int = JOINT_MAX_CELLS,
    maxiter: int = 200,
    rounds: int = 2,
    time_limit: float | None = 30.0,
    rng: np.random.Generator | None = None,
    progress: Callable[[float], None] | None = None,
) -> list[MMGroup]:
    """Optimise a strategy per (table, marginal) group and weight the groups for one joint release.

    ``time_limit`` bounds the whole preparation: marginals are optimised from the cheapest to the most
    expensive (terms x cells along the axes), each with an equal share of the time left, so what the small
    ones do not use goes to the large ones. A marginal whose share runs out keeps the best strategy found
    so far (at worst the identity), whose error is computed exactly and stated in ``unit_error``.
    ``progress(fraction of one group)`` runs as blocks finish.
    """
    items = list(workloads.items())
    order = sorted(range(len(items)), key=lambda i: len(items[i][1][1]) * sum(items[i][1][0]))
    end = time.monotonic() + time_limit if time_limit is not None else None
    planned: dict[int, MMGroup] = {}
    for done, i in enumerate(order):
        key, (shape, queries) = items[i]
        table, marginal = key[0], key[1]
        share = None if end is None else max(MIN_SHARE_S, (end - time.monotonic()) / (len(order) - done))
        strat = kron_strategy(shape, queries, joint_max_cells=joint_max_cells, rng=rng, maxiter=maxiter,
                              rounds=rounds, time_limit=share, on_block=progress)
        planned[i] = MMGroup(table, marginal, tuple(shape), strat, workload_error(strat, queries), len(queries))
    groups = [planned[i] for i in range(len(items))]
    for g, a in zip(groups, group_weights([g.unit_error for g in groups]), strict=True):
        g.weight = float(a)
    return groups


def quick_groups(
    workloads: Mapping[GroupKey, tuple[tuple[int, ...], Sequence[ProductQuery]]],
) -> list[MMGroup]:
    """Groups with an instant error estimate and no optimisation: per marginal the lower of two strategies'
    exact errors, the identity (sum of the queries' squared norms) and the queries themselves (rank of the
    workload x its largest squared column norm). Measured on overlapping ranges it lands within 10% of
    what :func:`plan_groups` reaches. Their strategy is a placeholder identity: these groups size the
    budget split of an epoch whose release is prepared later; they are never released."""
    groups = []
    for key, (shape, queries) in workloads.items():
        table, marginal = key[0], key[1]
        k = len(queries)
        gram = np.zeros((k, k))  # q_i . q_j from the product form: no marginal-sized vector needed
        for i, qi in enumerate(queries):
            for j, qj in enumerate(queries[: i + 1]):
                gram[i, j] = gram[j, i] = sum(
                    w1 * w2 * math.prod(float(np.dot(a, b)) for a, b in zip(v1, v2, strict=True))
                    for w1, v1 in qi for w2, v2 in qj)
        identity_err = float(np.trace(gram))
        if math.prod(shape) <= 4_000_000:
            acc = np.zeros(shape)
            for q in queries:
                acc += _dense(q, shape) ** 2
            col2 = float(acc.max())
        else:  # an upper bound: every query at its largest weight in the same cell
            col2 = sum(max(abs(w) * math.prod(float(np.max(np.abs(v))) for v in vs) for w, vs in q) ** 2
                       for q in queries)
        workload_err = float(np.linalg.matrix_rank(gram)) * col2 if k else 0.0
        groups.append(MMGroup(table, marginal, tuple(shape), identity_strategy(shape, coarse_labels(shape, queries)),
                              min(identity_err, workload_err), k))
    for g, a in zip(groups, group_weights([g.unit_error for g in groups]), strict=True):
        g.weight = float(a)
    return groups


def _dense(query: ProductQuery, shape: Sequence[int]) -> np.ndarray:
    out = np.zeros(shape)
    for w, vs in query:
        term = np.asarray(w, dtype=np.float64)
        for v in vs:
            term = np.multiply.outer(term, v)
        out += term
    return out


def workload_cells(shape: Sequence[int], queries: Sequence[ProductQuery]) -> np.ndarray:
    """The cells of a marginal some query of the workload reads (a boolean array of ``shape``): under
    ``bounding = "statement"`` the release's histogram holds each unit's k rows among those cells only."""
    mask = np.zeros(tuple(shape), dtype=bool)
    for q in queries:
        for w, vs in q:
            if w != 0:
                mask[np.ix_(*[np.asarray(v) != 0 for v in vs])] = True
    return mask


class StatementCells:
    """The cells one asking statement reads, per group of a release (embedded in the group's marginal), so
    that a group whose histogram bounds units among cells the statement does not read is not used for it:
    under ``bounding = "statement"`` the fresh answer bounds a unit's k rows among the rows the statement
    reads (a superset of this union), and a group bounded among a subset of them keeps, in every cell the
    statement reads, every row the fresh answer keeps (docs/bounding.md): its bias is never worse.
    Computed once per group and statement."""

    def __init__(self, reads: Sequence[tuple[Marginal, ProductQuery]], sizes: Mapping[str, int],
                 axis: GroupAxis | None = None) -> None:
        self.reads = list(reads)
        self.sizes = sizes
        self.axis = axis  # the asking statement's groups under per-group bounds (None: none)
        self._covers: dict[int, bool] = {}
        self._reads_exactly: dict[int, bool] = {}

    def same_groups(self, axis: GroupAxis) -> bool:
        """The asking statement is bounded per group on exactly ``axis``' groups (a group of the release
        read per group answers only such statements: its rows are then the ones the fresh answer keeps)."""
        return self.axis is not None and (self.axis.attr, self.axis.sets, self.axis.per_unit) == \
            (axis.attr, axis.sets, axis.per_unit)

    def covers(self, i: int, group: MMGroup, cells: np.ndarray) -> bool:
        """Every cell of ``cells`` (group ``i``'s) is read by some query of the statement whose marginal
        lies in the group's (queries over other axes are left out: the union is then smaller, never larger
        than the rows the statement reads)."""
        if i not in self._covers:
            mask = np.zeros(cells.shape, dtype=bool)
            have = set(group.marginal)
            inside = True  # every query of the statement lies in the group's marginal
            for marginal, query in self.reads:
                if not set(marginal) <= have:
                    inside = False
                    continue
                pos = {a: k for k, a in enumerate(marginal)}
                for w, vs in query:
                    if w != 0:
                        mask[np.ix_(*[np.asarray(vs[pos[a]]) != 0 if a in pos else np.ones(self.sizes[a], dtype=bool)
                                      for a in group.marginal])] = True
            self._covers[i] = not bool((cells & ~mask).any())
            self._reads_exactly[i] = self._covers[i] and inside and not bool((mask & ~cells).any())
        return self._covers[i]

    def reads_exactly(self, i: int, group: MMGroup, cells: np.ndarray) -> bool:
        """The statement reads exactly group ``i``'s cells and nothing else: a group read per group then
        holds the very rows its fresh answer keeps (the same filter, groups, c, g and k; with more cells in
        the same groups a unit's other rows could take its group or k places, docs/bounding.md)."""
        self.covers(i, group, cells)
        return self._reads_exactly[i]


def _within(query: ProductQuery, cells: np.ndarray) -> bool:
    """Every cell the query reads is in ``cells``."""
    return all(w == 0 or bool(cells[np.ix_(*[np.asarray(v) != 0 for v in vs])].all()) for w, vs in query)


def joint_sensitivity(groups: Sequence[MMGroup], unit_rows: Mapping[str, int] | None = None,
                      unit_tables: Mapping[str, str] | None = None,
                      presence: Mapping[str, int] | None = None) -> float:
    """L2 sensitivity of the stacked strategy of all groups (per table; the largest over tables), each
    table's scaled by its rows per privacy unit (``unit_rows``: table -> k, 1 where absent); groups over
    histograms derived from one table (``unit_tables``: derived -> protected) share its unit. Over a
    units-present histogram (``presence``: table -> g) one unit adds 1 to at most g cells, which
    :func:`presence_sensitivity` bounds from the strategy's blocks."""
    rows = unit_rows or {}
    present = presence or {}
    parts = []
    for g in groups:
        if g.table in present:
            s = presence_sensitivity(g.strategy.mats, present[g.table],
                                     aggregated=any(lab is not None for lab in g.strategy.labels or ()))
            parts.append((g.table, g.weight * s))
        else:
            parts.append((g.table, g.weight * g.strategy.sensitivity * unit_factor(g, rows)))
    return stacked_sensitivity(parts, None, unit_tables)


def unit_factor(group: MMGroup, unit_rows: Mapping[str, int]) -> float:
    """What one unit's rows move the group's histogram by, over its strategy's largest column norm: the
    per-group bound when the release reads it per group (``axis``, lapras.release_bounds), else k."""
    if group.axis is not None and group.fresh_norm is not None:
        return group.fresh_norm
    return float(unit_rows.get(group.table, 1))


def expected_query_variance(groups: Sequence[MMGroup], unit_cost: Cost,
                            unit_rows: Mapping[str, int] | None = None,
                            unit_tables: Mapping[str, str] | None = None,
                            presence: Mapping[str, int] | None = None) -> float:
    """Mean variance of P's answers when the release costs ``unit_cost`` (for the ``auto`` split)."""
    if not groups:
        return 0.0
    sigma = Gaussian.calibrate(unit_cost, joint_sensitivity(groups, unit_rows, unit_tables, presence),
                               sum(g.strategy.rows for g in groups)).sigma
    total = sum(g.unit_error / g.strategy.sensitivity**2 / g.weight**2 for g in groups)
    return sigma**2 * total / sum(g.n_queries for g in groups)


def expected_relative_variance(groups: Sequence[MMGroup], unit_cost: Cost,
                               unit_rows: Mapping[str, int] | None = None,
                               unit_tables: Mapping[str, str] | None = None,
                               presence: Mapping[str, int] | None = None) -> float:
    """Mean over P's queries of their variance from the release at ``unit_cost`` divided by the variance a
    fresh release of the query's own GROUP BY would give it at the same cost: what the ``auto`` split
    compares with online answers, which it models as costing 1 per unit.

    Both sides carry the table's per-unit bound (k rows, g cells): a fresh count over a table of k = 10
    rows per unit has noise 10 times a row-level one, and so has every release measuring it. Comparing the
    release's absolute variance with a sensitivity-1 online answer (what the split did before) made P look
    k^2 times worse than it is: on the events dashboard (k = 10) the split gave P nothing although its
    release answered every predicted panel 3-6 times more accurately than a fresh statement at the same
    grant. The reference is a lower bound on what the online side pays (a statement of overlapping
    queries has a larger sensitivity), so the ratio never flatters the release."""
    if not groups:
        return 0.0
    rows, present = unit_rows or {}, presence or {}
    joint = Gaussian.calibrate(unit_cost, joint_sensitivity(groups, unit_rows, unit_tables, presence),
                               sum(g.strategy.rows for g in groups)).variance()
    total = 0.0
    for g in groups:
        # A GROUP BY statement with per-group bounds is answered fresh at its own bound, not at k.
        ref = histogram_sensitivity(present[g.table], True) if g.table in present else \
            (g.fresh_norm if g.fresh_norm is not None else histogram_sensitivity(rows.get(g.table, 1)))
        fresh = Gaussian.calibrate(unit_cost, ref).variance()
        total += float(joint / fresh) * g.unit_error / g.strategy.sensitivity**2 / g.weight**2
    return total / sum(g.n_queries for g in groups)


@dataclass
class MMRelease:
    """The epoch's stored release: per group the noisy measurements, rescaled to noise sigma / a_g."""

    groups: list[MMGroup]
    y: list[np.ndarray]
    sigma: float
    cost: Cost
    cells: list[np.ndarray | None] = field(default_factory=list)
    """Per group, the cells its histogram was read over (each unit's k rows among the rows in them,
    ``bounding = "statement"``), None: every cell (bounded over all rows). A query reading a cell outside
    them is never estimated from the group: its histogram holds no rows there."""
    _xhat: dict[int, np.ndarray] = field(default_factory=dict, repr=False)

    def group_cells(self, i: int) -> np.ndarray | None:
        return self.cells[i] if i < len(self.cells) else None

    def group_sigma(self, i: int) -> float:
        return self.sigma / self.groups[i].weight

    def xhat(self, i: int) -> np.ndarray:
        if i not in self._xhat:
            self._xhat[i] = self.groups[i].strategy.least_squares(self.y[i])
        return self._xhat[i]

    def query_rmse(self, i: int) -> tuple[float, float | None]:
        """Group i's per-query RMSE (root mean over its queries, in units of their sensitivity) and the
        SVD lower bound on it at the same noise and share of the release (None when not computed)."""
        g = self.groups[i]
        mse = self.group_sigma(i) ** 2 * g.unit_error / g.strategy.sensitivity**2 / max(g.n_queries, 1)
        bound = mse * g.svd_error / g.unit_error if g.svd_error and g.unit_error > 0 else None
        return math.sqrt(mse), math.sqrt(bound) if bound is not None else None

    def find(self, table: str, marginal: Marginal) -> list[int]:
        """Groups whose marginal contains ``marginal`` (a query there is in the span of their measurements)."""
        want = set(marginal)
        return [i for i, g in enumerate(self.groups) if g.table == table and want <= set(g.marginal)]

    def estimate(
        self, table: str, marginal: Marginal, query: ProductQuery, sizes: Mapping[str, int],
        reads: StatementCells | None = None,
    ) -> tuple[float, float] | None:
        """Least-squares estimate and variance of a query from the best group covering it, or None.

        ``reads``: the cells the asking statement reads; a group read over cells (``group_cells``) is used
        only when they are all among them (its rows bounded as the statement's fresh answer would, or
        tighter): a windowed query is never estimated from a group bounded over a year."""
        best: tuple[float, float] | None = None
        for i in self.find(table, marginal):
            g = self.groups[i]
            pos = {a: k for k, a in enumerate(marginal)}
            emb: ProductQuery = [
                (w, [vs[pos[a]] if a in pos else np.ones(sizes[a]) for a in g.marginal]) for w, vs in query
            ]
            if not g.strategy.in_row_space(emb):
                continue
            cells = self.group_cells(i)
            if cells is not None and not _within(emb, cells):
                continue
            if cells is not None and reads is not None and not reads.covers(i, g, cells):
                continue
            if g.axis is not None and (reads is None or cells is None or not reads.same_groups(g.axis)
                                       or not reads.reads_exactly(i, g, cells)):
                continue  # read per group: only for a statement reading its cells on the same groups
            var = self.group_sigma(i) ** 2 * g.strategy.query_variance(emb)
            if best is None or var < best[1]:
                best = (g.strategy.estimate(self.xhat(i), emb), var)
        return best

    def to_bytes(self) -> bytes:
        """Serialise measurements and strategies (never the exact data or the raw noise)."""
        arrays: dict[str, np.ndarray] = {"sigma": np.array([self.sigma])}
        for i, g in enumerate(self.groups):
            arrays[f"y{i}"] = self.y[i]
            for k, v in g.strategy.to_arrays().items():
                arrays[f"s{i}_{k}"] = v
            cells = self.group_cells(i)
            if cells is not None:
                arrays[f"c{i}"] = cells
        buf = io.BytesIO()
        # Not compressed: noisy floats barely compress, and deflating them cost ~1 s per epoch start.
        np.savez(buf, **arrays)  # type: ignore[arg-type]
        return buf.getvalue()

    def meta(self) -> list[dict[str, object]]:
        return [
            {"table": g.table, "marginal": list(g.marginal), "shape": list(g.shape), "unit_error": g.unit_error,
             "n_queries": g.n_queries, "weight": g.weight, "strategy": g.strategy.name, "svd_error": g.svd_error,
             "members": [list(m) for m in g.members], "fresh_norm": g.fresh_norm,
             "axis": None if g.axis is None else {"attr": g.axis.attr, "sets": [list(map(list, rs)) for rs in g.axis.sets],
                                                  "per_unit": g.axis.per_unit}}
            for g in self.groups
        ]

    @staticmethod
    def from_bytes(meta: Sequence[Mapping[str, object]], blob: bytes, cost: Cost) -> MMRelease:
        d = np.load(io.BytesIO(blob))
        groups, ys, cells = [], [], []
        for i, m in enumerate(meta):
            arrs = {k[len(f"s{i}_"):]: d[k] for k in d.files if k.startswith(f"s{i}_")}
            cells.append(d[f"c{i}"].astype(bool) if f"c{i}" in d.files else None)
            strat = KronStrategy.from_arrays(arrs, str(m["strategy"]))
            groups.append(MMGroup(str(m["table"]), tuple(m["marginal"]),  # type: ignore[arg-type]
                                  tuple(m["shape"]), strat, float(m["unit_error"]),  # type: ignore[arg-type]
                                  int(m["n_queries"]), float(m["weight"]),  # type: ignore[call-overload,arg-type]
                                  float(m["svd_error"]) if m.get("svd_error") else None,  # type: ignore[arg-type]
                                  tuple(tuple(x) for x in m.get("members") or ()),  # type: ignore[attr-defined]
                                  _axis_from(m.get("axis")),
                                  float(m["fresh_norm"]) if m.get("fresh_norm") else None))  # type: ignore[arg-type]
            ys.append(d[f"y{i}"])
        return MMRelease(groups, ys, float(d["sigma"][0]), cost, cells)


def _axis_from(d: object) -> GroupAxis | None:
    """A group's ``axis`` as ``MMRelease.meta`` stores it."""
    if not isinstance(d, Mapping):
        return None
    sets = tuple(tuple((int(lo), int(hi)) for lo, hi in rs) for rs in d["sets"])
    return GroupAxis(str(d["attr"]), sets, per_unit=bool(d.get("per_unit")))


def release_mm(
    groups: Sequence[MMGroup], histograms: Sequence[np.ndarray], cost: Cost,
    unit_rows: Mapping[str, int] | None = None, unit_tables: Mapping[str, str] | None = None,
    presence: Mapping[str, int] | None = None, cells: Sequence[np.ndarray | None] | None = None,
) -> MMRelease:
    """Draw the joint release: y_g = A_g x_g + N(0, (sigma / a_g)^2), sigma calibrated on the joint matrix
    (group g is the stacked row block a_g A_g, released at scale 1 / a_g; ``unit_rows`` as for
    ``joint_sensitivity``). ``cells``: per group, the cells its histogram was read over (None: all).

    The sensitivity holds whether the groups' histograms share one bounding of each unit's rows or each
    bounds them on its own (among its cells): it is per group the largest column norm times k, squared and
    added over the groups of a table, which assumes nothing about which k rows each group saw."""
    mech = Gaussian.calibrate(cost, joint_sensitivity(groups, unit_rows, unit_tables, presence),
                              sum(g.strategy.rows for g in groups))
    ys = [mech.release(g.strategy.measure(x), 1.0 / g.weight) for g, x in zip(groups, histograms, strict=True)]
    return MMRelease(list(groups), ys, mech.sigma, cost, list(cells) if cells is not None else [])
