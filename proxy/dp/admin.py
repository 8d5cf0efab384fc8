"""The admin handler: ``SHOW lapras.budget``, ``SELECT lapras.new_epoch()``, and the operator CLI's budget
report and epoch start (read from the ledger without a server)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lapras.ledger.postgres import PostgresLedger
from lapras.report import budget_report, epoch_report
from pgcore.pgtypes import INT8, TEXT
from pgcore.sqlstate import SqlError

from ..config import Config
from .budget_view import budget_rows
from .commands import NewEpochCommand, ShowCommand
from .engine_factory import build_engine
from .protocols import EpochEngine
from .service_api import ColumnDesc, QueryResult

BUDGET_COLUMNS = [ColumnDesc("key", TEXT), ColumnDesc("value", TEXT)]
EPOCH_COLUMNS = [ColumnDesc("new_epoch", INT8)]


class ServiceError(SqlError):
    """A refusal raised by the service itself (unknown lapras.* object and the like)."""

    def __init__(self, sqlstate: str, message: str, hint: str | None = None) -> None:
        super().__init__(sqlstate, message, hint=hint)


class AdminHandler:
    """The budget shown to each user (other analysts' activity to admins only) and epochs started by admins."""

    def __init__(self, config: Config, engine: EpochEngine) -> None:
        self.config = config
        self.engine = engine

    def show_columns(self, command: ShowCommand) -> list[ColumnDesc]:
        if command.target == "lapras.budget":
            return list(BUDGET_COLUMNS)
        raise ServiceError("42704", f'unrecognized configuration parameter "{command.target}"',
                           hint="SHOW lapras.budget shows the privacy budget")

    def show(self, command: ShowCommand, user: str = "") -> QueryResult:
        cols = self.show_columns(command)
        report = self.engine.budget_report()
        u = self.config.user(user)
        activity: dict[str, float] = {}
        units_to_eps = None
        ledger = self.engine.ledger
        epoch = ledger.current_epoch() if ledger is not None else None
        if ledger is not None and epoch is not None:
            activity = ledger.user_activity(epoch.id, user)
            units_to_eps = epoch.spec.budget.eps_delta
        rows = budget_rows(report, activity, admin=bool(u is not None and u.admin), units_to_eps=units_to_eps)
        if rows and rows[0][0] != "epoch":
            # How many more fresh statements the allocation rule grants budget to in this epoch (each gets
            # its own grant whatever its size; repeats and free answers cost nothing and do not count).
            left = self.engine.fresh_statements_left()
            rows.insert(3 if rows[2][0] == "remaining.mu" else 2, ("remaining.fresh_statements", str(left)))
        return QueryResult(cols, rows, f"SELECT {len(rows)}")

    def describe_new_epoch(self, _command: NewEpochCommand) -> list[ColumnDesc]:
        return list(EPOCH_COLUMNS)

    def new_epoch(self, _command: NewEpochCommand, user: str) -> QueryResult:
        u = self.config.user(user)
        if u is None or not u.admin:
            raise ServiceError("42501", "permission denied for function lapras.new_epoch",
                               hint="only users with admin = true in config.toml may start an epoch")
        ep = self.engine.new_epoch()
        return QueryResult(list(EPOCH_COLUMNS), [(ep.id,)], "SELECT 1",
                           [f"lapras: epoch {ep.id} started by {user}"])


def open_ledger_report(cfg: Config, upstream_dsn: str) -> dict[str, Any]:
    """Budget report for the operator CLI, read from the ledger without starting a server."""
    ledger = PostgresLedger(upstream_dsn)
    try:
        return budget_report(ledger)
    finally:
        ledger.close()


def start_new_epoch(cfg: Config, upstream_dsn: str, state_dir: Path | None = None) -> dict[str, Any]:
    """Close the current epoch and open a new one (admin command; strategies from the state dir's store)."""
    engine = build_engine(cfg, upstream_dsn, state_dir=state_dir)
    try:
        ep = engine.new_epoch()
        return epoch_report(ep)
    finally:
        engine.close()
