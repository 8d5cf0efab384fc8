"""Exceptions of the LAPRAS engine, each carrying PostgreSQL error fields for the proxy's ErrorResponse."""

from __future__ import annotations

from parser.sqlstate import INVALID_PARAMETER_VALUE, SqlError


class LaprasError(SqlError):
    """Base class of the engine's errors; each subclass fixes its SQLSTATE."""

    sqlstate = "XX000"

    def __init__(self, message: str, *, detail: str | None = None, hint: str | None = None) -> None:
        super().__init__(None, message, detail=detail, hint=hint)


class BudgetExhausted(LaprasError):
    """The epoch's privacy budget is spent (or paced out) and no free estimate answers the statement.

    SQLSTATE 53400 (configuration_limit_exceeded): the proxy never adds fresh noise past the budget.
    """

    sqlstate = "53400"


class UnknownTable(LaprasError):
    """The plan names a table the engine's catalog does not hold (42P01)."""

    sqlstate = "42P01"


class StatementTooComplex(LaprasError):
    """A statement whose mechanism would need more work than the per-statement limit (54000,
    program_limit_exceeded); refused before anything is read or charged."""

    sqlstate = "54000"


class LedgerError(LaprasError):
    """The ledger could not record a spend; nothing was released (58000, system_error)."""

    sqlstate = "58000"


class ConfigError(LaprasError):
    """Invalid LAPRAS settings (F0000, config_file_error)."""

    sqlstate = "F0000"


class InfeasibleBudget(SqlError, ValueError):
    """No noise level meets the requested (eps, delta) for these parameters (22023)."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(INVALID_PARAMETER_VALUE, message, hint=hint)
