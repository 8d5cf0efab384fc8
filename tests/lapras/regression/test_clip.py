"""Clipping to public bounds."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from lapras.regression.clip import clip_rows, clip_values


@given(arrays(np.float64, (7, 3), elements=st.floats(-1e6, 1e6)), st.floats(0.01, 100))
def test_rows_within_bound_and_unchanged_inside(X: np.ndarray, bound: float) -> None:
    out = clip_rows(X, bound)
    norms = np.linalg.norm(X, axis=1)
    assert np.all(np.linalg.norm(out, axis=1) <= bound * (1 + 1e-12))
    inside = norms <= bound
    np.testing.assert_array_equal(out[inside], X[inside])
    # direction kept
    outside = norms > bound
    np.testing.assert_allclose(out[outside] * norms[outside, None] / bound, X[outside], rtol=1e-9, atol=1e-9)


def test_values_and_bad_bounds() -> None:
    np.testing.assert_array_equal(clip_values(np.array([-5.0, 0.5, 9.0]), 2.0), [-2.0, 0.5, 2.0])
    with pytest.raises(ValueError):
        clip_rows(np.zeros((1, 1)), 0.0)
    with pytest.raises(ValueError):
        clip_values(np.zeros(1), -1.0)
