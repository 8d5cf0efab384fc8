"""``time`` (without time zone): times of day in cells of an hour or a minute, as a ``TemporalType`` over
the instants of one day (2000-01-01; 24:00 is the next midnight, as PostgreSQL allows)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, time, timedelta
from typing import Any

from sqlglot import exp

from pgcore import errors as E
from pgcore import pgtypes as T
from pgcore.errors import Refusal
from pgcore.sqlstate import DATETIME_FIELD_OVERFLOW, INVALID_DATETIME_FORMAT

from .base import ColumnType, DeclarationError, Value, clamp_sql
from .temporal import RESOLUTIONS, TemporalType

_DAY0 = datetime(2000, 1, 1)
_TIME_OF_DAY = re.compile(r"^\s*(\d{1,2}):(\d{2})(?::(\d{2})(?:\.(\d{1,6}))?)?\s*$")


def time_of_day(v: Any) -> datetime:
    """A ``time`` value (``'10:30'``, ``'10:30:15.5'``, ``24:00``, a ``datetime.time``) as an instant of the
    day 2000-01-01 (24:00 is the next midnight, as PostgreSQL allows); 22007 / 22008 as PostgreSQL."""
    if isinstance(v, time):
        return datetime.combine(_DAY0.date(), v)
    if isinstance(v, datetime):  # a timestamp compared with a time: its time of day, as a cast would
        return datetime.combine(_DAY0.date(), v.time())
    if not isinstance(v, str):
        raise Refusal(E.UNDEFINED_FUNCTION, f"cannot compare {type(v).__name__} with time without time zone")
    m = _TIME_OF_DAY.match(v)
    if m is None:
        raise Refusal(INVALID_DATETIME_FORMAT, f'invalid input syntax for type time: "{v}"')
    hh, mm, ss = int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)
    us = int((m.group(4) or "0").ljust(6, "0"))
    if hh == 24 and mm == ss == us == 0:
        return _DAY0 + timedelta(days=1)
    if hh > 23 or mm > 59 or ss > 59:
        raise Refusal(DATETIME_FIELD_OVERFLOW, f'date/time field value out of range: "{v}"')
    return _DAY0 + timedelta(hours=hh, minutes=mm, seconds=ss, microseconds=us)


@dataclass(frozen=True)
class TimeType(TemporalType, names=("time",), pg=("time", T.TIME)):
    """Times of day ``min..max`` (such as "08:00"; default the whole day), one cell per ``resolution`` (hour or minute, default minute).

    A ``time`` (without time zone) column. Compared with ``'10:30'``-style literals on cell boundaries; grouped
    by itself; expressions over it (extract, date_trunc) are not evaluated."""

    sqlglot_type = exp.DataType.Type.TIME

    def _out(self, ts: datetime) -> Value:
        return ts.time()

    def instant(self, v: Any) -> datetime:
        return time_of_day(v)

    def cell_last(self, index: int) -> Value:
        return self._out(self.start_of(index + 1) - self.eps)

    def _fmt_instant(self, ts: datetime) -> str:
        if ts >= _DAY0 + timedelta(days=1):
            return "24:00"
        return ts.strftime("%H:%M:%S.%f" if ts.microsecond else "%H:%M:%S" if ts.second else "%H:%M")

    def literal_sql(self, value: Value) -> str:
        ts = self.instant(value)
        text = "24:00:00" if ts >= _DAY0 + timedelta(days=1) else ts.time().isoformat()
        return f"TIME '{text}'"

    def cell_sql(self, col: str) -> str:
        # date_trunc has no time form (PostgreSQL would read the time as an interval): rebuild it
        fields = f"extract(hour FROM {col})::int, " + (f"extract(minute FROM {col})::int" if self.resolution ==
                                                        "minute" else "0")
        trunc = f"make_time({fields}, 0)"
        clipped = clamp_sql(trunc, self.literal_sql(self.lo), self.literal_sql(self.start_of(self.base_size - 1)))
        return f"CASE WHEN {col} IS NULL THEN NULL ELSE {clipped} END" if self.nullable else clipped

    def format_value(self, v: Value) -> str:
        return self._fmt_instant(self.instant(v))

    def format_cut(self, cut: Any) -> str:
        return self._fmt_instant(cut.at)

    @classmethod
    def from_config(cls, spec: Mapping[str, Any], nullable: bool) -> ColumnType:
        res = spec.get("resolution", "minute")
        if res not in ("hour", "minute"):
            raise DeclarationError([("resolution", f"must be hour or minute, got {res!r}")])
        bounds: dict[str, datetime] = {}
        problems: list[tuple[str, str]] = []
        for key, default in (("min", "00:00"), ("max", "23:59:59")):
            v = spec.get(key, default)
            try:
                bounds[key] = time_of_day(v if isinstance(v, time) else str(v))
            except Refusal as r:
                problems.append((key, f"{r.message}; write a time of day such as \"08:00\""))
        if problems:
            raise DeclarationError(problems)
        lo, hi = bounds["min"], bounds["max"]
        step = RESOLUTIONS[res]
        if hi < lo:
            raise DeclarationError([("", f"empty domain: max ({hi.time()}) is below min ({lo.time()})")])
        if hi >= _DAY0 + timedelta(days=1):
            raise DeclarationError([("max", "must be a time of day before 24:00")])
        if (lo - _DAY0) % step:
            raise DeclarationError([("min", f"must fall on a {res} boundary (cells are whole {res}s)")])
        return cls(lo, lo + (hi - lo) // step * step, res, nullable=nullable)
