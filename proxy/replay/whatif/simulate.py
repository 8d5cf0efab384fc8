"""The what-if replay itself: a log, epoch by epoch, through real engines at several budgets.

Each epoch of the log (a day by default) is one epoch of every simulated engine: memory ledger, the real
parser, the real matrix mechanism and online policy, exact answers from one data snapshot. Before each
epoch the prediction P is trained on the epochs before it only (walk-forward, as the back-test does),
declared templates included, and its overlap rho is the recall the previous epochs' predictions actually
got (what ``predict`` measures; the model's own estimate until a week of history exists). Every budget
runs twice, with P and with P switched off (same S), so the difference is what the predictor buys. The
operator is trusted: each released answer is compared with the exact one here, and only error figures
leave this module (never an exact value).
"""

from __future__ import annotations

import math
import multiprocessing as mp
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

import parser as sqlparser
from lapras.engine import Answer, Engine, Prediction
from lapras.errors import BudgetExhausted
from lapras.ledger.memory import MemoryLedger
from lapras.matrix_mechanism import p_workloads
from lapras.mechanisms import noise
from lapras.settings import EngineSettings
from lapras.strategy_cache import StrategyCache
from parser.model.linear import LinearQuery
from parser.model.schema import Catalog
from parser.plan.queryplan import QueryPlan
from parser.semantics.zoned_text import planned_in_zone
from predictor.canonical import canonical_key
from predictor.logs import LogStatement
from predictor.model import WorkloadModel
from predictor.predict import Epochs, PredictionSet, bucket, train
from predictor.templates import analyse
from predictor.utility import CostModel

from .exact import SnapshotExactSource

MIN_HISTORY = 7  # epochs of history before an epoch whose recall measures rho (predictor.predict.measure_overlap)
OUTCOMES = ("fresh", "from_p", "free", "refused")
# The engine's statement outcome -> the what-if's: a repeat (or an all-zero statement) costs nothing and
# reuses what was released; good / free_after_stop are served from P's release without a spend.
_OUTCOME = {"bad": "fresh", "good": "from_p", "free_after_stop": "from_p", "repeat": "free", "zero": "free"}


@dataclass(frozen=True)
class Kind:
    """What a DBA sorts statements by: recurring (dashboards, reports) or ad hoc, COUNT or SUM/AVG, and
    GROUP BY or one row."""

    recurring: bool
    aggregate: str  # count | sum/avg
    grouped: bool


@dataclass(frozen=True)
class Replayable:
    """One statement of the log, planned once for every run; ``plan`` None: the parser refuses it."""

    ts: datetime
    user: str
    sql: str
    plan: QueryPlan | None
    kind: Kind | None


@dataclass
class StatementOutcome:
    """What one simulated engine did with one statement (errors only; never the exact value)."""

    offset_s: float  # seconds since the epoch started
    outcome: str  # fresh | from_p | free | refused | unsupported
    spent: float  # share of the epoch's query budget spent after it (the MM release included)
    kind: Kind | None
    abs_error: float | None = None  # mean absolute error over the statement's aggregate cells
    rel_error: float | None = None  # sum |error| / max(sum |exact|, 1) over those cells
    z: tuple[float, ...] = ()  # (released - exact) / stated stderr of each query released for it
    released: np.ndarray | None = field(default=None, repr=False)  # the analyst's cells (tests compare)
    stderrs: np.ndarray | None = field(default=None, repr=False)  # stated, per linear query


@dataclass
class EpochRun:
    """One epoch of the log at one budget, with or without P."""

    epoch: int
    day: str
    epsilon: float
    with_p: bool
    s_estimate: int
    p_size: int
    rho: float | None
    outcomes: list[StatementOutcome]


@dataclass
class WhatIfResult:
    runs: list[EpochRun]
    epoch_hours: float
    skipped: dict[str, int]  # statements not replayed: undated, not over a protected table
    strategy_cache: tuple[int, int]  # (hits, misses)
    exact_fetches: tuple[int, int]  # (marginals, single answers) fetched from the upstream
    timings: dict[str, float] = field(default_factory=dict)  # wall seconds per phase


