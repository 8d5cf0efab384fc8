"""The LAPRAS engine: ``Engine.answer(plan, user) -> Answer``, with no knowledge of sockets.

Per statement (one stream item): repeats are served from the stored answers (no spend, no stream item);
zero queries are exactly 0; the rest are classified by :class:`lapras.online.OnlinePolicy` under the
epoch's lock: good statements are answered from the MM release / free estimates, bad ones get ONE
Gaussian release over their unanswered queries, paid by the allocation rule, combined with free estimates
by inverse-variance weighting. Spend, release and answers are committed before the answer is returned.
After the stop a statement is answered from free estimates or refused with SQLSTATE 53400.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import NoReturn, Protocol

import numpy as np

from lapras.accounting import Budget
from lapras.allocation import AllocState, warmup_length
from lapras.auto_bound import auto_columns, ledger_key, select_bound, with_bounds
from lapras.epochs import EpochPreparer, PreparedEpoch
from lapras.errors import BudgetExhausted, LaprasError, UnknownTable
from lapras.exact import ExactSource, close_source
from lapras.history import StatementHistory
from lapras.ledger.base import (
    EpochRecord,
    EpochSpec,
    Ledger,
    PartitionRecord,
    ReleaseRecord,
    StaleEpoch,
    StoredAnswer,
    check_partition,
)
from lapras.matrix_mechanism import (
    MMGroup,
    MMRelease,
    StatementCells,
    Workloads,
    expected_relative_variance,
    p_workloads,
    plan_groups,
    quick_groups,
    release_mm,
    workload_cells,
)
from lapras.mechanisms import Cost, Gaussian, Mechanism, new_rng, noise
from lapras.mechanisms.sensitivity import group_bound_norm, statement_sensitivity
from lapras.mechanisms.threshold import GaussianThreshold
from lapras.online import OnlinePolicy, combine
from lapras.settings import EngineSettings
from lapras.strategy.cache import StrategyCache
from lapras.svd_bound import svd_bound
from parser.bounding import clamped, clamped_sensitivity
from parser.linear import LinearQuery
from parser.partition import has_selected_keys
from parser.schema import Catalog, TableSchema, listed_values, with_value_lists

log = logging.getLogger("lapras.engine")



class Statement(Protocol):
    """What the engine answers: the linear queries of one statement over one protected table."""

    @property
    def table(self) -> str: ...

    @property
    def queries(self) -> Sequence[LinearQuery]: ...


@dataclass(frozen=True)
class Prediction:
    """The predictor's output for an epoch: P as canonical linear queries, S and the expected overlap."""

    queries: Sequence[LinearQuery] = ()
    s_estimate: int | None = None
    rho_estimate: float | None = None
    source: str = ""  # where P came from, for EXPLAIN: a file, declared templates, the proxy's history
    statements: tuple[tuple[str, ...], ...] = ()
    """Per predicted statement, the keys of its queries: under ``bounding = "statement"`` P's release bounds
    units per region of the cells a statement reads (``p_workloads``); empty: one group per marginal."""


def load_prediction(path: str | Path, catalog: Catalog) -> Prediction:
    """Read P.json and re-parse each SQL through the parser into canonical linear queries (bad SQL skipped)."""
    doc = json.loads(Path(path).read_text())
    return prediction_from_sql([item["sql"] for item in doc.get("queries", [])], doc.get("s_estimate"),
                               doc.get("rho_estimate"), catalog, f"prediction file {Path(path).name}")


def prediction_from_sql(sqls: Sequence[str], s_estimate: int | None, rho_estimate: float | None,
                        catalog: Catalog, source: str = "") -> Prediction:
    """P from SQL texts, each planned into canonical linear queries (SQL the parser refuses is skipped)."""
    import parser as sqlparser

    qs: dict[str, LinearQuery] = {}
    statements: list[tuple[str, ...]] = []
    for sql in sqls:
        try:
            plan = sqlparser.plan_query(sql, catalog)
        except Exception:  # noqa: BLE001 - a query the parser refuses cannot be predicted
            continue
        keys = tuple(q.key for q in plan.queries if not q.is_zero)
        for q in plan.queries:
            if not q.is_zero:
                qs.setdefault(q.key, q)
        if keys:
            statements.append(keys)
    return Prediction(tuple(qs.values()), s_estimate, rho_estimate, source, tuple(statements))


class StalePlan(LaprasError):
    """The statement was planned over value lists other than the current epoch's: its text cells mean
    other values here. Nothing was read or charged; plan it again over :attr:`Engine.catalog`."""

    sqlstate = "40001"  # serialization_failure: a client may retry as is


@dataclass(frozen=True)
class Preview:
    """What a statement would be answered with now: per query its standard error (nan: refused) and
    whether it is already stored (a repeat, free); ``outcome`` as the engine would classify it."""

    stderrs: np.ndarray
    stored: np.ndarray
    outcome: str


@dataclass(frozen=True)
class Answer:
    """Answers of one statement: values and standard errors per linear query, and what was spent."""

    values: np.ndarray
    stderrs: np.ndarray
    outcomes: tuple[str, ...]
    outcome: str  # repeat | good | bad | free_after_stop | zero
    cost: Cost | None = None
    position: int | None = None
    predicted: bool = False  # answered from the epoch's matrix-mechanism release of P (no charge)

    @property
    def cost_text(self) -> str:
        if self.cost is None:
            return "none"
        return ", ".join(f"{k}={v:.4g}" for k, v in self.cost.to_json().items())


