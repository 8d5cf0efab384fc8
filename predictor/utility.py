"""The expected-utility cut-off: which candidates go into P.

LAPRAS answers a predicted query from the matrix-mechanism (MM) release made at epoch start, and an
unpredicted one with fresh noise from the online pool. So:

- a candidate in P that arrives (a hit) saves one online answer: the online pool is shared by the
  expected B bad queries, so the saving is worth ``g = f_online / B`` of the epoch's budget;
- a candidate in P that does not arrive (a wrong prediction) is a useless row of the MM workload: with
  the MM budget spread over |P| rows it wastes ``c = kappa * f_mm / |P|`` (``kappa`` <= 1 credits the
  matrix mechanism for sharing noise between correlated rows; 1 is the independent-rows worst case).

Include a candidate with probability p iff ``p * g > (1 - p) * c``, i.e. ``p > c / (g + c)``. Both g and c
depend on the cut (|P| and B = expected distinct unpredicted queries), so the threshold is found by a
fixed-point iteration over the sorted candidates; it converges in a few steps because the threshold is
monotone in the cut. ``f_mm`` and ``f_online`` are the budget split's MM and bad-query (badInit + remBad)
fractions; the presets are the paper's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

SPLITS: dict[str, tuple[float, float]] = {
    # name: (MM fraction, badInit + remBad fraction)
    "equal": (0.25, 0.50),
    "matrix_heavy": (1 / 2, 1 / 3),
    "query_heavy": (1 / 6, 2 / 3),
    "reserve_heavy": (1 / 6, 1 / 3),
}


@dataclass(frozen=True)
class CostModel:
    mm_fraction: float = SPLITS["matrix_heavy"][0]
    online_fraction: float = SPLITS["matrix_heavy"][1]
    kappa: float = 1.0

    @classmethod
    def for_split(cls, name: str, kappa: float = 1.0) -> CostModel:
        mm, online = SPLITS[name]
        return cls(mm, online, kappa)

    def threshold(self, p_size: float, bad_expected: float) -> float:
        gain = self.online_fraction / max(bad_expected, 1.0)
        cost = self.kappa * self.mm_fraction / max(p_size, 1.0)
        return cost / (gain + cost)


def choose_cut(
    probs: Sequence[float], distinct_expected: float, model: CostModel, fixed_threshold: float | None = None
) -> tuple[int, float]:
    """Number of top candidates (``probs`` sorted descending) to put in P, and the threshold used."""
    if fixed_threshold is not None:
        return sum(1 for p in probs if p > fixed_threshold), fixed_threshold
    m = sum(1 for p in probs if p > 0.5)  # start from the "more likely than not" set
    thr = 0.5
    for _ in range(50):
        hits = sum(probs[:m])
        thr = model.threshold(max(m, 1), max(distinct_expected - hits, 1.0))
        new_m = sum(1 for p in probs if p > thr)
        if new_m == m:
            break
        m = new_m
    return m, thr
