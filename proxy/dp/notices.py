"""The NOTICEs an answer carries with ``lapras.show_stderr``: outcome, standard errors, cost, intervals
(documented in docs/show_stderr.md), and the partition selection its groups came from."""

from __future__ import annotations

from lapras.engine import Answer
from lapras.ledger.base import PartitionRecord
from parser.plan.queryplan import QueryPlan
from pgcore.identifiers import display_ident

TRUE = {"on", "true", "1", "yes"}
"""Spellings of a boolean setting that turn it on."""

NOTICE_ROWS = 8
"""Rows whose standard errors the show_stderr NOTICE lists per column (then "...")."""


def stderr_notice(plan: QueryPlan, answer: Answer) -> str:
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


def selection_notice(selection: PartitionRecord) -> str:
    c = selection.cost
    eps, delta = c.eps_delta_view()
    return (f"lapras: keys from DP partition selection: {len(selection.keys)} released "
            f"(cost rho={c.rho:.4g}, delta={c.delta:.3g}; alone (epsilon, delta) = ({eps:.4g}, {delta:.3g}); "
            "charged once per epoch for this filter, repeated free)")


def interval_notices(plan: QueryPlan, answer: Answer, shown: int = 20) -> list[str]:
    """One line per order statistic (MIN, MAX, median, percentiles) and group: its 95% interval."""
    lines = []
    for name, key, est, lo, hi in plan.intervals(answer.values, answer.stderrs)[:shown]:
        group = f" group ({', '.join(map(str, key))})" if key else ""
        span = f"95% interval [{lo}, {hi}]" if lo is not None else "no interval"
        lines.append(f"lapras: {name}{group} = {est}: {span}")
    return lines + [f"lapras: {note}" for note in plan.interval_notes()]
