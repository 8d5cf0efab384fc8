"""The EXPLAIN handler: what a DP statement would measure and cost, and how precisely it would be answered.

Nothing is read, drawn or charged: a partition selection's (epsilon, delta) is stated in full, a statement
of P is shown against the epoch's release and the SVD lower bound, any other by the standard errors the
engine would answer it with now (public quantities only).
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from typing import Any

from lapras.errors import LaprasError
from lapras.ledger.base import PartitionRecord
from lapras.mechanisms import Cost
from parser.bind.splits import describe as split_lines
from parser.plan.queryplan import QueryPlan
from parser.planner import Selection, SeriesStep
from pgcore.identifiers import display_ident, qualified
from pgcore.pgtypes import TEXT

from ..config import Config
from .commands import ExplainCommand
from .planning import Planners
from .protocols import ExplainingEngine
from .service_api import ColumnDesc, QueryResult
from .timeout import deadline_of

EXPLAIN_COLUMNS = [ColumnDesc("QUERY PLAN", TEXT)]


class ExplainHandler:
    """Answers ``EXPLAIN <query>`` over protected tables."""

    def __init__(self, config: Config, engine: ExplainingEngine, planners: Planners) -> None:
        self.config = config
        self.engine = engine
        self.planners = planners

    def describe(self, command: ExplainCommand, param_oids: Sequence[int] = ()) -> tuple[list[int], list[ColumnDesc]]:
        deadline = time.monotonic() + self.config.server.statement_timeout_s
        d = self.planners.planner.describe(command.statement, deadline=deadline, trees=command.parsed.take(),
                                           declared=param_oids)
        return list(d.param_types), list(EXPLAIN_COLUMNS)

    def explain(self, command: ExplainCommand, params: Sequence[object | None], settings: Mapping[str, str],
                param_oids: Sequence[int] = ()) -> QueryResult:
        """EXPLAIN of a DP statement: what it measures and what it costs (a partition selection's (epsilon,
        delta) in full); nothing is read, drawn or charged."""
        sql = command.statement
        deadline = deadline_of(self.config, settings)
        lines: list[str] = []
        planner = self.planners.planner
        step = planner.prepare(sql, params or None, deadline=deadline, trees=command.parsed.take(), series=False,
                               declared=param_oids)
        assert not isinstance(step, SeriesStep)
        if isinstance(step, Selection):
            req = step.request
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
                plan = self.planners.complete(planner, step, record, sql, params, deadline, param_oids)
            elif cost is None:
                lines.append("  off: no partition budget ([privacy] partition_fraction = 0): the statement is refused")
                return QueryResult(list(EXPLAIN_COLUMNS), [(ln,) for ln in lines], f"EXPLAIN {len(lines)}")
            else:
                lines.append("  not selected yet in this epoch: charged once when first run, then reused")
                return QueryResult(list(EXPLAIN_COLUMNS), [(ln,) for ln in lines], f"EXPLAIN {len(lines)}")
        else:
            plan = step
        answered = self.engine.lookup(plan) is not None
        n = sum(1 for q in plan.queries if not q.is_zero)
        lines.append(f"DP aggregate over {qualified(plan.schema, plan.table)}: {n} linear queries, "
                     f"{len(plan.group_keys)} groups")
        lines.extend(split_lines(plan.table_schema))  # cells cut at the statement's literals
        info = self.engine.explain(plan) if not answered else {}
        lines.extend(_auto_bound_lines(self.engine.explain_auto_bounds(plan)))
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
        try:
            pv = self.engine.preview(plan)
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
