"""What the engine is asked and what it gives back: a statement's linear queries (``Statement``), a partition
selection's request (``PartitionRequest``), the ``Answer`` and the EXPLAIN ``Preview``, and the checks that
a statement was planned over the engine's current epoch (``table_of``, ``protected_table``,
``check_planned_over``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from lapras.errors import LaprasError, UnknownTable
from lapras.mechanisms import Cost
from lapras.outcomes import Outcome, QueryOutcome
from parser.bind.partition import has_selected_keys
from parser.bind.splits import has_splits
from parser.model.linear import LinearQuery
from parser.model.schema import Catalog, TableSchema, listed_values


class Statement(Protocol):
    """What the engine answers: the linear queries of one statement over one protected table."""

    @property
    def table(self) -> str: ...

    @property
    def queries(self) -> Sequence[LinearQuery]: ...


class PartitionRequest(Protocol):
    """What a partition selection needs: its ledger key, the SQL of per-key unit counts, and m."""

    @property
    def key(self) -> str: ...

    @property
    def sql(self) -> str: ...

    @property
    def max_keys(self) -> int: ...

    def encode(self, keys: Sequence[Sequence[object]]) -> list[list[object]]: ...


class StalePlan(LaprasError):
    """The statement was planned over value lists other than the current epoch's: its text cells mean
    other values here. Nothing was read or charged; plan it again over :attr:`Engine.catalog`."""

    sqlstate = "40001"  # serialization_failure: a client may retry as is


@dataclass(frozen=True)
class Preview:
    """What a statement would be answered with now: per query its standard error (nan: refused) and
    whether it is already stored (a repeat, free); ``outcome`` as the engine would classify it."""

    stderrs: np.ndarray
    stored: np.ndarray
    outcome: Outcome


@dataclass(frozen=True)
class Answer:
    """Answers of one statement: values and standard errors per linear query, and what was spent."""

    values: np.ndarray
    stderrs: np.ndarray
    outcomes: tuple[QueryOutcome, ...]
    outcome: Outcome  # repeat | good | bad | free_after_stop | zero
    cost: Cost | None = None
    position: int | None = None
    predicted: bool = False  # answered from the epoch's matrix-mechanism release of P (no charge)

    @property
    def cost_text(self) -> str:
        if self.cost is None:
            return "none"
        return ", ".join(f"{k}={v:.4g}" for k, v in self.cost.to_json().items())


def table_of(plan: Statement, catalog: Catalog) -> TableSchema | None:
    """The schema a statement was planned over: the catalog's, or the one with a partition selection's
    released keys as a column's domain or cells split at its literals (what the statement's cells and
    exact-answer SQL refer to)."""
    planned = getattr(plan, "table_schema", None)
    if isinstance(planned, TableSchema) and (has_selected_keys(planned) or has_splits(planned)):
        return planned  # (has_splits: cells cut at the statement's literals, parser/bind/splits.py)
    return catalog.table(plan.table)


def protected_table(plan: Statement, catalog: Catalog) -> TableSchema:
    """``table_of`` for a statement that must be over a protected table: UnknownTable when it is not."""
    table = table_of(plan, catalog)
    if table is None:
        raise UnknownTable(f'relation "{plan.table}" is not a protected table')
    return table


def check_planned_over(plan: Statement, catalog: Catalog) -> None:
    """Raise StalePlan when ``plan``'s table has value lists other than ``catalog``'s (planned in an
    epoch whose lists differed): its cells would be read as other values."""
    planned = getattr(plan, "table_schema", None)
    current = catalog.table(plan.table)
    if isinstance(planned, TableSchema) and current is not None and planned is not current:
        old, new = listed_values(planned), listed_values(current)
        if old is not new and old != new:
            raise StalePlan(f'the value lists of "{plan.table}" changed with the epoch: plan the statement again')


def pick(items: Sequence[LinearQuery], mask: np.ndarray) -> list[LinearQuery]:
    """The queries ``mask`` marks."""
    return [q for q, f in zip(items, mask, strict=True) if f]
