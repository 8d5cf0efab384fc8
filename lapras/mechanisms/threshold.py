"""DP partition selection: the Gaussian threshold mechanism, OpenDP's ``make_gaussian_threshold``.

Input: for each candidate key (a value of the grouped columns), the number of privacy units holding it,
where each unit is counted in at most ``m`` keys (``max_groups_per_unit``, bounded in the pushed-down SQL;
without a privacy unit every row is a unit and m = 1). Output: the keys whose count plus discrete Gaussian
noise ``Z ~ N_Z(0, sigma^2)`` reaches the integer threshold ``T``; the noisy counts are discarded.

Privacy (Rogers 2023, "A unifying privacy analysis framework for unknown domain algorithms"; OpenDP's
proof of ``make_gaussian_threshold``): neighbouring inputs differ by one unit, which changes at most m
counts by one (L0 <= m, Linf <= 1, L2 <= sqrt(m)). Keys both inputs hold get a discrete Gaussian release
(Canonne, Kamath & Steinke), rho-zCDP with ``rho = m / (2 sigma^2)``; a key only one input holds has count
exactly 1 there and is released with probability ``P[1 + Z >= T]``. Hence the release is
delta-approximately rho-zCDP with

    rho = m / (2 sigma^2),        delta = m * P[Z >= T - 1]          (Z discrete Gaussian, scale sigma),

computed exactly here (:func:`discrete_gaussian_tail` sums the discrete Gaussian's mass). OpenDP 0.16's own
map reports a smaller delta: it takes the tail beyond T - 1, leaving out the mass at exactly T - 1 that the
sampler does release (opendp/opendp#2922, open); the statistical test measures the release rate of a single
unit's key against this module's bound, which that mass makes up to twice OpenDP's at small sigma. Only
OpenDP's sampler is used. Calibration for a granted cost (rho, delta): ``sigma = sqrt(m / (2 rho))`` and ``T`` the least integer
whose map's delta is at most the granted delta. A key held by n units is released with probability
``P[Z >= T - n]``: at most ``delta / m`` for a key of a single unit (:meth:`single_unit_bound`).

Such a cost is not GDP (its delta is an event, not a trade-off curve), so it never enters the query
stream's mu^2 accounting: :class:`lapras.accounting.PartitionAccountant` composes selections in their own
budget part (rho adds, delta adds), which composes with the other parts by basic composition.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
from scipy.special import ndtr, ndtri

from lapras.mechanisms import noise
from lapras.mechanisms.cost import Cost


class GaussianThreshold:
    """Keys released when their unit count plus discrete Gaussian noise of ``sigma`` reaches ``threshold``,
    for inputs where a unit holds at most ``max_keys`` keys."""

    name = "gaussian_threshold"

    def __init__(self, sigma: float, threshold: int, max_keys: int = 1) -> None:
        if not sigma > 0 or not math.isfinite(sigma):
            raise ValueError("sigma must be positive and finite")
        if max_keys < 1:
            raise ValueError("max_keys must be >= 1")
        self.sigma = float(sigma)
        self.threshold = int(threshold)
        self.max_keys = int(max_keys)

    @classmethod
    def calibrate(cls, cost: Cost, max_keys: int = 1) -> GaussianThreshold:
        """The least noisy instance whose release costs at most ``cost`` (a ``Cost(rho=, delta=)``)."""
        if cost.rho is None or cost.delta is None or not cost.rho > 0 or not 0 < cost.delta < 1:
            raise ValueError("a threshold release is calibrated from Cost(rho > 0, 0 < delta < 1)")
        # A hair more noise than the formula so that OpenDP's rho, recomputed in floating point, is within.
        sigma = math.sqrt(max_keys / (2.0 * cost.rho)) * (1.0 + 1e-12)

        def delta_at(t: int) -> float:
            return _map(sigma, t, max_keys)[1]

        # delta falls as the threshold rises: bracket from the continuous tail, then bisect on integers.
        hi = max(2, math.ceil(1.0 + sigma * (-float(ndtri(cost.delta / max_keys)) + 1.0)))
        if max_keys * _TAIL_SLACK * 2.0 >= cost.delta:
            raise ValueError(f"a threshold release cannot be calibrated to delta {cost.delta:g} over {max_keys} keys")
        while delta_at(hi) > cost.delta:
            hi *= 2
        lo = 1
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if delta_at(mid) <= cost.delta:
                hi = mid
            else:
                lo = mid
        t = hi if delta_at(lo) > cost.delta else lo
        mech = cls(sigma, t, max_keys)
        got = mech.privacy_map()
        assert got.rho is not None and got.rho <= cost.rho * (1 + 1e-9) and (got.delta or 0.0) <= cost.delta
        return mech

    @classmethod
    def from_params(cls, params: Mapping[str, float]) -> GaussianThreshold:
        return cls(float(params["sigma"]), int(params["threshold"]), int(params.get("max_keys", 1)))

    @property
    def params(self) -> dict[str, float]:
        return {"sigma": self.sigma, "threshold": float(self.threshold), "max_keys": float(self.max_keys)}

    def privacy_map(self, max_keys: int | None = None) -> Cost:
        """Cost of one selection over inputs where a unit holds at most ``max_keys`` keys (the
        calibrated bound by default)."""
        rho, delta = _map(self.sigma, self.threshold, max_keys or self.max_keys)
        return Cost(rho=rho, delta=delta)

    def single_unit_bound(self) -> float:
        """Probability that a key held by a single unit is released (the delta of one key)."""
        return _map(self.sigma, self.threshold, 1)[1]

    def release_probability(self, units: np.ndarray | float) -> np.ndarray:
        """Probability ``P[Z >= T - units]`` that a key held by ``units`` units is released."""
        u = np.atleast_1d(np.asarray(units, dtype=np.int64))
        out = np.array([discrete_gaussian_tail(self.sigma, self.threshold - int(x)) for x in u.ravel()])
        return out.reshape(np.shape(units))

    def select(self, counts: np.ndarray) -> np.ndarray:
        """Mask of the released keys, for per-key unit counts (each unit in at most ``max_keys`` keys)."""
        return noise.threshold_keys(np.asarray(counts, dtype=np.int64), self.sigma, self.threshold)


def _map(sigma: float, threshold: int, max_keys: int) -> tuple[float, float]:
    """(rho, delta) of one selection: rho of the discrete Gaussian at L2 sensitivity sqrt(m) (Canonne,
    Kamath & Steinke), delta the union over m keys of a single unit's key crossing the threshold."""
    delta = min(1.0, max_keys * discrete_gaussian_tail(sigma, threshold - 1))
    return max_keys / (2.0 * sigma * sigma), delta


