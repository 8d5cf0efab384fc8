"""``x AT TIME ZONE zone`` / ``timezone(zone, x)`` in the scalar evaluator: timestamptz -> timestamp (the wall
time in the zone), timestamp -> timestamptz (the instant of a wall time there), converted for all rows at once
by ``parser.semantics.zones`` (numpy over int64 microseconds, zoneinfo transitions); ``monotone`` tells the
cells check (``parser.analysis.cells``) whether the conversion steps back inside a cell (a fall-back)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np

from pgcore.errors import Refusal
from pgcore.pgtypes import TIMESTAMP, TIMESTAMPTZ
from pgcore.sqlstate import DATETIME_FIELD_OVERFLOW

from ..semantics.datetimes import Interval
from ..semantics.zones import Zone, from_interval, resolve
from .tree import Env, Expr, Vector, nulls, objects

_MIN, _MAX = datetime(1, 1, 1), datetime(9999, 12, 31, 23, 59, 59, 999999)
_EPOCH, _EPOCH_UTC, _US = datetime(1970, 1, 1), datetime(1970, 1, 1, tzinfo=UTC), timedelta(microseconds=1)


def zone_of(value: Any) -> Zone:
    """The zone a text or an interval names (22023 when none); the session's zone is a Zone already."""
    if isinstance(value, Zone):
        return value
    return from_interval(value) if isinstance(value, Interval) else resolve(str(value))


def _micros(values: Sequence[datetime]) -> np.ndarray:
    """Microseconds since 1970 (UTC for aware values): one subtraction a value, ten times numpy's parsing."""
    if not values:
        return np.empty(0, dtype=np.int64)
    epoch = _EPOCH_UTC if values[0].tzinfo is not None else _EPOCH
    return np.fromiter(((v - epoch) // _US for v in values), dtype=np.int64, count=len(values))


def _datetimes(us: np.ndarray, aware: bool) -> list[datetime]:
    lo, hi = np.datetime64(_MIN, "us").astype(np.int64), np.datetime64(_MAX, "us").astype(np.int64)
    if len(us) and (us.min() < lo or us.max() > hi):
        raise Refusal(DATETIME_FIELD_OVERFLOW, "timestamp out of range")
    out = us.astype("datetime64[us]").astype(object).tolist()
    return [v.replace(tzinfo=UTC) for v in out] if aware else out


class AtZone(Expr):
    """``x AT TIME ZONE zone``: ``args`` are (zone, x); x is timestamptz or timestamp (the compiler casts the rest)."""

    def __init__(self, zone: Expr, x: Expr, position: int | None = None) -> None:
        self.args, self.position, self.name = (zone, x), position, "timezone"
        self.local = x.oid == TIMESTAMPTZ
        self.oid = TIMESTAMP if self.local else TIMESTAMPTZ

    def _groups(self, env: Env) -> tuple[Vector, dict[Any, list[int]]]:
        """The values of x, and the rows of each zone value (NULL rows in none: their result is NULL)."""
        zs, xs = self.args[0].ev(env), self.args[1].ev(env)
        groups: dict[Any, list[int]] = {}
        for i, (z, x) in enumerate(zip(zs, xs, strict=True)):
            if z is not None and x is not None:
                groups.setdefault(z, []).append(i)
        return xs, groups

    def ev(self, env: Env) -> Vector:
        xs, groups = self._groups(env)
        out: Vector = [None] * env.n
        try:
            for z, rows in groups.items():
                zone = zone_of(z)
                us = _micros([xs[i] for i in rows])
                done = _datetimes(zone.to_local(us) if self.local else zone.to_utc(us), aware=not self.local)
                for i, v in zip(rows, done, strict=True):
                    out[i] = v
        except Refusal as r:
            r.position = r.position or self.position
            raise
        return out

    def monotone(self, starts: Env, ends: Env) -> bool:
        """The conversion keeps order inside every cell (between each row's ``starts`` and ``ends`` value)."""
        zs = self.args[0].ev(starts)
        if zs != self.args[0].ev(ends) or len({z for z in zs if z is not None}) > 1:
            return False
        los, his = objects(self.args[1].ev(starts)), objects(self.args[1].ev(ends))
        keep = ~(nulls(objects(zs)) | nulls(los) | nulls(his))
        if not keep.any():
            return True
        zone = zone_of(next(z for z in zs if z is not None))
        return zone.monotone(_micros(los[keep].tolist()), _micros(his[keep].tolist()), self.local)
