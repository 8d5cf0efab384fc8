"""Privacy tests: the released sketch has exactly its calibrated covariance, and the budget split adds up.

Statistical test (stated false-failure rate): the released rows, whitened by the calibrated covariance
(X^T X + eta^2 I of each draw), must be i.i.d. N(0, I). With N pooled rows the empirical covariance W has
Var(W_ii) = 2/N and Var(W_ij) = 1/N; each entry is checked at z = Phi^{-1}(1 - 1e-6 / (2 m)) over its m
entries (Bonferroni), so the test fails by chance with probability below 1e-6.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.special import ndtri

from lapras.mechanisms import mixing, noise
from lapras.regression import rdp
from lapras.regression.methods import array_source, released_sketches

FALSE_FAILURE = 1e-6


def _whitened_rows(X: np.ndarray, y: np.ndarray | None, cal: rdp.Calibration, k: int, T: int,
                   draws: int, seed: int) -> tuple[np.ndarray, list[float]]:
    with_y = y is not None
    A = np.column_stack([X, y]) if with_y else X
    yy = y if y is not None else np.zeros(len(X))
    out, floors = [], []
    for _ in range(draws):
        # The real secret stream (AES-CTR keyed from the OS CSPRNG) and the CSPRNG's lattice noise.
        sk, eta2 = released_sketches(array_source(X, yy), k, T, cal, noise.sketch_randomness(), with_y=with_y)
        Sigma = A.T @ A + eta2 * np.eye(A.shape[1])
        floors.append(float(np.linalg.eigvalsh(Sigma)[0]))
        L = np.linalg.cholesky(Sigma)
        for s in sk:
            out.append(np.linalg.solve(L, s.T).T)
    return np.concatenate(out), floors


def _check_identity_cov(W_rows: np.ndarray) -> None:
    N, m = W_rows.shape
    W = W_rows.T @ W_rows / N
    z = float(ndtri(1 - FALSE_FAILURE / (2 * m * (m + 1) / 2)))
    sd = np.where(np.eye(m, dtype=bool), math.sqrt(2.0 / N), math.sqrt(1.0 / N))
    assert np.all(np.abs(W - np.eye(m)) <= z * sd), (W, z * sd)


@pytest.mark.parametrize("with_y", [False, True])
def test_released_sketch_covariance_matches_calibration(with_y: bool) -> None:
    rng = np.random.default_rng(0)
    X = rng.standard_normal((6, 2))
    X /= np.maximum(np.linalg.norm(X, axis=1, keepdims=True), 1.0)
    y = np.clip(rng.standard_normal(6), -1, 1) if with_y else None
    k, T = 40, 2
    cal = rdp.calibrate_linmix(2.0, 1e-6, k) if with_y else rdp.calibrate_ihm(2.0, 1e-6, k, T)
    rows, floors = _whitened_rows(X, y, cal, k, 1 if with_y else T, draws=400, seed=1)
    _check_identity_cov(rows)
    # the noise floor the RDP bound assumes holds in every draw (it may fail only w.p. rho = delta / 10)
    assert min(floors) >= cal.gamma * (1 - 1e-9)


def test_miscalibrated_noise_is_detected() -> None:
    """Power check: a sketch with 30 % less noise variance than calibrated fails the same test."""
    rng = np.random.default_rng(2)
    X = rng.standard_normal((6, 2)) / 3
    cal = rdp.calibrate_ihm(2.0, 1e-6, 40, 1)
    weak = rdp.Calibration(cal.gamma * 0.7, cal.sigma_eig, cal.z_rho, cal.sigma_grad, cal.eps, cal.delta)
    rows, _ = _whitened_rows(X, None, weak, 40, 1, draws=400, seed=3)
    rows *= math.sqrt(1 / 0.7)  # whiten as if the calibrated gamma had been used
    with pytest.raises(AssertionError):
        _check_identity_cov(rows)


@pytest.mark.parametrize("eps,delta", [(0.1, 1e-9), (1.0, 1e-6), (10.0, 1e-3)])
def test_budget_split_never_exceeds_total(eps: float, delta: float) -> None:
    """Each method's parts (sketch RDP, lambda_min release, failure prob, gradients) sum within (eps, delta)."""
    k, T = 64, 3
    c = rdp.calibrate_ihm(eps, delta, k, T)
    d4 = delta / 4
    e_sketch = mixing.sketch_eps(c.gamma, k=k, T=T, delta_rdp=d4)
    e_eig = mixing.eig_eps(c.gamma, k=k, delta_eig=d4)
    assert e_sketch + e_eig <= eps / 2 * (1 + 1e-12)
    assert d4 + d4 + delta / 10 + d4 <= delta
    c = rdp.calibrate_fast_ihm(eps, delta, k, T)
    assert mixing.sketch_eps(c.gamma, k=k, T=T, delta_rdp=delta / 3, kind="fast") <= eps / 3 * (1 + 1e-12)
    assert c.sigma_eig >= rdp.agm_sigma(eps / 6, delta / 6, 1.0) * (1 - 1e-12)
    assert c.sigma_grad == pytest.approx(math.sqrt(T) * rdp.agm_sigma(eps / 2, delta / 4, 1.0))
    assert eps / 3 + eps / 6 + eps / 2 <= eps * (1 + 1e-12)
    assert delta / 3 + delta / 6 + delta / 10 + delta / 4 <= delta
    c = rdp.calibrate_linmix(eps, delta, k)
    assert (mixing.sketch_eps(c.gamma, k=k, T=1, delta_rdp=delta / 3, b2=2.0)
            + mixing.eig_eps(c.gamma, k=k, delta_eig=delta / 3)) <= eps * (1 + 1e-12)
