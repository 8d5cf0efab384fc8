"""The query handler: an aggregate statement's plan, step by step, then the engine's (noisy) answer as rows.

``Planner.prepare`` returns the next step of a statement's plan: the plan itself; a DP partition selection
the engine runs (or replays) first, after which the plan is completed over the keys it released; or
Superset's series limit, answered as two DP statements (``parser.plan.series``). Nothing here draws noise or
spends budget: the engine does, when asked for an answer.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping, Sequence

import numpy as np

from lapras.errors import BudgetExhausted
from parser.analysis.probe import NO_ROWS
from parser.plan.series import SeriesLimit
from parser.planner import Planner, PlanStep, Selection, SeriesStep
from parser.semantics import session_zone
from pgcore.errors import Refusal

from ..config import Config
from .commands import QueryCommand, RegressionCommand
from .notices import TRUE, interval_notices, selection_notice, stderr_notice
from .planning import Planners
from .protocols import AnsweringEngine
from .service_api import ColumnDesc, QueryResult
from .timeout import deadline_of, read_in_thread

log = logging.getLogger("lapras.service")

Query = QueryCommand | RegressionCommand
"""A statement planned as a query (a regression command whose text holds no call is one)."""


class QueryHandler:
    """Plans and answers aggregate statements over protected tables."""

    def __init__(self, config: Config, engine: AnsweringEngine, planners: Planners) -> None:
        self.config = config
        self.engine = engine
        self.planners = planners

    def describe(self, command: Query, param_oids: Sequence[int]) -> tuple[list[int], list[ColumnDesc]]:
        # Describe has no session settings: the server's statement timeout bounds its planning.
        planner = self.planners.planner
        deadline = time.monotonic() + self.config.server.statement_timeout_s
        sql = command.sql
        try:
            d = planner.describe(sql, deadline=deadline, trees=command.parsed.take(), declared=param_oids)
        except Refusal:
            split = planner.series_split(sql)
            if split is None:
                raise
            d = planner.describe(split.outer([]), deadline=deadline)  # the shape is the outer query's
        params = list(d.param_types)
        for i, oid in enumerate(param_oids[: len(params)]):
            if oid:
                params[i] = oid
        return params, [ColumnDesc(c.name, c.type_oid) for c in d.columns]

    async def execute(self, command: Query, params: Sequence[object | None], user: str,
                      settings: Mapping[str, str], param_oids: Sequence[int] = ()) -> QueryResult:
        sql = command.sql
        t0 = time.perf_counter()
        planner = self.planners.planner
        trees = command.parsed.take()  # the router's trees: this planning's, or nobody's
        step: PlanStep | None = planner.cached_plan(sql, params or None, param_oids)
        selection = None
        deadline = deadline_of(self.config, settings)
        if step is None:
            # Planning a new text is bounded by the statement's deadline and work limits, and runs off the
            # event loop so a hard statement never stalls other clients while it is planned or refused.
            step = await asyncio.to_thread(planner.prepare, sql, params or None,
                                           deadline=deadline, trees=trees,
                                           declared=param_oids)
        if isinstance(step, SeriesStep):
            return await self._series_limited(step.split, user, settings)
        if isinstance(step, Selection):
            # Private keys or a filtered value list: the engine selects (or replays) the released keys,
            # charged to the partition part, then the plan is completed over them like any other.
            if self.engine.partition_cost() is None:
                raise step.refusal  # no partition budget: refused as before, saying how to turn it on
            selection = await read_in_thread(deadline, self.engine.select_partition, step.request)
            step = await asyncio.to_thread(self.planners.complete, planner, step, selection, sql, params,
                                           deadline_of(self.config, settings), param_oids)
        plan = step
        # Repeats and free answers come from memory without a thread hop: the hot path stays lean.
        answer = self.engine.lookup(plan)
        if answer is None:
            try:
                answer = await read_in_thread(deadline, self.engine.answer, plan, user)
            except BudgetExhausted:
                self._record(sql, params, "refused")  # demand the allocation counts (S), unanswered
                raise
        self._record(sql, params, answer.outcome)
        rows = plan.rows(answer.values, answer.stderrs)
        notices = []
        if NO_ROWS in plan.template.groups:
            notices.append("lapras: a row-level read of a protected table returns its columns and no row "
                           "(answered for tools that probe a query's shape; nothing was read or spent)")
        if settings.get("lapras.show_stderr", "off").lower() in TRUE:
            if selection is not None:
                notices.append(selection_notice(selection))
            notices.append(stderr_notice(plan, answer))
            notices.extend(interval_notices(plan, answer))
        log.debug("answered %s in %.2f ms", plan.table, (time.perf_counter() - t0) * 1e3)
        return QueryResult([ColumnDesc(c.name, c.type_oid) for c in plan.columns], rows,
                           f"SELECT {len(rows)}", notices, outcome=answer.outcome,
                           query_keys=tuple(q.key for q in plan.queries),
                           cost=answer.cost.to_json() if answer.cost is not None else None)

    def _record(self, sql: str, params: Sequence[object | None], outcome: str) -> None:
        """The statement into the engine's history (P and S are learnt from it; no value is recorded)."""
        # With the session's zone: learning plans it again as it was asked (Berlin's days, not UTC's).
        zone = session_zone.current()
        self.engine.record_statement(sql, params or None, outcome, zone.text if zone is not None else None)

    async def _series_limited(self, split: SeriesLimit, user: str, settings: Mapping[str, str]) -> QueryResult:
        """Superset's series limit as two DP statements: the top-N subquery (noisy totals), then the query
        restricted to the N series it released (see parser.plan.series). Both are planned before the first is
        charged, the second over placeholder series of the first's shape: a chart refused for either part
        charges nothing."""
        await asyncio.to_thread(_plan_series_limit, self.planners.planner, split,
                                deadline_of(self.config, settings))
        top = await self.execute(QueryCommand(split.inner), (), user, settings)
        keys = [tuple(r[: split.n_keys]) for r in top.rows]
        main = await self.execute(QueryCommand(split.outer(keys)), (), user, settings)
        note = (f"lapras: series limit: {len(keys)} series chosen from noisy totals by a separate DP statement "
                "(charged like any statement; repeated free)")
        return QueryResult(main.columns, main.rows, main.command_tag, [*top.notices, note, *main.notices],
                           outcome=main.outcome, query_keys=top.query_keys + main.query_keys, cost=main.cost)


def _plan_series_limit(planner: Planner, split: SeriesLimit, deadline: float) -> None:
    """Raise the refusal either part of a series-limited statement would meet, reading nothing: the outer
    part is planned over the series the top-N part would list if every total were 0 (the same key columns
    and types as the released ones). A top-N part over private keys is planned after its selection, as any
    statement."""
    inner = planner.prepare(split.inner, None, deadline=deadline, series=False)
    if isinstance(inner, Selection):
        return
    assert not isinstance(inner, SeriesStep)
    placeholder = [tuple(r[: split.n_keys]) for r in inner.rows(np.zeros(len(inner.queries)))]
    planner.prepare(split.outer(placeholder), None, deadline=deadline, series=False)
