"""The stream answerer: one statement, one stream item.

Repeats are served from the stored answers (no spend, no stream item); zero queries are exactly 0; the
rest go through four steps: *calibrate* (the queries' noise scale, their free estimates from P's release,
the exact answers and the unit noise, all before the ledger's lock), *decide* (the online policy
classifies the statement under the epoch's lock: good statements are answered from the MM release / free
estimates, bad ones get ONE Gaussian release over their unanswered queries, paid by the allocation rule),
*release* (the noise scaled to the grant, combined with free estimates by inverse-variance weighting) and
*commit* (spend, release and answers durably recorded before the answer is returned). After the stop a
statement is answered from free estimates or refused with SQLSTATE 53400. ``preview`` and ``explain``
state the same errors from public quantities only (EXPLAIN)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import NoReturn

import numpy as np

from lapras.errors import BudgetExhausted, StatementInterrupted
from lapras.ledger.base import EpochRecord, EpochTxn, ReleaseRecord, StaleEpoch, StoredAnswer
from lapras.matrix_mechanism import MMRelease
from lapras.online import Decision, OnlinePolicy, combine
from lapras.outcomes import Outcome, QueryOutcome
from lapras.read_guard import armed_reads
from parser.model.linear import LinearQuery
from parser.model.schema import TableSchema

from .calibrate import Sensitivity, calibration, free_estimates
from .keeper import EpochKeeper
from .selector import PartitionSelector
from .statements import Answer, Preview, Statement, check_planned_over, pick, protected_table, table_of


@dataclass
class _Asked:
    """A statement calibrated in the epoch it is answered in: its queries (clamped SUMs carrying their
    noise scale as their sensitivity), the positions still to answer, their free estimates."""

    ep: EpochRecord
    mm: MMRelease | None
    policy: OnlinePolicy
    table: TableSchema  # as the exact answers read it (automatic per-group bounds included)
    queries: list[LinearQuery]
    todo: list[int]
    sensitivity: Sensitivity
    sens_todo: float  # the sensitivity of every query in ``todo`` (bounded by the work limit)
    free: np.ndarray
    free_var: np.ndarray
    predicted: bool  # every query to answer is in P


@dataclass
class _Open:
    """The queries of ``_Asked.todo`` not stored by another worker meanwhile (``keep``: their indices
    within todo), in normalised units: each row divided by its own sensitivity ``scale``."""

    keep: list[int]
    sub: list[LinearQuery]
    free: np.ndarray
    free_var: np.ndarray
    scale: np.ndarray
    sensitivity_of: Callable[[np.ndarray], float]


class StreamAnswerer:
    """Answers statements in the keeper's current epoch; thread-safe (the ledger's lock orders items)."""

    def __init__(self, epochs: EpochKeeper, selector: PartitionSelector) -> None:
        self.epochs = epochs
        self.selector = selector

    def lookup(self, plan: Statement) -> Answer | None:
        """Repeat of already answered queries: the stored answer from memory, no spend (well under 1 ms)."""
        vals, errs = [], []
        cache = self.epochs.answers
        for q in plan.queries:
            hit = cache.get(q.key)
            if hit is None:
                if not q.is_zero:
                    return None
                hit = (0.0, 0.0)
            vals.append(hit[0])
            errs.append(hit[1])
        return Answer(np.array(vals), np.array(errs), (QueryOutcome.REPEAT,) * len(vals), Outcome.REPEAT)

    def answer(self, plan: Statement, user: str = "") -> Answer:
        """Answer one statement; raises BudgetExhausted (53400) when it cannot be answered."""
        epochs = self.epochs
        epochs.maybe_roll()
        hit = self.lookup(plan)
        if hit is not None:
            return hit
        if epochs.mm_pending and epochs.pending_keys and all(
                q.is_zero or q.key in epochs.pending_keys or q.key in epochs.answers for q in plan.queries):
            # P's release is on its way: a predicted statement waits for it (bounded), then is answered
            # fresh from the stream's parts (the release's share stays reserved either way).
            epochs.wait_for_release(epochs.settings.mm_wait)
            hit = self.lookup(plan)
            if hit is not None:
                return hit
        for _ in range(3):
            try:
                return self._answer(plan, user)
            except StaleEpoch:
                epochs.readopt()
        raise StaleEpoch("the epoch changed three times while answering")

    def _answer(self, plan: Statement, user: str) -> Answer:
        """Calibrate, then decide, release and commit one stream item under the epoch's lock."""
        asked = self._calibrate(plan)
        ep = asked.ep
        if ep.id in self.epochs.stopped and not np.isfinite(asked.free_var).all():
            replayed = self._after_stop(plan, asked)
            if replayed is not None:
                return replayed
        todo, queries = asked.todo, asked.queries
        need_exact = not (asked.predicted and np.isfinite(asked.free_var).all())
        with armed_reads() as guard:
            try:
                exact = (self.epochs.exact.answers(asked.table, [queries[i] for i in todo])
                         if need_exact and todo else None)
            except StatementInterrupted:
                if guard is not None and guard.read_started:
                    self._charge_unreleased(asked)
                raise
        # Unit noise is drawn ahead (it does not depend on the grant), so the lock only scales it.
        unit = self.epochs.mechanism.draw(len(todo)) if exact is not None else None
        # A read that ended is committed (charged and stored) even when its client stopped waiting: a retry
        # is then a free repeat.
        recs: list[StoredAnswer] = []
        with self.epochs.ledger.locked(ep.id) as tx:
            open_ = self._still_open(tx, asked)
            if open_ is None:
                return self._replayed(plan)
            d = self._decide(tx, asked, open_)
            # Raising inside the block would roll the stopping item back: refuse once the lock is left.
            if d.outcome == Outcome.REFUSED:
                if not tx.epoch.state.stopped:
                    tx.commit_item(d.state, None, [])  # the item that stops the stream is recorded
            else:
                values, var, release = self._release(d, open_, exact, unit)
                recs = self._commit(tx, d, open_, values, var, release, user)
                if d.state.stopped:
                    self.epochs.stopped.add(ep.id)
        if d.outcome == Outcome.REFUSED:
            self.epochs.stopped.add(ep.id)
            _refuse(ep.id, d.state.n)
        for r in recs:
            self.epochs.answers[r.key] = (r.value, r.stderr)
        base = self.lookup(plan)
        assert base is not None
        per = {r.key: QueryOutcome(r.outcome) for r in recs}
        outcomes = tuple(QueryOutcome.ZERO if q.is_zero else per.get(q.key, QueryOutcome.REPEAT) for q in queries)
        return Answer(base.values, base.stderrs, outcomes, d.outcome, d.cost, d.state.n,
                      predicted=d.outcome == Outcome.GOOD and asked.predicted and asked.mm is not None)

    def _charge_unreleased(self, asked: _Asked) -> None:
        """Charge the grant a statement whose upstream read began and was stopped (57014) would have had,
        with nothing released or stored (``lapras.read_guard``): the read's duration, which decides between
        an answer and 57014, is then paid for like an answer, and a retry is charged again."""
        with self.epochs.ledger.locked(asked.ep.id) as tx:
            open_ = self._still_open(tx, asked)
            if open_ is None:
                return
            d = self._decide(tx, asked, open_)
            if d.outcome == Outcome.REFUSED:
                if not tx.epoch.state.stopped:
                    tx.commit_item(d.state, None, [])
                return
            if d.outcome != Outcome.BAD:
                return  # answered from free estimates alone: no read was needed for it
            assert d.cost is not None
            fresh = pick(open_.sub, d.fresh)
            sens = open_.sensitivity_of(d.fresh)
            mech = self.epochs.mechanism.calibrate(d.cost, sens, len(fresh))
            tx.commit_item(d.state, ReleaseRecord("fresh", d.cost, d.grant.total, mech.name, mech.params, sens,
                                                  d.state.n, {"pool": d.grant.pool, "reserve": d.grant.reserve},
                                                  {"keys": [q.key for q in fresh], "unreleased": True}), [])

    def _calibrate(self, plan: Statement) -> _Asked:
        """The statement's queries as their noise is scaled in the current epoch, and their free estimates;
        a statement too large is refused here (54000), before any exact work or any write."""
        epochs = self.epochs
        with epochs.lock:  # one epoch's state: its release and its cells together
            ep, mm, policy, catalog = epochs.epoch, epochs.mm, epochs.policy, epochs.catalog
        assert ep is not None
        table = protected_table(plan, catalog)
        check_planned_over(plan, catalog)
        queries = list(plan.queries)
        todo = [i for i, q in enumerate(queries) if not q.is_zero and q.key not in epochs.answers]
        # A "max_sum_per_group = auto" bound this statement clamps with: chosen (and charged) once per epoch
        # here, before this statement's own decision; stored, so every later statement reads the same B.
        table = self.selector.auto_bounded(ep.id, table, [queries[i] for i in todo], charge=True)
        # (Clamped SUMs carry their noise scale as their sensitivity from here on; keys are unchanged.)
        effective, sensitivity = calibration(epochs.exact, table, [queries[i] for i in todo])
        for i, q in zip(todo, effective, strict=True):
            queries[i] = q
        sens_todo = sensitivity(effective, epochs.settings.max_statement_work)
        free, free_var = free_estimates(table, [queries[i] for i in todo], mm, queries)
        predicted = all(queries[i].key in epochs.pkeys for i in todo)
        return _Asked(ep, mm, policy, table, queries, todo, sensitivity, sens_todo, free, free_var, predicted)

    def _after_stop(self, plan: Statement, asked: _Asked) -> Answer | None:
        """The stream stopped for good: a query with neither a stored answer (another process may have
        released it) nor a free estimate is refused, before any exact aggregate or any write; a statement
        all stored is replayed; None: every query left has a free estimate (answered as usual)."""
        ep, queries, todo = asked.ep, asked.queries, asked.todo
        with self.epochs.ledger.locked(ep.id) as tx:
            stored = tx.find([queries[i].key for i in todo])
            position = tx.epoch.state.n  # the ledger's (this process's copy is as of its adoption)
        for k, a in stored.items():
            self.epochs.answers[k] = (a.value, a.stderr)
        if any(queries[i].key not in stored and not np.isfinite(v) for i, v in zip(todo, asked.free_var, strict=True)):
            _refuse(ep.id, position)
        if all(queries[i].key in stored for i in todo):
            return self._replayed(plan)
        return None

    def _replayed(self, plan: Statement) -> Answer:
        again = self.lookup(plan)
        assert again is not None
        return again

    def _still_open(self, tx: EpochTxn, asked: _Asked) -> _Open | None:
        """Under the lock: the queries no other worker has stored meanwhile (None: all were)."""
        queries, todo = asked.queries, asked.todo
        stored = tx.find([queries[i].key for i in todo])
        for k, a in stored.items():
            self.epochs.answers[k] = (a.value, a.stderr)
        keep = [j for j, i in enumerate(todo) if queries[i].key not in stored]
        if not keep:
            return None
        sub = [queries[todo[j]] for j in keep]
        # Each row is released as (row / its own sensitivity) + noise at the calibrated scale, i.e.
        # with noise scaled by s_i: a COUNT next to a SUM keeps count-sized noise instead of the SUM's.
        # The policy works in these normalised units; the sensitivity is the normalised matrix's.
        scale = np.array([q.sensitivity for q in sub], dtype=np.float64)

        def sensitivity_of(mask: np.ndarray) -> float:
            if len(sub) == len(todo) and mask.all():
                return asked.sens_todo
            # A subset of the statement (bounded by the statement's own work, already checked), over
            # the same bounded rows: each query still in its group's block.
            return asked.sensitivity(pick(sub, mask), None)

        return _Open(keep, sub, asked.free[keep], asked.free_var[keep], scale, sensitivity_of)

    def _decide(self, tx: EpochTxn, asked: _Asked, open_: _Open) -> Decision:
        """The online policy's decision for the open queries, from the epoch's state under the lock."""
        return asked.policy.decide(tx.epoch.state, predicted=asked.predicted, free_var=open_.free_var / open_.scale**2,
                                   sensitivity_of=open_.sensitivity_of)

    def _release(self, d: Decision, open_: _Open, exact: np.ndarray | None,
                 unit: np.ndarray | None) -> tuple[np.ndarray, np.ndarray, ReleaseRecord | None]:
        """Values and variances of the open queries: a bad statement's fresh ones released now (the unit
        noise scaled to the grant) and combined with their free estimates; the rest their free estimates."""
        values, var = open_.free.copy(), open_.free_var.copy()
        if d.outcome != Outcome.BAD:
            return values, var, None
        assert exact is not None and unit is not None and d.cost is not None
        keep, scale = open_.keep, open_.scale
        fresh = pick(open_.sub, d.fresh)
        sens = open_.sensitivity_of(d.fresh)
        mech = self.epochs.mechanism.calibrate(d.cost, sens, len(fresh))
        noisy = mech.release(exact[keep][d.fresh], scale[d.fresh], unit[keep][d.fresh])
        values[d.fresh], var[d.fresh] = combine(noisy, mech.variance(scale[d.fresh]), open_.free[d.fresh],
                                                open_.free_var[d.fresh])
        release = ReleaseRecord("fresh", d.cost, d.grant.total, mech.name, mech.params, sens, d.state.n,
                                {"pool": d.grant.pool, "reserve": d.grant.reserve},
                                {"keys": [q.key for q in fresh]})
        return values, var, release

    @staticmethod
    def _commit(tx: EpochTxn, d: Decision, open_: _Open, values: np.ndarray, var: np.ndarray,
                release: ReleaseRecord | None, user: str) -> list[StoredAnswer]:
        """The stream item, its release and its answers, committed durably (before the answer leaves)."""
        outs = [QueryOutcome.FRESH if d.outcome == Outcome.BAD and d.fresh[j] else QueryOutcome.FREE
                for j in range(len(open_.sub))]
        recs = [StoredAnswer(q.key, float(values[j]), float(math.sqrt(var[j])), outs[j].value, d.state.n)
                for j, q in enumerate(open_.sub)]
        tx.commit_item(d.state, release, recs, user)
        return recs

    def preview(self, plan: Statement) -> Preview:
        """The standard error each of ``plan``'s queries would be answered with if it ran now, from public
        quantities only (the allocation state, the calibration, the queries' sensitivities, stored answers'
        and free estimates' standard errors): nothing is read, drawn or charged (for EXPLAIN)."""
        epochs = self.epochs
        ep, mm, policy, catalog = epochs.epoch, epochs.mm, epochs.policy, epochs.catalog
        assert ep is not None
        table = protected_table(plan, catalog)
        queries = list(plan.queries)
        cache = epochs.answers
        errs = np.zeros(len(queries))
        stored = np.array([q.is_zero or q.key in cache for q in queries])
        for i, q in enumerate(queries):
            if not q.is_zero and q.key in cache:
                errs[i] = cache[q.key][1]
        todo = [i for i in range(len(queries)) if not stored[i]]
        if not todo:
            return Preview(errs, stored, Outcome.REPEAT)
        # Calibrated as the answer path does (per-group bounds and clamped SUMs included), so the stated
        # error is the one the answer will have (an automatic bound not chosen yet: unclamped).
        table = self.selector.auto_bounded(ep.id, table, [queries[i] for i in todo], charge=False)
        sub, sensitivity = calibration(epochs.exact, table, [queries[i] for i in todo])
        sens = sensitivity(sub, epochs.settings.max_statement_work)
        _, free_var = free_estimates(table, sub, mm)
        scale = np.array([q.sensitivity for q in sub], dtype=np.float64)

        def sensitivity_of(mask: np.ndarray) -> float:
            return sens if mask.all() else sensitivity(pick(sub, mask), None)

        d = policy.decide(epochs.state_now(ep), predicted=all(q.key in epochs.pkeys for q in sub),
                          free_var=free_var / scale**2, sensitivity_of=sensitivity_of)
        var = free_var.copy()
        if d.outcome == Outcome.REFUSED:
            var[~np.isfinite(var)] = np.nan
        elif d.outcome == Outcome.BAD:
            assert d.cost is not None
            mech = epochs.mechanism.calibrate(d.cost, sensitivity_of(d.fresh), int(d.fresh.sum()))
            _, var[d.fresh] = combine(np.zeros(int(d.fresh.sum())), mech.variance(scale[d.fresh]),
                                      np.zeros(int(d.fresh.sum())), free_var[d.fresh])
        errs[todo] = np.sqrt(var)
        return Preview(errs, stored, d.outcome)

    def explain(self, plan: Statement) -> dict[str, object]:
        """Whether a statement would be answered from P (the epoch's matrix-mechanism release) and how
        accurately, with the strategy's per-query RMSE against the SVD lower bound: nothing is read,
        drawn or charged (for EXPLAIN)."""
        epochs = self.epochs
        with epochs.lock:
            mm, pkeys, catalog, source = epochs.mm, epochs.pkeys, epochs.catalog, epochs.p_source
        queries = [q for q in plan.queries if not q.is_zero]
        table = table_of(plan, catalog)
        predicted = bool(queries) and mm is not None and table is not None and all(q.key in pkeys for q in queries)
        info: dict[str, object] = {"predicted": predicted, "source": source}
        if not predicted or mm is None or table is None:
            return info
        _, var = free_estimates(table, queries, mm, queries)
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

    def fresh_statements_left(self, cap: int = 100_000) -> int:
        """How many more fresh (bad) statements the epoch's allocation would grant budget to, from its
        state now (public: the allocation rule and the spend so far)."""
        ep = self.epochs.epoch
        if ep is None:
            return 0
        policy = self.epochs.policy
        state, n = self.epochs.state_now(ep), 0
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


def _refuse(epoch_id: int, position: int) -> NoReturn:
    raise BudgetExhausted(
        "privacy budget of the current epoch exhausted",
        detail=f"epoch {epoch_id}: the stream stopped at statement {position}; no free estimate covers "
               "this query",
        hint="repeat a query already answered, or wait for the next epoch")
