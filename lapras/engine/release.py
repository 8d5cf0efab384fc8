"""The epoch's matrix-mechanism release of P: prepared from P alone (P planned over the epoch's value lists,
the strategies optimised, the budget split) and then measured (P's marginals read, the noise drawn).

Preparation never reads the data, so it runs ahead of the epoch (``lapras.engine.preparer``) or before the
epoch's lock; measuring reads the data and is committed with the epoch (``EpochKeeper.commit_epoch``)."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from tqdm import tqdm

from lapras.accounting import Budget
from lapras.allocation import warmup_length
from lapras.exact import ExactSource
from lapras.ledger.base import EpochSpec, ReleaseRecord
from lapras.matrix_mechanism import (
    MMGroup,
    MMRelease,
    Workloads,
    expected_relative_variance,
    group_weights,
    p_workloads,
    plan_groups,
    quick_groups,
    release_mm,
    unit_factor,
    workload_cells,
)
from lapras.mechanisms import Gaussian, new_rng
from lapras.mechanisms.sensitivity import axis_unit_norm
from lapras.release_bounds import splits_groups
from lapras.settings import EngineSettings
from lapras.strategy import identity_strategy, workload_error
from lapras.strategy.optimize import coarse_labels
from lapras.strategy.share import share_marginals, shared_workloads
from lapras.strategy_cache import StrategyCache
from lapras.svd_bound import svd_bound
from parser.model.schema import Catalog, TableSchema
from parser.pushdown.bounding import GroupAxis
from parser.pushdown.rowfilter import cells_filter


@dataclass(frozen=True)
class PreparedEpoch:
    """The data-independent part of an epoch: its spec (budget split) and P's planned groups.

    ``groups`` is None for a quick preparation (the split from identity strategies; the release follows).
    """

    spec: EpochSpec
    groups: Sequence[Any] | None
    keys: tuple[str, ...]
    prediction: Any
    catalog: Any = None  # the catalog P was planned over: its value lists are the spec's
    derived: Mapping[str, Any] = field(default_factory=dict)  # P's derived histograms, by name
    workloads: Sequence[Any] = ()  # per group of ``groups``, its (shape, product queries): the cells it reads


class ReleasePlanner:
    """Prepares and measures the MM releases of one engine's epochs; remembers P's derived histograms
    (COUNT(DISTINCT)) by name, whose unit bounds every later release and estimate needs."""

    def __init__(self, exact: ExactSource, strategies: StrategyCache | None, rng: np.random.Generator,
                 background: bool) -> None:
        self.exact = exact
        self.strategies = strategies  # shared by engines that replay the same P (what-if replays)
        self.rng = rng
        self.background = background
        self.derived: dict[str, TableSchema] = {}  # P's derived histograms (COUNT(DISTINCT)) by name

    def prepare(self, pred: Any, catalog: Catalog, settings: EngineSettings, lists: Mapping[str, Sequence[str]],
                quick: bool = False) -> PreparedEpoch:
        """P's strategies (the slow part, skipped when ``quick``) and the budget split over ``catalog``.

        ``quick``: the split is computed from an error estimate never below the optimised one's
        (:func:`quick_groups`) and the strategies are optimised later."""
        st = settings
        s = int(pred.s_estimate or st.stream_length)
        (eps_q, delta_q), (eps_r, delta_r), (eps_p, delta_p) = st.stream_budget, st.regression_budget, st.partition_budget
        axes: dict[Any, GroupAxis] = {}
        groups_in = self.workloads(pred, catalog, st, axes)
        if quick:
            groups = quick_groups(groups_in)
            work = groups_in
        else:
            # Nested and overlapping marginals measured once (at most a third of the preparation's time).
            start = time.monotonic()
            members = share_marginals(groups_in, tables=self.shareable(catalog), time_limit=st.mm_time_limit / 3,
                                      joint_max_cells=st.joint_max_cells)
            work = shared_workloads(groups_in, members)
            plan = self.strategies.plan_groups if self.strategies is not None else plan_groups
            groups = plan(work, joint_max_cells=st.joint_max_cells, rng=new_rng() if self.background else self.rng,
                          time_limit=max(st.mm_time_limit - (time.monotonic() - start), st.mm_time_limit / 3),
                          progress=_progress(len(work), st))
            # plan keeps the workloads' order: each group is its workload's (a merged one its members')
            for g, (key, (_, units)) in zip(groups, work.items(), strict=True):
                g.members = tuple(members.get(key, (key[1],)))
                g.svd_error = svd_bound(units, g.shape)  # how far from the best strategy (EXPLAIN, benchmarks)
        self.bound_per_group(groups, list(work.items()), axes, catalog)
        budget = Budget(st.accounting, eps_q, delta_q)
        v_unit = (expected_relative_variance(groups, budget.cost_of(1.0), self.unit_rows(catalog), self.unit_tables(),
                                             self.presence()) if groups else None)
        rho = pred.rho_estimate if pred.rho_estimate is not None else st.rho_estimate
        if rho is not None and tuple(getattr(pred, "statements", ())):
            rho *= answerable(pred, groups_in)
        split = st.resolve_split(s, rho, v_unit, bool(groups))
        n_pred = sum(g.n_queries for g in groups)
        spec = EpochSpec(st.accounting, eps_q, delta_q, st.epsilon, st.delta, eps_r, delta_r,
                         split.to_json(), st.allocation, s, st.warmup or warmup_length(s), st.min_fraction,
                         prior_bad=(1 - rho) * s if rho is not None else None, rho_estimate=rho,
                         predicted_keys=n_pred, partition_epsilon=eps_p, partition_delta=delta_p,
                         partition_selections=st.partition_selections,
                         value_lists={k: tuple(v) for k, v in lists.items()})
        marginals = {(k[0], k[1]) for k in groups_in}
        keys = tuple(q.key for q in pred.queries if (q.table, tuple(q.marginal)) in marginals)
        derived = {q.source.name: q.source for q in pred.queries if q.source is not None}
        return PreparedEpoch(spec, None if quick else groups, keys, pred, catalog, derived,
                             () if quick else tuple(work.values()))

    def measure(self, spec: EpochSpec, groups: Sequence[MMGroup], keys: Sequence[str], prepared: PreparedEpoch,
                catalog: Catalog) -> tuple[ReleaseRecord, MMRelease] | None:
        """The MM release of ``groups`` at the epoch's reserved share: reads P's marginals (cells over the
        prepared epoch's catalog), draws the noise. ``catalog`` is the engine's current one (unit bounds)."""
        units = spec.split.get("mm", 0.0) * spec.budget.units
        if not groups or units <= 0:
            return None
        cost = spec.budget.cost_of(units)
        hists, cells = [], []
        for g, (table, read) in zip(groups, self._release_tables(groups, prepared), strict=True):
            hists.append(self.exact.marginal(table, g.marginal))
            cells.append(read)
        rel = release_mm(groups, hists, cost, self.unit_rows(catalog), self.unit_tables(), self.presence(), cells)
        return ReleaseRecord("mm", cost, units, Gaussian.name, {"sigma": rel.sigma}, 1.0, 0, {"mm": units},
                             {"groups": rel.meta(), "keys": list(keys),
                              "source": getattr(prepared.prediction, "source", "")}, rel.to_bytes()), rel

    def bound_per_group(self, groups: Sequence[MMGroup], work: Sequence[tuple[Any, tuple[Any, Any]]],
                        axes: Mapping[Any, GroupAxis], catalog: Catalog) -> None:
        """Per-group bounds for the groups of GROUP-BY-shaped regions (``axes``, lapras.release_bounds):
        each such group states its fresh statement's bound (``fresh_norm``, the split's reference), and is
        read per group (``axis``) when its strategy measures the groups apart (else the identity over its
        atoms, which does, when that costs less at the bounds each pays) and its cells can be written as a
        filter; the groups' weights are then re-chosen for the bounds they pay. Data-independent."""
        if not axes:
            return
        rows = self.unit_rows(catalog)
        for g, (key, (shape, units)) in zip(groups, work, strict=True):
            axis = axes.get(key)
            table = catalog.table(g.table)
            if axis is None or table is None:
                continue
            g.fresh_norm = axis_unit_norm(table, axis)
            cells = workload_cells(shape, units)
            if cells_filter(table, g.marginal, cells) is None:
                continue  # read over every row: no per-group reading
            k = float(rows.get(g.table, 1))
            if splits_groups(g.strategy, g.marginal, shape, axis, cells):
                g.axis = axis
                continue
            ident = identity_strategy(shape, coarse_labels(shape, units))
            err = workload_error(ident, units)
            if splits_groups(ident, g.marginal, shape, axis, cells) and err * g.fresh_norm**2 < g.unit_error * k**2:
                g.strategy, g.unit_error, g.axis = ident, err, axis
        for g, a in zip(groups, group_weights([g.unit_error * unit_factor(g, rows) ** 2 for g in groups]),
                        strict=True):
            g.weight = float(a)

    def _release_tables(self, groups: Sequence[MMGroup],
                        prepared: PreparedEpoch) -> list[tuple[TableSchema, np.ndarray | None]]:
        """Per group of the release, the table its histogram is read from and the cells it holds rows of
        (None: all): with ``bounding = "statement"`` each unit's k rows among the cells P's queries of the
        group read, or per group (c rows in each of g groups) for a group with an ``axis`` (the exact
        source's ``release_table``; a merged group's, its members' cells), so a
        predicted windowed query is not biased by a unit's rows outside its window; a free answer is then
        estimated only from a group whose cells hold every cell it reads (``MMRelease.estimate``)."""
        view = getattr(self.exact, "release_table", None)
        works = prepared.workloads or (None,) * len(groups)
        out: list[tuple[TableSchema, np.ndarray | None]] = []
        for g, work in zip(groups, works, strict=True):
            table = prepared.derived.get(g.table) or prepared.catalog.table(g.table)
            if view is None or work is None or table.privacy_unit is None or table.derived is not None:
                if g.axis is not None:  # charged its per-group bound: read any other way it could exceed it
                    raise RuntimeError(f"release group over {g.marginal} is bounded per group but not read so")
                out.append((table, None))
                continue
            shape, units = work
            if g.axis is not None:  # per group, as the predicted GROUP BY statement reads it
                out.append(view(table, g.marginal, workload_cells(shape, units), g.axis))
            else:
                out.append(view(table, g.marginal, workload_cells(shape, units)))
        return out

    def shareable(self, catalog: Catalog) -> set[str]:
        """Tables whose groups may be measured on a union marginal: never a derived histogram (units present
        per cell do not add up over a coarser cell), nor a table bounded per statement (each group's units
        bounded among its own cells: a union would read them among more)."""
        per_statement = getattr(self.exact, "release_table", None) is not None
        return {t.name for t in catalog.tables
                if t.derived is None and t.name not in self.derived and (t.privacy_unit is None or not per_statement)}

    def workloads(self, pred: Any, catalog: Catalog, settings: EngineSettings,
                  axes: dict[Any, GroupAxis] | None = None) -> Workloads:
        """P's release groups as product queries: per marginal, and under ``bounding = "statement"`` per
        region of the cells a predicted statement reads in it (each bounded among its own cells:
        docs/bounding.md); derived tables remembered by name."""
        for q in pred.queries:
            if q.source is not None:
                self.derived.setdefault(q.source.name, q.source)  # unit bounds, by name
        statements = getattr(pred, "statements", ())
        by_region = getattr(self.exact, "bounding", None) == "statement" and bool(statements)
        per_group = by_region and axes is not None and getattr(self.exact, "release_table", None) is not None
        return p_workloads(catalog, pred.queries, settings.mm_max_cells, statements if by_region else None,
                           axes if per_group else None)

    def unit_rows(self, catalog: Catalog) -> dict[str, int]:
        return {t.name: t.unit_rows for t in (*catalog.tables, *self.derived.values())}

    def presence(self) -> dict[str, int]:
        """Derived histograms of units present (one unit adds 1 to at most g cells): their g."""
        return {name: t.unit_rows for name, t in self.derived.items() if t.derived.counted is None}

    def unit_tables(self) -> dict[str, str]:
        return {name: t.unit_table for name, t in self.derived.items()}


