"""Composition of release costs: the only module that adds privacy costs up.

The query-stream part of an epoch's budget is measured in *units* the allocator splits:

- ``gdp``: units are mu^2. Gaussian mechanisms compose as mu = sqrt(sum mu_i^2) even with adaptively
  chosen scales; the part's (epsilon, delta) fixes mu_total as the largest mu meeting it exactly.
- ``basic``: units are epsilon. A release granted ``u`` units costs (u, delta * u / epsilon): delta is split
  in proportion to epsilon, so that the deltas sum to the part's delta exactly when the epsilons do.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from lapras.calibration import gdp_eps, gdp_mu
from lapras.mechanisms import Cost

Mode = Literal["gdp", "basic"]


@dataclass(frozen=True)
class Budget:
    """The query-stream budget of one epoch, in (epsilon, delta) and in allocation units."""

    mode: Mode
    epsilon: float
    delta: float

    @property
    def units(self) -> float:
        """Total units: mu_total^2 in gdp mode, epsilon in basic mode."""
        return gdp_mu(self.epsilon, self.delta) ** 2 if self.mode == "gdp" else self.epsilon

    def cost_of(self, units: float) -> Cost:
        """Cost of a release granted ``units``."""
        if units <= 0:
            raise ValueError("a release needs positive units")
        if self.mode == "gdp":
            return Cost(mu=math.sqrt(units))
        return Cost(eps=units, delta=self.delta * units / self.epsilon)

    def units_of(self, cost: Cost) -> float:
        if self.mode == "gdp":
            if cost.mu is None:
                raise ValueError("gdp ledger holds mu costs only")
            return cost.mu**2
        if cost.eps is None:
            raise ValueError("basic ledger holds (eps, delta) costs only")
        return cost.eps

    def compose(self, costs: Iterable[Cost]) -> Cost:
        """Total cost of a sequence of releases under this mode's composition."""
        costs = list(costs)
        if self.mode == "gdp":
            return Cost(mu=math.sqrt(sum(self.units_of(c) for c in costs)))
        return Cost(eps=sum(c.eps or 0.0 for c in costs), delta=sum(c.delta or 0.0 for c in costs))

    def eps_delta(self, units: float) -> tuple[float, float]:
        """(epsilon, delta) of spending ``units`` in this mode (gdp: exact conversion at the part's delta)."""
        units = max(units, 0.0)
        if self.mode == "gdp":
            return gdp_eps(math.sqrt(units), self.delta), (self.delta if units > 0 else 0.0)
        return units, self.delta * units / self.epsilon


def split_budget(epsilon: float, delta: float, regression_fraction: float) -> tuple[tuple[float, float], ...]:
    """Split an epoch's (epsilon, delta) into (query stream, regression) parts by basic composition."""
    if not 0 <= regression_fraction < 1:
        raise ValueError("regression_fraction must be in [0, 1)")
    q = 1.0 - regression_fraction
    return (epsilon * q, delta * q), (epsilon * regression_fraction, delta * regression_fraction)


def cumulative(parts: Iterable[tuple[float, float]]) -> tuple[float, float]:
    """Privacy loss over several epochs by basic composition (epochs are never hidden)."""
    eps = delta = 0.0
    for e, d in parts:
        eps += e
        delta += d
    return eps, delta
