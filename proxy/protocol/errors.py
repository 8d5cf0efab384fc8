"""PostgreSQL error fields carried by exceptions, shared by every layer of the proxy."""

from __future__ import annotations

from pgcore.sqlstate import INTERNAL_ERROR, PROTOCOL_VIOLATION, SqlError


class PgError(SqlError):
    """An error the proxy itself raises; it reaches the client as an ErrorResponse with these fields."""


class ProtocolViolation(PgError):
    """The peer broke the wire protocol; the connection must end after reporting it."""

    def __init__(self, message: str, sqlstate: str = PROTOCOL_VIOLATION) -> None:
        super().__init__(sqlstate, message, severity="FATAL")


def error_fields(exc: BaseException) -> SqlError:
    """The ErrorResponse fields of any exception: a ``SqlError`` as it is, anything else XX000 without its
    text (an unexpected exception, or an upstream driver's error, could carry data)."""
    if isinstance(exc, SqlError):
        return exc
    return PgError(INTERNAL_ERROR, "internal error in the proxy")
