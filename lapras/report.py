"""Budget report of the ledger, for ``SHOW lapras.budget`` and ``lapras-proxy budget [--json]``."""

from __future__ import annotations

from typing import Any

from lapras.accounting import cumulative
from lapras.ledger.base import EpochRecord, Ledger


def epoch_report(ep: EpochRecord) -> dict[str, Any]:
    """One epoch in (epsilon, delta) terms. In gdp mode the spent part is the exact conversion of
    sqrt(sum mu_i^2) and the remaining part is what the unspent mu^2 would cost on its own."""
    s = ep.spec
    budget = s.budget
    units = budget.units
    spent_eps, spent_delta = budget.eps_delta(ep.spent_units)
    rem_eps, rem_delta = budget.eps_delta(max(units - ep.spent_units, 0.0))
    out: dict[str, Any] = {
        "epoch": ep.id,
        "started_at": ep.started_at,
        "ended_at": ep.ended_at,
        "accounting": s.mode,
        "budget": {"epsilon": s.total_epsilon, "delta": s.total_delta},
        "stream_budget": {"epsilon": s.epsilon, "delta": s.delta},
        "regression_budget": {"epsilon": s.regression_epsilon, "delta": s.regression_delta},
        "split": dict(s.split),
        "allocation": s.policy,
        "stream_length_estimate": s.s,
        "warmup": s.warmup,
        "spent": {"epsilon": spent_eps, "delta": spent_delta},
        "remaining": {"epsilon": rem_eps, "delta": rem_delta},
        "regression_spent": {"epsilon": ep.regression_epsilon_spent, "delta": ep.regression_delta_spent},
        "partition_budget": {"epsilon": s.partition_epsilon, "delta": s.partition_delta,
                             "selections": s.partition_selections},
        "partition_spent": _partition_spent(ep),
        "answers_served": ep.answers_served,
        "stream_position": ep.state.n,
        "bad_statements": ep.state.b,
        "stopped": ep.state.stopped,
    }
    out.update(budget.figures(ep.spent_units))
    return out


def _partition_spent(ep: EpochRecord) -> dict[str, float]:
    """The partition part's spend: (epsilon, delta) of its selections composed (approximate zCDP), and how
    many more selections it admits."""
    part = ep.spec.partition
    if not part.enabled:
        return {"epsilon": 0.0, "delta": 0.0, "selections_left": 0}
    eps, delta = part.eps_delta(ep.partition_rho_spent, ep.partition_delta_spent)
    each = part.cost_per_selection()
    left = 0
    while part.admits(ep.partition_rho_spent + left * (each.rho or 0.0),
                      ep.partition_delta_spent + left * (each.delta or 0.0), each) and left < part.selections:
        left += 1
    return {"epsilon": eps, "delta": delta, "selections_left": left}


def budget_report(ledger: Ledger) -> dict[str, Any]:
    """Current epoch plus the cumulative privacy loss over all epochs (basic composition across epochs)."""
    eps = ledger.epochs()
    reports = [epoch_report(e) for e in eps]
    cur = next((r for r in reversed(reports) if r["ended_at"] is None), None)
    tot = cumulative((r["spent"]["epsilon"] + r["regression_spent"]["epsilon"] + r["partition_spent"]["epsilon"],
                      r["spent"]["delta"] + r["regression_spent"]["delta"] + r["partition_spent"]["delta"])
                     for r in reports)
    return {"current": cur, "epochs": len(reports),
            "cumulative": {"epsilon": tot[0], "delta": tot[1], "composition": "basic across epochs"}}
