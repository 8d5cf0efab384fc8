"""The DP query service behind the protocol: SQL -> parser plan -> LAPRAS engine -> result rows.

It implements `proxy.dp.service_api.QueryService`. It knows nothing of sockets and does no privacy
arithmetic itself: the parser shapes queries and rows, the engine decides noise and spends budget.
"""

from __future__ import annotations

import asyncio
import logging
import math
import re
import threading
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import psycopg

import parser as sqlparser
from lapras.engine import StalePlan
from lapras.errors import BudgetExhausted, LaprasError
from lapras.ledger.base import PartitionRecord
from lapras.mechanisms import Cost
from parser.analysis.probe import NO_ROWS
from parser.bind.partition import NeedsPartition, PartitionRequest, selected_catalog, selected_table
from parser.bind.splits import describe as split_lines
from parser.model.schema import Catalog
from parser.plan.queryplan import QueryPlan
from parser.plan.series import SeriesLimit, series_limit
from pgcore.identifiers import display_ident, qualified
from pgcore.pgtypes import INT8, TEXT
from pgcore.sqlstate import SqlError

from ..config import Config
from ..statements.sqltext import duration_ms
from .budget_view import budget_rows
from .service_api import ColumnDesc, QueryResult

log = logging.getLogger("lapras.service")

_TRUE = {"on", "true", "1", "yes"}
MAX_SELECTED_PLANNERS = 256


class ServiceError(SqlError):
    """A refusal raised by the service itself (unknown lapras.* object and the like)."""

    def __init__(self, sqlstate: str, message: str, hint: str | None = None) -> None:
        super().__init__(sqlstate, message, hint=hint)


def _show_target(sql: str) -> str | None:
    words = sql.strip().rstrip(";").split()
    if len(words) == 2 and words[0].upper() == "SHOW" and words[1].lower().startswith("lapras."):
        return words[1].lower()
    return None


BUDGET_COLUMNS = [ColumnDesc("key", TEXT), ColumnDesc("value", TEXT)]
EPOCH_COLUMNS = [ColumnDesc("new_epoch", INT8)]
EXPLAIN_COLUMNS = [ColumnDesc("QUERY PLAN", TEXT)]
_EXPLAIN = re.compile(r"^\s*explain\s+(?P<stmt>(?:select|with)\b.*)$", re.I | re.S)
_NEW_EPOCH = re.compile(r"^\s*select\s+(?:\*\s+from\s+)?lapras\s*\.\s*new_epoch\s*\(\s*\)\s*;?\s*$", re.I)


