"""The session's TimeZone while a statement is planned and bound: PostgreSQL computes in it what depends on a
zone (a timestamptz's day, hour, week and month, its casts to date and timestamp, the instant of a date or of a
text without an offset, a day added to it) and so does the planner. The proxy sets it for each statement
(``using_zone`` with the session's setting, as ``zones.session_setting`` reads it); None stands for UTC, where
every such computation is the plain UTC one. A ContextVar, as ``collation``: ``asyncio.to_thread`` carries it
to the planning thread. ``cache_tag`` is what caches of zone-dependent results add to their keys."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .zones import Zone

_CURRENT: ContextVar[Zone | None] = ContextVar("session_zone", default=None)


def current() -> Zone | None:
    """The session's zone, or None when it is UTC (or any zone of offset 0 for ever)."""
    return _CURRENT.get()


def cache_tag() -> str:
    """'' under UTC, else the zone's spelling: plans and per-cell values computed in a zone are its own."""
    zone = _CURRENT.get()
    return "" if zone is None else f"|TimeZone={zone.text}"


@contextmanager
def using_zone(setting: str | None) -> Iterator[None]:
    """Plan and bind under the session's TimeZone ``setting`` (SHOW TimeZone's text; None or 'UTC': UTC)."""
    from .zones import session_setting  # zones reads datetimes, which reads this module

    zone = session_setting(setting) if setting and setting.upper() != "UTC" else None
    if zone is not None and zone.key is None and not zone.fixed:
        zone = None
    token = _CURRENT.set(zone)
    try:
        yield
    finally:
        _CURRENT.reset(token)
