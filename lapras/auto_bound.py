"""Automatic per-group SUM bounds: ``max_sum_per_group = { column = "auto" }`` chosen from a DP quantile.

What is measured (public definition): for each privacy unit, ``x_u`` = the sum of the unit's c largest
``|value|`` of the column over all its rows (c = ``max_rows_per_group``). A GROUP BY statement under
per-group bounds keeps at most c of a unit's rows in one group, so every per-group sum of every statement
is at most ``x_u`` in absolute value: a bound B at the q-th quantile of the ``x_u`` leaves at least a
fraction q of the units unclamped in every group of every statement of the epoch.

Mechanism: the units are counted per bin of a public geometric grid of candidate bounds (``candidates``:
from c times the column's largest |value| down by factors of sqrt(2); a function of the declared domain
only), and the counts are released with discrete Gaussian noise (``lapras.mechanisms.Gaussian``). Adding
or removing one unit changes one bin by 1: L2 sensitivity 1. At ``sigma = 1 / (mu - margin)`` with
``mu = sqrt(2 rho)`` the release is mu-GDP, hence ``mu^2 / 2 = rho``-zCDP (the lattice's rounding margin
included, as for every Gaussian release), which is what the epoch's partition part accounts for one
selection (``PartitionAccountant``: its delta share is charged too, unused here). B is read from the noisy
counts alone (``choose``: post-processing), stored in the ledger with its charge and replayed, never drawn
again.

``AUTO_QUANTILE`` = 0.95: clamping trades bias (the clamped units' excess, at most 5% of the units) for
noise (a SUM's noise scales by B); at the 95th percentile the bias falls on the tail only, while B stays
well below the row bound c x max|value| on skewed data (the common case for amounts).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from lapras.errors import BudgetExhausted
from lapras.ledger.base import Ledger, PartitionRecord, StaleEpoch, check_partition
from lapras.mechanisms.cost import Cost
from lapras.mechanisms.gaussian import Gaussian
from parser.model.linear import LinearQuery
from parser.model.schema import TableSchema
from parser.pushdown.bounding import GroupAxis, unit_sum_histogram_sql

AUTO_QUANTILE = 0.95
GRID_STEPS = 48
"""Candidate bounds below the top one, each sqrt(2) below the last (down to 2^-24 of it)."""


def candidates(row_max: float, rows_per_group: int) -> np.ndarray:
    """The public grid of candidate bounds, ascending, ending at ``rows_per_group * row_max`` (a unit's
    largest possible sum in one group: B there clamps nothing)."""
    top = float(rows_per_group) * float(row_max)
    return top * np.power(2.0, -0.5 * np.arange(GRID_STEPS, -1, -1, dtype=np.float64))


def ledger_key(table: str, column: str) -> str:
    """The key the chosen bound is stored under in the epoch's partition records."""
    return f"auto_bound:{table}:{column}"


@dataclass(frozen=True)
class AutoBoundQuantile:
    """The noisy histogram of units over the grid's bins, and B read from it."""

    sigma: float
    quantile: float = AUTO_QUANTILE
    name: str = "auto_bound_quantile"

    @classmethod
    def calibrate(cls, cost: Cost, bins: int) -> AutoBoundQuantile:
        """The least noisy instance whose release of ``bins`` counts (one unit in one bin) is ``cost.rho``-zCDP."""
        if cost.rho is None or not cost.rho > 0:
            raise ValueError("an automatic bound is calibrated from Cost(rho > 0)")
        mech = Gaussian.calibrate(Cost(mu=math.sqrt(2.0 * cost.rho)), 1.0, bins)
        return cls(mech.sigma)

    @property
    def params(self) -> dict[str, float]:
        return {"sigma": self.sigma, "quantile": self.quantile}

    def release(self, counts: np.ndarray) -> np.ndarray:
        """The counts with discrete Gaussian noise of scale ``sigma`` each."""
        return Gaussian(self.sigma).release(np.asarray(counts, dtype=np.float64), 1.0)

    def choose(self, noisy: np.ndarray, bounds: np.ndarray) -> float:
        """B from the noisy bin counts only: the upper end of the first bin where the running maximum of
        the noisy CDF reaches ``quantile`` of the noisy total; the top bound when the total is not positive.
        Bin j holds the units with ``bounds[j-1] <= x_u < bounds[j]`` (the last: ``x_u`` at the top)."""
        cdf = np.maximum.accumulate(np.cumsum(np.asarray(noisy, dtype=np.float64)))
        total = float(cdf[-1])
        if not total > 0:
            return float(bounds[-1])
        j = int(np.searchsorted(cdf, self.quantile * total, side="left"))
        return float(bounds[min(j, len(bounds) - 1)])