class Engine:
    """One engine per process; thread-safe (the proxy calls ``answer`` from worker threads)."""

    def __init__(
        self,
        catalog: Catalog,
        ledger: Ledger,
        exact: ExactSource,
        settings: EngineSettings | None = None,
        predictions: Callable[[Catalog], Prediction] | None = None,
        rng: np.random.Generator | None = None,
        clock: Callable[[], float] = time.time,
        mechanism: type[Mechanism] = Gaussian,
        strategies: StrategyCache | None = None,
        background: bool = False,
        value_lists: Callable[[], Mapping[str, Sequence[str]]] | None = None,
        history: StatementHistory | None = None,
    ) -> None:
        # ``catalog`` as configured; ``self.catalog`` is the current epoch's: its text columns declared
        # with ``values_from`` take the value lists the epoch fixed when it was prepared (``value_lists``
        # reads them fresh from their public tables then; see prepare_epoch and _adopt).
        self.base_catalog = catalog
        self.catalog = catalog
        self.value_lists = value_lists
        self.ledger = ledger
        self.exact = exact
        self.settings = settings or EngineSettings()
        self.predictions = predictions or (lambda _catalog: Prediction())
        self.rng = rng if rng is not None else new_rng()
        self.clock = clock
        self.mechanism = mechanism
        self.strategies = strategies  # shared by engines that replay the same P (what-if replays)
        self.history = history  # statements asked, for learning P and S (lapras.history); None = not kept
        self.p_source = ""  # where the current epoch's P came from (this process's preparation)
        self._lock = threading.RLock()
        self._cache: dict[str, tuple[float, float]] = {}
        self._derived: dict[str, TableSchema] = {}  # P's derived histograms (COUNT(DISTINCT)) by name
        self._epoch: EpochRecord | None = None
        self._mm: MMRelease | None = None
        self._pkeys: frozenset[str] = frozenset()
        self._stopped: set[int] = set()  # epochs whose stream this process saw stop (it never restarts)
        self._lists: dict[str, tuple[str, ...]] = {}  # the current epoch's value lists
        self._partitions: dict[tuple[int, str], PartitionRecord] = {}  # selected sets, as the ledger holds them
        noise.warm_up()
        # Epoch preparation off the serving path (see lapras.epochs): a thread prepares the next epoch
        # and commits it at the boundary; an epoch begun without its release reserves the MM share.
        self.background = background
        self._mm_pending = False
        self._mm_ready = threading.Event()
        self._pending_keys: frozenset[str] = frozenset()
        self._preparer: EpochPreparer | None = None
        self._load_or_start()
        if background:
            self._preparer = EpochPreparer(self)
            self._preparer.start()

    # ----------------------------------------------------------------------------------- epochs

    def _load_or_start(self) -> None:
        ep = self.ledger.current_epoch()
        if ep is None and self.background:
            self.begin_reserved(expected_current=None)  # serve at once; the release follows
        elif ep is None:
            self.new_epoch(expected_current=None)
        else:
            self._adopt(ep)

    def _adopt(self, ep: EpochRecord, drawn: MMRelease | None = None, drawn_payload: bytes | None = None) -> None:
        """Make ``ep`` the engine's epoch: its MM release and stored answers, as the ledger has them.

        ``drawn`` is the release this engine just stored (``drawn_payload`` its bytes): when the ledger holds
        exactly that one it is kept as is, with its strategies' factorisations already computed."""
        with self._lock:
            rel = self.ledger.mm_release(ep.id)
            mm = None
            pkeys: frozenset[str] = frozenset()
            if rel is not None and rel.payload is not None:
                meta = rel.meta if isinstance(rel.meta, dict) else {}
                if drawn is not None and rel.payload == drawn_payload:
                    mm = drawn
                else:
                    mm = MMRelease.from_bytes(meta.get("groups", []), rel.payload, rel.cost)
                pkeys = frozenset(meta.get("keys", []))
                self.p_source = str(meta.get("source") or "")
            pending = rel is None and ep.spec.split.get("mm", 0.0) > 0 and ep.spec.predicted_keys > 0
            if not pending:
                self._pending_keys = frozenset()
            self._epoch, self._mm, self._pkeys, self._mm_pending = ep, mm, pkeys, pending
            self._lists = self.ledger.value_lists(ep.id)
            self.catalog = self._catalog_for(self._lists)  # every process reads the same cells
            if pending:
                self._mm_ready.clear()
            else:
                self._mm_ready.set()
            if ep.state.stopped:
                self._stopped.add(ep.id)
            snapshot_epoch = getattr(self.exact, "new_epoch", None)
            if snapshot_epoch is not None:
                snapshot_epoch(ep.id)  # a per-epoch snapshot of exact marginals starts afresh
            self._cache = {k: (a.value, a.stderr) for k, a in self.ledger.answers(ep.id).items()}
            self._policy = OnlinePolicy(ep.spec.allocator(), ep.spec.budget, self.settings.free_stderr_ratio,
                                        self.settings.free_answer_max_stderr or None, self.mechanism)

    def update_settings(self, settings: EngineSettings) -> None:
        """New settings (a reloaded config): an epoch's budget and split are fixed in its spec when it is
        prepared, so privacy settings take effect at the next epoch (one prepared ahead is prepared
        again); the epoch length, work limit and release wait apply at once."""
        self.settings = settings
        if self._preparer is not None:
            self._preparer.forget()

    def next_epoch_at(self) -> float | None:
        """When the current epoch ends by itself (its start plus the epoch length), None for manual epochs."""
        ep, length = self._epoch, self.settings.epoch_length
        return None if ep is None or length is None else ep.started_at + length

    def new_epoch(self, prediction: Prediction | None = None, expected_current: int | None = -1) -> EpochRecord:
        """Start a new epoch now: new budget, new P, and the MM release drawn before any query is answered.

        The strategy is optimised before the epoch's lock is taken, so other sessions keep being answered
        (in the old epoch) meanwhile."""
        if expected_current == -1:
            expected_current = self._epoch.id if self._epoch is not None else None
        return self.commit_epoch(self.prepare_epoch(prediction), expected_current)

    def prepare_epoch(self, prediction: Prediction | None = None, quick: bool = False,
                      value_lists: Mapping[str, Sequence[str]] | None = None) -> PreparedEpoch:
        """The data-independent part of a new epoch: its public value lists, P planned over them, P's
        strategies (the slow part) and the budget split.

        ``quick`` skips the optimisation (instant): the split is computed from an error estimate never below
        the optimised one's (:func:`quick_groups`) and the strategies are optimised later. ``value_lists``
        (those of an epoch already begun) instead of reading them now."""
        lists = dict(value_lists) if value_lists is not None else self._read_value_lists()
        catalog = self._catalog_for(lists)
        pred = prediction if prediction is not None else self.predictions(catalog)
        st = self.settings
        s = int(pred.s_estimate or st.stream_length)
        (eps_q, delta_q), (eps_r, delta_r), (eps_p, delta_p) = st.stream_budget, st.regression_budget, st.partition_budget
        groups_in = self._p_workloads(pred, catalog)
        if quick:
            groups = quick_groups(groups_in)
        else:
            plan = self.strategies.plan_groups if self.strategies is not None else plan_groups
            groups = plan(groups_in, joint_max_cells=st.joint_max_cells, rng=new_rng() if self.background else self.rng,
                          time_limit=st.mm_time_limit, progress=self._progress(len(groups_in)))
            for g, (_, units) in zip(groups, groups_in.values(), strict=True):
                g.svd_error = svd_bound(units, g.shape)  # how far from the best strategy (EXPLAIN, benchmarks)
        budget = Budget(st.accounting, eps_q, delta_q)
        v_unit = (expected_relative_variance(groups, budget.cost_of(1.0), self._unit_rows(), self._unit_tables(),
                                             self._presence()) if groups else None)
        rho = pred.rho_estimate if pred.rho_estimate is not None else st.rho_estimate
        if rho is not None and pred.statements:
            rho *= self._answerable(pred, groups_in)
        split = st.resolve_split(s, rho, v_unit, bool(groups))
        n_pred = sum(g.n_queries for g in groups)
        spec = EpochSpec(st.accounting, eps_q, delta_q, st.epsilon, st.delta, eps_r, delta_r,
                         split.to_json(), st.allocation, s, st.warmup or warmup_length(s), st.min_fraction,
                         prior_bad=(1 - rho) * s if rho is not None else None, rho_estimate=rho,
                         predicted_keys=n_pred, partition_epsilon=eps_p, partition_delta=delta_p,
                         partition_selections=st.partition_selections,
                         value_lists={k: tuple(v) for k, v in lists.items()})
        marginals = {(k[0], k[1]) for k in groups_in}
        keys = tuple(q.key for q in pred.queries if self._group_of(q) in marginals)
        derived = {q.source.name: q.source for q in pred.queries if q.source is not None}
        return PreparedEpoch(spec, None if quick else groups, keys, pred, catalog, derived)

    def _read_value_lists(self) -> dict[str, tuple[str, ...]]:
        """The public value lists as their tables hold them now; the current epoch's when unreadable (the
        lists are public either way: an epoch must not wait for a broken lookup table)."""
        if self.value_lists is None:
            return {}
        try:
            return {k: tuple(v) for k, v in self.value_lists().items()}
        except Exception as exc:  # noqa: BLE001 - any failure to read keeps the lists in force
            log.warning("value lists kept as the current epoch has them: %s", exc)
            return dict(self._lists)

    def _catalog_for(self, lists: Mapping[str, Sequence[str]]) -> Catalog:
        """The catalog whose ``values_from`` columns hold ``lists`` (the configured one when empty)."""
        return with_value_lists(self.base_catalog, lists) if lists else self.base_catalog

    def catalog_of_epoch(self, epoch_id: int) -> Catalog:
        """The catalog epoch ``epoch_id`` fixed (its ``values_from`` lists): the adopted one when it is
        that epoch, else read from the ledger (an epoch another process began but this one has not yet
        adopted)."""
        with self._lock:
            ep, catalog = self._epoch, self.catalog
        if ep is not None and ep.id == epoch_id:
            return catalog
        return self._catalog_for(self.ledger.value_lists(epoch_id))

    def _unit_rows(self) -> dict[str, int]:
        return {t.name: t.unit_rows for t in (*self.catalog.tables, *self._derived.values())}

    def _presence(self) -> dict[str, int]:
        """Derived histograms of units present (one unit adds 1 to at most g cells): their g."""
        return {name: t.unit_rows for name, t in self._derived.items() if t.derived.counted is None}

    def _unit_tables(self) -> dict[str, str]:
        return {name: t.unit_table for name, t in self._derived.items()}

    def _measure(self, spec: EpochSpec, groups: Sequence[MMGroup], keys: Sequence[str],
                 prepared: PreparedEpoch) -> tuple[ReleaseRecord, MMRelease] | None:
        """The MM release of ``groups`` at the epoch's reserved share: reads P's marginals (cells over the
        prepared epoch's catalog), draws the noise."""
        units = spec.split.get("mm", 0.0) * spec.budget.units
        if not groups or units <= 0:
            return None
        cost = spec.budget.cost_of(units)
        hists, cells = [], []
        for g, (table, read) in zip(groups, self._release_tables(groups, prepared), strict=True):
            hists.append(self.exact.marginal(table, g.marginal))
            cells.append(read)
        rel = release_mm(groups, hists, cost, self._unit_rows(), self._unit_tables(), self._presence(), cells)
        return ReleaseRecord("mm", cost, units, Gaussian.name, {"sigma": rel.sigma}, 1.0, 0, {"mm": units},
                             {"groups": rel.meta(), "keys": list(keys),
                              "source": getattr(prepared.prediction, "source", "")}, rel.to_bytes()), rel

    def _release_tables(self, groups: Sequence[MMGroup],
                        prepared: PreparedEpoch) -> list[tuple[TableSchema, np.ndarray | None]]:
        """Per group of the release, the table its histogram is read from and the cells it holds rows of
        (None: all): with ``bounding = "statement"`` each unit's k rows among the cells P's queries of the
        group read (the exact source's ``release_table``), so a predicted windowed query is not biased by
        a unit's rows outside its window; a free answer is then estimated only from a group whose cells
        hold every cell it reads (``MMRelease.estimate``)."""
        view = getattr(self.exact, "release_table", None)
        # The groups are planned in the order of P's workloads (one per marginal, or per region of it).
        work = list(self._p_workloads(prepared.prediction, prepared.catalog).items()) if view is not None else []
        out: list[tuple[TableSchema, np.ndarray | None]] = []
        for i, g in enumerate(groups):
            table = prepared.derived.get(g.table) or prepared.catalog.table(g.table)
            found = work[i] if i < len(work) and work[i][0][:2] == (g.table, tuple(g.marginal)) else None
            if view is None or found is None or table.privacy_unit is None or table.derived is not None:
                out.append((table, None))
                continue
            shape, units = found[1]
            out.append(view(table, g.marginal, workload_cells(shape, units)))
        return out

    def commit_epoch(self, prepared: PreparedEpoch, expected_current: int | None) -> EpochRecord:
        """Begin the prepared epoch in the ledger, atomically with its MM release (measured now).

        A prepared epoch without strategies (``quick``) begins with the MM share reserved and no release:
        :meth:`fill_release` adds it. Returns the ledger's current epoch (another process may have won)."""
        # The epoch has no id yet, hence no materialised bounded rows: its release reads the window.
        live = getattr(self.exact, "reading_live", None)
        with live() if live is not None else contextlib.nullcontext():
            measured = (self._measure(prepared.spec, prepared.groups, prepared.keys, prepared)
                        if prepared.groups else None)
        mm_rec, rel = measured if measured is not None else (None, None)
        ep = self.ledger.begin_epoch(prepared.spec, mm_rec, expected_current)
        with self._lock:
            if prepared.groups is None:
                self._pending_keys = frozenset(prepared.keys)
            self._adopt(ep, rel, mm_rec.payload if mm_rec is not None else None)
        return ep

    def begin_reserved(self, expected_current: int | None) -> EpochRecord:
        """Begin an epoch at once with the MM share reserved; its release is prepared afterwards."""
        return self.commit_epoch(self.prepare_epoch(quick=True), expected_current)

    def fill_release(self) -> bool:
        """Optimise, measure and attach the release of an epoch begun without it; True when attached here.

        The release spends exactly the share the epoch reserved for it, so nothing else could have used it;
        when another process attached one first (or the epoch ended), this one is discarded unreleased."""
        ep = self._epoch
        if ep is None or not self._mm_pending:
            return False
        prepared = self.prepare_epoch(value_lists=self._lists)  # the cells the epoch fixed
        if prepared.groups is None or not prepared.groups:
            return False
        measured = self._measure(ep.spec, prepared.groups, prepared.keys, prepared)
        attached = measured is not None and self.ledger.attach_mm(ep.id, measured[0])
        cur = self.ledger.current_epoch()
        if cur is not None and cur.id == ep.id:
            if measured is not None:
                self._adopt(cur, measured[1], measured[0].payload)
            else:
                self._adopt(cur)
        return attached

    def prepare_exact(self) -> None:
        """Materialise the current epoch's bounded rows of the privacy-unit tables before statements need
        them (``[lapras] bounding = "epoch"``; the epoch preparer calls this off the serving path)."""
        prepare = getattr(self.exact, "prepare", None)
        if prepare is not None and self._epoch is not None:
            prepare([t for t in self.catalog.tables if t.privacy_unit is not None])

    def wait_for_release(self, timeout: float) -> bool:
        """Block up to ``timeout`` seconds while the epoch's release is being prepared; True when ready."""
        return self._mm_ready.wait(timeout)

    def _progress(self, total: int) -> Callable[[float], None] | None:
        """A bar over P's marginals; the postfix states the worst case left (the preparation's time limit)."""
        if not self.settings.progress or total == 0:
            return None
        from tqdm import tqdm

        bar = tqdm(total=total, desc="matrix mechanism", unit="marginal",
                   bar_format="{l_bar}{bar}| {n:.1f}/{total} marginals [{elapsed}<{remaining}{postfix}]")
        end = time.monotonic() + self.settings.mm_time_limit

        def step(k: float) -> None:
            bar.update(k)
            bar.set_postfix_str(f"at most {max(0.0, end - time.monotonic()):.0f} s left", refresh=False)
            if bar.n >= total - 1e-9:
                bar.close()

        return step

    def _answerable(self, pred: Prediction, groups_in: Workloads) -> float:
        """The share of P's statements the release can answer whole (every query a count in one of its
        marginals; a SUM over a measure is always fresh): rho counts a statement as predicted, but one with
        a SUM costs a fresh release all the same, so the split (a public function of P) must not starve
        those statements to pay for a release that does not answer them."""
        marginals = {(k[0], k[1]) for k in groups_in}
        by_key = {q.key: q for q in pred.queries}
        whole = sum(all(k in by_key and not by_key[k].measure and self._group_of(by_key[k]) in marginals for k in st)
                    for st in pred.statements)
        return whole / len(pred.statements)

    def _group_of(self, q: LinearQuery) -> tuple[str, tuple[str, ...]]:
        return (q.table, tuple(q.marginal))

    def _p_workloads(self, pred: Prediction, catalog: Catalog) -> Workloads:
        """P's release groups: per marginal, and under ``bounding = "statement"`` per region of the cells a
        predicted statement reads in it (each bounded among its own cells: docs/bounding.md)."""
        for q in pred.queries:
            if q.source is not None:
                self._derived.setdefault(q.source.name, q.source)  # unit bounds, by name
        by_region = getattr(self.exact, "bounding", None) == "statement" and bool(pred.statements)
        return p_workloads(catalog, pred.queries, self.settings.mm_max_cells,
                           pred.statements if by_region else None)

    def _maybe_roll(self) -> None:
        if self.background:
            return  # the preparer thread rolls the epoch; serving never waits for it
        length = self.settings.epoch_length
        ep = self._epoch
        if ep is not None and length is not None and self.clock() - ep.started_at >= length:
            self.new_epoch(expected_current=ep.id)

    # ----------------------------------------------------------------------------------- answering

    def lookup(self, plan: Statement) -> Answer | None:
        """Repeat of already answered queries: the stored answer from memory, no spend (well under 1 ms)."""
        vals, errs = [], []
        cache = self._cache
        for q in plan.queries:
            hit = cache.get(q.key)
            if hit is None:
                if not q.is_zero:
                    return None
                hit = (0.0, 0.0)
            vals.append(hit[0])
            errs.append(hit[1])
        return Answer(np.array(vals), np.array(errs), ("repeat",) * len(vals), "repeat")

    def answer(self, plan: Statement, user: str = "") -> Answer:
        """Answer one statement; raises BudgetExhausted (53400) when it cannot be answered."""
        self._maybe_roll()
        hit = self.lookup(plan)
        if hit is not None:
            return hit
        if self._mm_pending and self._pending_keys and all(
                q.is_zero or q.key in self._pending_keys or q.key in self._cache for q in plan.queries):
            # P's release is on its way: a predicted statement waits for it (bounded), then is answered
            # fresh from the stream's parts (the release's share stays reserved either way).
            self.wait_for_release(self.settings.mm_wait)
            hit = self.lookup(plan)
            if hit is not None:
                return hit
        for _ in range(3):
            try:
                return self._answer(plan, user)
            except StaleEpoch:
                cur = self.ledger.current_epoch()
                if cur is None:
                    self.new_epoch(expected_current=None)
                else:
                    self._adopt(cur)
        raise StaleEpoch("the epoch changed three times while answering")

    def _answer(self, plan: Statement, user: str) -> Answer:
        """Decide, calibrate, release, combine, commit: one stream item under the epoch's lock."""
        with self._lock:  # one epoch's state: its release and its cells together
            ep, mm, policy, catalog = self._epoch, self._mm, self._policy, self.catalog
        assert ep is not None
        table = _table_of(plan, catalog)
        if table is None:
            raise UnknownTable(f'relation "{plan.table}" is not a protected table')
        _check_planned_over(plan, catalog)
        queries = list(plan.queries)
        todo = [i for i, q in enumerate(queries) if not q.is_zero and q.key not in self._cache]
        # A "max_sum_per_group = auto" bound this statement clamps with: chosen (and charged) once per epoch
        # here, before this statement's own decision; stored, so every later statement reads the same B.
        table = self._auto_bounded(ep.id, table, [queries[i] for i in todo], charge=True)
        # Bounded work before the lock: a statement too large is refused here, before any exact work.
        # (Clamped SUMs carry their noise scale as their sensitivity from here on; keys are unchanged.)
        effective, sensitivity = self.calibration(table, [queries[i] for i in todo])
        for i, q in zip(todo, effective, strict=True):
            queries[i] = q
        sens_todo = sensitivity(effective, self.settings.max_statement_work)
        free, free_var = self._free_estimates(table, [queries[i] for i in todo], mm, queries)
        if ep.id in self._stopped and not np.isfinite(free_var).all():
            # The stream stopped for good: a query with neither a stored answer (another process may have
            # released it) nor a free estimate is refused, before any exact aggregate or any write.
            with self.ledger.locked(ep.id) as tx:
                stored = tx.find([queries[i].key for i in todo])
            for k, a in stored.items():
                self._cache[k] = (a.value, a.stderr)
            if any(queries[i].key not in stored and not np.isfinite(v) for i, v in zip(todo, free_var, strict=True)):
                self._refuse(ep.id, ep.state.n)
            if all(queries[i].key in stored for i in todo):
                again = self.lookup(plan)
                assert again is not None
                return again
        predicted = all(queries[i].key in self._pkeys for i in todo)
        need_exact = not (predicted and np.isfinite(free_var).all())
        exact = self.exact.answers(table, [queries[i] for i in todo]) if need_exact and todo else None
        # Unit noise is drawn ahead (it does not depend on the grant), so the lock only scales it.
        unit = self.mechanism.draw(len(todo)) if exact is not None else None
        with self.ledger.locked(ep.id) as tx:
            stored = tx.find([queries[i].key for i in todo])
            for k, a in stored.items():
                self._cache[k] = (a.value, a.stderr)
            keep = [j for j, i in enumerate(todo) if queries[i].key not in stored]
            if not keep:
                again = self.lookup(plan)
                assert again is not None
                return again
            sub = [queries[todo[j]] for j in keep]
            fv, fvar = free[keep], free_var[keep]
            # Each row is released as (row / its own sensitivity) + noise at the calibrated scale, i.e.
            # with noise scaled by s_i: a COUNT next to a SUM keeps count-sized noise instead of the SUM's.
            # The policy works in these normalised units; the sensitivity is the normalised matrix's.
            scale = np.array([q.sensitivity for q in sub], dtype=np.float64)
            def sensitivity_of(mask: np.ndarray) -> float:
                if len(sub) == len(todo) and mask.all():
                    return sens_todo
                # A subset of the statement (bounded by the statement's own work, already checked), over
                # the same bounded rows: each query still in its group's block.
                return sensitivity(_pick(sub, mask), None)

            d = policy.decide(tx.epoch.state, predicted=predicted, free_var=fvar / scale**2,
                              sensitivity_of=sensitivity_of)
            # Raising inside the block would roll the stopping item back: refuse once the lock is left.
            refused = d.outcome == "refused"
            if refused:
                if not tx.epoch.state.stopped:
                    tx.commit_item(d.state, None, [])  # the item that stops the stream is recorded
            else:
                values, var = fv.copy(), fvar.copy()
                release = None
                if d.outcome == "bad":
                    assert exact is not None and unit is not None and d.cost is not None
                    fresh = _pick(sub, d.fresh)
                    sens = sensitivity_of(d.fresh)
                    mech = self.mechanism.calibrate(d.cost, sens, len(fresh))
                    noisy = mech.release(exact[keep][d.fresh], scale[d.fresh], unit[keep][d.fresh])
                    values[d.fresh], var[d.fresh] = combine(noisy, mech.variance(scale[d.fresh]), fv[d.fresh],
                                                            fvar[d.fresh])
                    release = ReleaseRecord("fresh", d.cost, d.grant.total, mech.name, mech.params, sens, d.state.n,
                                            {"pool": d.grant.pool, "reserve": d.grant.reserve},
                                            {"keys": [q.key for q in fresh]})
                outs = ["fresh" if d.outcome == "bad" and d.fresh[j] else "free" for j in range(len(sub))]
                recs = [StoredAnswer(q.key, float(values[j]), float(math.sqrt(var[j])), outs[j], d.state.n)
                        for j, q in enumerate(sub)]
                tx.commit_item(d.state, release, recs, user)
                if d.state.stopped:
                    self._stopped.add(ep.id)
        if refused:
            self._stopped.add(ep.id)
            self._refuse(ep.id, d.state.n)
        for r in recs:
            self._cache[r.key] = (r.value, r.stderr)
        base = self.lookup(plan)
        assert base is not None
        per = {q.key: o for q, o in zip(sub, outs, strict=True)}
        outcomes = tuple("zero" if q.is_zero else per.get(q.key, "repeat") for q in queries)
        return Answer(base.values, base.stderrs, outcomes, d.outcome, d.cost, d.state.n,
                      predicted=d.outcome == "good" and predicted and mm is not None)

    def explain(self, plan: Statement) -> dict[str, object]:
        """Whether a statement would be answered from P (the epoch's matrix-mechanism release) and how
        accurately, with the strategy's per-query RMSE against the SVD lower bound: nothing is read,
        drawn or charged (for EXPLAIN)."""
        with self._lock:
            mm, pkeys, catalog, source = self._mm, self._pkeys, self.catalog, self.p_source
        queries = [q for q in plan.queries if not q.is_zero]
        table = _table_of(plan, catalog)
        predicted = bool(queries) and mm is not None and table is not None and all(q.key in pkeys for q in queries)
        info: dict[str, object] = {"predicted": predicted, "source": source}
        if not predicted or mm is None or table is None:
            return info
        _, var = self._free_estimates(table, queries, mm, queries)
        info["stderr"] = [math.sqrt(v) for v in var]
        groups = []
        for q in queries:
            for i in mm.find(q.table, tuple(q.marginal)):
                if i not in groups and tuple(mm.groups[i].marginal) == tuple(q.marginal):
                    groups.append(i)
        info["groups"] = [{"marginal": mm.groups[i].marginal, "strategy": mm.groups[i].strategy.name,
                           "n_queries": mm.groups[i].n_queries, "rmse": mm.query_rmse(i)[0],
                           "svd_rmse": mm.query_rmse(i)[1]} for i in groups]
        return info

    def record_statement(self, sql: str, params: Sequence[object] | None, outcome: str) -> None:
        """Add a statement asked over a protected table to the history P and S are learnt from (texts,
        parameters, time, epoch, outcome; no value). Nothing happens when no history is kept."""
        ep = self._epoch
        if self.history is not None and ep is not None:
            self.history.record(ep.id, sql, params, outcome)

    def calibration(self, table: TableSchema, queries: Sequence[LinearQuery]) -> tuple[
            list[LinearQuery], Callable[[Sequence[LinearQuery], int | None], float]]:
        """The queries as their noise is scaled, and the sensitivity of any subset of them (with a work
        limit), for the exact answers ``self.exact`` gives them: with per-group bounds (the source's
        ``group_bounds``: c rows per group, g groups, k in all) the unclamped queries' sensitivity is their
        largest column norm times ``group_bound_norm``, and each SUM clamped per group
        (``max_sum_per_group``) is scaled by what one unit can add to it (``clamped_sensitivity``) and adds
        1 per clamped query of a group to the squared sensitivity, in at most min(g, k, groups) groups;
        else the queries as they are and the k bound. Use it wherever a statement's noise is stated (EXPLAIN):
        the exact answers and this come from the same ``statement_groups``."""
        bounds = getattr(self.exact, "group_bounds", None)
        groups = bounds(table, queries) if bounds is not None else None
        if groups is None:
            return list(queries), lambda qs, work: statement_sensitivity(table, qs, work)
        norm = group_bound_norm(table.unit_rows, table.group_rows, table.unit_cells, groups.count)
        effective = [replace(q, sensitivity=clamped_sensitivity(table, q)) if clamped(table, q) else q for q in queries]
        live_groups = min(table.unit_cells, table.unit_rows, groups.count)

        def sensitivity(qs: Sequence[LinearQuery], work: int | None) -> float:
            plain = [q for q in qs if not clamped(table, q)]
            rows = statement_sensitivity(table, plain, work, norm) if plain else 0.0
            if len(plain) == len(qs):
                return rows
            return math.sqrt(rows**2 + groups.per_group * live_groups)

        return effective, sensitivity

    def _auto_bounded(self, epoch_id: int, table: TableSchema, queries: Sequence[LinearQuery],
                      charge: bool) -> TableSchema:
        """``table`` with the epoch's automatic per-group bounds (``max_sum_per_group = auto``) that these
        queries' clamped SUMs use: the stored B, else (``charge``) one chosen now (``select_bound``: charged
        and stored before use); without ``charge`` a bound not chosen yet is left out (the SUM unclamped)."""
        chosen: dict[str, float] = {}
        for column in auto_columns(table, queries, getattr(self.exact, "group_bounds", None)):
            rec = self._auto_record(epoch_id, table, column, charge)
            if rec is not None:
                chosen[column] = float(rec.keys[0][0])
        return with_bounds(table, chosen)

    def _auto_record(self, epoch_id: int, table: TableSchema, column: str, charge: bool) -> PartitionRecord | None:
        key = ledger_key(table.qualified_name, column)
        rec = self._partitions.get((epoch_id, key)) or self.ledger.partition(epoch_id, key)
        if rec is None and charge:
            try:
                rec = select_bound(self.ledger, self.exact, epoch_id, table, column)
            except BudgetExhausted:
                return None  # the partition part cannot pay for it: the SUM keeps its row bound (sound)
        if rec is not None:
            self._partitions[(epoch_id, key)] = rec
        return rec

    def explain_auto_bounds(self, plan: Statement) -> list[dict[str, object]]:
        """Per automatic bound the statement would clamp with: its column and the stored record (B, cost,
        mechanism), or None and what choosing it would cost; nothing is read, drawn or charged (EXPLAIN)."""
        ep, catalog = self._epoch, self.catalog
        table = _table_of(plan, catalog)
        if ep is None or table is None:
            return []
        out: list[dict[str, object]] = []
        for column in auto_columns(table, list(plan.queries), getattr(self.exact, "group_bounds", None)):
            rec = self._auto_record(ep.id, table, column, charge=False)
            cost = rec.cost if rec is not None else self.partition_cost()
            cur = self.ledger.current_epoch()
            payable = rec is not None or (cost is not None and cur is not None and cur.spec.partition.admits(
                cur.partition_rho_spent, cur.partition_delta_spent, cost))
            out.append({"column": column, "record": rec, "cost": cost, "payable": payable})
        return out

    @staticmethod
    def _refuse(epoch_id: int, position: int) -> NoReturn:
        raise BudgetExhausted(
            "privacy budget of the current epoch exhausted",
            detail=f"epoch {epoch_id}: the stream stopped at statement {position}; no free estimate covers "
                   "this query",
            hint="repeat a query already answered, or wait for the next epoch")

    def _free_estimates(self, table: TableSchema, queries: Sequence[LinearQuery], mm: MMRelease | None,
                        statement: Sequence[LinearQuery] = ()) -> tuple[np.ndarray, np.ndarray]:
        """Free estimates (inf variance: none) of ``queries`` from P's release, using only groups whose
        rows are bounded among cells ``statement`` (all the asking statement's queries) reads."""
        vals = np.full(len(queries), np.nan)
        var = np.full(len(queries), np.inf)
        if mm is None:
            return vals, var
        sizes_of: dict[str, dict[str, int]] = {}
        reads_of: dict[str, StatementCells] = {}
        for i, q in enumerate(queries):
            if q.measure:
                continue  # the release measured counts; a measure's sum is not a function of them
            t = q.source if q.source is not None else table  # a derived table (COUNT(DISTINCT)) or the table
            sizes = sizes_of.get(t.name)
            if sizes is None:
                sizes = sizes_of[t.name] = {a.name: a.domain.size for a in t.attributes}
            reads = reads_of.get(t.name)
            if reads is None:
                reads = reads_of[t.name] = StatementCells(
                    [(tuple(r.marginal), r.factors(t)) for r in (statement or queries)
                     if not r.is_zero and not r.measure and _source_name(r) == _source_name(q)], sizes)
            est = mm.estimate(t.name, tuple(q.marginal), q.factors(t), sizes, reads)
            if est is not None:
                vals[i], var[i] = est
        return vals, var

    def sync_epoch(self) -> bool:
        """Adopt the ledger's current epoch when another process or an admin started a new one, and roll
        a timed epoch that has ended; True when the epoch changed. Cheap enough to poll every second."""
        ep = self._epoch
        self._maybe_roll()
        cur = self.ledger.current_epoch()
        if cur is not None and (self._epoch is None or cur.id != self._epoch.id):
            self._adopt(cur)
        elif cur is not None and self._mm_pending and self.ledger.mm_release(cur.id) is not None:
            self._adopt(cur)  # another process attached the release
        if cur is not None and cur.state.stopped:
            self._stopped.add(cur.id)  # another process stopped the stream: refuse before exact work here too
        return self._epoch is not ep

    # ----------------------------------------------------------------------------------- partitions

    def partition_cost(self) -> Cost | None:
        """What one new partition selection costs in the current epoch (None when the part is off)."""
        ep = self._epoch
        part = ep.spec.partition if ep is not None else None
        return part.cost_per_selection() if part is not None and part.enabled else None

    def select_partition(self, request: PartitionRequest) -> PartitionRecord:
        """The keys released for ``request`` in this epoch: the stored set when one was selected (replayed,
        never drawn again), else a new selection: admitted against the partition part before any data is
        read, per-key unit counts read from the database, the threshold drawn, and the set committed with
        its charge before it is returned. Raises BudgetExhausted (53400) when the part cannot cover it."""
        for _ in range(3):
            ep = self._epoch
            assert ep is not None
            hit = self._partitions.get((ep.id, request.key))
            if hit is not None:
                return hit
            stored = self.ledger.partition(ep.id, request.key)
            if stored is None:
                try:
                    stored = self._select(ep.id, request)
                except StaleEpoch:
                    cur = self.ledger.current_epoch()
                    if cur is not None:
                        self._adopt(cur)
                    continue
            self._partitions[(ep.id, request.key)] = stored
            return stored
        raise StaleEpoch("the epoch changed three times while selecting keys")

    def explain_partition(self, request: PartitionRequest) -> dict[str, object]:
        """What a selection for ``request`` would cost and how it would draw, or the stored one: nothing is
        read, drawn or charged (for EXPLAIN)."""
        ep = self._epoch
        assert ep is not None
        stored = self._partitions.get((ep.id, request.key)) or self.ledger.partition(ep.id, request.key)
        if stored is not None:
            return {"stored": True, "record": stored, "keys": len(stored.keys), "cost": stored.cost, **stored.params}
        cost = self.partition_cost()
        if cost is None:
            return {"stored": False, "cost": None}
        mech = GaussianThreshold.calibrate(cost, request.max_keys)
        return {"stored": False, "cost": cost, "single_unit_bound": mech.single_unit_bound(), **mech.params}

    def _select(self, epoch_id: int, request: PartitionRequest) -> PartitionRecord:
        cur = self.ledger.current_epoch()
        if cur is None or cur.id != epoch_id:
            raise StaleEpoch(epoch_id)
        part = cur.spec.partition
        cost = part.cost_per_selection() if part.enabled else Cost(rho=1.0, delta=0.5)
        check_partition(cur, cost)  # refused before anything is read
        mech = GaussianThreshold.calibrate(cost, request.max_keys)
        keys, counts = self.exact.key_counts(request.sql)  # type: ignore[attr-defined]
        kept = mech.select(np.asarray(counts, dtype=np.int64))
        chosen = sorted(request.encode([k for k, m in zip(keys, kept, strict=True) if m]), key=_key_order)
        rec = PartitionRecord(request.key, chosen, cost, mech.name, mech.params)
        stored, _ = self.ledger.commit_partition(epoch_id, rec)
        return stored

    # ------------------------------------------------------------------------------------- preview

    def preview(self, plan: Statement) -> Preview:
        """The standard error each of ``plan``'s queries would be answered with if it ran now, from public
        quantities only (the allocation state, the calibration, the queries' sensitivities, stored answers'
        and free estimates' standard errors): nothing is read, drawn or charged (for EXPLAIN)."""
        ep, mm, policy, catalog = self._epoch, self._mm, self._policy, self.catalog
        assert ep is not None
        table = _table_of(plan, catalog)
        if table is None:
            raise UnknownTable(f'relation "{plan.table}" is not a protected table')
        queries = list(plan.queries)
        errs = np.zeros(len(queries))
        stored = np.array([q.is_zero or q.key in self._cache for q in queries])
        for i, q in enumerate(queries):
            if not q.is_zero and q.key in self._cache:
                errs[i] = self._cache[q.key][1]
        todo = [i for i in range(len(queries)) if not stored[i]]
        if not todo:
            return Preview(errs, stored, "repeat")
        # Calibrated as the answer path does (per-group bounds and clamped SUMs included), so the stated
        # error is the one the answer will have (an automatic bound not chosen yet: unclamped).
        table = self._auto_bounded(ep.id, table, [queries[i] for i in todo], charge=False)
        sub, sensitivity = self.calibration(table, [queries[i] for i in todo])
        sens = sensitivity(sub, self.settings.max_statement_work)
        _, free_var = self._free_estimates(table, sub, mm)
        scale = np.array([q.sensitivity for q in sub], dtype=np.float64)

        def sensitivity_of(mask: np.ndarray) -> float:
            return sens if mask.all() else sensitivity(_pick(sub, mask), None)

        d = policy.decide(self._state_now(ep), predicted=all(q.key in self._pkeys for q in sub), free_var=free_var / scale**2,
                          sensitivity_of=sensitivity_of)
        var = free_var.copy()
        if d.outcome == "refused":
            var[~np.isfinite(var)] = np.nan
        elif d.outcome == "bad":
            assert d.cost is not None
            mech = self.mechanism.calibrate(d.cost, sensitivity_of(d.fresh), int(d.fresh.sum()))
            _, var[d.fresh] = combine(np.zeros(int(d.fresh.sum())), mech.variance(scale[d.fresh]),
                                      np.zeros(int(d.fresh.sum())), free_var[d.fresh])
        errs[todo] = np.sqrt(var)
        return Preview(errs, stored, d.outcome)

    def _state_now(self, ep: EpochRecord) -> AllocState:
        """The allocation state of ``ep`` as the ledger has it now (other workers' spends included)."""
        cur = self.ledger.current_epoch()
        return cur.state if cur is not None and cur.id == ep.id else ep.state

    def fresh_statements_left(self, cap: int = 100_000) -> int:
        """How many more fresh (bad) statements the epoch's allocation would grant budget to, from its
        state now (public: the allocation rule and the spend so far)."""
        ep, policy = self._epoch, self._policy
        if ep is None:
            return 0
        state, n = self._state_now(ep), 0
        if state.stopped:
            return 0
        while n < cap:
            grant, state = policy.allocator.bad(state)
            if grant.total <= 0:
                break
            n += 1  # answered (the grant that stops the stream still answers its statement)
            if state.stopped:
                break
        return n

    # ----------------------------------------------------------------------------------- reporting

    def budget_report(self) -> dict[str, object]:
        from lapras.report import budget_report

        report = budget_report(self.ledger)
        cur = report.get("current")
        if isinstance(cur, dict) and self._epoch is not None and cur.get("epoch") == self._epoch.id:
            cur["matrix_mechanism"] = ("pending" if self._mm_pending else
                                       "released" if self._mm is not None else "none")
        return report

    def close(self) -> None:
        if self._preparer is not None:
            self._preparer.stop()
        if self.history is not None:
            self.history.close()
        self.ledger.close()
        close_source(self.exact)


