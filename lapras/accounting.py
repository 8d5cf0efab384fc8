"""Composition of release costs: the only module that adds privacy costs up.

The query-stream part of an epoch's budget is measured in *units* the allocator splits. An accountant per
composition rule:

- :class:`GdpAccountant`: units are mu^2. Gaussian mechanisms compose as mu = sqrt(sum mu_i^2) even with
  adaptively chosen scales; the part's (epsilon, delta) fixes mu_total as the largest mu meeting it exactly.
- :class:`BasicAccountant`: units are epsilon. A release granted ``u`` units costs (u, delta * u / epsilon):
  delta is split in proportion to epsilon, so that the deltas sum to the part's delta exactly when the
  epsilons do.

Partition selection (:class:`PartitionAccountant`) has its own part of the epoch, composed with the query
stream and regression parts by basic composition (:func:`split_budget`): a threshold release is
delta-approximately rho-zCDP, whose delta is the probability of an event (a key of one unit crossing the
threshold), not a point of a trade-off curve, so it cannot be folded into the stream's mu^2.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Iterable
from dataclasses import dataclass
from typing import ClassVar, Literal

from lapras.calibration import gdp_eps, gdp_mu, zcdp_eps, zcdp_rho
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
    """Units are mu^2: releases compose as mu = sqrt(sum mu_i^2); the part's (epsilon, delta) fixes mu_total."""

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
    """Units are epsilon: a release of ``u`` units costs (u, delta * u / epsilon), so the deltas add up to the
    part's delta exactly when the epsilons do."""

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


def split_budget(epsilon: float, delta: float, regression_fraction: float,
                 partition_fraction: float = 0.0) -> tuple[tuple[float, float], ...]:
    """Split an epoch's (epsilon, delta) into (query stream, regression, partition selection) parts by basic
    composition."""
    if not 0 <= regression_fraction < 1 or not 0 <= partition_fraction < 1:
        raise ValueError("regression_fraction and partition_fraction must be in [0, 1)")
    q = 1.0 - regression_fraction - partition_fraction
    if q <= 0:
        raise ValueError("regression_fraction + partition_fraction must leave the query stream some budget")
    return ((epsilon * q, delta * q), (epsilon * regression_fraction, delta * regression_fraction),
            (epsilon * partition_fraction, delta * partition_fraction))


# The least event delta a selection is granted: a threshold is calibrated in double precision, where
# probabilities far below this (subnormals) are not held to a relative error (lapras.mechanisms.threshold).
DELTA_FLOOR = 1e-300


@dataclass(frozen=True)
class PartitionAccountant:
    """The partition-selection part (epsilon, delta) of an epoch, shared by up to ``selections`` selections.

    Selections compose as approximate zCDP (Bun & Steinke): their rho add up, and so do their deltas (the
    probabilities of their bad events, a key of one unit released). Let E be the event that no selection
    of the epoch releases a key held only by the unit that differs; P[not E] <= sum delta_i =: delta_E
    whatever the adaptive choices, and on E every selection is a discrete Gaussian release of rho_i-zCDP.
    For any set S of outputs, on the side holding the unit, P[M' in S] <= P[A' in S] + delta_E and
    P[A' in S] <= P[M' in S] + delta_E (A' the release with that unit's own keys withheld), so the part is

        (eps, delta_zCDP(eps; sum rho_i) + e^eps * delta_E)-DP.

    Each selection is granted an equal share: rho = zcdp_rho(eps, (1 - share) delta) / selections and
    delta_i = share * delta / (e^eps * selections); ``share`` of delta goes to the threshold events. ``eps``
    is the part's epsilon, lowered where needed so that delta_i stays at least ``DELTA_FLOOR`` (a delta_i
    that rounds to 0 in floating point calibrates no threshold): an (eps, delta) guarantee holds at every
    larger epsilon, so this is sound. A part whose delta cannot grant DELTA_FLOOR at any eps is not usable.
    """

    epsilon: float
    delta: float
    selections: int
    share: float = 0.5

    @property
    def reserved(self) -> bool:
        """A part is configured (it may still be too small to use: see ``enabled``)."""
        return self.epsilon > 0 and self.delta > 0 and self.selections > 0

    @property
    def enabled(self) -> bool:
        return self.reserved and self.conversion_epsilon > 0

    @property
    def conversion_epsilon(self) -> float:
        """The epsilon the part is spent at: its own, or less where e^-epsilon would push a selection's
        event delta below DELTA_FLOOR (0 when even epsilon = 0 would)."""
        if not self.reserved:
            return 0.0
        # A sum of logs: share * delta / selections may underflow to 0 (delta 1e-320, many selections).
        room = math.log(self.share) + math.log(self.delta) - math.log(self.selections) - math.log(DELTA_FLOOR)
        return max(0.0, min(self.epsilon, room))

    @property
    def rho_total(self) -> float:
        return zcdp_rho(self.conversion_epsilon, (1.0 - self.share) * self.delta) if self.enabled else 0.0

    @property
    def events_total(self) -> float:
        return self.share * self.delta * math.exp(-self.conversion_epsilon) if self.enabled else 0.0

    def cost_per_selection(self) -> Cost:
        if not self.enabled:
            raise ValueError("partition selection has no budget part")
        return Cost(rho=self.rho_total / self.selections, delta=self.events_total / self.selections)

    def admits(self, rho_spent: float, delta_spent: float, cost: Cost) -> bool:
        assert cost.rho is not None and cost.delta is not None
        return (self.enabled and rho_spent + cost.rho <= self.rho_total * (1 + 1e-12)
                and delta_spent + cost.delta <= self.events_total * (1 + 1e-12))

    def eps_delta(self, rho_spent: float, delta_spent: float) -> tuple[float, float]:
        """(epsilon, delta) of what the part has spent, at the part's delta."""
        if rho_spent <= 0:
            return 0.0, 0.0
        conv = self.delta - (_exp(self.conversion_epsilon) * delta_spent if delta_spent > 0 else 0.0)
        return (zcdp_eps(rho_spent, conv), self.delta) if conv > 0 else (math.inf, self.delta)


def _exp(x: float) -> float:
    """e^x, inf where it overflows (a partition part with a huge epsilon)."""
    try:
        return math.exp(x)
    except OverflowError:
        return math.inf


def cumulative(parts: Iterable[tuple[float, float]]) -> tuple[float, float]:
    """Privacy loss over several epochs by basic composition (epochs are never hidden)."""
    eps = delta = 0.0
    for e, d in parts:
        eps += e
        delta += d
    return eps, delta
