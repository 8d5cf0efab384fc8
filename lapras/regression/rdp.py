"""Budget splits of the regression methods: how each method's (eps, delta) is shared among its mechanisms.

Each method composes (basic composition) a Gaussian mixing mechanism (T sketches; its privacy map and the
calibration of its noise floor gamma are :mod:`lapras.mechanisms.mixing`'s), a lattice Gaussian release of
the private lambda_min (:class:`lapras.mechanisms.Gaussian`), IHM's T noisy gradients (Gaussian too) and
the failure probability rho of the floor estimate. :class:`Calibration` holds the resulting noise
parameters of one run.

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
from dataclasses import dataclass

from scipy.special import ndtri

from lapras.calibration import agm_sigma
from lapras.errors import InfeasibleBudget
from lapras.mechanisms.cost import Cost
from lapras.mechanisms.mixing import GaussianMixing, eig_eps

__all__ = ["Calibration", "InfeasibleBudget", "agm_sigma", "calibrate_fast_ihm", "calibrate_ihm",
           "calibrate_linmix", "ihm_gradient_sigma"]


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
    return float(ndtri(1.0 - rho))


def calibrate_linmix(eps: float, delta: float, k: int) -> Calibration:
    """LinMix: sketch of [X, y] (row norm^2 <= 2 after scaling) with budget (eps, delta)."""
    _check_budget(eps, delta)
    d3 = delta / 3.0
    g = GaussianMixing.calibrate(Cost(eps=eps, delta=d3), 2.0, k, floor_delta=d3).gamma
    s_eig = agm_sigma(eig_eps(g, k=k, delta_eig=d3), d3, 2.0)
    return Calibration(g, s_eig, _z(_rho(delta)), 0.0, eps, delta, eig_sensitivity=2.0)


def calibrate_ihm(eps: float, delta: float, k: int, T: int) -> Calibration:
    """IHM: T Gaussian Hessian sketches of X (row norm <= 1) and T clipped gradients (sensitivity 1)."""
    _check_budget(eps, delta)
    d4 = delta / 4.0
    g = GaussianMixing.calibrate(Cost(eps=eps / 2.0, delta=d4), 1.0, k, sketches=T, floor_delta=d4).gamma
    s_eig = agm_sigma(eig_eps(g, k=k, delta_eig=d4), d4, 1.0)
    return Calibration(g, s_eig, _z(_rho(delta)), ihm_gradient_sigma(eps / 2.0, d4, T), eps, delta)


def calibrate_fast_ihm(eps: float, delta: float, k: int, T: int) -> Calibration:
    """Fast IHM: T FastMix sketches (eps/3, delta/3) as in the reference; lambda_min (eps/6, delta/6);
    gradients (eps/2, delta/4) exactly as IHM's; failure probability rho = delta/10 (total 0.85 delta).
    """
    _check_budget(eps, delta)
    rho = _rho(delta)
    g = GaussianMixing.calibrate(Cost(eps=eps / 3.0, delta=delta / 3.0), 1.0, k, sketches=T, kind="fast").gamma
    s_eig = agm_sigma(eps / 6.0, delta / 6.0, 1.0)
    return Calibration(g, s_eig, _z(rho), ihm_gradient_sigma(eps / 2.0, delta / 4.0, T), eps, delta)


def ihm_gradient_sigma(eps: float, delta: float, T: int, sensitivity: float = 1.0) -> float:
    """Noise per gradient so that T of them are together (eps, delta)-DP: sqrt(T) AGM(eps, delta).

    T Gaussian mechanisms of noise sqrt(T) sigma compose exactly (GDP) to one of noise sigma.
    """
    return math.sqrt(T) * agm_sigma(eps, delta, sensitivity)
