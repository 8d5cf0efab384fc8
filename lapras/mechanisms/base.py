"""The mechanism interface: an additive-noise release that carries its own privacy map.

As OpenDP's measurements do, a mechanism knows how its noise scale relates to privacy: ``calibrate`` turns
a granted :class:`Cost` and an L2 sensitivity into a mechanism with fixed parameters, ``privacy_map``
states the cost of those parameters at a sensitivity, ``release`` draws the noise, ``variance`` states it.
The ledger stores ``name`` and ``params`` so a stored release can be rebuilt (:func:`mechanism_from`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import ClassVar

import numpy as np

from lapras.mechanisms.cost import Cost

_REGISTRY: dict[str, type[Mechanism]] = {}


class Mechanism(ABC):
    """A calibrated mechanism. Rows may be released at their own scale: row ``i`` of ``exact`` gets noise
    ``scale[i]`` times the unit release, i.e. the row divided by ``scale[i]`` is released at the calibrated
    parameters (so a COUNT beside a SUM keeps count-sized noise)."""

    name: ClassVar[str]

    def __init_subclass__(cls, **kw: object) -> None:
        super().__init_subclass__(**kw)
        if "name" in cls.__dict__:
            _REGISTRY[cls.name] = cls

    @classmethod
    @abstractmethod
    def calibrate(cls, cost: Cost, sensitivity: float, dims: int = 1) -> Mechanism:
        """The least noisy instance whose release of ``dims`` rows at this L2 sensitivity costs at most
        ``cost``."""

    @classmethod
    @abstractmethod
    def from_params(cls, params: Mapping[str, float]) -> Mechanism:
        """Rebuild an instance from its stored parameters."""

    @property
    @abstractmethod
    def params(self) -> dict[str, float]:
        """Parameters to store in the ledger (JSON numbers)."""

    @abstractmethod
    def privacy_map(self, sensitivity: float, like: Cost, dims: int = 1) -> Cost:
        """Cost of releasing ``dims`` rows at this L2 sensitivity, in the form of ``like`` (mu, or eps at
        like's delta)."""

    @staticmethod
    @abstractmethod
    def draw(n: int) -> np.ndarray:
        """Unit noise for ``n`` rows, independent of the parameters (so it can be drawn ahead)."""

    @abstractmethod
    def release(self, exact: np.ndarray, scale: np.ndarray | float,
                unit: np.ndarray | None = None) -> np.ndarray:
        """Noisy values of ``exact`` (row ``i`` with noise ``scale[i]`` times the unit noise), from
        ``unit`` (a :meth:`draw` for as many rows) or from a draw made now."""

    @abstractmethod
    def variance(self, scale: np.ndarray | float = 1.0) -> np.ndarray:
        """Variance of each released row's noise (rows at the given scales)."""


def mechanism_from(name: str, params: Mapping[str, float]) -> Mechanism:
    """The stored release's mechanism, by the name and parameters the ledger holds."""
    try:
        cls = _REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown mechanism {name!r} in the ledger") from None
    return cls.from_params(params)