@dataclass(frozen=True)
class WhatIfOptions:
    epsilons: Sequence[float] = (1.0,)
    stream_length: int | None = None  # None: the predictor's S estimate (auto)
    split: str | None = None  # None: the configured one
    days: tuple[int, int] | None = None  # epoch indices, inclusive; None: all
    epoch_hours: float = 24.0
    declared: Sequence[dict[str, Any]] = ()
    cost: CostModel | None = None
    threshold: float | None = None
    seed: int = 0
    without_p: bool = True  # also run every budget with P switched off
    workers: int = 1  # processes replaying days in parallel (each with its own engines)


def _kinds(plans: dict[str, QueryPlan | None], epochs: Epochs, catalog: Catalog) -> dict[str, Kind]:
    """Recurring: the statement's canonical key occurs on 3 epochs or more of the whole log, or its
    literals follow one of the progressions the predictor finds there (a report whose date advances).
    Hindsight over the whole log: this is the evaluation's label, not what the predictor knew."""
    model = WorkloadModel(epochs.buckets, epochs.weekday_of if epochs.hours == 24 else None, catalog, epochs.hours)
    in_stream = {(s.template, v) for s in model.streams for _, v in s.nodes}
    out: dict[str, Kind] = {}
    for sql, plan in plans.items():
        if plan is None:
            continue
        key = canonical_key(sql, catalog)
        st = model.keys.get(key) if key is not None else None
        shape = analyse(sql)
        recurring = (st is not None and sum(st.present) >= 3) or (
            shape is not None and (shape.template, shape.values) in in_stream)
        sums = any(q.value is not None for q in plan.queries if not q.is_zero)
        out[sql] = Kind(recurring, "sum/avg" if sums else "count", bool(plan.template.groups))
    return out


def _prediction(pset: PredictionSet, planner: sqlparser.Planner, s: int | None, rho: float | None) -> Prediction:
    qs: dict[str, LinearQuery] = {}
    for item in pset.queries:
        try:
            with planned_in_zone(item.sql) as text:
                plan = planner.plan(text)
        except sqlparser.Refusal:
            continue
        for q in plan.queries:
            if not q.is_zero:
                qs.setdefault(q.key, q)
    return Prediction(tuple(qs.values()), s if s is not None else (pset.s_estimate or None), rho)


def _errors(plan: QueryPlan, answer: Answer, exact: np.ndarray) -> tuple[float | None, float | None, tuple[float, ...]]:
    got, want = plan.group_cells(answer.values), plan.group_cells(exact)
    ok = np.isfinite(got) & np.isfinite(want)
    abs_err = rel_err = None
    if ok.any():
        diff = np.abs(got[ok] - want[ok])
        abs_err = float(diff.mean())
        rel_err = float(diff.sum() / max(float(np.abs(want[ok]).sum()), 1.0))
    z = tuple(float((v - e) / s) for v, e, s, o in zip(answer.values, exact, answer.stderrs, answer.outcomes, strict=True)
              if o in ("fresh", "free") and s > 0)
    return abs_err, rel_err, z


@dataclass(frozen=True)
class _Day:
    """One epoch to replay, the same for every run: its statements, P and the rho the engine is told."""

    index: int
    day: str
    origin: datetime
    prediction: Prediction
    rho: float | None
    statements: list[Replayable]


@dataclass(frozen=True)
class _Replay:
    """Everything a day's runs read (shared with worker processes by fork, never pickled)."""

    catalog: Catalog
    settings: EngineSettings
    exact: SnapshotExactSource
    options: WhatIfOptions
    kinds: dict[str, Kind]
    strategies: StrategyCache


_SHARED: _Replay | None = None  # set in the parent before the workers fork
_ENGINES: dict[tuple[float, bool], Engine] = {}  # per process: one engine per run, reused day after day


