"""The one place released noise is drawn.

Every mechanism draws its noise through this module, so the source of randomness for released values is
chosen (and audited) here alone.
"""

from __future__ import annotations

import numpy as np


def new_rng() -> np.random.Generator:
    """Generator seeded from the OS entropy pool: the noise must never be predictable."""
    return np.random.default_rng()


def standard_normal(shape: int | tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """Independent N(0, 1) draws."""
    return rng.standard_normal(shape)
