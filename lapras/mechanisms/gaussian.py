"""The Gaussian mechanism on a lattice: ``x + N(0, sigma^2)`` with noise that is exactly discrete.

Row ``i`` (at its public scale ``c_i``) is released as ``(round(x_i / g_i) + K_i) * g_i`` with lattice step
``g_i = sigma * c_i / STEPS`` and ``K_i ~ N_Z(0, STEPS^2)`` (:mod:`lapras.mechanisms.noise`): the discrete
Gaussian mechanism with scale ``sigma * c_i``. Rounding each row to its lattice moves it by at most one step
(two with floating-point division near 2^53), so neighbouring inputs differ by at most ``Delta + 2 sqrt(d)
sigma / STEPS`` in the normalised coordinates; ``sigma`` is calibrated for that sensitivity, exactly:
``sigma = Delta / (mu - 2 sqrt(d) / STEPS)`` with ``mu`` the cost's (mu-GDP, Dong, Roth & Su) or the one
meeting its (epsilon, delta) exactly (the analytic Gaussian, Balle & Wang). At STEPS = 2^20 the discrete
Gaussian's privacy profile equals the continuous one's to within exp(-2 pi^2 STEPS^2) (Canonne, Kamath &
Steinke), below any representable delta.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from lapras.calibration import gdp_eps, gdp_mu
from lapras.mechanisms import noise
from lapras.mechanisms.base import Mechanism
from lapras.mechanisms.cost import Cost


class Gaussian(Mechanism):
    """Discrete Gaussian noise of scale ``sigma`` per unit row, on a lattice of ``sigma / STEPS``."""

    name = "gaussian"

    def __init__(self, sigma: float) -> None:
        if not sigma >= 0:
            raise ValueError("sigma must be >= 0")
        self.sigma = float(sigma)

    @classmethod
    def calibrate(cls, cost: Cost, sensitivity: float, dims: int = 1) -> Gaussian:
        return cls(sigma_for(cost, sensitivity, dims))

    @classmethod
    def from_params(cls, params: Mapping[str, float]) -> Gaussian:
        return cls(float(params["sigma"]))

    @property
    def params(self) -> dict[str, float]:
        return {"sigma": self.sigma, "steps": float(noise.STEPS)}

    def privacy_map(self, sensitivity: float, like: Cost, dims: int = 1) -> Cost:
        if self.sigma == 0:
            mu = 0.0 if sensitivity == 0 else math.inf
        else:
            mu = sensitivity / self.sigma + _margin(dims)
        if like.mu is not None:
            return Cost(mu=mu)
        assert like.delta is not None
        return Cost(eps=gdp_eps(mu, like.delta), delta=like.delta)

    @staticmethod
    def draw(n: int) -> np.ndarray:
        return noise.lattice_gaussian(n)

    def release(self, exact: np.ndarray, scale: np.ndarray | float,
                unit: np.ndarray | None = None) -> np.ndarray:
        exact = np.asarray(exact, dtype=np.float64)
        if self.sigma == 0:
            return exact.copy()
        k = unit if unit is not None else self.draw(exact.size)
        step = self.sigma * np.broadcast_to(np.asarray(scale, dtype=np.float64), exact.shape) / noise.STEPS
        # The output is a lattice point: a function of the rounded value and the integer draw only.
        return (np.rint(exact / step) + np.asarray(k, dtype=np.float64).reshape(exact.shape)) * step

    def variance(self, scale: np.ndarray | float = 1.0) -> np.ndarray:
        return np.asarray((self.sigma * np.asarray(scale, dtype=np.float64)) ** 2)


def _margin(dims: int) -> float:
    """mu lost to rounding ``dims`` rows to the lattice (sensitivity margin over sigma)."""
    return 2.0 * math.sqrt(max(dims, 1)) / noise.STEPS


def sigma_for(cost: Cost, sensitivity: float, dims: int = 1) -> float:
    """Noise scale meeting ``cost`` for a release of ``dims`` rows at this L2 sensitivity."""
    if sensitivity == 0:
        return 0.0
    if cost.mu is not None:
        if cost.mu <= 0:
            raise ValueError("mu must be positive")
        mu = cost.mu
    else:
        assert cost.eps is not None and cost.delta is not None
        mu = gdp_mu(cost.eps, cost.delta)
    room = mu - _margin(dims)
    if room <= 0:
        raise ValueError(f"a cost of mu={mu:.3g} cannot cover the lattice margin of {dims} rows")
    return sensitivity / room


def gaussian_release(values: np.ndarray, sigma: float, sensitivity: float) -> np.ndarray:
    """``values + N(0, sigma^2)`` per entry as a lattice Gaussian release whose privacy at this L2
    sensitivity is that of the continuous Gaussian of scale ``sigma`` (its sigma raised by the margin for
    rounding to the lattice): the Gaussian steps of the regressions, calibrated by an analytic Gaussian
    sigma (``lapras.regression.rdp``). ``sigma <= 0``: the values unchanged."""
    v = np.asarray(values, dtype=np.float64)
    if sigma <= 0:
        return v.copy()
    mech = Gaussian.calibrate(Cost(mu=sensitivity / sigma), sensitivity, max(v.size, 1))
    return mech.release(v.ravel(), 1.0).reshape(v.shape)


def lattice_feasible(sigma: float, sensitivity: float, dims: int) -> bool:
    """Whether :func:`gaussian_release` can keep the privacy of scale ``sigma`` (the rounding margin of
    ``dims`` rows is below sensitivity / sigma); only absurdly small budgets fail it."""
    if sigma <= 0:
        return True
    try:
        sigma_for(Cost(mu=sensitivity / sigma), sensitivity, max(dims, 1))
    except ValueError:
        return False
    return True
