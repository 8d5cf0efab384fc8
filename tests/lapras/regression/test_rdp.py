"""Calibration of the mixing mechanisms against DESIGN.md section 5 and independent cross-checks."""

from __future__ import annotations

import math

import numpy as np
import pytest

from lapras.mechanisms import mixing
from lapras.regression import rdp

N = 2**19
DELTA = 1.0 / N**2
EPS = (0.3162, 1.0, 10.0)


def sig4(x: float, ref: float) -> bool:
    """Equal to 4 significant digits (relative difference below half a unit in the 4th digit)."""
    return abs(x - ref) <= 0.5 * 10 ** (math.floor(math.log10(abs(ref))) - 3)


@pytest.mark.parametrize("eps,ref", list(zip(EPS, (1643.36, 528.74, 55.59), strict=True)))
def test_ihm_gamma_reference(eps: float, ref: float) -> None:
    assert sig4(rdp.calibrate_ihm(eps, DELTA, 256, 3).gamma, ref)


@pytest.mark.parametrize("eps,ref", list(zip(EPS, (1424.92, 465.54, 51.28), strict=True)))
def test_fast_ihm_gamma_reference(eps: float, ref: float) -> None:
    assert sig4(rdp.calibrate_fast_ihm(eps, DELTA, 192, 3).gamma, ref)


@pytest.mark.parametrize("eps,ref", list(zip(EPS, (1550.77, 500.35, 53.99), strict=True)))
def test_linmix_gamma_reference(eps: float, ref: float) -> None:
    assert sig4(rdp.calibrate_linmix(eps, DELTA, 768).gamma, ref)


@pytest.mark.parametrize("eps,ref", list(zip(EPS, (68.376, 22.295, 2.446), strict=True)))
def test_ihm_gradient_noise_reference(eps: float, ref: float) -> None:
    assert sig4(rdp.calibrate_ihm(eps, DELTA, 256, 3).sigma_grad, ref)


def test_gradient_noise_cross_checked_with_dp_accounting() -> None:
    """T Gaussian mechanisms of noise sqrt(T) AGM(eps, delta) are (eps, delta)-DP (PLD accountant)."""
    dp_accounting = pytest.importorskip("dp_accounting")
    from dp_accounting.pld import pld_privacy_accountant

    eps, delta, T = 0.5, 1e-6, 3
    sigma = rdp.ihm_gradient_sigma(eps, delta, T)
    acc = pld_privacy_accountant.PLDAccountant(value_discretization_interval=1e-4)
    acc.compose(dp_accounting.GaussianDpEvent(sigma), T)
    assert acc.get_delta(eps) <= delta * 1.01
    # ...and tight: 5 % less noise breaks the guarantee
    acc2 = pld_privacy_accountant.PLDAccountant(value_discretization_interval=1e-4)
    acc2.compose(dp_accounting.GaussianDpEvent(sigma * 0.95), T)
    assert acc2.get_delta(eps) > delta


@pytest.mark.parametrize("kind", ["gaussian", "fast"])
@pytest.mark.parametrize("eps", [0.05, 0.3162, 1.0, 10.0, 100.0])
def test_calibrated_gamma_is_feasible_and_tight(kind: mixing.SketchKind, eps: float) -> None:
    kw = dict(k=128, T=3, delta_rdp=1e-9, b2=1.0, kind=kind)
    g = mixing.calibrate_gamma(eps, **kw)  # type: ignore[arg-type]
    assert mixing.sketch_eps(g, **kw) <= eps  # type: ignore[arg-type]
    assert mixing.sketch_eps(g * (1 - 1e-6), **kw) > eps * (1 - 1e-4)  # type: ignore[arg-type]


def test_infeasible_budget_raises() -> None:
    with pytest.raises(rdp.InfeasibleBudget):
        mixing.calibrate_gamma(0.0, k=10, T=1, delta_rdp=1e-6)
    with pytest.raises(rdp.InfeasibleBudget):
        mixing.calibrate_gamma(1e-30, k=10**6, T=10**3, delta_rdp=1e-300)
    with pytest.raises(rdp.InfeasibleBudget):
        rdp.calibrate_ihm(1.0, 1.5, 64, 3)


def test_fast_bound_weaker_than_gaussian() -> None:
    a = np.linspace(1.01, 50, 200)
    for beta in (1e-3, 1e-2, 0.01):
        g = mixing.sketch_rdp(a, beta, 64, "gaussian")
        f = mixing.sketch_rdp(a, beta, 64, "fast")
        ok = np.isfinite(f)
        assert np.all(f[ok] >= g[ok] - 1e-12)


def _renyi_gauss(S1: np.ndarray, S2: np.ndarray, alpha: float) -> float:
    """Exact D_alpha(N(0,S1) || N(0,S2)) for one sample."""
    Sa = alpha * S2 + (1 - alpha) * S1
    ld = lambda M: np.linalg.slogdet(M)[1]  # noqa: E731
    return float(-(ld(Sa) - (1 - alpha) * ld(S1) - alpha * ld(S2)) / (2 * (alpha - 1)))


def test_sketch_rdp_bounds_exact_divergence_of_neighbours() -> None:
    """On random small data with lambda_min(Sigma_big) >= gamma, both directions stay under the bound."""
    rng = np.random.default_rng(1)
    d, k = 3, 7
    for _ in range(50):
        X = rng.standard_normal((20, d))
        X /= np.maximum(np.linalg.norm(X, axis=1, keepdims=True), 1.0)
        v = rng.standard_normal(d)
        v /= np.linalg.norm(v) * rng.uniform(1.0, 1.5)
        gamma = rng.uniform(2.0, 10.0)
        lam = np.linalg.eigvalsh(X.T @ X)[0]
        eta2 = max(gamma - lam, 0.0)
        S_small = X.T @ X + eta2 * np.eye(d)
        S_big = S_small + np.outer(v, v)
        for alpha in (1.5, 2.0, 0.9 * gamma):
            bound = float(mixing.sketch_rdp(alpha, 1.0 / gamma, k)[0])
            exact = k * max(_renyi_gauss(S_small, S_big, alpha), _renyi_gauss(S_big, S_small, alpha))
            assert exact <= bound * (1 + 1e-9) + 1e-12


def test_worst_case_neighbour_attains_bound() -> None:
    """The bound is tight: a row along the eigenvector of lambda_min = gamma (norm 1) attains it."""
    gamma, k, alpha = 5.0, 4, 2.5
    S_small = np.diag([gamma - 1.0, 9.0])
    S_big = S_small + np.outer([1.0, 0.0], [1.0, 0.0])
    exact = k * max(_renyi_gauss(S_small, S_big, alpha), _renyi_gauss(S_big, S_small, alpha))
    assert exact == pytest.approx(float(mixing.sketch_rdp(alpha, 1.0 / gamma, k)[0]), rel=1e-9)