class PartitionRequest(Protocol):
    """What a partition selection needs: its ledger key, the SQL of per-key unit counts, and m."""

    @property
    def key(self) -> str: ...

    @property
    def sql(self) -> str: ...

    @property
    def max_keys(self) -> int: ...

    def encode(self, keys: Sequence[Sequence[object]]) -> list[list[object]]: ...


def _table_of(plan: Statement, catalog: Catalog) -> TableSchema | None:
    """The schema a statement was planned over: the catalog's, or the one with a partition selection's
    released keys as a column's domain (what the statement's cells and exact-answer SQL refer to)."""
    planned = getattr(plan, "table_schema", None)
    if isinstance(planned, TableSchema) and has_selected_keys(planned):
        return planned
    return catalog.table(plan.table)


def _check_planned_over(plan: Statement, catalog: Catalog) -> None:
    """Raise StalePlan when ``plan``'s table has value lists other than ``catalog``'s (planned in an
    epoch whose lists differed): its cells would be read as other values."""
    planned = getattr(plan, "table_schema", None)
    current = catalog.table(plan.table)
    if isinstance(planned, TableSchema) and current is not None and planned is not current:
        old, new = listed_values(planned), listed_values(current)
        if old is not new and old != new:
            raise StalePlan(f'the value lists of "{plan.table}" changed with the epoch: plan the statement again')


def _key_order(k: list[object]) -> tuple[tuple[bool, str, object], ...]:
    return tuple((v is None, type(v).__name__, v if isinstance(v, int) else str(v)) for v in k)


def _source_name(q: LinearQuery) -> str | None:
    """The derived histogram a query reads (COUNT(DISTINCT)), None for the table itself."""
    return q.source.name if q.source is not None else None


def _pick(items: Sequence[LinearQuery], mask: np.ndarray) -> list[LinearQuery]:
    return [q for q, f in zip(items, mask, strict=True) if f]
