"""I/O-free PostgreSQL v3 protocol: frontend parsing, backend builders, connection state machine."""

from . import backend, types
from .connection import NEED_DATA, PAUSED, Phase, ServerConnection
from .errors import PgError, ProtocolViolation, error_fields
from .frontend import (
    Bind,
    CancelRequested,
    Close,
    ConnectionFailed,
    Describe,
    Event,
    Execute,
    Flush,
    FunctionCall,
    GSSENCRequested,
    Parse,
    PasswordMessage,
    Query,
    SSLRequested,
    StartupReceived,
    Sync,
    Terminate,
)

__all__ = [
    "NEED_DATA", "PAUSED", "Bind", "CancelRequested", "Close", "ConnectionFailed", "Describe", "Event",
    "Execute", "Flush", "FunctionCall", "GSSENCRequested", "Parse", "PasswordMessage", "PgError", "Phase",
    "ProtocolViolation", "Query", "SSLRequested", "ServerConnection", "StartupReceived", "Sync", "Terminate",
    "backend", "error_fields", "types",
]
