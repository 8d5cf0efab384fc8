"""One stream item at a time: classify a statement, grant its budget, combine noisy and free estimates.

Shared by the engine (live statements) and the benchmarks (simulated streams), so both run the same rule:

- A statement is *good* when every linear query is in P (answered by the MM release) or has a free
  estimate meeting the accuracy rule; a good statement costs nothing.
- The accuracy rule: a free estimate is used alone when its standard error is at most
  ``free_max_stderr`` (absolute, when configured) or else at most ``free_stderr_ratio`` times the standard
  error a fresh answer would get under the current allocation.
- Otherwise the statement is *bad*: the allocator grants units, the queries without an acceptable free
  estimate are released together as one Gaussian release, and each fresh value is combined with its free
  estimate (when one exists) by inverse-variance weighting.
- When the allocator refuses (the stream stopped), the statement is answered from free estimates if all
  its queries have one, else refused.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from lapras.accounting import Accountant
from lapras.allocation import Allocator, AllocState, Grant
from lapras.mechanisms import Cost, Gaussian, Mechanism
from lapras.outcomes import Outcome


@dataclass(frozen=True)
class Decision:
    """What to do with one statement; ``fresh`` marks the queries to release together at ``cost``."""

    outcome: Outcome
    state: AllocState
    grant: Grant
    fresh: np.ndarray
    cost: Cost | None


def combine(
    fresh: np.ndarray, fresh_var: np.ndarray, free: np.ndarray, free_var: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Inverse-variance combination of independent estimates (an infinite variance means absent)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        wf = np.where(np.isfinite(fresh_var), 1.0 / fresh_var, 0.0)
        wc = np.where(np.isfinite(free_var), 1.0 / free_var, 0.0)
        tot = wf + wc
        value = (wf * np.nan_to_num(fresh) + wc * np.nan_to_num(free)) / tot
        var = 1.0 / tot
    return value, var


@dataclass(frozen=True)
class OnlinePolicy:
    allocator: Allocator
    budget: Accountant
    free_stderr_ratio: float = 1.0
    free_max_stderr: float | None = None
    mechanism: type[Mechanism] = Gaussian

    def decide(
        self,
        state: AllocState,
        *,
        predicted: bool,
        free_var: np.ndarray,
        sensitivity_of: Callable[[np.ndarray], float],
    ) -> Decision:
        """Classify one statement given the variances of its free estimates (inf where none)."""
        free_var = np.asarray(free_var, dtype=np.float64)
        has_free = np.isfinite(free_var)
        none = np.zeros(len(free_var), dtype=bool)
        if predicted and has_free.all():
            return Decision(Outcome.GOOD, self.allocator.good(state), Grant(0.0, 0.0), none, None)
        grant, after_bad = self.allocator.bad(state)
        if grant.total <= 0:
            if has_free.all():
                return Decision(Outcome.FREE_AFTER_STOP, after_bad, grant, none, None)
            return Decision(Outcome.REFUSED, after_bad, grant, none, None)
        cost = self.budget.cost_of(grant.total)
        if self.free_max_stderr is not None:
            limit = self.free_max_stderr**2
        else:
            # A fresh release of the whole statement at this grant: the accuracy a free estimate must match.
            everything = np.ones(len(free_var), dtype=bool)
            fresh_var = float(self.mechanism.calibrate(cost, sensitivity_of(everything), len(free_var)).variance())
            limit = self.free_stderr_ratio**2 * fresh_var
        ok = has_free & (free_var <= limit)
        if ok.all():
            return Decision(Outcome.GOOD, self.allocator.good(state), Grant(0.0, 0.0), none, None)
        return Decision(Outcome.BAD, after_bad, grant, ~ok, cost)
