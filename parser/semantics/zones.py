"""Time zones as PostgreSQL reads them in ``ts AT TIME ZONE zone`` and ``timezone(zone, ts)``, applied to whole
vectors of instants (int64 microseconds) with numpy.

A zone is a fixed offset (an abbreviation of PostgreSQL's Default set such as 'EST' or 'CET', 'UTC', a POSIX
offset such as '+02' or 'UTC+3', whose sign is POSIX's: positive west of Greenwich, or an INTERVAL, whose sign
is ISO's: positive east) or a tz database zone ('Europe/Paris', any case) whose offsets come from zoneinfo:
its transitions over the years asked (probed every 6 hours, each change bisected to the second; cached per
zone and year), then one ``searchsorted`` for all values.

timestamptz -> timestamp (``to_local``) adds the offset in effect at the instant. timestamp -> timestamptz
(``to_utc``) follows PostgreSQL's DetermineTimeZoneOffset: the transition after the wall time minus a day
decides, a wall time skipped by a spring-forward reads with the offset before it and a repeated one with the
offset after it (the later instant in both cases).

The session's TimeZone setting (``SET TIME ZONE``) reads a text as PostgreSQL's check_timezone does
(``session_setting``): a number of hours or an INTERVAL east of UTC (ISO's sign), else a tz database name or a
POSIX offset as above (abbreviations are not zones there); the same Zone then prints timestamptz values.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone, tzinfo
from functools import lru_cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

import numpy as np

from pgcore.errors import Refusal
from pgcore.sqlstate import FEATURE_NOT_SUPPORTED, INVALID_PARAMETER_VALUE

from .datetimes import Interval
from .session_zone import using_zone
from .zone_abbrevs import DYNAMIC, FIXED

US = 1_000_000
DAY = 86_400 * US
_PROBE = 6 * 3600  # seconds between probes: zones never change offset twice within 6 hours
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_POSIX = re.compile(r"(?:[a-z]*|<[a-z0-9:+-]*>)([+-]?)(\d{1,3})(?::(\d{1,2})(?::(\d{1,2}))?)?", re.I)
_POSIX_DST = re.compile(r"(?:[a-z]{3,}|<[a-z0-9:+-]*>)[+-]?\d{1,3}(?::\d{1,2}){0,2}(?:[a-z]{3,}|<[a-z0-9:+-]*>).*",
                        re.I)
_HOURS = re.compile(r"\s*[+-]?(?:\d+\.?\d*|\.\d+)(?:e[+-]?\d+)?", re.I)  # what strtod reads whole
_SET_INTERVAL = re.compile(r"interval\s+'?([+-]?)(\d{1,3})(?::(\d{1,2})(?::(\d{1,2}))?)?'?(\s+hour\b.*)?", re.I)
_REJECTED = frozenset({"localtime", "posixrules"})  # files of the tz directory PostgreSQL refuses as zones


def not_recognized(text: str) -> Refusal:
    return Refusal(INVALID_PARAMETER_VALUE, f'time zone "{text}" not recognized')


@dataclass(frozen=True)
class Zone:
    """A fixed offset (microseconds east of UTC) or a zoneinfo key."""

    text: str
    fixed: int | None = None
    key: str | None = None

    def table(self, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
        """The transitions (UTC microseconds) between ``lo`` and ``hi`` and the offsets around them:
        ``offsets[i]`` is in effect before ``transitions[i]``, ``offsets[-1]`` after the last."""
        if self.key is None:
            return np.empty(0, dtype=np.int64), np.array([self.fixed or 0], dtype=np.int64)
        first, last = _year(lo), _year(hi)
        trans: list[int] = []
        offs = [_year_table(self.key, first)[0]]
        for y in range(first, last + 1):
            for t, o in _year_table(self.key, y)[1]:
                trans.append(t)
                offs.append(o)
        return np.asarray(trans, dtype=np.int64) * US, np.asarray(offs, dtype=np.int64) * US

    def to_local(self, utc: np.ndarray) -> np.ndarray:
        """timestamptz AT TIME ZONE: the wall time (as naive microseconds) of each instant."""
        if not len(utc):
            return utc
        # A day's margin either side: the year of an instant is read from an average year's length.
        trans, offs = self.table(int(utc.min()) - 2 * DAY, int(utc.max()) + 2 * DAY)
        return utc + offs[np.searchsorted(trans, utc, side="right")]

    def to_utc(self, wall: np.ndarray) -> np.ndarray:
        """timestamp AT TIME ZONE: the instant of each wall time, as PostgreSQL resolves gaps and repeats."""
        if not len(wall):
            return wall
        trans, offs = self.table(int(wall.min()) - 2 * DAY, int(wall.max()) + 2 * DAY)
        k = np.searchsorted(trans, wall - DAY, side="right")  # the first transition after the wall time - 1 day
        before = offs[k]
        if not len(trans):
            return wall - before
        has = k < len(trans)
        after = np.where(has, offs[np.minimum(k + 1, len(offs) - 1)], before)
        boundary = np.where(has, trans[np.minimum(k, len(trans) - 1)], np.iinfo(np.int64).max)
        bt, at = wall - before, wall - after
        both_before = (bt < boundary) & (at < boundary)
        both_after = (bt >= boundary) & (at >= boundary)
        return np.where(both_before | (~both_after & (bt > at)), bt, at)

    def monotone(self, lo: np.ndarray, hi: np.ndarray, local: bool) -> bool:
        """The conversion never steps back inside any interval ``(lo[i], hi[i]]`` of its inputs: a fall-back
        inside an instant's range (``local``), or a wall time just after a spring-forward gap (else)."""
        if self.key is None or not len(lo):
            return True
        trans, offs = self.table(int(lo.min()) - 2 * DAY, int(hi.max()) + 2 * DAY)
        if local:
            points = trans[offs[1:] < offs[:-1]]
        else:
            forward = offs[1:] > offs[:-1]
            points = trans[forward] + offs[1:][forward]
        inside = np.searchsorted(points, hi, side="right") - np.searchsorted(points, lo, side="right")
        return not bool(inside.any())

    def tzinfo(self) -> tzinfo:
        """The zone as Python prints datetimes in it."""
        if self.key is not None:
            return ZoneInfo(self.key)
        return UTC if not self.fixed else timezone(timedelta(microseconds=self.fixed))