class DPService:
    """Answers statements over protected tables through the LAPRAS engine."""

    def __init__(self, config: Config, engine: Any, regression: Any | None = None) -> None:
        self.config = config
        self.catalog = config.catalog
        self.planner = sqlparser.Planner(config.catalog)  # owns the parse and plan caches
        self.engine = engine
        self.regression = regression
        self._selected: dict[str, sqlparser.Planner] = {}
        self._selected_lock = threading.Lock()

    @classmethod
    def open(cls, config: Config, upstream_dsn: str, state_dir: Path | None = None) -> DPService:
        """Connect the engine (ledger + exact answers) to the upstream database; epochs are prepared by
        the engine's own thread, so opening never waits for the matrix mechanism."""
        from .engine_factory import build_engine, build_regression

        engine = build_engine(config, upstream_dsn, background=True, state_dir=state_dir)
        return cls(config, engine, build_regression(config, upstream_dsn, engine))

    def close(self) -> None:
        close = getattr(self.engine, "close", None)
        if close is not None:
            close()

    # ------------------------------------------------------------------------------------- describe

    def _follow_catalog(self) -> None:
        """Plan over the engine's current catalog: an epoch fixes its ``values_from`` lists, so a new epoch
        may bring new text domains. Statements already planned finish on the old planner; the engine
        refuses a plan whose lists are not its epoch's (StalePlan), and ``execute`` plans it again."""
        catalog = getattr(self.engine, "catalog", None)
        if catalog is None or catalog is self.catalog:
            return
        with self._selected_lock:
            if catalog is not self.catalog:
                self.planner = sqlparser.Planner(catalog)
                self._selected = {}  # selected-keys planners were built over the old catalog
                self.catalog = catalog
                log.info("the epoch's value lists changed: planning over its catalog")

    def describe(self, sql: str, param_oids: Sequence[int]) -> tuple[list[int], list[ColumnDesc]]:
        self._follow_catalog()
        target = _show_target(sql)
        if target is not None:
            return [], self._show_columns(target)
        if self.regression is not None and self.regression.matches(sql):
            return self.regression.describe(sql)
        if _NEW_EPOCH.match(sql):
            return [], list(EPOCH_COLUMNS)
        explain = _EXPLAIN.match(sql)
        if explain is not None:
            d = self.planner.describe(explain["stmt"], deadline=time.monotonic() + self.config.server.statement_timeout_s)
            return list(d.param_types), list(EXPLAIN_COLUMNS)
        # Describe has no session settings: the server's statement timeout bounds its planning.
        deadline = time.monotonic() + self.config.server.statement_timeout_s
        try:
            d = self.planner.describe(sql, deadline=deadline)
        except sqlparser.Refusal:
            split = series_limit(sql, self.catalog)
            if split is None:
                raise
            d = self.planner.describe(split.outer([]), deadline=deadline)  # the shape is the outer query's
        params = list(d.param_types)
        for i, oid in enumerate(param_oids[: len(params)]):
            if oid:
                params[i] = oid
        return params, [ColumnDesc(c.name, c.type_oid) for c in d.columns]

    # -------------------------------------------------------------------------------------- execute

    async def execute(self, sql: str, params: Sequence[object | None], user: str,
                      settings: Mapping[str, str]) -> QueryResult:
        try:
            for _ in range(2):
                self._follow_catalog()
                try:
                    return await self._execute(sql, params, user, settings)
                except StalePlan:
                    continue  # planned just before the epoch changed its value lists: plan it again
            self._follow_catalog()
            return await self._execute(sql, params, user, settings)
        except psycopg.OperationalError:
            # The upstream is down or restarting: nothing was answered; the client may retry.
            raise ServiceError("57P03", "the upstream database is not available; nothing was answered",
                               hint="retry when the database is back") from None
        except psycopg.Error as exc:
            # Never relay the upstream's message: it could quote data. Log it for the operator.
            log.error("upstream error while answering: %s", exc)
            raise ServiceError("XX000", "the upstream database failed to answer; nothing was released") from None

    async def _execute(self, sql: str, params: Sequence[object | None], user: str,
                       settings: Mapping[str, str]) -> QueryResult:
        target = _show_target(sql)
        if target is not None:
            return await asyncio.to_thread(self._show, target, user)
        if self.regression is not None and self.regression.matches(sql):
            return await asyncio.to_thread(self.regression.execute, sql, user)
        if _NEW_EPOCH.match(sql):
            return await asyncio.to_thread(self._new_epoch, user)
        explain = _EXPLAIN.match(sql)
        if explain is not None:
            return await asyncio.to_thread(self._explain, explain["stmt"], params, settings)
        t0 = time.perf_counter()
        plan = self.planner.cached_plan(sql, params or None)
        selection = None
        if plan is None:
            # Planning a new text is bounded by the statement's deadline and work limits, and runs off the
            # event loop so a hard statement never stalls other clients while it is planned or refused.
            try:
                plan = await asyncio.to_thread(self.planner.plan, sql, params or None,
                                               deadline=self._deadline(settings))
            except NeedsPartition as need:
                # Private keys or a filtered value list: the engine selects (or replays) the released keys,
                # charged to the partition part, then the statement is planned over them like any other.
                if self.engine.partition_cost() is None:
                    raise  # no partition budget: refused as before, saying how to turn it on
                selection = await asyncio.to_thread(self.engine.select_partition, need.request)
                plan = await asyncio.to_thread(self._selected_plan, need.request, selection, sql, params,
                                               self._deadline(settings))
            except sqlparser.Refusal:
                split = None if params else series_limit(sql, self.catalog)
                if split is None:
                    raise
                return await self._series_limited(split, user, settings)
        # Repeats and free answers come from memory without a thread hop: the hot path stays lean.
        answer = self.engine.lookup(plan)
        if answer is None:
            try:
                answer = await asyncio.to_thread(self.engine.answer, plan, user)
            except BudgetExhausted:
                self._record(sql, params, "refused")  # demand the allocation counts (S), unanswered
                raise
        self._record(sql, params, answer.outcome)
        rows = plan.rows(answer.values, answer.stderrs)
        notices = []
        if NO_ROWS in plan.template.groups:
            notices.append("lapras: a row-level read of a protected table returns its columns and no row "
                           "(answered for tools that probe a query's shape; nothing was read or spent)")
        if settings.get("lapras.show_stderr", "off").lower() in _TRUE:
            if selection is not None:
                notices.append(_selection_notice(selection))
            notices.append(_notice(plan, answer))
            notices.extend(_interval_notices(plan, answer))
        log.debug("answered %s in %.2f ms", plan.table, (time.perf_counter() - t0) * 1e3)
        return QueryResult([ColumnDesc(c.name, c.type_oid) for c in plan.columns], rows,
                           f"SELECT {len(rows)}", notices, outcome=answer.outcome,
                           query_keys=tuple(q.key for q in plan.queries),
                           cost=answer.cost.to_json() if answer.cost is not None else None)

    def _record(self, sql: str, params: Sequence[object | None], outcome: str) -> None:
        """The statement into the engine's history (P and S are learnt from it; no value is recorded)."""
        record = getattr(self.engine, "record_statement", None)
        if record is not None:
            record(sql, params or None, outcome)

    def _explain(self, sql: str, params: Sequence[object | None], settings: Mapping[str, str]) -> QueryResult:
        """EXPLAIN of a DP statement: what it measures and what it costs (a partition selection's (epsilon,
        delta) in full); nothing is read, drawn or charged."""
        deadline = self._deadline(settings)
        lines: list[str] = []
        try:
            plan = self.planner.plan(sql, params or None, deadline=deadline)
        except NeedsPartition as need:
            req = need.request
            info = self.engine.explain_partition(req)
            cols = ", ".join(map(display_ident, req.columns))  # names as SQL spells them
            where = qualified(req.schema, req.table)
            lines.append(f"DP partition selection: keys of ({cols}) in {where} under the statement's "
                         f"WHERE (each privacy unit counted in at most {req.max_keys} keys)")
            cost = info.get("cost")
            if isinstance(cost, Cost) and cost.rho is not None and cost.delta is not None:
                eps, delta = cost.eps_delta_view()
                lines.append(f"  cost: rho = {cost.rho:.4g}, delta = {cost.delta:.3g} (approximate zCDP; on its own "
                             f"(epsilon, delta) = ({eps:.4g}, {delta:.3g})), from the epoch's partition budget")
                lines.append(f"  mechanism: Gaussian threshold, sigma = {info['sigma']:.4g}, "
                             f"threshold = {info['threshold']:.0f} units")
            if info.get("stored"):
                lines.append(f"  selected earlier in this epoch: {info['keys']} keys released; reused, no charge")
                record = info["record"]
                assert isinstance(record, PartitionRecord)
                plan = self._selected_plan(req, record, sql, params, deadline)
            elif cost is None:
                lines.append("  off: no partition budget ([privacy] partition_fraction = 0): the statement is refused")
                return QueryResult(list(EXPLAIN_COLUMNS), [(ln,) for ln in lines], f"EXPLAIN {len(lines)}")
            else:
                lines.append("  not selected yet in this epoch: charged once when first run, then reused")
                return QueryResult(list(EXPLAIN_COLUMNS), [(ln,) for ln in lines], f"EXPLAIN {len(lines)}")
        answered = self.engine.lookup(plan) is not None
        n = sum(1 for q in plan.queries if not q.is_zero)
        lines.append(f"DP aggregate over {qualified(plan.schema, plan.table)}: {n} linear queries, "
                     f"{len(plan.group_keys)} groups")
        lines.extend(split_lines(plan.table_schema))  # cells cut at the statement's literals
        explain = getattr(self.engine, "explain", None)
        info = explain(plan) if explain is not None and not answered else {}
        auto = getattr(self.engine, "explain_auto_bounds", None)
        if auto is not None:
            lines.extend(_auto_bound_lines(auto(plan)))
        if answered:
            lines.append("  cost: none, every answer is stored (a repeat)")
        elif info.get("predicted"):
            lines.extend(_predicted_lines(info))
        else:
            lines.append("  cost: a share of the query stream's budget granted when it runs (Gaussian noise; "
                         "repeats free)")
        if not info.get("predicted"):
            lines.extend(self._precision_lines(plan))
        return QueryResult(list(EXPLAIN_COLUMNS), [(ln,) for ln in lines], "EXPLAIN")

    def _precision_lines(self, plan: QueryPlan) -> list[str]:
        """Per output column, the standard error it would be answered with now (engine.preview: public
        quantities only; never a relative error, which would need the exact answer)."""
        preview = getattr(self.engine, "preview", None)
        if preview is None:
            return []
        try:
            pv = preview(plan)
        except LaprasError:
            return []
        if pv.outcome == "refused":
            return ["  precision: none, the epoch's budget is exhausted for fresh answers (the statement is refused "
                    "unless every answer is stored or free)"]
        head = {"repeat": "free: already released", "good": "free: answered from released estimates",
                "bad": "fresh now"}.get(pv.outcome, pv.outcome)
        lines = [f"  precision ({head}): standard error per output column, as it would be answered now"]
        for name, what, lo, hi in plan.column_errors(pv.stderrs):
            err = f"error {lo:.4g}" if math.isclose(lo, hi, rel_tol=1e-6) else f"errors {lo:.4g} .. {hi:.4g}"
            note = {"a tree of counts (order statistic)": " per tree count (its 95% interval is stated with the answer)",
                    "SUM / COUNT": " of the counts and sums it divides (its 95% interval is stated with the answer)",
                    }.get(what, "")
            lines.append(f"    {name}: {what}, standard {err}{note}")
        return lines

    def _selected_plan(self, request: PartitionRequest, selection: PartitionRecord, sql: str,
                       params: Sequence[object | None], deadline: float) -> QueryPlan:
        if request.kind == "cells":
            cells = frozenset(tuple(int(i) for i in k) for k in selection.keys)
            return self.planner.plan_selected(sql, params or None, cells, deadline=deadline)
        return self._selected_planner(request, selection).plan(sql, params or None, deadline=deadline)

    def _selected_planner(self, request: PartitionRequest, selection: PartitionRecord) -> sqlparser.Planner:
        """The planner over the catalog in which the request's column has the selected keys as its domain
        (one per selection; a selection is fixed for its epoch, so its planner's caches stay valid)."""
        ident = f"{request.key}|{selection.cost.to_json()}|{len(selection.keys)}"
        with self._selected_lock:
            planner = self._selected.get(ident)
            if planner is None:
                base = self.catalog.table(request.table, request.schema)
                assert base is not None
                table = selected_table(base, request.columns, selection.keys)
                planner = sqlparser.Planner(selected_catalog(self.catalog, table), cache_bytes=4 << 20)
                self._selected[ident] = planner
                while len(self._selected) > MAX_SELECTED_PLANNERS:
                    self._selected.pop(next(iter(self._selected)))
            return planner

    async def _series_limited(self, split: SeriesLimit, user: str, settings: Mapping[str, str]) -> QueryResult:
        """Superset's series limit as two DP statements: the top-N subquery (noisy totals), then the query
        restricted to the N series it released (see parser.plan.series). Both are planned before the first is
        charged, the second over placeholder series of the first's shape: a chart refused for either part
        charges nothing."""
        await asyncio.to_thread(self._plan_series_limit, split, self._deadline(settings))
        top = await self._execute(split.inner, (), user, settings)
        keys = [tuple(r[: split.n_keys]) for r in top.rows]
        main = await self._execute(split.outer(keys), (), user, settings)
        note = (f"lapras: series limit: {len(keys)} series chosen from noisy totals by a separate DP statement "
                "(charged like any statement; repeated free)")
        return QueryResult(main.columns, main.rows, main.command_tag, [*top.notices, note, *main.notices],
                           outcome=main.outcome, query_keys=top.query_keys + main.query_keys, cost=main.cost)

    def _plan_series_limit(self, split: SeriesLimit, deadline: float) -> None:
        """Raise the refusal either part of a series-limited statement would meet, reading nothing: the
        outer part is planned over the series the top-N part would list if every total were 0 (the same
        key columns and types as the released ones). A top-N part over private keys is planned after its
        selection, as any statement."""
        try:
            inner = self.planner.plan(split.inner, None, deadline=deadline)
        except NeedsPartition:
            return
        placeholder = [tuple(r[: split.n_keys]) for r in inner.rows(np.zeros(len(inner.queries)))]
        try:
            self.planner.plan(split.outer(placeholder), None, deadline=deadline)
        except NeedsPartition:
            return

    def _deadline(self, settings: Mapping[str, str]) -> float:
        """When planning must stop: the session's statement_timeout, capped by server.statement_timeout_s."""
        limit = self.config.server.statement_timeout_s
        ms = duration_ms(settings.get("statement_timeout", "0"))
        return time.monotonic() + (min(limit, ms / 1000.0) if ms > 0 else limit)

    def _new_epoch(self, user: str) -> QueryResult:
        u = self.config.user(user)
        if u is None or not u.admin:
            raise ServiceError("42501", "permission denied for function lapras.new_epoch",
                               hint="only users with admin = true in config.toml may start an epoch")
        ep = self.engine.new_epoch()
        return QueryResult(list(EPOCH_COLUMNS), [(ep.id,)], "SELECT 1",
                           [f"lapras: epoch {ep.id} started by {user}"])

    async def sync_forever(self, every: float = 1.0, metrics: Any = None,
                           on_catalog: Callable[[Catalog], Awaitable[None]] | None = None) -> None:
        """Follow epochs started elsewhere (other workers, the epoch command), roll timed epochs, and
        publish the remaining budget to the metrics. ``on_catalog`` is awaited with the engine's catalog
        whenever an epoch brings other ``values_from`` lists (the shadow catalog's CHECK lists follow)."""
        shown = None
        while True:
            try:
                await asyncio.to_thread(self.engine.sync_epoch)
                catalog = getattr(self.engine, "catalog", None)
                if on_catalog is not None and catalog is not None and catalog is not shown:
                    await on_catalog(catalog)
                    shown = catalog
                if metrics is not None:
                    report = await asyncio.to_thread(self.engine.budget_report)
                    cur = report.get("current") or {}
                    metrics.budget_remaining.set(float(cur.get("remaining", {}).get("epsilon", 0.0)),
                                                 unit="epsilon")
                    metrics.budget_total.set(float(cur.get("budget", {}).get("epsilon", 0.0)), unit="epsilon")
            except Exception as exc:  # the database may be down for a while; keep polling
                log.warning("epoch sync failed: %s", exc)
            await asyncio.sleep(every)

    def _show_columns(self, target: str) -> list[ColumnDesc]:
        if target == "lapras.budget":
            return list(BUDGET_COLUMNS)
        raise ServiceError("42704", f'unrecognized configuration parameter "{target}"',
                           hint="SHOW lapras.budget shows the privacy budget")

    def _show(self, target: str, user: str = "") -> QueryResult:
        cols = self._show_columns(target)
        report = self.engine.budget_report()
        u = self.config.user(user)
        activity: dict[str, float] = {}
        units_to_eps = None
        ledger = getattr(self.engine, "ledger", None)
        epoch = ledger.current_epoch() if ledger is not None else None
        if ledger is not None and epoch is not None:
            activity = ledger.user_activity(epoch.id, user)
            units_to_eps = epoch.spec.budget.eps_delta
        rows = budget_rows(report, activity, admin=bool(u is not None and u.admin), units_to_eps=units_to_eps)
        left = getattr(self.engine, "fresh_statements_left", None)
        if left is not None and rows and rows[0][0] != "epoch":
            # How many more fresh statements the allocation rule grants budget to in this epoch (each gets
            # its own grant whatever its size; repeats and free answers cost nothing and do not count).
            rows.insert(3 if rows[2][0] == "remaining.mu" else 2, ("remaining.fresh_statements", str(left())))
        return QueryResult(cols, rows, f"SELECT {len(rows)}")