def discrete_gaussian_tail(sigma: float, k: int) -> float:
    """An upper bound on ``P[Z >= k]`` for ``Z ~ N_Z(0, sigma^2)`` (mass proportional to exp(-z^2 / (2 sigma^2))
    on the integers), tight to a relative 1e-9 up to ``_EXACT_SIGMA``: the mass summed term by term (terms past
    40 sigma, below e^-800, are zero in double precision), rounded up by a relative 1e-9, far above the sums'
    rounding error, plus ``_TAIL_SLACK`` for the terms that underflow (each off by at most a subnormal's ulp).
    Above ``_EXACT_SIGMA`` (arrays of 40 sigma terms would not fit in memory at a tiny epsilon) it is the
    integral bound: the terms from k on are at most the first plus the integral from k, and the normaliser is
    at least sigma sqrt(2 pi) (Poisson summation), so P[Z >= k] <= Phi(-k / sigma) + phi(k / sigma) / sigma,
    looser than the sum by a relative (k / sigma) / sigma, under 2% there."""
    if k <= 0:
        return 1.0 - discrete_gaussian_tail(sigma, 1 - k) / (1.0 + 1e-9)  # symmetry: P[Z >= k] = 1 - P[Z >= 1 - k]
    if sigma > _EXACT_SIGMA:
        t = k / sigma
        bound = float(ndtr(-t)) + math.exp(-0.5 * t * t) / (sigma * math.sqrt(2.0 * math.pi))
        return min(1.0, bound * (1.0 + 1e-9) + _TAIL_SLACK)
    reach = math.ceil(40.0 * sigma) + 1
    if k > reach:
        return _TAIL_SLACK
    z = np.arange(0, reach + 1, dtype=np.float64)
    w = np.exp(-(z * z) / (2.0 * sigma * sigma))
    total = 2.0 * float(np.sum(w[1:][::-1])) + 1.0
    # The tail is summed on its own, smallest terms first, never as 1 minus a near-1 sum.
    return min(1.0, float(np.sum(w[k:][::-1])) / total * (1.0 + 1e-9) + _TAIL_SLACK)


# Above this sigma the tail is bounded by an integral rather than summed (80,001 terms at most).
_EXACT_SIGMA = 2000.0
# Covers the terms that underflow to subnormals or 0 (at most 80,002 of them, each off by under 2^-1074 in
# the sum, which the normaliser >= 1 does not enlarge): the tail is an upper bound at every sigma, never 0.
# The accountant grants a selection at least 1e-300 (lapras.accounting.DELTA_FLOOR), far above.
_TAIL_SLACK = 1e-315