def _replay_day(day: _Day, rp: _Replay | None = None) -> tuple[list[EpochRun], tuple[int, int]]:
    """Every run (budget x with/without P) of one epoch; returns the runs and the strategy cache's
    (hits, misses) added meanwhile."""
    rp = rp if rp is not None else _SHARED
    assert rp is not None
    opts = rp.options
    hits, misses = rp.strategies.hits, rp.strategies.misses
    runs: list[EpochRun] = []
    for k, eps in enumerate(opts.epsilons):
        for with_p in (True, False) if opts.without_p else (True,):
            # Seeded noise per run and epoch, whichever process replays it: nothing released here leaves the
            # operator's machine (lapras.mechanisms.noise.simulation).
            with noise.simulation([opts.seed, k, int(with_p), day.index]):
                engine = _ENGINES.get((eps, with_p))
                if engine is None:
                    engine = _ENGINES[(eps, with_p)] = Engine(
                        rp.catalog, MemoryLedger(), rp.exact, replace(rp.settings, epsilon=eps),
                        rng=np.random.default_rng([opts.seed, k, int(with_p)]), strategies=rp.strategies)
                pred = day.prediction if with_p else Prediction((), day.prediction.s_estimate, None)
                outs = _replay_epoch(engine, pred, day, rp)
            runs.append(EpochRun(day.index, day.day, eps, with_p, int(pred.s_estimate or rp.settings.stream_length),
                                 len(pred.queries), day.rho if with_p else None, outs))
    return runs, (rp.strategies.hits - hits, rp.strategies.misses - misses)


def _replay_epoch(engine: Engine, pred: Prediction, day: _Day, rp: _Replay) -> list[StatementOutcome]:
    engine.new_epoch(pred)
    ep = engine.ledger.current_epoch()
    assert ep is not None
    units = ep.spec.budget.units
    spent = ep.spent_units
    outs: list[StatementOutcome] = []
    for r in day.statements:
        offset = (r.ts - day.origin).total_seconds()
        if r.plan is None:
            outs.append(StatementOutcome(offset, "unsupported", spent / units, None))
            continue
        table = getattr(r.plan, "table_schema", None) or rp.catalog.table(r.plan.table)  # cut cells: its own
        assert table is not None
        try:
            ans = engine.answer(r.plan, r.user)
        except BudgetExhausted:
            outs.append(StatementOutcome(offset, "refused", spent / units, rp.kinds.get(r.sql)))
            continue
        if ans.cost is not None:
            cur = engine.ledger.current_epoch()
            spent = cur.spent_units if cur is not None else spent
        truth = rp.exact.answers(table, r.plan.queries)
        abs_err, rel_err, z = _errors(r.plan, ans, truth)
        outs.append(StatementOutcome(offset, _OUTCOME.get(ans.outcome, "fresh"), spent / units,
                                     rp.kinds.get(r.sql), abs_err, rel_err, z,
                                     r.plan.group_cells(ans.values), ans.stderrs))
    return outs