NOTICE_ROWS = 8
"""Rows whose standard errors the show_stderr NOTICE lists per column (then "...")."""


def _notice(plan: QueryPlan, answer: Any) -> str:
    """The show_stderr NOTICE: outcome, each aggregate column's standard error per result row (columns in
    the result's order, rows in its order; documented in docs/show_stderr.md), and the statement's cost."""
    parts = []
    for name, errs in plan.output_stderrs(answer.values, answer.stderrs):
        shown = ", ".join("null" if e is None else f"{e:.4g}" for e in errs[:NOTICE_ROWS])
        more = ", ..." if len(errs) > NOTICE_ROWS else ""
        parts.append(f"{display_ident(name)}: {shown}{more}")
    source = " (answered from P: the epoch's matrix-mechanism release of predicted queries, no charge)" \
        if getattr(answer, "predicted", False) else ""
    return f"lapras: outcome={answer.outcome}{source} stderr=[{'; '.join(parts)}] cost={answer.cost_text}"


def _predicted_lines(info: Mapping[str, Any]) -> list[str]:
    """EXPLAIN of a statement in P: answered from the epoch's matrix-mechanism release, how accurately,
    and how the release's strategy compares with the SVD lower bound (Li and Miklau)."""
    errs = ", ".join(f"{e:.4g}" for e in list(info.get("stderr", []))[:8])
    source = f" ({info['source']})" if info.get("source") else ""
    lines = ["  answered from P: the epoch's matrix-mechanism release of the predicted queries" + source,
             f"  cost: none (the release was paid at the epoch's start); stderr=[{errs}]"]
    for g in info.get("groups", []):
        bound = g.get("svd_rmse")
        versus = (f"; SVD lower bound {bound:.4g} (ratio {g['rmse'] / bound:.2f})" if bound else
                  "; SVD lower bound not computed (workload too large)")
        lines.append(f"  strategy over ({', '.join(g['marginal'])}): {g['strategy']}, {g['n_queries']} queries, "
                     f"per-query RMSE {g['rmse']:.4g}{versus}")
    return lines


