"""Mechanisms with their privacy maps: one interface, the Gaussian first, noise drawn in one place.

- :mod:`~lapras.mechanisms.cost`: the cost a release carries.
- :mod:`~lapras.mechanisms.base`: the :class:`Mechanism` interface and the registry the ledger uses.
- :mod:`~lapras.mechanisms.gaussian`: the Gaussian mechanism (and the regressions' Gaussian steps).
- :mod:`~lapras.mechanisms.mixing`: the regressions' Gaussian mixing mechanism and its Renyi-DP map.
- :mod:`~lapras.mechanisms.threshold`: partition selection's Gaussian threshold and its map.
- :mod:`~lapras.mechanisms.sensitivity`: every L2 sensitivity computation.
- :mod:`~lapras.mechanisms.noise`: the only source of released noise.
"""

from lapras.mechanisms.base import Mechanism, mechanism_from
from lapras.mechanisms.cost import Cost
from lapras.mechanisms.gaussian import Gaussian, sigma_for
from lapras.mechanisms.noise import new_rng

__all__ = ["Cost", "Gaussian", "Mechanism", "mechanism_from", "new_rng", "sigma_for"]
