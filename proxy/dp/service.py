"""The DP query service behind the protocol: a typed command -> its handler -> result rows.

It implements `proxy.dp.service_api.QueryService`. The router has classified and parsed the statement
(`proxy.dp.commands`); the service hands each command to its handler: queries (`query.py`: plan steps,
partition selection, series limit, the engine's answer), EXPLAIN (`explain.py`), SHOW lapras.budget and
new epochs (`admin.py`), regressions (`regression_endpoint.py`). It knows nothing of sockets and does no
privacy arithmetic itself: the parser shapes queries and rows, the engine decides noise and spends budget.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import psycopg

from lapras.engine import StalePlan
from lapras.errors import LaprasError
from parser.model.schema import Catalog
from parser.semantics.zones import using_setting

from ..config import Config
from .admin import AdminHandler, ServiceError, open_ledger_report, start_new_epoch
from .budget_view import flatten
from .commands import DPCommand, ExplainCommand, NewEpochCommand, QueryCommand, RegressionCommand, ShowCommand
from .engine_factory import build_engine, build_regression
from .explain import EXPLAIN_COLUMNS, ExplainHandler
from .planning import Planners
from .protocols import Regression, ServiceEngine
from .query import QueryHandler
from .service_api import ColumnDesc, QueryResult
from .timeout import deadline_of, read_in_thread

log = logging.getLogger("lapras.service")


class DPService:
    """Answers DP commands (statements over protected tables) through the LAPRAS engine."""

    def __init__(self, config: Config, engine: ServiceEngine, regression: Regression | None = None) -> None:
        self.config = config
        self.engine = engine
        self.regression = regression
        self.planners = Planners(config.catalog)
        self.queries = QueryHandler(config, engine, self.planners)
        self.explains = ExplainHandler(config, engine, self.planners)
        self.admin = AdminHandler(config, engine)

    @classmethod
    def open(cls, config: Config, upstream_dsn: str, state_dir: Path | None = None) -> DPService:
        """Connect the engine (ledger + exact answers) to the upstream database; epochs are prepared by
        the engine's own thread, so opening never waits for the matrix mechanism."""
        engine = build_engine(config, upstream_dsn, background=True, state_dir=state_dir)
        return cls(config, engine, build_regression(config, upstream_dsn, engine))

    def close(self) -> None:
        self.engine.close()

    @property
    def catalog(self) -> Catalog:
        """The catalog statements are planned over (the current epoch's value lists)."""
        return self.planners.catalog

    def _follow_catalog(self) -> None:
        self.planners.follow(self.engine.catalog)

    def _regression(self, command: RegressionCommand) -> Regression | None:
        """The endpoint, when the command's text is a regression call (else it is planned as a query)."""
        return self.regression if self.regression is not None and self.regression.matches(command.sql) else None

    # ------------------------------------------------------------------------------------- describe

    def describe(self, command: DPCommand, param_oids: Sequence[int],
                 settings: Mapping[str, str] | None = None) -> tuple[list[int], list[ColumnDesc]]:
        # Planned in the session's TimeZone, as Execute plans it: a refusal only the zone causes (a zone that
        # cuts the cells) shows at Describe, where PostgreSQL's would.
        setting = (settings or {}).get("timezone")
        with using_setting(setting):
            return self._described(command, param_oids)

    def _described(self, command: DPCommand, param_oids: Sequence[int]) -> tuple[list[int], list[ColumnDesc]]:
        self._follow_catalog()
        if isinstance(command, ShowCommand):
            return [], self.admin.show_columns(command)
        if isinstance(command, RegressionCommand) and (regression := self._regression(command)) is not None:
            return regression.describe(command.sql)
        if isinstance(command, NewEpochCommand):
            return [], self.admin.describe_new_epoch(command)
        if isinstance(command, ExplainCommand):
            if self.regression is not None and self.regression.matches(command.statement):
                return [], list(EXPLAIN_COLUMNS)
            return self.explains.describe(command, param_oids)
        return self.queries.describe(command, param_oids)

    # -------------------------------------------------------------------------------------- execute

    async def execute(self, command: DPCommand, params: Sequence[object | None], user: str,
                      settings: Mapping[str, str], param_oids: Sequence[int] = ()) -> QueryResult:
        # Planned and bound in the session's TimeZone, as PostgreSQL computes a timestamptz's day or hour and reads
        # a literal without an offset (Bind's parameters too); the planning threads (asyncio.to_thread) inherit it.
        setting = settings.get("timezone")
        with using_setting(setting):
            return await self._answered(command, params, user, settings, param_oids)

    async def _answered(self, command: DPCommand, params: Sequence[object | None], user: str,
                        settings: Mapping[str, str], param_oids: Sequence[int]) -> QueryResult:
        try:
            for _ in range(2):
                self._follow_catalog()
                try:
                    return await self._execute(command, params, user, settings, param_oids)
                except StalePlan:
                    continue  # planned just before the epoch changed its value lists: plan it again
            self._follow_catalog()
            return await self._execute(command, params, user, settings, param_oids)
        except psycopg.OperationalError:
            # The upstream is down or restarting: nothing was answered; the client may retry.
            raise ServiceError("57P03", "the upstream database is not available; nothing was answered",
                               hint="retry when the database is back") from None
        except psycopg.Error as exc:
            # Never relay the upstream's message: it could quote data. Log it for the operator.
            log.error("upstream error while answering: %s", exc)
            raise ServiceError("XX000", "the upstream database failed to answer; nothing was released") from None

    async def _execute(self, command: DPCommand, params: Sequence[object | None], user: str,
                       settings: Mapping[str, str], param_oids: Sequence[int] = ()) -> QueryResult:
        if isinstance(command, ShowCommand):
            return await asyncio.to_thread(self.admin.show, command, user)
        if isinstance(command, RegressionCommand) and (regression := self._regression(command)) is not None:
            return await read_in_thread(deadline_of(self.config, settings), regression.execute, command.sql, user)
        if isinstance(command, NewEpochCommand):
            return await asyncio.to_thread(self.admin.new_epoch, command, user)
        if isinstance(command, ExplainCommand):
            if self.regression is not None and self.regression.matches(command.statement):
                return await asyncio.to_thread(self.regression.explain, command.statement)
            return await asyncio.to_thread(self.explains.explain, command, params, settings, param_oids)
        return await self.queries.execute(command, params, user, settings, param_oids)

    # ------------------------------------------------------------------------------------- epochs

    async def sync_forever(self, every: float = 1.0, metrics: Any = None,
                           on_catalog: Callable[[Catalog], Awaitable[None]] | None = None) -> None:
        """Follow epochs started elsewhere (other workers, the epoch command), roll timed epochs, and
        publish the remaining budget to the metrics. ``on_catalog`` is awaited with the engine's catalog
        whenever an epoch brings other ``values_from`` lists (the shadow catalog's CHECK lists follow)."""
        shown = None
        while True:
            try:
                await asyncio.to_thread(self.engine.sync_epoch)
                catalog = self.engine.catalog
                if on_catalog is not None and catalog is not None and catalog is not shown:
                    await on_catalog(catalog)
                    shown = catalog
                if metrics is not None:
                    report = await asyncio.to_thread(self.engine.budget_report)
                    cur: Any = report.get("current") or {}
                    metrics.budget_remaining.set(float(cur.get("remaining", {}).get("epsilon", 0.0)),
                                                 unit="epsilon")
                    metrics.budget_total.set(float(cur.get("budget", {}).get("epsilon", 0.0)), unit="epsilon")
            except Exception as exc:  # the database may be down for a while; keep polling
                log.warning("epoch sync failed: %s", exc)
            await asyncio.sleep(every)


# The CLI and the app import these from here (their homes: admin.py, budget_view.py).
__all__ = ["DPService", "LaprasError", "QueryCommand", "ServiceError", "flatten", "open_ledger_report",
           "start_new_epoch"]