def answerable(pred: Any, groups_in: Workloads) -> float:
    """The share of P's statements the release can answer whole (every query a count in one of its
    marginals; a SUM over a measure is always fresh): rho counts a statement as predicted, but one with a
    SUM costs a fresh release all the same, so the split (a public function of P) must not starve those
    statements to pay for a release that does not answer them."""
    marginals = {(k[0], k[1]) for k in groups_in}
    by_key = {q.key: q for q in pred.queries}
    whole = sum(all(k in by_key and not by_key[k].measure and (by_key[k].table, tuple(by_key[k].marginal))
                    in marginals for k in st) for st in pred.statements)
    return float(whole) / len(pred.statements)


def _progress(total: int, settings: EngineSettings) -> Callable[[float], None] | None:
    """A bar over P's marginals; the postfix states the worst case left (the preparation's time limit)."""
    if not settings.progress or total == 0:
        return None
    # disable=None: no bar when stderr is not a terminal (a service's log file or journal would get the
    # carriage-return redraws glued to its log lines).
    bar = tqdm(total=total, desc="matrix mechanism", unit="marginal", disable=None,
               bar_format="{l_bar}{bar}| {n:.1f}/{total} marginals [{elapsed}<{remaining}{postfix}]")
    end = time.monotonic() + settings.mm_time_limit

    def step(k: float) -> None:
        bar.update(k)
        bar.set_postfix_str(f"at most {max(0.0, end - time.monotonic()):.0f} s left", refresh=False)
        if bar.n >= total - 1e-9:
            bar.close()

    return step
