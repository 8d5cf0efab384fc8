"""How long a statement may take: the session's statement_timeout, capped by the server's; planning is bounded
by it, and so are the statement's upstream reads (``read_in_thread``)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from typing import TypeVar

from lapras.read_guard import READ_GUARD, ReadGuard

from ..config import Config

_T = TypeVar("_T")

_UNITS_MS = {"us": 0.001, "ms": 1.0, "s": 1000.0, "min": 60000.0, "h": 3600000.0, "d": 86400000.0}


def duration_ms(text: str) -> float:
    """A PostgreSQL time setting ('5000', '5s', '100ms', '1min') in milliseconds; 0 when unreadable."""
    t = text.strip().strip("'").lower()
    num = t.rstrip("abcdefghijklmnopqrstuvwxyz ")
    unit = t[len(num):].strip() or "ms"
    try:
        return float(num) * _UNITS_MS[unit]
    except (ValueError, KeyError):
        return 0.0


def deadline_of(config: Config, settings: Mapping[str, str]) -> float:
    """When planning must stop: the session's statement_timeout, capped by server.statement_timeout_s."""
    limit = config.server.statement_timeout_s
    ms = duration_ms(settings.get("statement_timeout", "0"))
    return time.monotonic() + (min(limit, ms / 1000.0) if ms > 0 else limit)


async def read_in_thread(deadline: float, fn: Callable[..., _T], *args: object) -> _T:
    """``fn(*args)`` in a worker thread whose upstream reads are bounded by ``deadline`` and stopped when
    this task is cancelled (the client's statement timeout or CancelRequest, ``proxy.server.connection``):
    without that the thread would wait on for its upstream query (behind a lock, say), and a few such
    statements hold every worker thread. Only the statement's answer read is bounded and cancelled (the
    answerer arms it, ``lapras.read_guard.armed_reads``), and a read stopped after it began is charged."""
    guard = ReadGuard(deadline)
    token = READ_GUARD.set(guard)  # copied into the thread's context by asyncio.to_thread
    try:
        return await asyncio.to_thread(fn, *args)
    except asyncio.CancelledError:
        guard.cancel()
        raise
    finally:
        READ_GUARD.reset(token)
