"""The expected-utility cut-off: which candidates go into P.

LAPRAS answers a predicted query from the matrix-mechanism (MM) release made at epoch start and an
unpredicted one with fresh noise from the online pool (badInit + remBad). In budget terms:

- a candidate in P that arrives (a hit) is answered from the MM release instead of taking its share of the
  online pool: the gain is one online share, ``g = f_online / B`` (B = expected distinct unpredicted
  queries);
- a candidate in P that does not arrive is a useless row of the MM workload and takes its share of the MM
  budget from the useful rows: the cost is ``c = f_mm / |P|``.

A candidate with probability p is worth including iff ``p * g > (1 - p) * c``. The fractions come from the
budget split:

- ``auto`` (default; what the engine's ``auto`` split does with the predictor's rho): the split follows the
  expected traffic, so ``f_mm`` is proportional to the expected hits H and ``f_online`` to the expected
  misses B. Then ``g = c0 / S`` and ``c = c0 * (H / |P|) / S``: include iff ``p / (1 - p) > H / |P|``, the
  expected precision of P. The threshold ``pi / (1 + pi)`` (pi = expected precision) is at most 1/2 and is
  found by a monotone fixed-point iteration from 1/2 downwards.
- a preset (``equal``, ``matrix_heavy``, ``query_heavy``, ``reserve_heavy``: the paper's fractions): the
  threshold ``c / (g + c)`` with |P| and B taken at the cut, again by fixed-point iteration. With a fixed MM
  share a small P makes every wrong row expensive, so presets predict little when little is predictable.

``kappa`` (default 1) scales the MM cost: below 1 credits the matrix mechanism for sharing noise between
correlated rows.
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
SPLIT_NAMES = ("auto", *SPLITS)


@dataclass(frozen=True)
class CostModel:
    split: str = "auto"
    kappa: float = 1.0

    @classmethod
    def for_split(cls, name: str, kappa: float = 1.0) -> CostModel:
        if name not in SPLIT_NAMES:
            raise ValueError(f"unknown split {name!r}; expected one of {', '.join(SPLIT_NAMES)}")
        return cls(name, kappa)

    def threshold(self, p_size: int, hits: float, bad_expected: float) -> float:
        """Score above which one more candidate pays for itself, at a cut with |P| = p_size."""
        if p_size <= 0:
            return 0.5
        if self.split == "auto":
            ratio = self.kappa * hits / p_size  # cost / gain = kappa * expected precision
        else:
            mm, online = SPLITS[self.split]
            gain = online / max(bad_expected, 1.0)
            ratio = self.kappa * (mm / p_size) / gain
        return ratio / (1.0 + ratio)


def choose_cut(
    probs: Sequence[float], distinct_expected: float, model: CostModel, fixed_threshold: float | None = None
) -> tuple[int, float]:
    """Number of top candidates (``probs`` sorted descending) to put in P, and the threshold used."""
    if fixed_threshold is not None:
        return sum(1 for p in probs if p > fixed_threshold), fixed_threshold
    thr = 0.5
    m = sum(1 for p in probs if p > thr)
    for _ in range(100):
        hits = sum(probs[:m])
        new_thr = model.threshold(m, hits, max(distinct_expected - hits, 1.0))
        new_m = sum(1 for p in probs if p > new_thr)
        thr = new_thr
        if new_m == m:
            break
        m = new_m
    return m, thr
