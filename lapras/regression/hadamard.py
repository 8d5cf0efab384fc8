"""Normalised fast Walsh-Hadamard transform along the row axis of an (n, d) array.

Uses the compiled ``fht_cpu`` package when importable (SIMD + OpenMP; its ``fht`` is the *unnormalised*
Sylvester-ordered transform, checked against scipy.linalg.hadamard in the tests), else vectorised numpy
butterflies. The compiled transform is fastest along the last axis of a C-contiguous array, so callers that
transform repeatedly should keep the data as (d, n) and call :func:`fwht_rows`.
"""

from __future__ import annotations

import math

import numpy as np

try:  # pragma: no cover - exercised implicitly when installed
    import fht_cpu as _fht_cpu
except ImportError:  # pragma: no cover
    _fht_cpu = None

HAVE_COMPILED = _fht_cpu is not None


def _check_pow2(n: int) -> None:
    if n < 1 or n & (n - 1):
        raise ValueError(f"length {n} is not a power of two")


def _sylvester(bits: int) -> np.ndarray:
    h = np.ones((1, 1))
    for _ in range(bits):
        h = np.block([[h, h], [h, -h]])
    return h


def _numpy_last_axis(a: np.ndarray) -> None:
    """In-place unnormalised WHT along the last axis of a C-contiguous 2-D float array.

    H_{2^L} = H_{2^c1} (x) H_{2^c2} (x) ... (Sylvester order: the sign of entry (i, j) is the parity of
    popcount(i & j), which splits over bit chunks), so the transform is a few small dense matmuls along
    the axes of a (m, 2^c1, 2^c2, ...) view: BLAS does the work, with chunks of at most 5 bits.
    """
    m, n = a.shape
    L = n.bit_length() - 1
    if L == 0:
        return
    chunks = [5] * (L // 5) + ([L % 5] if L % 5 else [])
    x = a.reshape(m, *[1 << c for c in chunks])
    for ax, c in enumerate(chunks, start=1):
        h = _sylvester(c).astype(a.dtype)
        x = np.moveaxis(np.moveaxis(x, ax, -1) @ h, -1, ax)  # h is symmetric
    a[...] = x.reshape(m, n)


def fwht_rows(a: np.ndarray, *, compiled: bool | None = None) -> np.ndarray:
    """Normalised WHT of each row of a (d, n) array, in place when possible; returns the result.

    ``compiled``: None = use fht_cpu when available; False forces the numpy fallback.
    """
    if a.ndim != 2:
        raise ValueError("expected a 2-D array")
    n = a.shape[1]
    _check_pow2(n)
    if a.dtype not in (np.float32, np.float64) or not a.flags.c_contiguous:
        a = np.ascontiguousarray(a, dtype=np.float64)
    use = HAVE_COMPILED if compiled is None else (compiled and HAVE_COMPILED)
    if use:
        assert _fht_cpu is not None
        # OpenMP start-up costs more than it saves on small arrays.
        _fht_cpu.fht(a, axis=-1, inplace=True, num_threads=1 if a.size < (1 << 16) else -1)
    else:
        _numpy_last_axis(a)
    a *= 1.0 / math.sqrt(n)
    return a


def fwht(x: np.ndarray, *, compiled: bool | None = None) -> np.ndarray:
    """Normalised WHT along axis 0 of an (n,) or (n, d) array (a new array; H_n^T H_n = I)."""
    if x.ndim == 1:
        return fwht_rows(np.array(x[None, :], dtype=np.float64), compiled=compiled)[0]
    return fwht_rows(np.ascontiguousarray(x.T, dtype=np.float64), compiled=compiled).T.copy()
