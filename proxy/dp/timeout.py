"""How long planning may take: the session's statement_timeout, capped by the server's."""

from __future__ import annotations

import time
from collections.abc import Mapping

from ..config import Config

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
