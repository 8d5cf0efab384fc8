"""Sketches of a row-streamed matrix: dense Gaussian (O(k d) memory) and SRHT (zero-padded to 2^m).

The Gaussian sketch ``S A`` (S standard normal, k x n) is accumulated block by block: each block of rows
draws its own k x b slice of S, so neither S nor A is ever held whole. The SRHT needs all rows at once; it
keeps them transposed, (d, n_pad), so the Walsh-Hadamard transform runs along contiguous memory.

Why the sketch matrices are drawn here and not in :mod:`lapras.mechanisms`: S (and the SRHT's signs and
sampled rows) is not noise added to a released value but the random projection the data passes through,
drawn block by block as the rows stream past (S is never held whole). The privacy analysis does rest on
it staying secret, so every entry comes from the release's secret stream, which only
:func:`lapras.mechanisms.noise.sketch_randomness` creates; the noise added to the sketch (eta xi) and its
privacy map are the mixing mechanism's (:class:`lapras.mechanisms.mixing.GaussianMixing`), drawn from
that same stream.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np

from lapras.mechanisms.noise import SketchRandomness
from lapras.regression.hadamard import fwht_rows


class GaussianSketch:
    """Accumulates ``S A`` for a k x n standard Gaussian S, fed with row blocks of A (n unknown upfront).

    ``dtype`` of the random draws: float32 halves the generation time (the bottleneck) and its rounding is
    far below the noise the mechanism adds; the product is accumulated in float64.
    """

    def __init__(self, k: int, d: int, rnd: SketchRandomness, dtype: type = np.float32) -> None:
        self.k, self.d = k, d
        self.rnd = rnd
        self.dtype = dtype
        self.acc = np.zeros((k, d), dtype=np.float64)

    def update(self, block: np.ndarray) -> None:
        if block.shape[0] == 0:
            return
        S = self.rnd.normal((self.k, block.shape[0]), dtype=self.dtype)
        self.acc += (S @ block.astype(self.dtype, copy=False)).astype(np.float64, copy=False)

    def result(self) -> np.ndarray:
        return self.acc


def gaussian_sketch(A: np.ndarray | Iterable[np.ndarray], k: int, rnd: SketchRandomness,
                    block: int = 8192, dtype: type = np.float32) -> np.ndarray:
    """``S A`` for an array or an iterable of row blocks."""
    blocks: Iterable[np.ndarray]
    if isinstance(A, np.ndarray):
        blocks = (A[i:i + block] for i in range(0, A.shape[0], block))
        d = A.shape[1]
        sk = GaussianSketch(k, d, rnd, dtype)
    else:
        it = iter(A)
        first = next(it)
        sk = GaussianSketch(k, first.shape[1], rnd, dtype)
        sk.update(first)
        blocks = it
    for b in blocks:
        sk.update(b)
    return sk.result()


def dense_gaussian_sketch(A: np.ndarray, k: int, rnd: SketchRandomness) -> np.ndarray:
    """``S A`` for a k x n standard Gaussian S drawn whole in float64 (FastMix's second stage, over the
    SRHT's k_in rows)."""
    return rnd.normal((k, A.shape[0])) @ A


def next_pow2(n: int) -> int:
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


def padded_transpose(A: np.ndarray) -> np.ndarray:
    """(d, n_pad) float64 copy of A^T with zero columns up to the next power of two (rows are never dropped)."""
    n, d = A.shape
    At = np.zeros((d, next_pow2(n)), dtype=np.float64)
    At[:, :n] = A.T
    return At


def srht(At_pad: np.ndarray, k_in: int, rnd: SketchRandomness, work: np.ndarray | None = None) -> np.ndarray:
    """SRHT sketch sqrt(n/k_in) P H D A of a padded transposed matrix; returns (k_in, d).

    ``At_pad`` is (d, n) with n a power of two and is left unchanged; ``work`` is an optional scratch
    array of the same shape (reused across iterations to avoid re-allocating n d floats).
    """
    d, n = At_pad.shape
    if n & (n - 1):
        raise ValueError("SRHT needs a power-of-two number of rows; pad with zero rows first")
    k_in = min(k_in, n)
    signs = rnd.signs(n)
    if work is None or work.shape != At_pad.shape or work.dtype != np.float64:
        work = np.empty(At_pad.shape)
    np.multiply(At_pad, signs[None, :], out=work)
    fwht_rows(work)
    rows = rnd.subset(n, k_in)
    return (work[:, rows] * math.sqrt(n / k_in)).T.copy()
