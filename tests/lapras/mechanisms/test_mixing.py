"""The regressions' Gaussian mixing mechanism (``lapras.mechanisms.mixing``): its noise has the calibrated
scale, its privacy map is the calibration's, and it is a Mechanism like the engine's Gaussian.

Statistical test (stated false-failure rate 1e-6 per check): n entries of ``release(0, eta)`` divided by
eta are i.i.d. N(0, 1), so their sum of squares is chi-square with n degrees of freedom and their mean is
N(0, 1/n); each is checked at its two-sided 1e-6 quantiles. A 5 % error in the scale moves the sum of
squares by 10 % of n = 40,000, far outside the band (about +-3.5 %), so the test has the power to see it.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.special import ndtri
from scipy.stats import chi2

from lapras.mechanisms import Cost, Mechanism, mechanism_from, noise
from lapras.mechanisms.mixing import GaussianMixing, sketch_eps

FALSE_FAILURE = 1e-6


def _unit_noise_ok(z: np.ndarray) -> bool:
    n = z.size
    stat = float(np.sum(z * z))
    mean_ok = abs(float(z.mean())) <= float(ndtri(1 - FALSE_FAILURE / 2)) / math.sqrt(n)
    return mean_ok and chi2.ppf(FALSE_FAILURE / 2, n) < stat < chi2.ppf(1 - FALSE_FAILURE / 2, n)


@pytest.mark.parametrize("kind", ["gaussian", "fast"])
def test_mixing_noise_has_the_calibrated_scale(kind: str) -> None:
    mix = GaussianMixing.calibrate(Cost(eps=1.0, delta=1e-6), 1.0, 64, sketches=2, kind=kind)  # type: ignore[arg-type]
    mix = GaussianMixing(mix.gamma, 64, 2, mix.kind, stream=noise.sketch_randomness())
    eta2 = mix.noise_floor(0.25 * mix.gamma)  # the floor a sketch whose lambda_min is a quarter of gamma gets
    assert eta2 == pytest.approx(0.75 * mix.gamma)
    eta = math.sqrt(eta2)
    exact = np.full((64, 5), 3.0)
    draws = np.concatenate([(mix.release(exact, eta) - exact).ravel() for _ in range(125)])  # 40,000 entries
    assert draws.size == 40_000
    assert _unit_noise_ok(draws / eta)
    assert float(mix.variance(eta)) == pytest.approx(eta2)
    # Power: the same draws read at a 5 % wrong scale fail.
    assert not _unit_noise_ok(draws / (1.05 * eta))
    assert not _unit_noise_ok(draws / (0.95 * eta))


def test_noise_floor_is_zero_when_the_data_already_has_it() -> None:
    mix = GaussianMixing(10.0, 8)
    assert mix.noise_floor(12.0) == 0.0
    assert np.array_equal(mix.release(np.ones((8, 2)), 0.0), np.ones((8, 2)))


@pytest.mark.parametrize("kind", ["gaussian", "fast"])
@pytest.mark.parametrize("eps,delta,b2,k,T", [(0.3, 1e-9, 1.0, 128, 3), (2.0, 1e-6, 2.0, 40, 1)])
def test_privacy_map_meets_the_calibrated_cost_tightly(kind: str, eps: float, delta: float, b2: float, k: int,
                                                       T: int) -> None:
    mix = GaussianMixing.calibrate(Cost(eps=eps, delta=delta), b2, k, sketches=T, kind=kind)  # type: ignore[arg-type]
    spent = mix.privacy_map(b2, Cost(eps=1.0, delta=delta))
    assert spent.delta == delta and spent.eps is not None
    assert spent.eps <= eps
    assert spent.eps == pytest.approx(sketch_eps(mix.gamma, k=k, T=T, delta_rdp=delta, b2=b2, kind=kind))  # type: ignore[arg-type]
    looser = GaussianMixing(mix.gamma * (1 - 1e-6), k, T, mix.kind)
    assert looser.privacy_map(b2, Cost(eps=1.0, delta=delta)).eps > eps * (1 - 1e-4)  # type: ignore[operator]
    with pytest.raises(ValueError):
        mix.privacy_map(b2, Cost(mu=1.0))


def test_mixing_is_a_mechanism_rebuilt_from_its_parameters() -> None:
    mix = GaussianMixing(7.5, 32, 4, "fast")
    assert isinstance(mix, Mechanism)
    again = mechanism_from(mix.name, mix.params)
    assert isinstance(again, GaussianMixing)
    assert (again.gamma, again.rows, again.sketches, again.kind) == (7.5, 32, 4, "fast")


def test_simulation_seeds_the_mixing_noise_like_every_other_draw() -> None:
    with noise.simulation(3):
        a = GaussianMixing(5.0, 4).release(np.zeros((4, 3)), 1.0)
    with noise.simulation(3):
        b = GaussianMixing(5.0, 4).release(np.zeros((4, 3)), 1.0)
    assert np.array_equal(a, b)
    assert not np.array_equal(a, GaussianMixing(5.0, 4).release(np.zeros((4, 3)), 1.0))