def _selection_notice(selection: PartitionRecord) -> str:
    c = selection.cost
    eps, delta = c.eps_delta_view()
    return (f"lapras: keys from DP partition selection: {len(selection.keys)} released "
            f"(cost rho={c.rho:.4g}, delta={c.delta:.3g}; alone (epsilon, delta) = ({eps:.4g}, {delta:.3g}); "
            "charged once per epoch for this filter, repeated free)")


def _interval_notices(plan: Any, answer: Any, shown: int = 20) -> list[str]:
    """One line per order statistic (MIN, MAX, median, percentiles) and group: its 95% interval."""
    lines = []
    for name, key, est, lo, hi in plan.intervals(answer.values, answer.stderrs)[:shown]:
        group = f" group ({', '.join(map(str, key))})" if key else ""
        span = f"95% interval [{lo}, {hi}]" if lo is not None else "no interval"
        lines.append(f"lapras: {name}{group} = {est}: {span}")
    return lines + [f"lapras: {note}" for note in plan.interval_notes()]


def flatten(tree: Mapping[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    """Nested report -> (dotted key, value) pairs, in report order."""
    out: list[tuple[str, Any]] = []
    for k, v in tree.items():
        if isinstance(v, Mapping):
            out.extend(flatten(v, f"{prefix}{k}."))
        else:
            out.append((f"{prefix}{k}", v))
    return out


def _fmt(v: object) -> str:
    if isinstance(v, float):
        return f"{v:.6g}"
    return "" if v is None else str(v)


def open_ledger_report(cfg: Config, upstream_dsn: str) -> dict[str, Any]:
    """Budget report for the operator CLI, read from the ledger without starting a server."""

    from lapras.ledger.postgres import PostgresLedger
    from lapras.report import budget_report

    ledger = PostgresLedger(upstream_dsn)
    try:
        return budget_report(ledger)
    finally:
        ledger.close()


def start_new_epoch(cfg: Config, upstream_dsn: str, state_dir: Path | None = None) -> dict[str, Any]:
    """Close the current epoch and open a new one (admin command; strategies from the state dir's store)."""
    from .engine_factory import build_engine

    engine = build_engine(cfg, upstream_dsn, state_dir=state_dir)
    try:
        ep = engine.new_epoch()
        from lapras.report import epoch_report

        return epoch_report(ep)
    finally:
        engine.close()


__all__ = ["DPService", "LaprasError", "ServiceError", "open_ledger_report", "start_new_epoch"]


def _auto_bound_lines(items: Sequence[Mapping[str, object]]) -> list[str]:
    """EXPLAIN's lines for the automatic per-group SUM bounds (``max_sum_per_group = "auto"``) a statement
    clamps with: the epoch's B once chosen, else what choosing it at first use costs."""
    lines = []
    for item in items:
        col, rec, cost = display_ident(str(item["column"])), item.get("record"), item.get("cost")
        what = ("a DP 95th percentile of the units' sums of their c largest |values| (Gaussian histogram), "
                "from the epoch's partition budget")
        spend = (f"rho = {cost.rho:.4g}, delta = {cost.delta:.3g}" if isinstance(cost, Cost) and cost.rho is not None
                 and cost.delta is not None else "")
        if isinstance(rec, PartitionRecord):
            lines.append(f"  automatic bound: max_sum_per_group.{col} = {float(rec.keys[0][0]):.6g} in this epoch "
                         f"({what}; charged once: {spend}; reused, no charge)")
        elif not item.get("payable"):
            lines.append(f"  automatic bound for SUM({col}): cannot be chosen, the epoch's partition budget is "
                         "off or spent: the SUM keeps its row bound (declare a number to clamp it)")
        else:
            lines.append(f"  automatic bound for SUM({col}): not chosen yet this epoch: charged once at first use "
                         f"({what}; {spend}); until then the precision below is at the row bound")
    return lines
