"""Exceptions of the LAPRAS engine, each carrying PostgreSQL error fields for the proxy's ErrorResponse."""

from __future__ import annotations

from pgcore.sqlstate import INVALID_PARAMETER_VALUE, SqlError


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


class SettingsDiffer(LedgerError):
    """This process's privacy settings differ from those stored with the shared ledger (F0000): proxies on
    one ledger must spend one budget under one set of rules. ``differences``: (key, ours, stored)."""

    sqlstate = "F0000"

    def __init__(self, differences: list[tuple[str, object, object]]) -> None:
        self.differences = differences
        listed = "; ".join(f"{k} = {_show(ours)} here, {_show(stored)} stored" for k, ours, stored in differences)
        super().__init__(f"the privacy settings differ from those stored with the ledger: {listed}")


def _show(v: object) -> str:
    return "unset" if v is None else repr(v) if isinstance(v, str) else str(v)


class ConfigError(LaprasError):
    """Invalid LAPRAS settings (F0000, config_file_error)."""

    sqlstate = "F0000"


class InfeasibleBudget(SqlError, ValueError):
    """No noise level meets the requested (eps, delta) for these parameters (22023)."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(INVALID_PARAMETER_VALUE, message, hint=hint)


class StatementInterrupted(LaprasError):
    """The statement's upstream read was stopped: its statement timeout passed or it was cancelled (57014,
    query_canceled; the message is PostgreSQL's own). Nothing was charged: the engine commits a spend only after
    the read, and checks the statement's guard once more just before."""

    sqlstate = "57014"
