"""Walsh-Hadamard transform against scipy.linalg.hadamard, both backends."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.linalg import hadamard

from lapras.mechanisms import noise
from lapras.regression.hadamard import HAVE_COMPILED, fwht, fwht_rows
from lapras.regression.sketches import next_pow2, padded_transpose, srht

BACKENDS = [False] + ([True] if HAVE_COMPILED else [])


@pytest.mark.parametrize("compiled", BACKENDS)
@pytest.mark.parametrize("n", [1, 2, 4, 8, 16, 64, 256])
def test_matches_scipy(n: int, compiled: bool) -> None:
    rng = np.random.default_rng(n)
    X = rng.standard_normal((n, 5))
    H = hadamard(n) / np.sqrt(n)
    np.testing.assert_allclose(fwht(X, compiled=compiled), H @ X, atol=1e-12)
    np.testing.assert_allclose(fwht(X[:, 0], compiled=compiled), H @ X[:, 0], atol=1e-12)


@pytest.mark.parametrize("compiled", BACKENDS)
def test_rows_float32_and_orthogonal(compiled: bool) -> None:
    rng = np.random.default_rng(0)
    A = rng.standard_normal((3, 1024)).astype(np.float32)
    out = fwht_rows(A.copy(), compiled=compiled)
    np.testing.assert_allclose(out, (hadamard(1024) / 32.0 @ A.T.astype(np.float64)).T, atol=1e-4)
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), np.linalg.norm(A, axis=1), rtol=1e-5)


def test_rejects_non_power_of_two() -> None:
    with pytest.raises(ValueError):
        fwht(np.zeros((6, 2)))


def test_padding_keeps_every_row() -> None:
    X = np.arange(10.0).reshape(5, 2)
    At = padded_transpose(X)
    assert At.shape == (2, 8) and next_pow2(5) == 8 and next_pow2(8) == 8
    np.testing.assert_array_equal(At[:, :5], X.T)
    assert not At[:, 5:].any()


def test_srht_preserves_gram_in_expectation() -> None:
    rng = np.random.default_rng(3)
    X = rng.standard_normal((100, 3))
    At = padded_transpose(X)
    rnd = noise.sketch_randomness()  # the secret stream itself (AES-CTR from the OS CSPRNG)
    G = np.mean([(lambda S: S.T @ S)(srht(At, 32, rnd)) for _ in range(3000)], axis=0)
    np.testing.assert_allclose(G, X.T @ X, rtol=0.05, atol=2.0)
    full = srht(At, 128, rnd)  # k_in = n_pad: an orthogonal rotation, Gram exact
    np.testing.assert_allclose(full.T @ full, X.T @ X, atol=1e-9)
