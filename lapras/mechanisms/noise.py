"""The one place released noise is drawn: exact discrete Gaussian samples from a CSPRNG.

Released noise is never a floating-point Gaussian (whose low-order bits can betray the value it was added
to, as Mironov showed for the Laplace mechanism). Each draw is an integer from the discrete Gaussian
``N_Z(0, STEPS^2)``, sampled exactly (Canonne, Kamath & Steinke) by OpenDP's sampler from the operating
system's CSPRNG; a mechanism turns it into noise on a lattice fixed by its public scale
(:class:`lapras.mechanisms.gaussian.Gaussian`). Draws are vectorised (one call per release) and do not
depend on the scale, so they can be taken before the epoch's lock.

Partition selection draws here too: OpenDP's Gaussian threshold measurement (discrete Gaussian noise on
integer counts of privacy units, keys kept when the noisy count reaches the threshold) is built and run
by :func:`threshold_keys`; its privacy map is read from the same measurement (:func:`threshold_measurement`).
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import secrets
import threading
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

# Lattice points per standard deviation. Large enough that the discrete Gaussian's privacy profile is the
# continuous one to within exp(-2 pi^2 STEPS^2) and that rounding to the lattice costs a sensitivity margin
# of 2 sqrt(d) / STEPS standard deviations; small enough that |value| / step stays below 2^53 for counts
# up to 2^32 at a noise scale of 1.
STEPS = 1 << 20


_LOCK = threading.Lock()
_SIMULATION: contextvars.ContextVar[np.random.Generator | None] = contextvars.ContextVar(
    "lapras_noise_simulation", default=None)


@functools.cache
def _sampler_unlocked() -> Any:
    import opendp.prelude as dp  # heavy (OpenDP's native library): loaded when noise is first drawn

    dp.enable_features("contrib")
    return dp.m.make_gaussian(dp.vector_domain(dp.atom_domain(T="i64")), dp.l2_distance(T="i64"),
                              scale=float(STEPS))


def _sampler() -> Any:
    with _LOCK:  # one construction, even when the warm-up thread and a release race for it
        return _sampler_unlocked()


def warm_up() -> None:
    """Load the sampler now (OpenDP's library takes seconds to import), e.g. from a thread at start-up, so
    the first release after a (re)start does not wait for it. Not needed inside a simulation."""
    if _SIMULATION.get() is not None:
        return
    threading.Thread(target=_sampler, name="noise-warm-up", daemon=True).start()


def lattice_gaussian(n: int) -> np.ndarray:
    """``n`` independent integer draws from the discrete Gaussian N_Z(0, STEPS^2)."""
    if n <= 0:
        return np.zeros(0, dtype=np.int64)
    sim = _SIMULATION.get()
    if sim is not None:
        return np.rint(sim.normal(0.0, float(STEPS), n)).astype(np.int64)
    # A numpy input takes OpenDP's buffer path (a Python list is checked element by element: ~10% more).
    return np.asarray(_sampler()(np.zeros(n, dtype=np.int64)), dtype=np.int64)


@contextlib.contextmanager
def simulation(seed: int | Sequence[int]) -> Iterator[None]:
    """Within the block (this thread only), draws come from a generator seeded with ``seed``: for
    simulations whose released values are never shown to anyone (see the module docstring)."""
    token = _SIMULATION.set(np.random.default_rng(seed))
    try:
        yield
    finally:
        _SIMULATION.reset(token)


class SketchRandomness:
    """The secret randomness of one sketching release (Gaussian entries, Rademacher signs, row samples),
    drawn here so that no other module draws noise."""

    def __init__(self, generator: np.random.Generator) -> None:
        self._g = generator

    def normal(self, shape: int | tuple[int, ...], dtype: type = np.float64) -> np.ndarray:
        """Independent standard normal entries."""
        return self._g.standard_normal(shape, dtype=dtype)

    def signs(self, n: int) -> np.ndarray:
        """``n`` independent uniform +-1 (float64)."""
        return np.where(self._g.integers(0, 2, size=n) == 1, 1.0, -1.0)

    def subset(self, n: int, k: int) -> np.ndarray:
        """``k`` distinct indices of ``range(n)`` uniformly at random, sorted."""
        return np.sort(np.asarray(self._g.choice(n, size=k, replace=False)))


def sketch_randomness() -> SketchRandomness:
    """A fresh secret stream: AES-128-CTR keyed from the OS CSPRNG (inside :func:`simulation`, the
    simulation's seeded generator)."""
    sim = _SIMULATION.get()
    if sim is not None:
        return SketchRandomness(sim)
    from randomgen import AESCounter  # heavy: only a regression's sketches draw from it

    return SketchRandomness(np.random.Generator(AESCounter(key=secrets.randbits(128))))


def new_rng() -> np.random.Generator:
    """Generator seeded from the OS entropy pool, for randomness no privacy guarantee rests on (strategy
    search starting points). Not for noise or sketches."""
    return np.random.default_rng()


@functools.lru_cache(maxsize=64)
def threshold_measurement(scale: float, threshold: int) -> Any:
    """OpenDP's Gaussian threshold over a map of key -> count (i64), at noise ``scale`` (the discrete
    Gaussian's sigma) and integer ``threshold``: its ``map((l0, l2, linf))`` is (rho, delta)."""
    import opendp.prelude as dp  # heavy (OpenDP's native library): only partition selection needs it

    with _LOCK:
        dp.enable_features("contrib")
        domain = dp.map_domain(dp.atom_domain(T=str), dp.atom_domain(T=dp.i64))
        metric = dp.l02inf_distance(dp.absolute_distance(T=dp.i64))
        return dp.m.make_gaussian_threshold(domain, metric, scale=float(scale), threshold=int(threshold))


def threshold_keys(counts: np.ndarray, scale: float, threshold: int) -> np.ndarray:
    """Mask of the keys whose count plus discrete Gaussian noise of ``scale`` reaches ``threshold``
    (OpenDP's sampler, OS CSPRNG). Keys are passed by position, so their text never reaches the sampler."""
    counts = np.asarray(counts, dtype=np.int64)
    if counts.size == 0:
        return np.zeros(0, dtype=bool)
    kept = threshold_measurement(scale, threshold)({str(i): int(c) for i, c in enumerate(counts)})
    mask = np.zeros(counts.size, dtype=bool)
    mask[[int(k) for k in kept]] = True
    return mask
