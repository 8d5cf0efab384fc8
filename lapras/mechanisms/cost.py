"""The privacy cost of one release: ``mu`` (Gaussian DP) or ``(eps, delta)`` (basic composition).

Every release carries one; only an accountant (:mod:`lapras.accounting`) adds costs up.
"""

from __future__ import annotations

from dataclasses import dataclass

from lapras.calibration import gdp_eps


@dataclass(frozen=True)
class Cost:
    """Privacy cost of one release: ``Cost(mu=...)`` or ``Cost(eps=..., delta=...)``."""

    mu: float | None = None
    eps: float | None = None
    delta: float | None = None

    def __post_init__(self) -> None:
        if (self.mu is None) == (self.eps is None):
            raise ValueError("a Cost is either Cost(mu=...) or Cost(eps=..., delta=...)")
        if self.eps is not None and self.delta is None:
            raise ValueError("Cost(eps=...) needs delta")

    @property
    def is_gdp(self) -> bool:
        return self.mu is not None

    @property
    def is_zero(self) -> bool:
        return (self.mu or 0.0) == 0.0 and (self.eps or 0.0) == 0.0

    def as_eps_delta(self, delta: float) -> tuple[float, float]:
        """(eps, delta) view: a GDP cost is converted exactly at the given delta."""
        if self.mu is not None:
            return gdp_eps(self.mu, delta), delta
        assert self.eps is not None and self.delta is not None
        return self.eps, self.delta

    def to_json(self) -> dict[str, float]:
        if self.mu is not None:
            return {"mu": self.mu}
        assert self.eps is not None and self.delta is not None
        return {"eps": self.eps, "delta": self.delta}

    @staticmethod
    def from_json(d: dict[str, float]) -> Cost:
        return Cost(mu=d["mu"]) if "mu" in d else Cost(eps=d["eps"], delta=d["delta"])
