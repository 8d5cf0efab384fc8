"""The automatic per-group bound's mechanism (lapras.auto_bound): its calibration meets the granted rho
exactly (the lattice margin included), its noise has the calibrated scale, B is read from the noisy counts
only, and the grid is public and scale-equivariant."""

from __future__ import annotations

import math

import numpy as np
import pytest

from lapras.auto_bound import AUTO_QUANTILE, AutoBoundQuantile, bin_counts, candidates
from lapras.mechanisms import Cost, Gaussian
from lapras.mechanisms.noise import STEPS


@pytest.mark.parametrize("rho", [1e-6, 3e-4, 0.05, 2.0])
@pytest.mark.parametrize("bins", [1, 50])
def test_calibration_spends_exactly_rho(rho: float, bins: int) -> None:
    mech = AutoBoundQuantile.calibrate(Cost(rho=rho, delta=1e-9), bins)
    # Sensitivity 1 (one unit in one bin); the lattice's rounding adds 2 sqrt(bins) / STEPS to mu.
    mu = 1.0 / mech.sigma + 2.0 * math.sqrt(bins) / STEPS
    assert mu**2 / 2 == pytest.approx(rho, rel=1e-12)
    assert Gaussian(mech.sigma).privacy_map(1.0, Cost(mu=1.0), bins).mu == pytest.approx(math.sqrt(2 * rho), rel=1e-12)
    with pytest.raises(ValueError):
        AutoBoundQuantile.calibrate(Cost(eps=1.0, delta=1e-6), bins)


def test_noise_has_the_calibrated_scale() -> None:
    """20,000 draws: the sample standard deviation is within 5% of sigma (a 7-sigma event for the chi
    distribution at this size: false-failure rate < 1e-10)."""
    mech = AutoBoundQuantile.calibrate(Cost(rho=0.01, delta=1e-9), 20_000)
    noisy = mech.release(np.full(20_000, 100.0))
    assert np.std(noisy - 100.0) == pytest.approx(mech.sigma, rel=0.05)


def test_choice_is_the_first_grid_point_past_the_quantile_of_the_noisy_counts() -> None:
    bounds = np.array([1.0, 2.0, 4.0, 8.0, 8.0])
    mech = AutoBoundQuantile(sigma=1.0)
    assert mech.choose(np.array([0.0, 50.0, 44.0, 6.0, 0.0]), bounds) == 8.0  # 94% below 4: short of 95%
    assert mech.choose(np.array([0.0, 50.0, 46.0, 4.0, 0.0]), bounds) == 4.0  # 96% reached at bin 2
    assert mech.choose(np.array([0.0, 0.0, 0.0, 0.0, 10.0]), bounds) == 8.0
    assert mech.choose(np.array([-3.0, 1.0, -1.0, 0.0, 0.0]), bounds) == 8.0  # no units beyond noise: the top
    assert mech.quantile == AUTO_QUANTILE


def test_grid_is_public_and_scale_equivariant() -> None:
    g = candidates(1000.0, 2)
    assert g[-1] == 2000.0 and np.all(np.diff(g) > 0)
    assert np.allclose(np.diff(np.log2(g)), 0.5)
    assert np.allclose(candidates(10_000.0, 2), 10 * g)
    assert list(bin_counts([(0,), (3,), (9,), (None,)], np.array([5, 2, 1, 7]), 4)) == [5.0, 0.0, 0.0, 2.0]
