"""Renyi-DP accounting of the mixing mechanisms and calibration of their noise level gamma.

Notation (DESIGN.md section 5). Rows are scaled so that every row of the sketched matrix has squared norm
at most ``b2`` (1 for IHM's ``X``, ``C_X^2 + C^2`` = 2 for LinMix's ``[X, y]``). A Gaussian mixing
mechanism releases ``S A + eta * xi`` with ``S`` a k x n standard Gaussian matrix: its k rows are i.i.d.
``N(0, Sigma)`` with ``Sigma = A^T A + eta^2 I``. Adding one row ``v`` gives ``Sigma' = Sigma + v v^T``. The
noise ``eta^2`` is chosen from a private lower estimate of ``lambda_min(A^T A)`` so that the larger of the
two covariances has ``lambda_min >= gamma``; then ``beta = v^T Sigma'^{-1} v <= b2 / gamma`` and the exact
Renyi divergences of the two zero-mean Gaussians (k independent rows) are

    remove:  D_a(N(0,Sigma') || N(0,Sigma)) = k / (2(a-1)) * [a log(1-beta) - log(1 - a beta)]   (a beta < 1)
    add:     D_a(N(0,Sigma) || N(0,Sigma')) = k * [-log(1-beta)/2 - log(1 + (a-1) beta) / (2(a-1))]

(derived from log det(a Sigma_1 + (1-a) Sigma_2) for a rank-one difference; both increase with beta, so
beta = b2/gamma is the worst case). The fast mixing mechanism (seed 002: SRHT to k_in rows, then a k x k_in
Gaussian sketch) has the weaker bound with ``f(c) = log(1 - c - c^2/4)`` in place of ``log(1 - c)``.
Caveat: that form is the one that reproduces DESIGN.md's fast-IHM reference; the seed's text (002) stops
before the theorem, so its exact conditions were not re-derived here. We apply it with the same floor as
the Gaussian sketch (lambda_min(X^T X) + eta^2 >= gamma); the SRHT's own contribution to the guarantee is
taken on the paper's word until the proof is checked.

RDP composes by addition over the T sketches of IHM; the total is converted to (eps, delta) with Canonne,
Kamath & Steinke (2020) Prop. 12:  eps = r(a) + log(1 - 1/a) - (log delta + log a) / (a - 1),
minimised over a. Any a gives a valid bound, so the numerical minimisation can only err on the safe side.

Budget split (reproduces the reference calibrations of DESIGN.md section 5 to 4+ significant digits):

- LinMix (eps, delta): sketch RDP converted at delta/3; private lambda_min with eps_eig =
  sqrt(2 log(1.25/(delta/3))) sqrt(k) / gamma at delta/3; failure probability rho <= delta/3.
- IHM (eps, delta): gradients (eps/2, delta/4) as T Gaussian mechanisms of noise sqrt(T) AGM(eps/2,
  delta/4); sketches + lambda_min share (eps/2, 3 delta/4) split as in LinMix (delta/4 each).
- fast IHM (eps, delta): sketches (eps/3, delta/3) with the FastMix bound (the reference); our choice
  for the rest: lambda_min (eps/6, delta/6), gradients (eps/2, delta/4) as in IHM, rho = delta/10.

Where the reference charges the lambda_min release with the classical Gaussian-mechanism formula (valid
only for eps < 1), we charge the same eps_eig but draw the noise from the exact analytic Gaussian mechanism
for (eps_eig, delta_eig): never larger than the classical sigma when that one is valid, and valid for
every eps_eig.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy.optimize import brentq, minimize_scalar

from lapras.calibration import agm_sigma
from parser.sqlstate import INVALID_PARAMETER_VALUE, SqlError

SketchKind = Literal["gaussian", "fast"]

_GAMMA_RTOL = 1e-11
# FastMix's bound needs 1 - c - c^2/4 > 0, i.e. c < 2(sqrt 2 - 1).
_FAST_CMAX = 2.0 * (math.sqrt(2.0) - 1.0)


class InfeasibleBudget(SqlError, ValueError):
    """No noise level meets the requested (eps, delta) for these parameters (22023)."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(INVALID_PARAMETER_VALUE, message, hint=hint)


