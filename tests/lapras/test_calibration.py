"""Calibrations against DESIGN.md's reference figures and against dp-accounting's PLD accountant."""

from __future__ import annotations

import math

import numpy as np
import pytest
from dp_accounting import dp_event
from dp_accounting.pld import pld_privacy_accountant

from lapras.accounting import Budget, split_budget
from lapras.calibration import agm_sigma, gdp_delta, gdp_eps, gdp_mu
from lapras.mechanisms import Cost, Gaussian, sigma_for
from lapras.mechanisms.sensitivity import kron_sensitivity, l2_sensitivity


@pytest.mark.parametrize("eps,delta,sigma", [(1, 1e-3, 2.5747), (0.5, 5e-4, 5.014), (0.1, 1e-4, 24.51),
                                             (0.01, 1e-5, 243.8)])
def test_agm_reference_figures(eps: float, delta: float, sigma: float) -> None:
    assert agm_sigma(eps, delta) == pytest.approx(sigma, rel=2e-4)


def test_gdp_reference_figures() -> None:
    mu = gdp_mu(1.0, 1e-3)
    assert mu == pytest.approx(1 / 2.5747, rel=1e-4)
    # The Online stream under gdp: S = 100 equal shares of mu^2.
    assert 1 / math.sqrt(mu**2 / 100) == pytest.approx(25.75, rel=1e-3)


def _pld_delta(sigma: float, eps: float, count: int = 1) -> float:
    acc = pld_privacy_accountant.PLDAccountant(value_discretization_interval=1e-4)
    acc.compose(dp_event.GaussianDpEvent(sigma), count)
    return acc.get_delta(eps)


@pytest.mark.parametrize("eps,delta", [(1.0, 1e-3), (0.3, 1e-5), (2.0, 1e-7), (0.05, 1e-4)])
def test_agm_matches_pld_accountant(eps: float, delta: float) -> None:
    sigma = agm_sigma(eps, delta)
    # PLD discretisation is pessimistic by a small relative amount: compare with a relative tolerance.
    assert _pld_delta(sigma, eps) == pytest.approx(delta, rel=2e-2)


@pytest.mark.parametrize("k", [4, 25])
def test_gdp_composition_matches_pld(k: int) -> None:
    """k Gaussian releases with sigma each compose to mu = sqrt(k)/sigma: same delta as the PLD composition."""
    sigma = 6.0
    mu = math.sqrt(k) / sigma
    eps = 1.0
    assert _pld_delta(sigma, eps, k) == pytest.approx(gdp_delta(mu, eps), rel=2e-2)


@pytest.mark.parametrize("delta", [1e-3, 1e-9, 2.0**-38])
def test_relative_tolerance_for_tiny_delta(delta: float) -> None:
    mu = gdp_mu(1.0, delta)
    assert gdp_delta(mu, 1.0) == pytest.approx(delta, rel=1e-8)
    assert gdp_eps(mu, delta) == pytest.approx(1.0, rel=1e-8)


def test_sensitivity_from_matrix() -> None:
    m = np.array([[1.0, 1.0, 0.0], [0.0, 1.0, 1.0]])
    assert l2_sensitivity(m) == pytest.approx(math.sqrt(2))
    a, b = np.array([[1.0, 0.5], [0.0, 1.0]]), np.array([[2.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    assert kron_sensitivity([a, b]) == pytest.approx(l2_sensitivity(np.kron(a, b)))


def test_sigma_for_modes() -> None:
    # Delta / mu, plus the lattice margin of one row: 2 / STEPS of mu (4e-6 relative here).
    assert sigma_for(Cost(mu=0.5), 2.0) == pytest.approx(2.0 / (0.5 - 2.0 / 2**20), rel=1e-12)
    assert sigma_for(Cost(mu=0.5), 2.0) == pytest.approx(4.0, rel=1e-5)
    assert sigma_for(Cost(eps=1.0, delta=1e-3), 2.0) == pytest.approx(2 * 2.5747, rel=1e-4)


def test_budget_units_and_composition() -> None:
    g = Budget("gdp", 1.0, 1e-3)
    costs = [g.cost_of(g.units / 4)] * 4
    total = g.compose(costs)
    assert total.mu == pytest.approx(gdp_mu(1.0, 1e-3))
    assert g.eps_delta(g.units)[0] == pytest.approx(1.0, rel=1e-8)
    b = Budget("basic", 1.0, 1e-3)
    tot = b.compose([b.cost_of(0.25)] * 4)
    assert tot.eps == pytest.approx(1.0) and tot.delta == pytest.approx(1e-3)
    assert split_budget(1.0, 1e-3, 0.2) == ((0.8, 8e-4), (0.2, 2e-4), (0.0, 0.0))
    parts = split_budget(1.0, 1e-3, 0.2, 0.1)
    assert parts[0] == pytest.approx((0.7, 7e-4)) and parts[2] == pytest.approx((0.1, 1e-4))


def test_gaussian_noise_variance_matches_sigma() -> None:
    """Chi-square test of the empirical variance against the calibrated sigma; false-failure rate 1e-4."""
    from scipy.stats import chi2

    n = 20000
    cost = Cost(eps=0.5, delta=1e-5)
    mech = Gaussian.calibrate(cost, 1.0)
    values = mech.release(np.zeros(n), 1.0)
    stat = float(np.sum(values**2) / mech.variance())
    assert chi2.ppf(0.5e-4, n) < stat < chi2.ppf(1 - 0.5e-4, n)
