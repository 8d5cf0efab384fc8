"""Clipping of rows to public bounds: the only way data are made to satisfy the declared norm bounds.

Never normalise by the data's own maximum (that leaks it); a row with norm above the public bound is scaled
down onto the bound, a response outside [-C_Y, C_Y] is clamped.
"""

from __future__ import annotations

import numpy as np


def clip_rows(X: np.ndarray, bound: float) -> np.ndarray:
    """Scale every row of X with L2 norm above ``bound`` down to norm ``bound`` (returns a new array)."""
    if bound <= 0:
        raise ValueError("bound must be positive")
    norms = np.linalg.norm(X, axis=1)
    scale = np.ones_like(norms)
    big = norms > bound
    scale[big] = bound / norms[big]
    return X * scale[:, None]


def clip_values(y: np.ndarray, bound: float) -> np.ndarray:
    """Clamp y to [-bound, bound]."""
    if bound <= 0:
        raise ValueError("bound must be positive")
    return np.clip(y, -bound, bound)
