"""The session's TimeZone in compiled scalar expressions: what PostgreSQL computes in the session's zone over a
timestamptz (its day, hour, week, month, its casts to date and timestamp, a day added to it) is compiled as the
same computation on its wall time there, ``x AT TIME ZONE zone``, and a wall time back to an instant the same
way (date_trunc('day', ts) is date_trunc('day', ts AT TIME ZONE z) AT TIME ZONE z). Under UTC (no session zone:
``parser.semantics.session_zone``) nothing changes. Written with AT TIME ZONE, the cells check
(``parser.analysis.cells``) judges these as it judges the explicit form: a zone that would cut a cell (+05:30
over hourly cells, any zone but UTC over day cells) is refused, never answered in UTC."""

from __future__ import annotations

from pgcore import errors as E
from pgcore import pgtypes as T
from pgcore.errors import Refusal

from .. import scalar as S
from ..semantics import session_zone
from ..semantics.datetimes import Interval

ZONE_HINT = ("The session's TimeZone is not UTC: SET TIME ZONE 'UTC' or use AT TIME ZONE to say which zone's "
             "days and hours are meant.")


def zone_const() -> S.Const | None:
    """The session's zone as a constant operand of AT TIME ZONE (None under UTC)."""
    zone = session_zone.current()
    return None if zone is None else S.Const(zone, T.TEXT)


def local(x: S.Expr) -> S.Expr:
    """A timestamptz as its wall time in the session's zone (timestamp); anything else as it is."""
    z = zone_const()
    return x if z is None or x.oid != T.TIMESTAMPTZ else S.AtZone(z, x)


def wall(x: S.Expr, position: int | None = None) -> S.Expr:
    """A date or timestamp as the wall time whose instant a zone gives (a date: its midnight)."""
    return S.Cast(x, T.TIMESTAMP, "timestamp", position) if x.oid == T.DATE else x


def zoned_cast(x: S.Expr, oid: int, name: str, position: int | None = None) -> S.Expr:
    """``x::oid`` between the temporal types, through the session's zone where PostgreSQL's cast is (timestamptz
    to date or timestamp, date or timestamp to timestamptz); timestamptz to text prints its zone's offset, which
    a protected table's plan does not: refused under a zone other than UTC."""
    z = zone_const()
    if z is None or isinstance(x, S.Const):
        return S.Cast(x, oid, name, position)  # a constant is cast by cast_temporal, which reads the zone
    if x.oid == T.TIMESTAMPTZ and oid in (T.DATE, T.TIMESTAMP):
        at = S.AtZone(z, x, position)
        return at if oid == T.TIMESTAMP else S.Cast(at, T.DATE, name, position)
    if x.oid in (T.DATE, T.TIMESTAMP) and oid == T.TIMESTAMPTZ:
        return S.AtZone(z, wall(x, position), position)
    if x.oid == T.TIMESTAMPTZ and oid == T.TEXT:
        raise Refusal(E.FEATURE_NOT_SUPPORTED, "a timestamptz as text in a session time zone other than UTC is not "
                      "supported on protected tables", position=position, hint=ZONE_HINT)
    return S.Cast(x, oid, name, position)


def shifted(op: str, a: S.Expr, b: S.Expr, position: int | None, oid: int) -> S.Expr:
    """timestamptz +/- interval: PostgreSQL adds its months, then its days, to the wall time in the session's
    zone (a day across a spring-forward is 23 hours), then its hours and smaller units to the instant. An
    interval not known when planned (a parameter's, a column's) under a zone other than UTC is refused."""
    z = zone_const()
    ts, iv = (a, b) if a.oid == T.TIMESTAMPTZ else (b, a)
    if z is None or oid != T.TIMESTAMPTZ or iv.oid != T.INTERVAL:
        return S.Arith(op, a, b, position, temporal=oid)
    value = iv.value if isinstance(iv, S.Const) else None
    if isinstance(iv, S.Const) and (not isinstance(value, Interval) or not (value.months or value.days)):
        return S.Arith(op, a, b, position, temporal=oid)
    if not isinstance(value, Interval):
        raise Refusal(E.FEATURE_NOT_SUPPORTED, "a timestamptz plus or minus an interval not known when planned, in "
                      "a session time zone other than UTC, is not supported on protected tables", position=position,
                      hint=ZONE_HINT)
    x = ts
    for part in (Interval(months=value.months), Interval(days=value.days)):
        if part.months or part.days:
            x = S.AtZone(z, S.Arith(op, S.AtZone(z, x), S.Const(part, T.INTERVAL), position, temporal=T.TIMESTAMP))
    if value.micros:
        x = S.Arith(op, x, S.Const(Interval(micros=value.micros), T.INTERVAL), position, temporal=T.TIMESTAMPTZ)
    return x
