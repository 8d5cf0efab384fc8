"""Partition selection and automatic per-group bounds: the spends of an epoch's partition part.

A selection releases the keys of a column whose values are private (or a filtered value list) through a
thresholded Gaussian (``lapras.mechanisms.threshold``); an automatic bound (``max_sum_per_group = auto``)
chooses a clamped SUM's B (``lapras.auto_bound``). Each is admitted against the partition part before any
data is read, committed with its charge, and then replayed for the rest of the epoch (never drawn again).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from lapras.auto_bound import auto_columns, ledger_key, select_bound, with_bounds
from lapras.errors import BudgetExhausted
from lapras.ledger.base import PartitionRecord, StaleEpoch, check_partition
from lapras.mechanisms import Cost
from lapras.mechanisms.threshold import GaussianThreshold
from parser.model.linear import LinearQuery
from parser.model.schema import TableSchema

from .keeper import EpochKeeper
from .statements import PartitionRequest, Statement, table_of


class PartitionSelector:
    """Selections and automatic bounds of one engine, remembered by (epoch, ledger key)."""

    def __init__(self, epochs: EpochKeeper) -> None:
        self.epochs = epochs
        self._partitions: dict[tuple[int, str], PartitionRecord] = {}  # selected sets, as the ledger holds them

    def partition_cost(self) -> Cost | None:
        """What one new partition selection costs in the current epoch (None when the part is off)."""
        ep = self.epochs.epoch
        part = ep.spec.partition if ep is not None else None
        return part.cost_per_selection() if part is not None and part.enabled else None

    def select_partition(self, request: PartitionRequest) -> PartitionRecord:
        """The keys released for ``request`` in this epoch: the stored set when one was selected (replayed,
        never drawn again), else a new selection: admitted against the partition part before any data is
        read, per-key unit counts read from the database, the threshold drawn, and the set committed with
        its charge before it is returned. Raises BudgetExhausted (53400) when the part cannot cover it."""
        ledger = self.epochs.ledger
        for _ in range(3):
            ep = self.epochs.epoch
            assert ep is not None
            hit = self._partitions.get((ep.id, request.key))
            if hit is not None:
                return hit
            stored = ledger.partition(ep.id, request.key)
            if stored is None:
                try:
                    stored = self._select(ep.id, request)
                except StaleEpoch:
                    cur = ledger.current_epoch()
                    if cur is not None:
                        self.epochs.adopt(cur)
                    continue
            self._partitions[(ep.id, request.key)] = stored
            return stored
        raise StaleEpoch("the epoch changed three times while selecting keys")

    def explain_partition(self, request: PartitionRequest) -> dict[str, object]:
        """What a selection for ``request`` would cost and how it would draw, or the stored one: nothing is
        read, drawn or charged (for EXPLAIN)."""
        ep = self.epochs.epoch
        assert ep is not None
        stored = self._partitions.get((ep.id, request.key)) or self.epochs.ledger.partition(ep.id, request.key)
        if stored is not None:
            return {"stored": True, "record": stored, "keys": len(stored.keys), "cost": stored.cost, **stored.params}
        cost = self.partition_cost()
        if cost is None:
            return {"stored": False, "cost": None}
        mech = GaussianThreshold.calibrate(cost, request.max_keys)
        return {"stored": False, "cost": cost, "single_unit_bound": mech.single_unit_bound(), **mech.params}

    def _select(self, epoch_id: int, request: PartitionRequest) -> PartitionRecord:
        ledger = self.epochs.ledger
        cur = ledger.current_epoch()
        if cur is None or cur.id != epoch_id:
            raise StaleEpoch(epoch_id)
        part = cur.spec.partition
        cost = part.cost_per_selection() if part.enabled else Cost(rho=1.0, delta=0.5)
        check_partition(cur, cost)  # refused before anything is read
        mech = GaussianThreshold.calibrate(cost, request.max_keys)
        keys, counts = self.epochs.exact.key_counts(request.sql)  # type: ignore[attr-defined]
        kept = mech.select(np.asarray(counts, dtype=np.int64))
        chosen = sorted(request.encode([k for k, m in zip(keys, kept, strict=True) if m]), key=_key_order)
        rec = PartitionRecord(request.key, chosen, cost, mech.name, mech.params)
        stored, _ = ledger.commit_partition(epoch_id, rec)
        return stored

    def auto_bounded(self, epoch_id: int, table: TableSchema, queries: Sequence[LinearQuery],
                     charge: bool) -> TableSchema:
        """``table`` with the epoch's automatic per-group bounds (``max_sum_per_group = auto``) that these
        queries' clamped SUMs use: the stored B, else (``charge``) one chosen now (``select_bound``: charged
        and stored before use); without ``charge`` a bound not chosen yet is left out (the SUM unclamped)."""
        chosen: dict[str, float] = {}
        for column in auto_columns(table, queries, getattr(self.epochs.exact, "group_bounds", None)):
            rec = self._auto_record(epoch_id, table, column, charge)
            if rec is not None:
                chosen[column] = float(rec.keys[0][0])
        return with_bounds(table, chosen)

    def _auto_record(self, epoch_id: int, table: TableSchema, column: str, charge: bool) -> PartitionRecord | None:
        key = ledger_key(table.qualified_name, column)
        rec = self._partitions.get((epoch_id, key)) or self.epochs.ledger.partition(epoch_id, key)
        if rec is None and charge:
            try:
                rec = select_bound(self.epochs.ledger, self.epochs.exact, epoch_id, table, column)
            except BudgetExhausted:
                return None  # the partition part cannot pay for it: the SUM keeps its row bound (sound)
        if rec is not None:
            self._partitions[(epoch_id, key)] = rec
        return rec

    def explain_auto_bounds(self, plan: Statement) -> list[dict[str, object]]:
        """Per automatic bound the statement would clamp with: its column and the stored record (B, cost,
        mechanism), or None and what choosing it would cost; nothing is read, drawn or charged (EXPLAIN)."""
        ep, catalog = self.epochs.epoch, self.epochs.catalog
        table = table_of(plan, catalog)
        if ep is None or table is None:
            return []
        out: list[dict[str, object]] = []
        for column in auto_columns(table, list(plan.queries), getattr(self.epochs.exact, "group_bounds", None)):
            rec = self._auto_record(ep.id, table, column, charge=False)
            cost = rec.cost if rec is not None else self.partition_cost()
            cur = self.epochs.ledger.current_epoch()
            payable = rec is not None or (cost is not None and cur is not None and cur.spec.partition.admits(
                cur.partition_rho_spent, cur.partition_delta_spent, cost))
            out.append({"column": column, "record": rec, "cost": cost, "payable": payable})
        return out


def _key_order(k: list[object]) -> tuple[tuple[bool, str, object], ...]:
    return tuple((v is None, type(v).__name__, v if isinstance(v, int) else str(v)) for v in k)