def simulate(statements: Sequence[LogStatement], catalog: Catalog, settings: EngineSettings,
             exact: SnapshotExactSource, options: WhatIfOptions,
             on_step: Callable[[int], None] | None = None, total: Callable[[int], None] | None = None) -> WhatIfResult:
    """Replay ``statements`` epoch by epoch at every budget of ``options``; see the module docstring."""
    t0 = time.perf_counter()
    dated = sorted((s for s in statements if s.ts is not None), key=lambda s: s.ts)  # type: ignore[arg-type,return-value]
    skipped = {"undated": sum(max(1, s.calls) for s in statements if s.ts is None), "not_protected": 0}
    epochs, _, _ = bucket(dated, options.epoch_hours, catalog)
    planner = sqlparser.Planner(catalog)
    plans: dict[str, QueryPlan | None] = {}
    other: set[str] = set()  # not over a protected table: the proxy relays them, nothing to simulate
    per_epoch: list[list[Replayable]] = [[] for _ in epochs.buckets]
    for s in dated:
        if s.sql not in plans and s.sql not in other:
            if not sqlparser.references_protected(s.sql, catalog):
                other.add(s.sql)
            else:
                try:
                    with planned_in_zone(s.sql) as text:
                        plans[s.sql] = planner.plan(text)
                except sqlparser.Refusal:
                    plans[s.sql] = None
        if s.sql in other:
            skipped["not_protected"] += max(1, s.calls)
            continue
        i = epochs.index_of(s.ts)  # type: ignore[arg-type]
        if 0 <= i < len(per_epoch):
            for _ in range(max(1, s.calls)):
                per_epoch[i].append(Replayable(s.ts, s.user or "", s.sql, plans[s.sql], None))  # type: ignore[arg-type]
    kinds = _kinds(plans, epochs, catalog)
    n = len(epochs.buckets)
    first, last = options.days if options.days is not None else (0, n - 1)
    first, last = max(0, first), min(n - 1, last)
    targets = list(range(first, last + 1))

    # Walk-forward P and its measured overlap: the recall of each earlier epoch's own P.
    psets: dict[int, PredictionSet] = {}
    recall: dict[int, float] = {}
    for d in range(max(0, first - 7), last + 1):
        window = Epochs(epochs.origin, epochs.hours, epochs.buckets[:d])
        psets[d] = train(window, d, catalog, options.cost, options.threshold, declared=options.declared)
        vol = sum(o.count for o in epochs.buckets[d])
        if vol:
            recall[d] = sum(o.count for o in epochs.buckets[d] if o.key in psets[d].keys) / vol
    days: list[_Day] = []
    for d in targets:
        # As `predict` measures it: only epochs with a week of history before them count; until there are
        # some, the model's own estimate.
        past = [recall[t] for t in range(max(MIN_HISTORY, d - 7), d) if t in recall]
        rho = sum(past) / len(past) if past else psets[d].rho_estimate
        origin = epochs.start_of(d)
        days.append(_Day(d, origin.date().isoformat() if epochs.hours == 24 else origin.isoformat(), origin,
                         _prediction(psets[d], planner, options.stream_length, rho), rho, per_epoch[d]))
    runs_per_day = len(options.epsilons) * (2 if options.without_p else 1)
    if total is not None:
        total(sum(len(day.statements) for day in days) * runs_per_day)
    t1 = time.perf_counter()

    # Exact work, shared by every run: all distinct queries of the replayed statements and every marginal
    # of every day's P, read in a few batched passes before anything is replayed.
    base = replace(settings, epoch="manual", epoch_seconds=None, progress=False, split=options.split or settings.split)
    exact.prefetch(catalog, [q for day in days for r in day.statements if r.plan is not None for q in r.plan.queries],
                   {(k[0], k[1]) for day in days for k in p_workloads(catalog, day.prediction.queries,
                                                                       base.mm_max_cells)})
    t2 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="lapras-whatif-") as tmp:
        # Strategies depend on P only: on disk, workers share what one of them optimised.
        rp = _Replay(catalog, base, exact, options, kinds, StrategyCache(path=Path(tmp) if options.workers > 1 else None))
        runs: list[EpochRun] = []
        hits = misses = 0
        for day_runs, (h, m) in _map_days(rp, days):
            runs.extend(day_runs)
            hits, misses = hits + h, misses + m
            if on_step is not None:
                on_step(len(day_runs[0].outcomes) * len(day_runs) if day_runs else 0)
    timings = {"plan_and_predict_s": round(t1 - t0, 2), "exact_s": round(t2 - t1, 2),
               "replay_s": round(time.perf_counter() - t2, 2)}
    return WhatIfResult(runs, options.epoch_hours, skipped, (hits, misses),
                        (exact.marginal_fetches, exact.answer_fetches), timings)


def _map_days(rp: _Replay, days: list[_Day]) -> Iterator[tuple[list[EpochRun], tuple[int, int]]]:
    """Replay the days in ``rp.options.workers`` processes (forked: they share everything read so far), in
    order; in this process when one worker is asked for, or fork is unavailable."""
    global _SHARED
    workers = min(rp.options.workers, len(days))
    if workers <= 1 or "fork" not in mp.get_all_start_methods():
        _ENGINES.clear()
        try:
            for day in days:
                yield _replay_day(day, rp)
        finally:
            _ENGINES.clear()
        return
    # A forked worker must not share the parent's database connection: it opens its own if it needs one.
    rp.exact.disconnect()
    _SHARED = rp
    try:
        with mp.get_context("fork").Pool(workers) as pool:
            # Contiguous chunks: consecutive days mostly repeat P's strategies, kept per process.
            yield from pool.imap(_replay_day, days, chunksize=max(1, math.ceil(len(days) / (2 * workers))))
    finally:
        _SHARED = None
