"""Dates, timestamps and intervals as PostgreSQL computes them: reading their text forms, casts,
arithmetic with intervals and integers, date_trunc, and extract/date_part.

Python carries date (date), timestamp (naive datetime), timestamptz (aware datetime in UTC) and interval
(``Interval``). date_trunc and extract here read a timestamptz in UTC: the scalar compiler moves a timestamptz
into the session's zone first (``AT TIME ZONE``, ``parser.analysis.scalar_time``). Reading a text without an
offset as timestamptz and the casts between timestamptz and date or timestamp use the session's zone
(``session_zone``), as PostgreSQL's do.
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from functools import lru_cache
from typing import Any

import numpy as np

from pgcore import errors as E
from pgcore.errors import Refusal
from pgcore.pgtypes import DATE, TIMESTAMP, TIMESTAMPTZ

from . import session_zone

INVALID_DATETIME_FORMAT = "22007"
DATETIME_FIELD_OVERFLOW = "22008"
EPOCH = datetime(1970, 1, 1)
PG_EPOCH = datetime(2000, 1, 1)


@dataclass(frozen=True)
class Interval:
    """An interval: months, days and microseconds, kept apart as PostgreSQL keeps them."""

    months: int = 0
    days: int = 0
    micros: int = 0

    def __neg__(self) -> Interval:
        return Interval(-self.months, -self.days, -self.micros)

    def __str__(self) -> str:
        parts = []
        if self.months:
            y, m = divmod(abs(self.months), 12)
            sign = "-" if self.months < 0 else ""
            parts += ([f"{sign}{y} year{'s' if y != 1 else ''}"] if y else []) + (
                [f"{sign}{m} mon{'s' if m != 1 else ''}"] if m else [])
        if self.days:
            parts.append(f"{self.days} day{'s' if abs(self.days) != 1 else ''}")
        if self.micros or not parts:
            s, us = divmod(abs(self.micros), 1_000_000)
            h, rest = divmod(s, 3600)
            m, s = divmod(rest, 60)
            frac = f".{us:06d}".rstrip("0") if us else ""
            parts.append(f"{'-' if self.micros < 0 else ''}{h:02d}:{m:02d}:{s:02d}{frac}")
        return " ".join(parts)


_UNITS = {
    "microsecond": (0, 0, 1), "millisecond": (0, 0, 1000), "second": (0, 0, 1_000_000),
    "minute": (0, 0, 60_000_000), "hour": (0, 0, 3_600_000_000), "day": (0, 1, 0), "week": (0, 7, 0),
    "month": (1, 0, 0), "year": (12, 0, 0), "decade": (120, 0, 0), "century": (1200, 0, 0),
}
_UNIT_ALIASES = {"us": "microsecond", "usec": "microsecond", "ms": "millisecond", "msec": "millisecond",
                 "s": "second", "sec": "second", "secs": "second", "m": "minute", "min": "minute",
                 "mins": "minute", "h": "hour", "hr": "hour", "hrs": "hour", "d": "day", "w": "week",
                 "mon": "month", "mons": "month", "y": "year", "yr": "year", "yrs": "year"}


@lru_cache(maxsize=256)
def unit_name(text: str) -> str | None:
    """A unit as PostgreSQL spells it ('days', 'DAY', 'hrs' -> 'day', 'hour'); None if unknown."""
    u = text.strip().lower()
    u = _UNIT_ALIASES.get(u, u)
    if u not in _UNITS and u.endswith("s"):
        u = _UNIT_ALIASES.get(u[:-1], u[:-1])
    return u if u in _UNITS else None


def parse_interval(text: str, unit: str | None = None) -> Interval:
    """``'7 days'``, ``'1 month 2 hours'``, ``'01:30:00'``, or a number with ``unit`` (INTERVAL '7' DAY)."""
    s = text.strip().lower()
    if s.startswith("@"):
        s = s[1:]
    ago = s.endswith(" ago")
    s = s.removesuffix(" ago")
    months = days = micros = 0
    tokens = s.split()
    if unit is not None and len(tokens) == 1 and re.fullmatch(r"[-+]?\d+(\.\d+)?", tokens[0]):
        tokens.append(unit)
    i = 0
    try:
        while i < len(tokens):
            tok = tokens[i]
            clock = re.fullmatch(r"([-+]?)(\d+):(\d{1,2})(?::(\d{1,2}(?:\.\d+)?))?", tok)
            if clock:
                sign = -1 if clock.group(1) == "-" else 1
                secs = int(clock.group(2)) * 3600 + int(clock.group(3)) * 60 + Decimal(clock.group(4) or 0)
                micros += sign * int(secs * 1_000_000)
                i += 1
                continue
            n = Decimal(tok)
            name = unit_name(tokens[i + 1]) if i + 1 < len(tokens) else None
            if name is None:
                raise ValueError(tok)
            m, d, us = _UNITS[name]
            whole = int(n)
            months += m * whole
            days += d * whole
            micros += int(us * n)
            if n != whole:  # fractional months / days spill into the smaller fields, as PostgreSQL does
                frac = n - whole
                extra_days = frac * (m * 30 + d)
                days += int(extra_days)
                micros += int((extra_days - int(extra_days)) * 86_400_000_000)
            i += 2
    except (ValueError, ArithmeticError, IndexError):
        raise Refusal(INVALID_DATETIME_FORMAT, f'invalid input syntax for type interval: "{text}"') from None
    out = Interval(months, days, micros)
    return -out if ago else out


_DATE_RE = re.compile(r"(\d{4,})-(\d{1,2})-(\d{1,2})")
_TIME_RE = re.compile(r"(\d{1,2}):(\d{2})(?::(\d{2})(?:\.(\d{1,6})\d*)?)?")
_TZ_RE = re.compile(r"(?:z|utc|gmt|[+-]\d{1,2}(?::?\d{2})?)", re.I)


def _type_label(oid: int) -> str:
    return {DATE: "date", TIMESTAMP: "timestamp without time zone", TIMESTAMPTZ: "timestamp with time zone"}[oid]


def parse_datetime(text: str, oid: int) -> Any:
    """A date / timestamp / timestamptz literal in ISO form (``2026-03-01``, ``2026-03-01 10:00:00``,
    ``2026-03-01T10:00:00Z``, ``... +02:00``); 22007 when malformed, 22008 when a field is out of range."""
    s = text.strip()
    low = s.lower()
    if low in ("epoch",):
        value = EPOCH
        return value.date() if oid == DATE else (value.replace(tzinfo=UTC) if oid == TIMESTAMPTZ else value)
    m = _DATE_RE.match(s)
    bad = Refusal(INVALID_DATETIME_FORMAT, f'invalid input syntax for type {_type_label(oid)}: "{text}"')
    if not m:
        raise bad
    rest = s[m.end():]
    hh = mm = ss = us = 0
    offset: timedelta | None = None
    if rest:
        rest = rest[1:] if rest[0] in "Tt " else rest
        rest = rest.strip()
        t = _TIME_RE.match(rest)
        if t:
            hh, mm = int(t.group(1)), int(t.group(2))
            ss = int(t.group(3) or 0)
            us = int((t.group(4) or "0").ljust(6, "0"))
            rest = rest[t.end():].strip()
        if rest:
            z = _TZ_RE.fullmatch(rest)
            if not z:
                raise bad
            tz = rest.lower()
            if tz in ("z", "utc", "gmt"):
                offset = timedelta(0)
            else:
                sign = -1 if tz[0] == "-" else 1
                digits = tz[1:].replace(":", "")
                h = int(digits[:-2] if len(digits) > 2 else digits)
                mi = int(digits[-2:]) if len(digits) > 2 else 0
                offset = sign * timedelta(hours=h, minutes=mi)
    try:
        value = datetime(int(m.group(1)), int(m.group(2)), int(m.group(3)), hh, mm, ss, us)
    except ValueError:
        raise Refusal(DATETIME_FIELD_OVERFLOW, f'date/time field value out of range: "{text}"') from None
    if offset is not None and oid == TIMESTAMPTZ:
        value = value - offset  # to UTC
    elif oid == TIMESTAMPTZ:
        return instant(value)
    if oid == DATE:
        return value.date()
    return value.replace(tzinfo=UTC) if oid == TIMESTAMPTZ else value


_US = timedelta(microseconds=1)


def instant(wall: datetime) -> datetime:
    """The timestamptz of a wall time in the session's zone (PostgreSQL's timestamp -> timestamptz)."""
    zone = session_zone.current()
    if zone is None:
        return wall.replace(tzinfo=UTC)
    us = zone.to_utc(np.array([(wall - EPOCH) // _US], dtype=np.int64))
    return _aware(_shifted(int(us[0])))


def wall_time(v: datetime) -> datetime:
    """The wall time of a timestamptz in the session's zone (PostgreSQL's timestamptz -> timestamp)."""
    naive = v.astimezone(UTC).replace(tzinfo=None)
    zone = session_zone.current()
    if zone is None:
        return naive
    return _shifted(int(zone.to_local(np.array([(naive - EPOCH) // _US], dtype=np.int64))[0]))


def _shifted(us: int) -> datetime:
    try:
        return EPOCH + us * _US
    except OverflowError:
        raise Refusal(DATETIME_FIELD_OVERFLOW, "timestamp out of range") from None


def _aware(v: datetime) -> datetime:
    return v.replace(tzinfo=UTC)


def cast_temporal(v: Any, to: int) -> Any:
    """A date, timestamp, timestamptz or text value as ``to`` (one of DATE, TIMESTAMP, TIMESTAMPTZ)."""
    if isinstance(v, str):
        return parse_datetime(v, to)
    if isinstance(v, datetime):
        if v.tzinfo is not None:
            return v.astimezone(UTC) if to == TIMESTAMPTZ else (wall_time(v).date() if to == DATE else wall_time(v))
        if to == DATE:
            return v.date()
        return instant(v) if to == TIMESTAMPTZ else v
    if isinstance(v, date):
        if to == DATE:
            return v
        ts = datetime(v.year, v.month, v.day)
        return instant(ts) if to == TIMESTAMPTZ else ts
    raise Refusal(E.UNDEFINED_FUNCTION, f"cannot cast type {type(v).__name__} to {_type_label(to)}")


def _add_months(d: datetime, months: int) -> datetime:
    y, m = divmod(d.month - 1 + months, 12)
    year, month = d.year + y, m + 1
    return d.replace(year=year, month=month, day=min(d.day, calendar.monthrange(year, month)[1]))


def add_interval(v: Any, iv: Interval) -> Any:
    """timestamp(tz) + interval (a date becomes a timestamp first, as in PostgreSQL)."""
    ts = v if isinstance(v, datetime) else datetime(v.year, v.month, v.day)
    try:
        if iv.months:
            ts = _add_months(ts, iv.months)
        return ts + timedelta(days=iv.days, microseconds=iv.micros)
    except (OverflowError, ValueError):
        raise Refusal(DATETIME_FIELD_OVERFLOW, "timestamp out of range") from None


def trunc(unit: str, v: Any) -> Any:
    """date_trunc(unit, v); a date is truncated as the timestamp at its midnight (PostgreSQL returns a
    timestamp(tz) for it; the caller types the result)."""
    ts = v if isinstance(v, datetime) else datetime(v.year, v.month, v.day)
    u = unit_name(unit) or unit.strip().lower()
    tz = ts.tzinfo
    if u == "microsecond":
        return ts
    if u == "millisecond":
        return ts.replace(microsecond=ts.microsecond // 1000 * 1000)
    if u == "second":
        return ts.replace(microsecond=0)
    if u == "minute":
        return datetime(ts.year, ts.month, ts.day, ts.hour, ts.minute, tzinfo=tz)
    if u == "hour":
        return datetime(ts.year, ts.month, ts.day, ts.hour, tzinfo=tz)
    day = datetime(ts.year, ts.month, ts.day, tzinfo=tz)
    if u == "day":
        return day
    if u == "week":
        return day - timedelta(days=day.weekday())  # ISO weeks start on Monday
    if u == "month":
        return day.replace(day=1)
    if u == "quarter":
        return day.replace(month=(day.month - 1) // 3 * 3 + 1, day=1)
    if u == "year":
        return day.replace(month=1, day=1)
    if u == "decade":
        return day.replace(year=day.year // 10 * 10, month=1, day=1)
    if u == "century":
        return day.replace(year=(day.year - 1) // 100 * 100 + 1, month=1, day=1)
    raise Refusal(E.FEATURE_NOT_SUPPORTED, f'unit "{unit}" not recognized for date_trunc',
                  hint="date_trunc takes microseconds .. century.")


def truncatable(unit: str) -> bool:
    return unit_name(unit) in _UNITS or unit.strip().lower() == "quarter"


EXTRACT_FIELDS = ("year", "quarter", "month", "week", "day", "dow", "isodow", "doy", "hour", "minute",
                  "second", "epoch", "isoyear", "decade", "century", "millennium")


@lru_cache(maxsize=65_536)
def extract(field: str, v: Any) -> Decimal:
    """extract(field FROM v) as numeric (PostgreSQL 14+); a timestamptz reads its UTC fields. Cached: a
    column's cells repeat across the rows of a product of columns (analysis/joint.py) and statements (equal
    instants in other zones give equal results: the fields are UTC's)."""
    f = field.strip().lower()
    if isinstance(v, datetime):
        ts = v.astimezone(UTC).replace(tzinfo=None) if v.tzinfo is not None else v
    else:
        ts = datetime(v.year, v.month, v.day)
    if f == "epoch":
        delta = ts - EPOCH
        return Decimal(delta.days * 86400 + delta.seconds) + Decimal(delta.microseconds).scaleb(-6)
    table = {
        "year": ts.year, "quarter": (ts.month - 1) // 3 + 1, "month": ts.month, "week": ts.isocalendar()[1],
        "day": ts.day, "dow": (ts.weekday() + 1) % 7, "isodow": ts.isoweekday(), "doy": ts.timetuple().tm_yday,
        "hour": ts.hour, "minute": ts.minute, "isoyear": ts.isocalendar()[0], "decade": ts.year // 10,
        "century": (ts.year - 1) // 100 + 1, "millennium": (ts.year - 1) // 1000 + 1,
    }
    if f in ("second", "seconds"):
        return Decimal(ts.second) + Decimal(ts.microsecond).scaleb(-6)
    if f in table:
        if isinstance(v, date) and not isinstance(v, datetime) and f in ("hour", "minute"):
            raise Refusal(E.FEATURE_NOT_SUPPORTED, f'unit "{f}" not supported for type date')
        return Decimal(table[f])
    raise Refusal(E.FEATURE_NOT_SUPPORTED, f'unit "{field}" not recognized for extract',
                  hint="extract takes " + ", ".join(EXTRACT_FIELDS) + ".")