def _year(us: int) -> int:
    return max(1, min(9999, 1970 + int(us // (365.2425 * DAY))))


def _offset(zone: ZoneInfo, t: int) -> int:
    off = (_EPOCH + timedelta(seconds=t)).astimezone(zone).utcoffset()
    return int(off.total_seconds()) if off is not None else 0


@lru_cache(maxsize=4096)
def _year_table(key: str, year: int) -> tuple[int, tuple[tuple[int, int], ...]]:
    """The offset (seconds) at the start of ``year`` (UTC) and each change in the year as (second, new offset)."""
    zone = ZoneInfo(key)
    start = int((datetime(year, 1, 1, tzinfo=UTC) - _EPOCH).total_seconds())
    end = int((datetime(year + 1, 1, 1, tzinfo=UTC) - _EPOCH).total_seconds()) if year < 9999 else start + 365 * 86400
    first = prev = _offset(zone, start)
    changes = []
    t = start
    while t < end:
        u = min(t + _PROBE, end)
        now = _offset(zone, u)
        if now != prev:
            a, b = t, u  # the offset changes in (a, b]: bisect to the first second of the new offset
            while b - a > 1:
                m = (a + b) // 2
                if _offset(zone, m) == prev:
                    a = m
                else:
                    b = m
            changes.append((b, now))
            prev = now
        t = u
    return first, tuple(changes)


def _loads(key: str) -> bool:
    try:
        ZoneInfo(key)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        return False
    return True


@lru_cache(maxsize=1)
def _zone_keys() -> dict[str, str]:
    """The tz database's zone names by their lower case (PostgreSQL matches them in any case)."""
    return {k.lower(): k for k in available_timezones() if k.lower() not in _REJECTED}


@lru_cache(maxsize=512)
def resolve(text: str) -> Zone:
    """The zone a text names, looked up as PostgreSQL does: an abbreviation, a tz database name, a POSIX
    offset; 22023 when none."""
    low = text.lower()
    if low in FIXED:
        return Zone(text, fixed=FIXED[low] * 60 * US)
    if low in DYNAMIC:
        raise Refusal(FEATURE_NOT_SUPPORTED, f'time zone abbreviation "{text}" is not supported on protected tables',
                      hint="Its offset follows a zone's history: write the zone's name (such as 'Europe/Moscow') "
                      "or a fixed offset such as INTERVAL '+03:00'.")
    named = _named(text)
    zone = Zone(text, named.fixed, named.key) if named is not None else _posix(text)
    if zone is None:
        raise not_recognized(text)
    return zone


def _named(text: str) -> Zone | None:
    """A tz database zone (any case) under its own spelling, or None."""
    low = text.lower()
    key = text if low not in _REJECTED and _loads(text) else _zone_keys().get(low)  # the usual spelling: no scan
    if key is None:
        return None
    if not _loads(key):
        raise not_recognized(text)
    if key.upper() in ("UTC", "ETC/UTC", "GMT", "ETC/GMT", "UCT", "ZULU", "UNIVERSAL", "ETC/UNIVERSAL"):
        return Zone(key, fixed=0)
    return Zone(key, key=key)


def _posix(text: str) -> Zone | None:
    """A POSIX offset ('UTC+3', '<+02>-02': positive west), or None; one with daylight-saving rules is refused."""
    m = _POSIX.fullmatch(text)
    if m is not None:
        hours, minutes, seconds = int(m.group(2)), int(m.group(3) or 0), int(m.group(4) or 0)
        if hours <= 167 and minutes < 60 and seconds < 60:
            west = (hours * 3600 + minutes * 60 + seconds) * (-1 if m.group(1) == "-" else 1)
            return Zone(text, fixed=-west * US)
    if _POSIX_DST.fullmatch(text):
        raise Refusal(FEATURE_NOT_SUPPORTED, f'POSIX time zone "{text}" with daylight-saving rules is not supported '
                      "on protected tables", hint="Write a zone name such as 'America/New_York' or a fixed offset.")
    return None


def _east(seconds: int) -> Zone:
    """A fixed offset east of UTC named as PostgreSQL names it in TimeZone ('<+02>-02', '<-03:30>+03:30')."""
    h, rest = divmod(abs(seconds), 3600)
    m, sec = divmod(rest, 60)
    body = f"{h:02d}" + (f":{m:02d}" if m or sec else "") + (f":{sec:02d}" if sec else "")
    east, west = ("+", "-") if seconds >= 0 else ("-", "+")
    return Zone(f"<{east}{body}>{west}{body}", fixed=seconds * US)


@lru_cache(maxsize=256)
def session_setting(text: str) -> Zone:
    """The zone ``SET TIME ZONE text`` sets, read as PostgreSQL's check_timezone reads it (hours and
    INTERVALs east of UTC, then a zone name or a POSIX offset), ``text`` being its canonical spelling (what
    SHOW prints); 22023 when it is none, 0A000 for one no datetime can print (24 hours or more, DST rules)."""
    m = _SET_INTERVAL.fullmatch(text.strip())
    zone: Zone | None
    if m is not None:
        zone = _east((int(m.group(2)) * 3600 + int(m.group(3) or 0) * 60 + int(m.group(4) or 0))
                     * (-1 if m.group(1) == "-" else 1))
    elif _HOURS.fullmatch(text):
        hours = float(text)
        if not math.isfinite(hours) or abs(hours) >= 1e6:  # '1e306': no offset (and float * 3600 overflows)
            raise Refusal(INVALID_PARAMETER_VALUE, f'invalid value for parameter "TimeZone": "{text}"')
        zone = _east(round(hours * 3600))
    else:
        try:
            zone = _named(text) or _posix(text)
        except Refusal as r:
            if r.sqlstate == FEATURE_NOT_SUPPORTED:
                raise Refusal(FEATURE_NOT_SUPPORTED, f'time zone "{text}" with daylight-saving rules is not supported',
                              hint="Write a zone name such as 'America/New_York' or a fixed offset.") from None
            zone = None
        if zone is None:
            raise Refusal(INVALID_PARAMETER_VALUE, f'invalid value for parameter "TimeZone": "{text}"')
    if zone.fixed is not None and abs(zone.fixed) >= DAY:
        raise Refusal(FEATURE_NOT_SUPPORTED, f'time zone offset "{text}" of a day or more is not supported',
                      hint="Write an offset of less than 24 hours.")
    return zone


def from_interval(iv: Interval) -> Zone:
    """AT TIME ZONE INTERVAL '+02:00': a fixed offset east of UTC (no months or days, as PostgreSQL checks)."""
    if iv.months or iv.days:
        raise Refusal(INVALID_PARAMETER_VALUE, f'interval time zone "{iv}" must not include months or days')
    return Zone(str(iv), fixed=iv.micros)


@contextmanager
def using_setting(text: str | None) -> Iterator[None]:
    """Plan and bind under the zone a TimeZone setting names (``SET TIME ZONE``'s text; None or empty: UTC)."""
    with using_zone(session_setting(text) if text else None):
        yield
