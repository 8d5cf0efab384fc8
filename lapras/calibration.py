"""Exact Gaussian calibrations: Analytic Gaussian Mechanism (Balle & Wang 2018) and mu-GDP conversions.

Both rest on one curve. A Gaussian mechanism with L2 sensitivity ``s`` and noise ``sigma`` is mu-GDP with
``mu = s / sigma`` (Dong, Roth & Su 2019), and its tight (epsilon, delta) profile is

    delta(eps; mu) = Phi(-eps/mu + mu/2) - e^eps * Phi(-eps/mu - mu/2),

which is exactly Balle & Wang's condition for the analytic Gaussian mechanism. Approximate zCDP costs
(partition selection) convert to (epsilon, delta) by Canonne, Kamath & Steinke's Proposition 12 (the tight
conversion from Renyi DP, at every order alpha > 1 of rho-zCDP's curve alpha * rho). Every inversion below is a
bracketed root find (brentq) with a *relative* tolerance on the unknown and a check on log(delta), so that
delta = 1/n^2 is calibrated as carefully as delta = 1e-3.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from scipy.optimize import brentq, minimize_scalar
from scipy.special import log_ndtr, ndtr, ndtri

_RTOL = 1e-12
# Calibrations treat an epsilon above this as this one: a guarantee at a smaller epsilon holds at every larger
# one (sound), and the root finds below overflow near 1e300. 1e12 leaves test configurations that ask for noise
# below rounding (epsilon 1e10 on a sum of sensitivity 5,148) the noise they asked for.
EPS_MAX = 1e12


def gdp_delta(mu: float, eps: float) -> float:
    """Smallest delta such that a mu-GDP mechanism is (eps, delta)-DP."""
    if mu <= 0:
        return 0.0
    if math.isinf(mu):
        return 1.0
    a = -eps / mu + mu / 2
    b = -eps / mu - mu / 2
    # e^eps * Phi(b) computed in log space: both terms can be tiny or e^eps huge.
    first = ndtr(a)
    second = math.exp(eps + float(log_ndtr(b)))
    return max(float(first - second), 0.0)


def _log_gap(mu: float, eps: float, delta: float) -> float:
    """log(delta(eps; mu)) - log(delta): increasing in mu, the quantity brentq zeroes."""
    d = gdp_delta(mu, eps)
    return (math.log(d) if d > 0 else -1e300) - math.log(delta)


def _bracket(f: Callable[[float], float], lo: float, hi: float) -> tuple[float, float]:
    """Widen [lo, hi] geometrically until f changes sign (f increasing)."""
    while f(lo) > 0:
        lo /= 2.0
    while f(hi) < 0:
        hi *= 2.0
    return lo, hi


def gdp_mu(eps: float, delta: float) -> float:
    """Largest mu whose mu-GDP trade-off curve is (eps, delta)-DP (eps above EPS_MAX calibrated as EPS_MAX)."""
    _check(eps, delta)
    eps = min(eps, EPS_MAX)
    mu = _gdp_root(eps, delta)
    err = _rounding(mu, eps, delta)
    if err > 1e-3:  # the curve cannot be evaluated near this root: a bound that needs no cancellation
        zero = 2.0 * float(ndtri(0.5 + 0.5 * delta))  # (0, delta)-DP, hence (eps, delta)-DP
        return max(zero, _classical_mu(eps, delta) if eps < 1.0 else 0.0) * (1.0 - 1e-12)
    if err > 1e-13:  # the root's delta may be off by err: calibrate below it
        mu = _gdp_root(eps, delta / (1.0 + 10.0 * err))
    return mu


def _gdp_root(eps: float, delta: float) -> float:
    f = lambda m: _log_gap(m, eps, delta)  # noqa: E731
    lo, hi = _bracket(f, 1e-3, 1.0)
    return float(brentq(f, lo, hi, xtol=1e-300, rtol=_RTOL, maxiter=500))


def _rounding(mu: float, eps: float, delta: float) -> float:
    """Relative error of delta(eps; mu) in double precision, from its two terms' rounding: each is off by
    phi(a) |a| ulps of a (e^eps phi(b) = phi(a)) plus its own ulps, a = -eps / mu + mu / 2. It matters only
    where both terms are tiny and nearly equal: at eps = 1e-12, delta = 1e-300 the root find returned a mu
    whose true delta was 1e254 times delta (checked against 80-digit arithmetic)."""
    if mu <= 0 or not math.isfinite(mu):
        return 0.0
    a = -eps / mu + mu / 2.0
    log_err = math.log(2.2e-16) + math.log(math.exp(-0.5 * a * a) / math.sqrt(2 * math.pi) * (abs(a) + mu + 1.0)
                                          + 2.0 * float(ndtr(a)) + 1e-320)
    return math.exp(min(log_err - math.log(delta), 700.0))


def _classical_mu(eps: float, delta: float) -> float:
    """The classical Gaussian mechanism's mu (Dwork & Roth, Theorem A.1: sigma >= sqrt(2 log(1.25 / delta)) /
    eps is (eps, delta)-DP for eps < 1), for where the exact curve cannot be evaluated in double precision."""
    return eps / math.sqrt(2.0 * math.log(1.25 / delta))


def gdp_eps(mu: float, delta: float) -> float:
    """Smallest eps at which a mu-GDP mechanism is (eps, delta)-DP (0 when mu == 0)."""
    if not 0 < delta < 1:
        raise ValueError("delta must be in (0, 1)")
    if mu <= 0 or gdp_delta(mu, 0.0) <= delta:
        return 0.0
    # delta(eps; mu) decreases in eps: zero the negated gap.
    f = lambda e: -_log_gap(mu, e, delta)  # noqa: E731
    hi = max(1.0, mu * mu)
    while f(hi) < 0:
        hi *= 2.0
    eps = float(brentq(f, 0.0, hi, xtol=1e-300, rtol=_RTOL, maxiter=500))
    err = _rounding(mu, eps, delta)
    if err > 1e-3:
        # The curve is not evaluable there (see _rounding): read an upper eps that needs no cancellation, the
        # classical bound where it holds (eps < 1), else mu-GDP's (mu^2 / 2)-zCDP conversion.
        classical = mu * math.sqrt(2.0 * math.log(1.25 / delta)) * (1.0 + 1e-12)
        return classical if classical < 1.0 else max(eps, zcdp_eps(mu * mu / 2.0, delta))
    # Rounded up by the root's tolerance and by delta's rounding error over the curve's slope in eps,
    # e^eps Phi(b): at a tiny eps the curve is flat, and a relative 1e-10 in delta moves eps by a percent.
    slope = math.exp(eps + float(log_ndtr(-eps / mu - mu / 2.0)))
    return eps * (1.0 + 4.0 * _RTOL) + 10.0 * err * delta / slope


def agm_sigma(eps: float, delta: float, sensitivity: float = 1.0) -> float:
    """Smallest sigma making the Gaussian mechanism (eps, delta)-DP for the given L2 sensitivity."""
    if sensitivity < 0:
        raise ValueError("sensitivity must be >= 0")
    if sensitivity == 0:
        return 0.0
    return sensitivity / gdp_mu(eps, delta)


def zcdp_eps(rho: float, delta: float) -> float:
    """Smallest eps at which rho-zCDP is (eps, delta)-DP (Canonne, Kamath & Steinke 2020, Prop. 12):
    the minimum over alpha > 1 of alpha rho + log(1 - 1/alpha) - (log delta + log alpha) / (alpha - 1)."""
    if not 0 < delta < 1:
        raise ValueError("delta must be in (0, 1)")
    if rho <= 0:
        return 0.0
    log_delta = math.log(delta)

    def eps_at(log_am1: float) -> float:
        a = 1.0 + math.exp(log_am1)
        return a * rho + math.log1p(-1.0 / a) - (log_delta + math.log(a)) / (a - 1.0)

    # The optimum sits near alpha - 1 = sqrt(log(1/delta) / rho); the curve is smooth and unimodal there.
    centre = 0.5 * math.log(max(-log_delta, 1e-300) / rho)
    res = minimize_scalar(eps_at, bounds=(centre - 12.0, centre + 12.0), method="bounded",
                          options={"xatol": 1e-12})
    return max(0.0, float(min(res.fun, eps_at(centre))))


def approx_zcdp_eps(rho: float, delta_events: float, delta: float) -> float:
    """Smallest eps at which a delta_events-approximately rho-zCDP release is (eps, delta)-DP, i.e. with
    zCDP's delta at eps plus e^eps delta_events at most delta (see lapras.accounting.PartitionAccountant);
    inf when delta cannot cover the events."""
    if delta_events <= 0:
        return zcdp_eps(rho, delta)
    eps = 0.0
    for _ in range(200):  # eps <- zcdp_eps(rho, delta - e^eps delta_events) rises to its fixed point
        room = delta - (math.exp(eps) * delta_events if eps < 700 else math.inf)
        if room <= 0:
            return math.inf
        nxt = zcdp_eps(rho, room)
        if nxt <= eps * (1 + 1e-12):
            return eps
        eps = nxt * (1 + 1e-12)
    return eps


def zcdp_rho(eps: float, delta: float) -> float:
    """Largest rho whose rho-zCDP guarantee is (eps, delta)-DP (inverse of :func:`zcdp_eps`; eps above
    EPS_MAX calibrated as EPS_MAX)."""
    _check(eps, delta)
    eps = min(eps, EPS_MAX)
    f = lambda r: zcdp_eps(r, delta) - eps  # noqa: E731
    hi = eps
    while f(hi) < 0:
        hi *= 2.0
    # The root is found to a relative 1e-12; shaving a little more keeps the rho on the safe side.
    return float(brentq(f, 1e-300, hi, xtol=1e-300, rtol=_RTOL, maxiter=500)) * (1.0 - 1e-9)


def _check(eps: float, delta: float) -> None:
    if not eps > 0 or math.isinf(eps):
        raise ValueError(f"epsilon must be positive and finite, got {eps}")
    if not 0 < delta < 1:
        raise ValueError(f"delta must be in (0, 1), got {delta}")
