"""Gaussian releases of query matrices, each with its privacy map.

A release is ``M x + N(0, sigma^2 I)`` for a matrix ``M`` over a histogram ``x``. Under add/remove-one-row
its L2 sensitivity is the largest column norm of ``M`` (one row moves ``x`` by one unit vector). Every
release carries its own :class:`Cost`; only :mod:`lapras.accounting` adds costs up.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from lapras.calibration import agm_sigma, gdp_eps


@dataclass(frozen=True)
class Cost:
    """Privacy cost of one release: ``mu`` (Gaussian DP) or ``(eps, delta)`` (basic composition)."""

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


def l2_sensitivity(matrix: np.ndarray) -> float:
    """Largest column L2 norm of a dense query matrix (rows = queries, columns = histogram cells)."""
    m = np.atleast_2d(np.asarray(matrix, dtype=np.float64))
    if m.size == 0:
        return 0.0
    return float(np.sqrt(np.max(np.einsum("ij,ij->j", m, m))))


def kron_sensitivity(factors: Sequence[np.ndarray]) -> float:
    """Sensitivity of ``A1 (x) A2 (x) ...``: column norms of a Kronecker product multiply."""
    return float(math.prod(l2_sensitivity(a) for a in factors))


def sigma_for(cost: Cost, sensitivity: float) -> float:
    """Noise scale meeting ``cost`` for a release of the given L2 sensitivity (AGM in basic mode)."""
    if sensitivity == 0:
        return 0.0
    if cost.mu is not None:
        if cost.mu <= 0:
            raise ValueError("mu must be positive")
        return sensitivity / cost.mu
    assert cost.eps is not None and cost.delta is not None
    return agm_sigma(cost.eps, cost.delta, sensitivity)


def new_rng() -> np.random.Generator:
    """Generator seeded from the OS entropy pool: the noise must never be predictable."""
    return np.random.default_rng()


@dataclass(frozen=True)
class GaussianRelease:
    """Noisy values of one release, with the scale and the cost they were drawn at."""

    values: np.ndarray
    sigma: float
    sensitivity: float
    cost: Cost


def gaussian_release(
    exact: np.ndarray, sensitivity: float, cost: Cost, rng: np.random.Generator
) -> GaussianRelease:
    """Add N(0, sigma^2) to every exact value, sigma calibrated from ``cost`` and ``sensitivity``."""
    exact = np.asarray(exact, dtype=np.float64)
    sigma = sigma_for(cost, sensitivity)
    noisy = exact + rng.normal(0.0, sigma, size=exact.shape) if sigma > 0 else exact.copy()
    return GaussianRelease(noisy, sigma, sensitivity, cost)
