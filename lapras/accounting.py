"""Composition of release costs: the only module that adds privacy costs up.

The query-stream part of an epoch's budget is measured in *units* the allocator splits. An accountant per
composition rule:

- :class:`GdpAccountant`: units are mu^2. Gaussian mechanisms compose as mu = sqrt(sum mu_i^2) even with
  adaptively chosen scales; the part's (epsilon, delta) fixes mu_total as the largest mu meeting it exactly.
- :class:`BasicAccountant`: units are epsilon. A release granted ``u`` units costs (u, delta * u / epsilon):
  delta is split in proportion to epsilon, so that the deltas sum to the part's delta exactly when the
  epsilons do.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Iterable
from dataclasses import dataclass
from typing import ClassVar, Literal

from lapras.calibration import gdp_eps, gdp_mu
from lapras.mechanisms.cost import Cost

Mode = Literal["gdp", "basic"]


@dataclass(frozen=True)
class Accountant(ABC):
    """The query-stream budget of one epoch, in (epsilon, delta) and in allocation units."""

    mode: ClassVar[str]
    # Noise variance of a release falls as units ** -variance_power (mu^2: 1; AGM epsilon: about 2).
    variance_power: ClassVar[int]

    epsilon: float
    delta: float

    @property
    @abstractmethod
    def units(self) -> float:
        """Total units of the part."""

    @abstractmethod
    def cost_of(self, units: float) -> Cost:
        """Cost of a release granted ``units``."""

    @abstractmethod
    def units_of(self, cost: Cost) -> float:
        """Units a cost takes (raises ValueError for a cost of the other composition)."""

    @abstractmethod
    def compose(self, costs: Iterable[Cost]) -> Cost:
        """Total cost of a sequence of releases."""

    @abstractmethod
    def eps_delta(self, units: float) -> tuple[float, float]:
        """(epsilon, delta) of spending ``units``."""

    def part_eps_delta(self, units: float) -> tuple[float, float] | None:
        """(epsilon, delta) of ``units`` taken on their own when such figures add up across releases
        (basic composition), else None (GDP releases compose through mu, not through their epsilons)."""
        return None

    def figures(self, spent_units: float) -> dict[str, dict[str, float]]:
        """Mode-specific figures for the budget report."""
        return {}

    @staticmethod
    def _positive(units: float) -> None:
        if units <= 0:
            raise ValueError("a release needs positive units")


@dataclass(frozen=True)
class GdpAccountant(Accountant):
    mode = "gdp"
    variance_power = 1

    @property
    def units(self) -> float:
        return gdp_mu(self.epsilon, self.delta) ** 2

    def cost_of(self, units: float) -> Cost:
        self._positive(units)
        return Cost(mu=math.sqrt(units))

    def units_of(self, cost: Cost) -> float:
        if cost.mu is None:
            raise ValueError("gdp ledger holds mu costs only")
        return cost.mu**2

    def compose(self, costs: Iterable[Cost]) -> Cost:
        return Cost(mu=math.sqrt(sum(self.units_of(c) for c in costs)))

    def eps_delta(self, units: float) -> tuple[float, float]:
        """Exact conversion of sqrt(units)-GDP at the part's delta."""
        units = max(units, 0.0)
        return gdp_eps(math.sqrt(units), self.delta), (self.delta if units > 0 else 0.0)

    def figures(self, spent_units: float) -> dict[str, dict[str, float]]:
        units = self.units
        return {"mu": {"total": units**0.5, "spent": spent_units**0.5,
                       "remaining": max(units - spent_units, 0.0) ** 0.5}}


@dataclass(frozen=True)
class BasicAccountant(Accountant):
    mode = "basic"
    variance_power = 2

    @property
    def units(self) -> float:
        return self.epsilon

    def cost_of(self, units: float) -> Cost:
        self._positive(units)
        return Cost(eps=units, delta=self.delta * units / self.epsilon)

    def units_of(self, cost: Cost) -> float:
        if cost.eps is None:
            raise ValueError("basic ledger holds (eps, delta) costs only")
        return cost.eps

    def compose(self, costs: Iterable[Cost]) -> Cost:
        costs = list(costs)
        for c in costs:
            self.units_of(c)
        return Cost(eps=sum(c.eps or 0.0 for c in costs), delta=sum(c.delta or 0.0 for c in costs))

    def eps_delta(self, units: float) -> tuple[float, float]:
        units = max(units, 0.0)
        return units, self.delta * units / self.epsilon

    def part_eps_delta(self, units: float) -> tuple[float, float] | None:
        return self.eps_delta(units)


ACCOUNTANTS: dict[str, type[Accountant]] = {a.mode: a for a in (GdpAccountant, BasicAccountant)}


def Budget(mode: str, epsilon: float, delta: float) -> Accountant:  # noqa: N802 - reads as a constructor
    """The accountant of ``mode`` (gdp or basic) for a part of (epsilon, delta)."""
    try:
        return ACCOUNTANTS[mode](epsilon, delta)
    except KeyError:
        raise ValueError(f"accounting must be one of {sorted(ACCOUNTANTS)}, got {mode!r}") from None


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
