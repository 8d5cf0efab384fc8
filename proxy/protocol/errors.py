"""PostgreSQL error fields carried by exceptions, shared by every layer of the proxy."""

from __future__ import annotations


class PgError(Exception):
    """An error that reaches the client as an ErrorResponse with these fields."""

    def __init__(self, sqlstate: str, message: str, *, detail: str | None = None, hint: str | None = None,
                 position: int | None = None, severity: str = "ERROR") -> None:
        super().__init__(message)
        self.sqlstate = sqlstate
        self.message = message
        self.detail = detail
        self.hint = hint
        self.position = position
        self.severity = severity


class ProtocolViolation(PgError):
    """The peer broke the wire protocol; the connection must end after reporting it."""

    def __init__(self, message: str, sqlstate: str = "08P01") -> None:
        super().__init__(sqlstate, message, severity="FATAL")


def error_fields(exc: BaseException) -> PgError:
    """Map any exception to PostgreSQL error fields; unknown ones become XX000 without their text."""
    if isinstance(exc, PgError):
        return exc
    sqlstate = getattr(exc, "sqlstate", None)
    if isinstance(sqlstate, str) and len(sqlstate) == 5:
        message = getattr(exc, "message", None) or str(exc) or "error"
        position = getattr(exc, "position", None)
        return PgError(sqlstate, str(message), detail=getattr(exc, "detail", None),
                       hint=getattr(exc, "hint", None),
                       position=position if isinstance(position, int) else None)
    # Never echo an unexpected exception's text: it could carry data.
    return PgError("XX000", "internal error in the proxy")
