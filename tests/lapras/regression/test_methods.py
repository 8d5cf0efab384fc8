"""The four estimators: close to OLS when the budget is large, streamed and in-memory paths agree."""

from __future__ import annotations

import numpy as np
import pytest

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
    theta, cost = M.fit(method, (X, y), c_x, c_y, 1e4, 1e-6, np.random.default_rng(1))
    assert cost == M.Cost(eps=1e4, delta=1e-6)
    loss = lambda t: float(np.sum((y - X @ t) ** 2))  # noqa: E731
    assert loss(theta) <= loss(ols) * 1.5


@pytest.mark.parametrize("method", ["adassp", "linmix", "ihm"])
def test_streamed_blocks_match_arrays(method: str) -> None:
    X, y, _ = _data(n=3000)
    a = M.fit(method, (X, y), 3.0, 8.0, 1.0, 1e-6, np.random.default_rng(5))[0]
    b = M.fit(method, M.array_source(X, y, block=3000), 3.0, 8.0, 1.0, 1e-6, np.random.default_rng(5))[0]
    np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-8)


def test_rows_are_clipped_not_normalised() -> None:
    """An outlier far outside the public bound moves the estimate no more than a row on the bound."""
    X, y, _ = _data(n=2000)
    X2 = np.vstack([X, [[1e6, 0, 0, 0, 0]]])
    y2 = np.append(y, 1e6)
    X3 = np.vstack([X, [[np.sqrt(5.0), 0, 0, 0, 0]]])
    y3 = np.append(y, 8.0)
    t2 = M.fit("adassp", (X2, y2), np.sqrt(5.0), 8.0, 1e6, 1e-6, np.random.default_rng(0))[0]
    t3 = M.fit("adassp", (X3, y3), np.sqrt(5.0), 8.0, 1e6, 1e-6, np.random.default_rng(0))[0]
    np.testing.assert_allclose(t2, t3, rtol=1e-6)


def test_bad_inputs() -> None:
    X, y, _ = _data(n=100)
    with pytest.raises(ValueError):
        M.fit("nope", (X, y), 1.0, 1.0, 1.0, 1e-6, np.random.default_rng())
    with pytest.raises(ValueError):
        M.fit("ihm", (X, y), -1.0, 1.0, 1.0, 1e-6, np.random.default_rng())
    with pytest.raises(M.rdp.InfeasibleBudget):
        M.fit("ihm", (X, y), 1.0, 1.0, 0.0, 1e-6, np.random.default_rng())
    with pytest.raises(ValueError):
        M.fit("ihm", (X, y), 1.0, 1.0, 1.0, 1e-6, np.random.default_rng(), clip=2.0)
