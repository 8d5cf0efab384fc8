"""The session's TimeZone while a statement is planned and bound: PostgreSQL computes in it what depends on a
zone (a timestamptz's day, hour, week and month, its casts to date and timestamp, the instant of a date or of a
text without an offset, a day added to it) and so does the planner. The proxy sets it for each statement
(``using_zone`` with the session's setting as ``zones.session_setting`` reads it); None stands for UTC, where
every such computation is the plain UTC one. A ContextVar, as ``collation``: ``asyncio.to_thread`` carries it
to the planning thread. ``cache_tag`` is what caches of zone-dependent results add to their keys."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import tzinfo
from typing import Protocol

import numpy as np


class SessionZone(Protocol):
    """What the planner uses of a ``zones.Zone`` (which reads this module's readers: not imported here)."""

    @property
    def text(self) -> str: ...
    @property
    def fixed(self) -> int | None: ...
    @property
    def key(self) -> str | None: ...
    def to_utc(self, wall: np.ndarray) -> np.ndarray: ...
    def to_local(self, utc: np.ndarray) -> np.ndarray: ...
    def tzinfo(self) -> tzinfo: ...


_CURRENT: ContextVar[SessionZone | None] = ContextVar("session_zone", default=None)


def current() -> SessionZone | None:
    """The session's zone, or None when it is UTC (or any zone of offset 0 for ever)."""
    return _CURRENT.get()


def cache_tag() -> str:
    """'' under UTC, else the zone's spelling: plans and per-cell values computed in a zone are its own."""
    zone = _CURRENT.get()
    return "" if zone is None else f"|TimeZone={zone.text}"


@contextmanager
def using_zone(zone: SessionZone | None) -> Iterator[None]:
    """Plan and bind under the session's TimeZone (``zones.session_setting`` of SHOW TimeZone's text)."""
    token = _CURRENT.set(None if zone is None or (zone.key is None and not zone.fixed) else zone)
    try:
        yield
    finally:
        _CURRENT.reset(token)
