"""The Gaussian mechanism: ``x + N(0, sigma^2)``, calibrated exactly (mu-GDP, or the analytic Gaussian)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from lapras.calibration import agm_sigma, gdp_eps
from lapras.mechanisms import noise
from lapras.mechanisms.base import Mechanism
from lapras.mechanisms.cost import Cost


class Gaussian(Mechanism):
    """Noise ``N(0, sigma^2)`` per unit row. At L2 sensitivity ``s`` it is mu-GDP with ``mu = s / sigma``
    (Dong, Roth & Su), whose tight (eps, delta) curve is Balle & Wang's analytic Gaussian condition."""

    name = "gaussian"

    def __init__(self, sigma: float) -> None:
        if not sigma >= 0:
            raise ValueError("sigma must be >= 0")
        self.sigma = float(sigma)

    @classmethod
    def calibrate(cls, cost: Cost, sensitivity: float) -> Gaussian:
        return cls(sigma_for(cost, sensitivity))

    @classmethod
    def from_params(cls, params: Mapping[str, float]) -> Gaussian:
        return cls(float(params["sigma"]))

    @property
    def params(self) -> dict[str, float]:
        return {"sigma": self.sigma}

    def privacy_map(self, sensitivity: float, like: Cost) -> Cost:
        mu = sensitivity / self.sigma if self.sigma > 0 else (0.0 if sensitivity == 0 else float("inf"))
        if like.mu is not None:
            return Cost(mu=mu)
        assert like.delta is not None
        return Cost(eps=gdp_eps(mu, like.delta), delta=like.delta)

    def release(self, exact: np.ndarray, scale: np.ndarray | float, rng: np.random.Generator) -> np.ndarray:
        exact = np.asarray(exact, dtype=np.float64)
        if self.sigma == 0:
            return exact.copy()
        return exact + noise.standard_normal(exact.shape, rng) * (self.sigma * np.asarray(scale, dtype=np.float64))

    def variance(self, scale: np.ndarray | float = 1.0) -> np.ndarray:
        return np.asarray((self.sigma * np.asarray(scale, dtype=np.float64)) ** 2)


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
