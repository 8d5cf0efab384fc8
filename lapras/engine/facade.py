"""``Engine``: the one object the proxy holds. It wires an epoch keeper (``keeper``), a partition selector
(``selector``) and a stream answerer (``answerer``) over one ledger and one exact source, and exposes their
public methods unchanged; it adds only the budget report and the statement history."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Generic, TypeVar, overload

import numpy as np

from lapras.exact import ExactSource, close_source
from lapras.history import StatementHistory
from lapras.ledger.base import EpochRecord, Ledger, PartitionRecord
from lapras.matrix_mechanism import MMRelease
from lapras.mechanisms import Cost, Gaussian, Mechanism, new_rng, noise
from lapras.report import budget_report
from lapras.settings import EngineSettings
from lapras.strategy_cache import StrategyCache
from parser.model.linear import LinearQuery
from parser.model.schema import Catalog, TableSchema

from .answerer import StreamAnswerer
from .calibrate import Sensitivity, calibration
from .keeper import EpochKeeper
from .prediction import Prediction
from .release import PreparedEpoch
from .selector import PartitionSelector
from .statements import Answer, PartitionRequest, Preview, Statement

T = TypeVar("T")


class _Kept(Generic[T]):
    """An attribute of the engine that is its keeper's (``attr``, by default of the same name): read, and unless
    ``read_only`` written, through to ``engine.keeper``."""

    def __init__(self, attr: str = "", read_only: bool = False) -> None:
        self.attr, self.read_only = attr, read_only

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name
        self.attr = self.attr or name

    @overload
    def __get__(self, engine: None, owner: type) -> _Kept[T]: ...
    @overload
    def __get__(self, engine: Engine, owner: type) -> T: ...

    def __get__(self, engine: Engine | None, owner: type) -> T | _Kept[T]:
        if engine is None:
            return self
        value: T = getattr(engine.keeper, self.attr)
        return value

    def __set__(self, engine: Engine, value: T) -> None:
        if self.read_only:
            raise AttributeError(f"property {self.name!r} of 'Engine' object has no setter")
        setattr(engine.keeper, self.attr, value)


class Engine:
    """One engine per process; thread-safe (the proxy calls ``answer`` from worker threads)."""

    def __init__(
        self,
        catalog: Catalog,
        ledger: Ledger,
        exact: ExactSource,
        settings: EngineSettings | None = None,
        predictions: Callable[[Catalog], Prediction] | None = None,
        rng: np.random.Generator | None = None,
        clock: Callable[[], float] = time.time,
        mechanism: type[Mechanism] = Gaussian,
        strategies: StrategyCache | None = None,
        background: bool = False,
        value_lists: Callable[[], Mapping[str, Sequence[str]]] | None = None,
        history: StatementHistory | None = None,
    ) -> None:
        self.history = history  # statements asked, for learning P and S (lapras.history); None = not kept
        self._exact = exact
        noise.warm_up()
        self.keeper = EpochKeeper(catalog, ledger, exact, settings or EngineSettings(),
                                  predictions or (lambda _catalog: Prediction()),
                                  rng if rng is not None else new_rng(), clock, mechanism, strategies, background,
                                  value_lists)
        self.selector = PartitionSelector(self.keeper)
        self.answerer = StreamAnswerer(self.keeper, self.selector)
        self.keeper.start()

    # --------------------------------------------------------------- the epoch's state, as the keeper has it

    catalog: _Kept[Catalog] = _Kept()
    """The current epoch's catalog (its ``values_from`` columns hold the lists the epoch fixed)."""
    base_catalog: _Kept[Catalog] = _Kept()
    """The catalog as configured (public tables refreshed in place by the proxy)."""

    ledger: _Kept[Ledger] = _Kept(read_only=True)

    @property
    def exact(self) -> ExactSource:
        return self._exact

    @exact.setter
    def exact(self, exact: ExactSource) -> None:
        # Also on a bare ``Engine.__new__(Engine)``, whose ``calibration`` alone is used (benchmarks).
        self._exact = exact
        keeper: EpochKeeper | None = self.__dict__.get("keeper")
        if keeper is not None:
            keeper.exact = keeper.releases.exact = exact

    settings: _Kept[EngineSettings] = _Kept(read_only=True)
    epoch: _Kept[EpochRecord | None] = _Kept(read_only=True)
    """The epoch statements are answered in (as adopted; the ledger may already be past it)."""
    p_source: _Kept[str] = _Kept(read_only=True)
    _epoch: _Kept[EpochRecord | None] = _Kept("epoch", read_only=True)  # the name tests and the admin console read
    _mm: _Kept[MMRelease | None] = _Kept("mm", read_only=True)
    _mm_pending: _Kept[bool] = _Kept("mm_pending", read_only=True)

    # ----------------------------------------------------------------------------------- epochs

    def update_settings(self, settings: EngineSettings) -> None:
        self.keeper.update_settings(settings)

    def next_epoch_at(self) -> float | None:
        return self.keeper.next_epoch_at()

    def new_epoch(self, prediction: Prediction | None = None, expected_current: int | None = -1) -> EpochRecord:
        return self.keeper.new_epoch(prediction, expected_current)

    def prepare_epoch(self, prediction: Prediction | None = None, quick: bool = False,
                      value_lists: Mapping[str, Sequence[str]] | None = None) -> PreparedEpoch:
        return self.keeper.prepare_epoch(prediction, quick, value_lists)

    def commit_epoch(self, prepared: PreparedEpoch, expected_current: int | None) -> EpochRecord:
        return self.keeper.commit_epoch(prepared, expected_current)

    def begin_reserved(self, expected_current: int | None) -> EpochRecord:
        return self.keeper.begin_reserved(expected_current)

    def fill_release(self) -> bool:
        return self.keeper.fill_release()

    def prepare_exact(self) -> None:
        self.keeper.prepare_exact()

    def wait_for_release(self, timeout: float) -> bool:
        return self.keeper.wait_for_release(timeout)

    def catalog_of_epoch(self, epoch_id: int) -> Catalog:
        return self.keeper.catalog_of_epoch(epoch_id)

    def sync_epoch(self) -> bool:
        return self.keeper.sync_epoch()

    # ----------------------------------------------------------------------------------- answering

    def lookup(self, plan: Statement) -> Answer | None:
        return self.answerer.lookup(plan)

    def answer(self, plan: Statement, user: str = "") -> Answer:
        return self.answerer.answer(plan, user)

    def preview(self, plan: Statement) -> Preview:
        return self.answerer.preview(plan)

    def explain(self, plan: Statement) -> dict[str, object]:
        return self.answerer.explain(plan)

    def fresh_statements_left(self, cap: int = 100_000) -> int:
        return self.answerer.fresh_statements_left(cap)

    def calibration(self, table: TableSchema, queries: Sequence[LinearQuery]) -> tuple[list[LinearQuery], Sensitivity]:
        return calibration(self._exact, table, queries)

    # ----------------------------------------------------------------------------------- partitions

    def partition_cost(self) -> Cost | None:
        return self.selector.partition_cost()

    def select_partition(self, request: PartitionRequest) -> PartitionRecord:
        return self.selector.select_partition(request)

    def explain_partition(self, request: PartitionRequest) -> dict[str, object]:
        return self.selector.explain_partition(request)

    def explain_auto_bounds(self, plan: Statement) -> list[dict[str, object]]:
        return self.selector.explain_auto_bounds(plan)

    # ------------------------------------------------------------------------------ reports, history

    def record_statement(self, sql: str, params: Sequence[object] | None, outcome: str,
                         zone: str | None = None) -> None:
        """Add a statement asked over a protected table to the history P and S are learnt from (texts,
        parameters, time, epoch, outcome, the session's TimeZone (None: UTC); no value). Nothing happens
        when no history is kept."""
        ep = self.keeper.epoch
        if self.history is not None and ep is not None:
            self.history.record(ep.id, sql, params, str(outcome), zone)

    def budget_report(self) -> dict[str, object]:
        """The ledger's budget report, with the current epoch's release as this process has it."""
        report = budget_report(self.keeper.ledger)
        cur = report.get("current")
        keeper = self.keeper
        if isinstance(cur, dict) and keeper.epoch is not None and cur.get("epoch") == keeper.epoch.id:
            cur["matrix_mechanism"] = ("pending" if keeper.mm_pending else
                                       "released" if keeper.mm is not None else "none")
        return report

    def close(self) -> None:
        self.keeper.close()
        if self.history is not None:
            self.history.close()
        self.keeper.ledger.close()
        close_source(self.keeper.exact)
