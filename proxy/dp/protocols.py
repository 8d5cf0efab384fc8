"""What the DP handlers need of their collaborators, as Protocols.

``lapras.engine.Engine`` satisfies every engine Protocol here and ``RegressionEndpoint`` the regression
one, structurally (the engine package declares the same methods in its own ``EngineAPI``): each handler
names only the part of the engine it calls, so a reader sees that EXPLAIN never answers and SHOW never
plans.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from lapras.engine import Answer, Preview
from lapras.ledger.base import EpochRecord, Ledger, PartitionRecord
from lapras.mechanisms import Cost
from parser.bind.partition import PartitionRequest
from parser.model.schema import Catalog
from parser.plan.queryplan import QueryPlan

from .service_api import ColumnDesc, QueryResult


class CatalogSource(Protocol):
    """Whose catalog (the epoch's ``values_from`` lists) statements are planned over."""

    @property
    def catalog(self) -> Catalog: ...


class AnsweringEngine(CatalogSource, Protocol):
    """The query handler's engine: stored answers, fresh ones, partition selection, the statement history."""

    def lookup(self, plan: QueryPlan) -> Answer | None: ...

    def answer(self, plan: QueryPlan, user: str = "") -> Answer: ...

    def partition_cost(self) -> Cost | None: ...

    def select_partition(self, request: PartitionRequest) -> PartitionRecord: ...

    def record_statement(self, sql: str, params: Sequence[object] | None, outcome: str,
                         zone: str | None = None) -> None: ...


class ExplainingEngine(CatalogSource, Protocol):
    """The EXPLAIN handler's engine: what a statement would cost and how precisely; nothing answered."""

    def lookup(self, plan: QueryPlan) -> Answer | None: ...

    def explain(self, plan: QueryPlan) -> dict[str, object]: ...

    def explain_partition(self, request: PartitionRequest) -> dict[str, object]: ...

    def explain_auto_bounds(self, plan: QueryPlan) -> list[dict[str, object]]: ...

    def preview(self, plan: QueryPlan) -> Preview: ...


class EpochEngine(CatalogSource, Protocol):
    """The admin handler's and the service's engine: epochs, the budget report, the ledger."""

    @property
    def ledger(self) -> Ledger: ...

    def new_epoch(self) -> EpochRecord: ...

    def sync_epoch(self) -> bool: ...

    def budget_report(self) -> dict[str, Any]: ...

    def fresh_statements_left(self, cap: int = 100_000) -> int: ...

    def close(self) -> None: ...


class ServiceEngine(AnsweringEngine, ExplainingEngine, EpochEngine, Protocol):
    """All of it: what ``DPService`` is given and shares among its handlers."""


class Regression(Protocol):
    """``lapras.linear_regression`` calls (``proxy.dp.regression_endpoint.RegressionEndpoint``)."""

    def matches(self, sql: str) -> bool: ...

    def describe(self, sql: str) -> tuple[list[int], list[ColumnDesc]]: ...

    def execute(self, sql: str, user: str) -> QueryResult: ...

    def explain(self, sql: str) -> QueryResult: ...