def from_epoch(seconds: Any) -> datetime:
    """to_timestamp(double precision): seconds since 1970-01-01 UTC."""
    try:
        return (EPOCH + timedelta(seconds=float(seconds))).replace(tzinfo=UTC)
    except (OverflowError, ValueError):
        raise Refusal(DATETIME_FIELD_OVERFLOW, "timestamp out of range") from None


def strptime(text: str, fmt: str, oid: int) -> Any:
    """to_date / to_timestamp(text, format) with sqlglot's strftime translation of the PostgreSQL format."""
    try:
        value = datetime.strptime(text.strip(), fmt)
    except ValueError:
        raise Refusal(INVALID_DATETIME_FORMAT, f'invalid value "{text}" for the format of '
                      f"{'to_date' if oid == DATE else 'to_timestamp'}") from None
    return value.date() if oid == DATE else instant(value)  # read in the session's zone, as PostgreSQL reads it


def pg_epoch_micros(v: datetime) -> int:
    """Microseconds since 2000-01-01 (UTC for an aware value): the binary wire form."""
    naive = v.astimezone(UTC).replace(tzinfo=None) if v.tzinfo is not None else v
    d = naive - PG_EPOCH
    return (d.days * 86400 + d.seconds) * 1_000_000 + d.microseconds
