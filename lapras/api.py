"""What the proxy needs from the engine and from the regression endpoint, as Protocols: the DP service is
typed by these, not by the classes, so a test or a what-if replay can hand it another engine.

``EngineAPI`` is what ``lapras.engine.Engine`` offers the proxy (checked below by mypy);
``RegressionAPI[ColumnT, ResultT]`` is the regression endpoint's surface, generic in the proxy's column
description and result types, which lapras does not know."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, TypeVar

from lapras.engine.prediction import Prediction
from lapras.engine.statements import Answer, PartitionRequest, Preview, Statement
from lapras.exact import ExactSource
from lapras.ledger.base import EpochRecord, Ledger, PartitionRecord
from lapras.mechanisms import Cost
from lapras.outcomes import Outcome, QueryOutcome
from lapras.settings import EngineSettings
from parser.model.schema import Catalog

__all__ = ["Answer", "EngineAPI", "Outcome", "PartitionRequest", "Preview", "QueryOutcome", "RegressionAPI",
           "Statement"]

ColumnT = TypeVar("ColumnT", covariant=True)
ResultT = TypeVar("ResultT", covariant=True)


class EngineAPI(Protocol):
    """The engine as the DP service, the admin console and the public-table follower use it."""

    catalog: Catalog  # the current epoch's (written when public tables are refreshed)
    base_catalog: Catalog  # as configured (likewise)

    @property
    def ledger(self) -> Ledger: ...

    @property
    def exact(self) -> ExactSource: ...

    @property
    def epoch(self) -> EpochRecord | None: ...

    def lookup(self, plan: Statement) -> Answer | None: ...

    def answer(self, plan: Statement, user: str = "") -> Answer: ...

    def preview(self, plan: Statement) -> Preview: ...

    def explain(self, plan: Statement) -> dict[str, object]: ...

    def explain_auto_bounds(self, plan: Statement) -> list[dict[str, object]]: ...

    def partition_cost(self) -> Cost | None: ...

    def select_partition(self, request: PartitionRequest) -> PartitionRecord: ...

    def explain_partition(self, request: PartitionRequest) -> dict[str, object]: ...

    def record_statement(self, sql: str, params: Sequence[object] | None, outcome: str,
                         zone: str | None = None) -> None: ...

    def new_epoch(self, prediction: Prediction | None = None, expected_current: int | None = -1) -> EpochRecord: ...

    def sync_epoch(self) -> bool: ...

    def next_epoch_at(self) -> float | None: ...

    def catalog_of_epoch(self, epoch_id: int) -> Catalog: ...

    def update_settings(self, settings: EngineSettings) -> None: ...

    def budget_report(self) -> dict[str, object]: ...

    def fresh_statements_left(self, cap: int = 100_000) -> int: ...

    def close(self) -> None: ...


class RegressionAPI(Protocol[ColumnT, ResultT]):
    """``lapras.linear_regression(...)`` calls: recognised, described (Describe) and executed."""

    def matches(self, sql: str) -> bool: ...

    def describe(self, sql: str) -> tuple[Sequence[int], Sequence[ColumnT]]: ...

    def execute(self, sql: str, user: str) -> ResultT: ...


if TYPE_CHECKING:
    from lapras.engine import Engine

    def _engine_is_an_engine_api(engine: Engine) -> EngineAPI:
        return engine  # mypy: Engine conforms to EngineAPI