def bin_counts(rows: list[tuple[object, ...]], counts: np.ndarray, bins: int) -> np.ndarray:
    """The histogram (``bins`` entries) from the (bin,) keys and counts the exact source returned."""
    out = np.zeros(bins, dtype=np.float64)
    for key, n in zip(rows, counts, strict=True):
        b = key[0]
        if isinstance(b, int) and 0 <= b < bins:
            out[b] += float(n)
    return out


def with_bounds(table: TableSchema, chosen: Mapping[str, float]) -> TableSchema:
    """``table`` with the chosen (column, B) pairs added to its ``max_sum_per_group``."""
    if not chosen:
        return table
    pairs = dict(table.max_sum_per_group)
    pairs.update(chosen)
    return replace(table, max_sum_per_group=tuple(sorted(pairs.items())))


def auto_columns(table: TableSchema, queries: Sequence[LinearQuery],
                 group_bounds: Callable[[TableSchema, Sequence[LinearQuery]], GroupAxis | None] | None) -> list[str]:
    """The columns declared ``"auto"`` and not yet chosen whose B this statement's answer would use: its
    plain SUMs over them, clamped under the per-group bounds the exact source applies (``group_bounds``,
    probed with a placeholder B: which groups a statement has does not depend on B)."""
    auto = [c for c in table.auto_sum_per_group if table.group_sum_bound(c) is None]
    live = [q for q in queries if not q.is_zero]
    if not auto or not live or group_bounds is None:
        return []
    groups = group_bounds(with_bounds(table, {c: 1.0 for c in auto}), live)
    return [c for c, _ in groups.clamps if c in auto] if groups is not None else []


def select_bound(ledger: Ledger, exact: object, epoch_id: int, table: TableSchema, column: str) -> PartitionRecord:
    """Choose B for ``column`` in epoch ``epoch_id``: admitted against the partition part before any data is
    read, the units' histogram read, the noise drawn, and B committed with its charge (one selection's
    cost) before it is used. When another process stored one meanwhile, that one is returned (no charge)."""
    cur = ledger.current_epoch()
    if cur is None or cur.id != epoch_id:
        raise StaleEpoch(epoch_id)
    part = cur.spec.partition
    if not part.enabled:
        raise BudgetExhausted(f"max_sum_per_group.{column} = \"auto\" needs the partition budget, which is off",
                              hint="set [privacy] partition_fraction > 0, or declare a number as the bound")
    cost = part.cost_per_selection()
    check_partition(cur, cost)  # refused before anything is read
    attr = table.attribute(column)
    assert attr is not None
    cands = candidates(attr.domain.max_abs, table.group_rows)
    per_bin = np.append(cands, cands[-1])  # bin j < len(cands): x < cands[j]; the last: x at the top
    mech = AutoBoundQuantile.calibrate(cost, len(per_bin))
    keys, counts = exact.key_counts(unit_sum_histogram_sql(table, column, cands.tolist()))  # type: ignore[attr-defined]
    bound = mech.choose(mech.release(bin_counts(keys, counts, len(per_bin))), per_bin)
    rec = PartitionRecord(ledger_key(table.qualified_name, column), [[bound]], cost, mech.name,
                          {**mech.params, "bound": bound})
    stored, _ = ledger.commit_partition(epoch_id, rec)
    return stored
