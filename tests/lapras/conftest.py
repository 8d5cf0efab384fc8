"""Fixtures for the engine tests."""

from __future__ import annotations

import numpy as np
import pytest

from lapras.exact import HistogramExactSource
from parser.model.schema import Catalog
from tests.fixtures.engine_helpers import CATALOG, make_hist


@pytest.fixture
def catalog() -> Catalog:
    return CATALOG


@pytest.fixture
def hist() -> np.ndarray:
    return make_hist()


@pytest.fixture
def exact(hist: np.ndarray) -> HistogramExactSource:
    return HistogramExactSource({"t": (("a", "b", "c"), hist)})