def _log1m(c: np.ndarray | float, kind: SketchKind) -> np.ndarray:
    """log(1 - c) for the Gaussian sketch, log(1 - c - c^2/4) for FastMix; nan outside the domain."""
    c = np.asarray(c, dtype=np.float64)
    inner = 1.0 - c - (0.25 * c * c if kind == "fast" else 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(inner > 0, np.log(np.where(inner > 0, inner, 1.0)), np.nan)


def sketch_rdp(alpha: np.ndarray | float, beta: float, k: int, kind: SketchKind = "gaussian") -> np.ndarray:
    """RDP of order ``alpha`` of one k-row mixing sketch with ``beta = b2 / gamma`` (inf where undefined).

    For the Gaussian sketch this is the max of the exact add and remove divergences; for FastMix the bound
    of seed 002 (remove form with the c^2/4 correction, which dominates its add form as well).
    """
    a = np.atleast_1d(np.asarray(alpha, dtype=np.float64))
    if not 0.0 < beta < 1.0:
        return np.full(a.shape, np.inf)
    remove = k * (a * _log1m(beta, kind) - _log1m(a * beta, kind)) / (2.0 * (a - 1.0))
    if kind == "gaussian":
        add = k * (-0.5 * math.log1p(-beta) - np.log1p((a - 1.0) * beta) / (2.0 * (a - 1.0)))
        out = np.fmax(remove, add)  # fmax: a nan 'remove' (a beta >= 1) must not hide behind 'add'
        out = np.where(np.isnan(remove), np.inf, out)
    else:
        out = np.where(np.isnan(remove), np.inf, remove)
    return out


def gaussian_rdp(alpha: np.ndarray | float, mu: float) -> np.ndarray:
    """RDP of a Gaussian mechanism with sensitivity / sigma = mu: alpha mu^2 / 2."""
    return np.asarray(alpha, dtype=np.float64) * mu * mu / 2.0


def rdp_to_dp(rdp: Callable[[np.ndarray], np.ndarray], delta: float, alpha_max: float) -> float:
    """Smallest eps (Canonne et al. Prop. 12) over orders 1 < alpha < alpha_max for an RDP curve."""
    if not 0.0 < delta < 1.0:
        raise ValueError("delta must be in (0, 1)")
    log_delta = math.log(delta)

    def eps_at(a: np.ndarray) -> np.ndarray:
        with np.errstate(invalid="ignore", divide="ignore"):
            e = rdp(a) + np.log1p(-1.0 / a) - (log_delta + np.log(a)) / (a - 1.0)
        return np.where(np.isfinite(e), e, np.inf)

    hi = min(alpha_max, 1e7)
    if hi <= 1.0 + 1e-9:
        return math.inf
    # Coarse log-spaced grid over alpha - 1, then a bounded refinement around the best grid point.
    grid = 1.0 + np.exp(np.linspace(math.log(min(1e-6, (hi - 1.0) / 2.0)), math.log(hi - 1.0), 400))
    grid = grid[grid < alpha_max]
    if grid.size == 0:
        return math.inf
    vals = eps_at(grid)
    i = int(np.argmin(vals))
    if not np.isfinite(vals[i]):
        return math.inf
    lo_a = grid[max(i - 1, 0)]
    hi_a = grid[min(i + 1, len(grid) - 1)]
    best = float(vals[i])
    if hi_a > lo_a:
        res = minimize_scalar(lambda x: float(eps_at(np.array([x]))[0]), bounds=(lo_a, hi_a),
                              method="bounded", options={"xatol": 1e-10 * lo_a})
        if np.isfinite(res.fun):
            best = min(best, float(res.fun))
    return best


def sketch_eps(gamma: float, *, k: int, T: int, delta_rdp: float, b2: float = 1.0,
               kind: SketchKind = "gaussian", delta_eig: float | None = None) -> float:
    """eps of T composed k-row mixing sketches at noise level gamma, plus the lambda_min release if any.

    ``delta_eig`` set: adds the eps charged for the private lambda_min estimate (see module docstring).
    """
    beta = b2 / gamma
    cmax = _FAST_CMAX if kind == "fast" else 1.0
    alpha_max = cmax / beta
    eps = rdp_to_dp(lambda a: T * sketch_rdp(a, beta, k, kind), delta_rdp, alpha_max)
    if delta_eig is not None:
        eps += eig_eps(gamma, k=k, delta_eig=delta_eig)
    return eps


def eig_eps(gamma: float, *, k: int, delta_eig: float) -> float:
    """eps charged for the private lambda_min estimate that goes with noise level gamma."""
    return math.sqrt(2.0 * math.log(1.25 / delta_eig)) * math.sqrt(k) / gamma


def calibrate_gamma(eps: float, *, k: int, T: int, delta_rdp: float, b2: float = 1.0,
                    kind: SketchKind = "gaussian", delta_eig: float | None = None) -> float:
    """Smallest gamma (relative tolerance 1e-11) with sketch_eps(gamma) <= eps; raise if none exists.

    Bracketed root finding on log(gamma): sketch_eps decreases in gamma, from +inf at gamma -> b2 (beta
    -> 1) to 0 as gamma -> inf. The returned gamma is checked to satisfy the budget (never infeasible).
    """
    if not (eps > 0 and math.isfinite(eps)):
        raise InfeasibleBudget(f"epsilon must be positive and finite, got {eps}")
    if not 0 < delta_rdp < 1 or (delta_eig is not None and not 0 < delta_eig < 1):
        raise InfeasibleBudget("delta must be in (0, 1)")

    def f(log_g: float) -> float:
        e = sketch_eps(math.exp(log_g), k=k, T=T, delta_rdp=delta_rdp, b2=b2, kind=kind, delta_eig=delta_eig)
        return (e if math.isfinite(e) else 1e300) - eps

    lo = math.log(b2 * 1.000001)
    hi = math.log(b2 * 10.0)
    while f(hi) > 0:
        hi += math.log(10.0)
        if hi > math.log(b2 * 1e15):
            raise InfeasibleBudget(f"no sketch noise level meets epsilon={eps:g}",
                                   hint="raise epsilon or lower the sketch size")
    if f(lo) <= 0:  # already private at the smallest admissible gamma
        return b2 * 1.000001
    root = brentq(f, lo, hi, xtol=1e-14, rtol=_GAMMA_RTOL, maxiter=500)
    g = math.exp(root)
    # brentq's answer lies within tolerance of the root on either side: step up until it is feasible.
    while f(math.log(g)) > 0:
        g *= 1.0 + 1e-10
    return g


@dataclass(frozen=True)
class Calibration:
    """Noise parameters of one method run: everything needed to add noise, nothing data-dependent."""

    gamma: float  # lower bound enforced on lambda_min(A^T A) + eta^2 (0 when unused)
    sigma_eig: float  # noise of the lambda_min release (sensitivity b2)
    z_rho: float  # lambda_min estimate is shifted down by z_rho * sigma_eig (under-estimate w.p. 1 - rho)
    sigma_grad: float  # per-iteration gradient noise (sensitivity 1 after scaling), 0 when unused
    eps: float
    delta: float
    eig_sensitivity: float = 1.0  # L2 sensitivity of lambda_min(A^T A): the bound b2 on a row's squared norm


def _rho(delta: float) -> float:
    return delta / 10.0


def _check_budget(eps: float, delta: float) -> None:
    if not (eps > 0 and math.isfinite(eps)) or not 0 < delta < 1:
        raise InfeasibleBudget(f"need epsilon > 0 and 0 < delta < 1, got ({eps}, {delta})")


def _z(rho: float) -> float:
    from scipy.special import ndtri

    return float(ndtri(1.0 - rho))


def calibrate_linmix(eps: float, delta: float, k: int) -> Calibration:
    """LinMix: sketch of [X, y] (row norm^2 <= 2 after scaling) with budget (eps, delta)."""
    _check_budget(eps, delta)
    d3 = delta / 3.0
    g = calibrate_gamma(eps, k=k, T=1, delta_rdp=d3, b2=2.0, delta_eig=d3)
    s_eig = agm_sigma(eig_eps(g, k=k, delta_eig=d3), d3, 2.0)
    return Calibration(g, s_eig, _z(_rho(delta)), 0.0, eps, delta, eig_sensitivity=2.0)


def calibrate_ihm(eps: float, delta: float, k: int, T: int) -> Calibration:
    """IHM: T Gaussian Hessian sketches of X (row norm <= 1) and T clipped gradients (sensitivity 1)."""
    _check_budget(eps, delta)
    d4 = delta / 4.0
    g = calibrate_gamma(eps / 2.0, k=k, T=T, delta_rdp=d4, b2=1.0, delta_eig=d4)
    s_eig = agm_sigma(eig_eps(g, k=k, delta_eig=d4), d4, 1.0)
    return Calibration(g, s_eig, _z(_rho(delta)), ihm_gradient_sigma(eps / 2.0, d4, T), eps, delta)


def calibrate_fast_ihm(eps: float, delta: float, k: int, T: int) -> Calibration:
    """Fast IHM: T FastMix sketches (eps/3, delta/3) as in the reference; lambda_min (eps/6, delta/6);
    gradients (eps/2, delta/4) exactly as IHM's; failure probability rho = delta/10 (total 0.85 delta).
    """
    _check_budget(eps, delta)
    rho = _rho(delta)
    g = calibrate_gamma(eps / 3.0, k=k, T=T, delta_rdp=delta / 3.0, b2=1.0, kind="fast")
    s_eig = agm_sigma(eps / 6.0, delta / 6.0, 1.0)
    return Calibration(g, s_eig, _z(rho), ihm_gradient_sigma(eps / 2.0, delta / 4.0, T), eps, delta)


def ihm_gradient_sigma(eps: float, delta: float, T: int, sensitivity: float = 1.0) -> float:
    """Noise per gradient so that T of them are together (eps, delta)-DP: sqrt(T) AGM(eps, delta).

    T Gaussian mechanisms of noise sqrt(T) sigma compose exactly (GDP) to one of noise sigma.
    """
    return math.sqrt(T) * agm_sigma(eps, delta, sensitivity)
