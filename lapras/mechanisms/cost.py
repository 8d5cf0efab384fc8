"""The privacy cost of one release: ``mu`` (Gaussian DP), ``(eps, delta)`` (basic composition) or
``(rho, delta)`` (delta-approximate rho-zCDP, the cost of a threshold release such as partition selection).

Every release carries one; only an accountant (:mod:`lapras.accounting`) adds costs up.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from lapras.calibration import approx_zcdp_eps, gdp_eps, zcdp_eps


@dataclass(frozen=True)
class Cost:
    """Privacy cost of one release: ``Cost(mu=...)``, ``Cost(eps=..., delta=...)`` or
    ``Cost(rho=..., delta=...)`` (rho-zCDP except with probability delta: Bun & Steinke's approximate zCDP)."""

    mu: float | None = None
    eps: float | None = None
    delta: float | None = None
    rho: float | None = None

    def __post_init__(self) -> None:
        if sum(x is not None for x in (self.mu, self.eps, self.rho)) != 1:
            raise ValueError("a Cost is either Cost(mu=...), Cost(eps=..., delta=...) or Cost(rho=..., delta=...)")
        if (self.eps is not None or self.rho is not None) and self.delta is None:
            raise ValueError("Cost(eps=...) and Cost(rho=...) need delta")
        if self.mu is not None and self.delta is not None:
            raise ValueError("a GDP cost has no delta")

    @property
    def is_gdp(self) -> bool:
        return self.mu is not None

    @property
    def is_zero(self) -> bool:
        return (self.mu or 0.0) == 0.0 and (self.eps or 0.0) == 0.0 and (self.rho or 0.0) == 0.0

    def as_eps_delta(self, delta: float) -> tuple[float, float]:
        """(eps, delta) view: a GDP cost is converted exactly at the given delta; an approximate zCDP cost at
        the given delta, which covers zCDP's delta plus e^eps times its own (inf eps when it cannot)."""
        if self.mu is not None:
            return gdp_eps(self.mu, delta), delta
        assert self.delta is not None
        if self.rho is not None:
            return approx_zcdp_eps(self.rho, self.delta, delta), delta
        assert self.eps is not None
        return self.eps, self.delta

    def eps_delta_view(self) -> tuple[float, float]:
        """One finite (eps, delta) guarantee of this release alone, for people to read. An approximate zCDP
        cost (rho, delta_e) is stated at eps0 = zCDP's eps at delta_e and total delta delta_e (1 + e^eps0),
        which covers zCDP's delta at eps0 plus e^eps0 delta_e (then tightened at that total delta); a fixed
        multiple of delta_e as the total could not cover e^eps delta_e for eps above its log (inf). Where that
        total reaches 1/2 (a huge budget: delta_e near 1e-300, eps0 in the hundreds) it is stated at the least
        total 10^-k (bisected on k) whose reading is finite."""
        if self.rho is None or not self.delta:
            return self.as_eps_delta(self.delta or 1e-6)
        eps0 = zcdp_eps(self.rho, min(self.delta, 0.5))
        log_total = math.log(self.delta) + eps0 + math.log1p(math.exp(-eps0))
        if log_total >= math.log(0.5):
            lo, hi = 1, max(1, math.floor(-math.log10(self.delta)))  # 10^-hi >= delta_e: finite reading at 10^-lo
            while hi - lo > 1:
                mid = (lo + hi) // 2
                lo, hi = (mid, hi) if math.isfinite(approx_zcdp_eps(self.rho, self.delta, 10.0 ** -mid)) else (lo, mid)
            total = 10.0 ** -lo
            return approx_zcdp_eps(self.rho, self.delta, total), total
        total = self.delta * (1.0 + math.exp(eps0))
        return min(eps0, approx_zcdp_eps(self.rho, self.delta, total)), total

    def to_json(self) -> dict[str, float]:
        if self.mu is not None:
            return {"mu": self.mu}
        assert self.delta is not None
        if self.rho is not None:
            return {"rho": self.rho, "delta": self.delta}
        assert self.eps is not None
        return {"eps": self.eps, "delta": self.delta}

    @staticmethod
    def from_json(d: dict[str, float]) -> Cost:
        if "mu" in d:
            return Cost(mu=d["mu"])
        if "rho" in d:
            return Cost(rho=d["rho"], delta=d["delta"])
        return Cost(eps=d["eps"], delta=d["delta"])
