"""The four estimators: close to OLS when the budget is large, streamed and in-memory paths agree."""

from __future__ import annotations

import numpy as np
import pytest

from lapras.mechanisms import noise
from lapras.mechanisms.gaussian import gaussian_release
from lapras.regression import methods as M


def _data(n: int = 4096, d: int = 5, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, (n, d))
    theta = rng.standard_normal(d)
    y = X @ theta + 0.1 * rng.standard_normal(n)
    return X, y, np.linalg.lstsq(X, y, rcond=None)[0]


@pytest.mark.parametrize("method", M.METHODS)
def test_large_budget_recovers_ols(method: str) -> None:
    X, y, ols = _data()
    c_x, c_y = np.sqrt(5.0), 8.0
    # Seeded (a simulation's noise): LinMix's loss ratio at k = 128 rows is 1.1-1.8 from draw to draw,
    # so an unseeded bound at 1.5 would fail about one run in three.
    with noise.simulation(1):
        theta, cost = M.fit(method, (X, y), c_x, c_y, 1e4, 1e-6)
    assert cost == M.Cost(eps=1e4, delta=1e-6)
    loss = lambda t: float(np.sum((y - X @ t) ** 2))  # noqa: E731
    assert loss(theta) <= loss(ols) * 1.5


@pytest.mark.parametrize("method", ["adassp", "linmix", "ihm"])
def test_streamed_blocks_match_arrays(method: str) -> None:
    X, y, _ = _data(n=3000)
    with noise.simulation(5):
        a = M.fit(method, (X, y), 3.0, 8.0, 1.0, 1e-6)[0]
    with noise.simulation(5):
        b = M.fit(method, M.array_source(X, y, block=3000), 3.0, 8.0, 1.0, 1e-6)[0]
    np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-8)


def test_rows_are_clipped_not_normalised() -> None:
    """An outlier far outside the public bound moves the estimate no more than a row on the bound."""
    X, y, _ = _data(n=2000)
    X2 = np.vstack([X, [[1e6, 0, 0, 0, 0]]])
    y2 = np.append(y, 1e6)
    X3 = np.vstack([X, [[np.sqrt(5.0), 0, 0, 0, 0]]])
    y3 = np.append(y, 8.0)
    with noise.simulation(0):
        t2 = M.fit("adassp", (X2, y2), np.sqrt(5.0), 8.0, 1e6, 1e-6)[0]
    with noise.simulation(0):
        t3 = M.fit("adassp", (X3, y3), np.sqrt(5.0), 8.0, 1e6, 1e-6)[0]
    np.testing.assert_allclose(t2, t3, rtol=1e-6)


def test_bad_inputs() -> None:
    X, y, _ = _data(n=100)
    with pytest.raises(ValueError):
        M.fit("nope", (X, y), 1.0, 1.0, 1.0, 1e-6)
    with pytest.raises(ValueError):
        M.fit("ihm", (X, y), -1.0, 1.0, 1.0, 1e-6)
    with pytest.raises(M.rdp.InfeasibleBudget):
        M.fit("ihm", (X, y), 1.0, 1.0, 0.0, 1e-6)
    with pytest.raises(ValueError):
        M.fit("ihm", (X, y), 1.0, 1.0, 1.0, 1e-6, clip=2.0)


@pytest.mark.parametrize("method", M.METHODS)
def test_noise_is_secret_and_released_coefficients_on_the_lattice(method: str) -> None:
    """Outside a simulation nothing seeds a fit (two fits differ); the coefficients are lattice points of
    the public scale c_y / c_x."""
    X, y, _ = _data(n=1000)
    c_x, c_y = np.sqrt(5.0), 8.0
    a = M.fit(method, (X, y), c_x, c_y, 1.0, 1e-6)[0]
    b = M.fit(method, (X, y), c_x, c_y, 1.0, 1e-6)[0]
    assert not np.array_equal(a, b)
    steps = a / (c_y / c_x * M.THETA_LATTICE)
    assert np.allclose(steps, np.rint(steps), rtol=0, atol=1e-6)


def test_gaussian_steps_are_lattice_releases_at_their_calibrated_scale() -> None:
    """The Gaussian-mechanism steps: discrete Gaussian noise on a lattice whose spread is the calibrated
    sigma (chi-square at a 1e-4 false-failure rate), a hair above it for the rounding margin."""
    from scipy.stats import chi2

    sigma, n = 3.0, 4000
    exact = np.linspace(-50, 50, n)
    out = gaussian_release(exact, sigma, 1.0)
    step = (out - exact)
    stat = float(np.sum((step / sigma) ** 2))
    assert chi2.ppf(0.5e-4, n) < stat < chi2.ppf(1 - 0.5e-4, n)
    from lapras.mechanisms import Cost, sigma_for

    s = sigma_for(Cost(mu=1.0 / sigma), 1.0, n)
    assert sigma < s < sigma * 1.001
    k = out / (s / noise.STEPS)
    assert np.allclose(k, np.rint(k), rtol=0, atol=1e-6)
