"""Temporal SQL in the scalar compiler: the statement's clock (now(), current_date), INTERVAL literals,
date_trunc, extract, to_date / to_timestamp, AT TIME ZONE, date and timestamp arithmetic, and comparisons across the
temporal types. A mixin of ``parser.analysis.scalars``' compiler: it sees the same leaf and budget."""

from __future__ import annotations

from datetime import UTC

from sqlglot import exp

from pgcore import errors as E
from pgcore import pgtypes as T
from pgcore.errors import Refusal

from .. import scalar as S
from ..semantics import datetimes as TM
from ..semantics import session_zone
from ..semantics.values import NUMBER_OIDS, temporal_arith_type, temporal_common
from ..syntax.parse import DATE_PART, position_of
from .nodes import CompilerPart, NotScalar
from .zoned import local, shifted, wall, zone_const, zoned_cast

_CLOCK = (exp.CurrentTimestamp, exp.CurrentDate, exp.Localtimestamp, exp.CurrentDatetime)
TEMPORAL_TYPES = {exp.DataType.Type.DATE: T.DATE, exp.DataType.Type.TIMESTAMP: T.TIMESTAMP,
                  exp.DataType.Type.TIMESTAMPTZ: T.TIMESTAMPTZ, exp.DataType.Type.TIMESTAMPLTZ: T.TIMESTAMPTZ}


class TemporalCompiler(CompilerPart):
    """Compiles the temporal nodes; ``temporal`` returns None for a node that is not one."""

    def temporal(self, node: exp.Expr, d: int) -> S.Expr | None:
        if isinstance(node, _CLOCK):
            return self.clock(node)
        if isinstance(node, exp.Interval):
            return self.interval(node)
        if isinstance(node, exp.TimestampTrunc | exp.DateTrunc):
            unit = node.args.get("unit")
            text = unit.name if isinstance(unit, exp.Var | exp.Literal) else None
            if text is None or not TM.truncatable(text):
                raise NotScalar(node)
            x = self.compile(node.this, d)
            if x.oid not in T.TEMPORAL_OIDS:
                raise NotScalar(node)
            z = zone_const()
            if z is not None and x.oid in (T.DATE, T.TIMESTAMPTZ):  # truncated in the session's zone
                inner = wall(local(x), position_of(node))
                return S.AtZone(z, S.Call("date_trunc", [S.Const(text.lower(), T.TEXT), inner], T.TIMESTAMP))
            args = [S.Const(text.lower(), T.TEXT), x]
            return S.Call("date_trunc", args, S.call_type("date_trunc", [T.TEXT, x.oid]))
        if isinstance(node, exp.Extract):
            field = node.this.name if isinstance(node.this, exp.Var | exp.Literal) else None
            x = self.compile(node.expression, d)
            if field is None or x.oid not in T.TEMPORAL_OIDS:
                raise NotScalar(node)
            oid = T.FLOAT8 if node.meta.get(DATE_PART) else T.NUMERIC
            x = x if field.lower() == "epoch" else local(x)  # fields of the wall time in the session's zone
            return self.typed(S.Call("extract", [S.Const(field.lower(), T.TEXT), x], oid))
        if isinstance(node, exp.StrToDate | exp.StrToTime):
            source, fmt = self.compile(node.this, d), node.args.get("format")
            oid = T.DATE if isinstance(node, exp.StrToDate) else T.TIMESTAMPTZ
            if not isinstance(source, S.Const) or not isinstance(fmt, exp.Literal) or not isinstance(source.value, str):
                raise NotScalar(node)
            return S.Const(TM.strptime(source.value, str(fmt.this), oid), oid)
        if isinstance(node, exp.AtTimeZone):
            return self.at_zone(node.args["zone"], node.this, node, d)
        if isinstance(node, exp.Anonymous) and node.name.lower() == "timezone" and len(node.expressions) == 2:
            return self.at_zone(node.expressions[0], node.expressions[1], node, d)
        if isinstance(node, exp.UnixToTime):
            if node.args.get("scale") is not None:
                raise NotScalar(node)
            x = self.compile(node.this, d)
            if x.oid not in NUMBER_OIDS:
                raise NotScalar(node)
            return S.Call("to_timestamp", [x], T.TIMESTAMPTZ)
        return None

    def at_zone(self, zone_node: exp.Expr, x_node: exp.Expr, node: exp.Expr, d: int) -> S.Expr:
        """``x AT TIME ZONE zone`` / ``timezone(zone, x)``: a date or a quoted literal reads as timestamptz (as
        PostgreSQL resolves them, in the session's UTC); a constant zone is checked here (22023)."""
        x, z = self.compile(x_node, d), self.compile(zone_node, d)
        if isinstance(z, S.Param):
            z.oid = T.TEXT
        pos = position_of(node)
        if isinstance(x, S.Const) and x.oid in (T.TEXT, T.UNKNOWN):
            x = S.Const(None if x.value is None else S.cast_value(x.value, T.TEXT, T.TIMESTAMPTZ, "timestamptz"),
                        T.TIMESTAMPTZ)
        elif x.oid == T.DATE:
            x = zoned_cast(x, T.TIMESTAMPTZ, "timestamptz", pos)
        if x.oid == T.TIME and z.oid in (T.TEXT, T.UNKNOWN, T.INTERVAL):
            raise Refusal(E.FEATURE_NOT_SUPPORTED, "AT TIME ZONE of a time of day (time with time zone) is not supported "
                          "on protected tables", position=pos, hint="Convert the timestamp first: "
                          "(ts AT TIME ZONE 'Europe/Paris')::time.")
        if z.oid not in (T.TEXT, T.UNKNOWN, T.INTERVAL) or x.oid not in (T.TIMESTAMP, T.TIMESTAMPTZ):
            raise Refusal(E.UNDEFINED_FUNCTION, f"function timezone({T.type_name(z.oid)}, {T.type_name(x.oid)}) does "
                          "not exist", position=pos, hint="AT TIME ZONE takes a timestamp or timestamptz and a zone "
                          "name ('Europe/Paris'), an offset ('+02', 'UTC') or an INTERVAL.")
        if not any(isinstance(e, S.Cell | S.Key | S.Param) for e in z.walk()):
            value = S.constant(z)
            if value is not None:
                try:
                    S.zone_of(value)
                except Refusal as r:
                    r.position = r.position or position_of(zone_node)
                    raise
        return S.AtZone(z, x, pos)

    def clock(self, node: exp.Expr) -> S.Expr:
        """now(), current_date, current_timestamp, localtimestamp: the statement's one instant (UTC)."""
        now = self.budget.statement_time()
        zone = session_zone.current()
        if zone is not None and not isinstance(node, exp.CurrentTimestamp | exp.CurrentDatetime):
            now = now.astimezone(zone.tzinfo()).replace(tzinfo=UTC)  # the session zone's date and wall time
        if isinstance(node, exp.CurrentDate):
            return S.Const(now.date(), T.DATE)
        if isinstance(node, exp.Localtimestamp):
            return S.Const(now.replace(tzinfo=None), T.TIMESTAMP)
        return S.Const(now, T.TIMESTAMPTZ)

    def interval(self, node: exp.Interval) -> S.Expr:
        """INTERVAL '7 days', INTERVAL '7' DAY."""
        text = node.this
        unit = node.args.get("unit")
        if not isinstance(text, exp.Literal):
            raise NotScalar(node)
        return S.Const(TM.parse_interval(str(text.this), unit.name if unit is not None else None), T.INTERVAL)

    def temporal_arith(self, op: str, a: S.Expr, b: S.Expr, node: exp.Expr) -> S.Expr:
        """date +/- integer, date - date, date/timestamp(tz) +/- interval (a quoted literal takes the
        other side's type first, as PostgreSQL resolves unknown literals)."""
        a, b = self.as_temporal(a, b), self.as_temporal(b, a)
        oid = temporal_arith_type(op, a.oid, b.oid)
        if oid is None and op in "*/" and {a.oid, b.oid} & {T.INTERVAL} and {a.oid, b.oid} & NUMBER_OIDS:
            raise Refusal(E.FEATURE_NOT_SUPPORTED, f"interval {op} {T.type_name(b.oid if a.oid == T.INTERVAL else a.oid)} "
                          "is not supported on protected tables", position=position_of(node),
                          hint="An interval may be multiplied by an integer (CAST(x AS bigint) * INTERVAL '1 day').")
        if oid is None:
            raise Refusal(E.UNDEFINED_FUNCTION, f"operator does not exist: {T.type_name(a.oid)} {op} {T.type_name(b.oid)}",
                          position=position_of(node),
                          hint="Dates take + or - an integer of days or an INTERVAL; an integer column takes "
                          "no interval." if T.INTERVAL in (a.oid, b.oid) else None)
        return shifted(op, a, b, position_of(node), oid)

    def as_temporal(self, e: S.Expr, other: S.Expr) -> S.Expr:
        if isinstance(e, S.Const) and e.oid in (T.TEXT, T.UNKNOWN) and e.value is not None:
            if other.oid in T.TEMPORAL_OIDS:
                return S.Const(S.cast_value(e.value, T.TEXT, T.INTERVAL, "interval"), T.INTERVAL)
            if other.oid == T.INTERVAL:
                return S.Const(S.cast_value(e.value, T.TEXT, T.TIMESTAMP, "timestamp"), T.TIMESTAMP)
        return e

    def temporal_operands(self, a: S.Expr, b: S.Expr, node: exp.Expr) -> tuple[S.Expr, S.Expr]:
        """Both sides of a comparison as one temporal type (a quoted literal reads as the other side's)."""
        kinds = [e.oid for e in (a, b) if e.oid in T.TEMPORAL_OIDS]
        for e in (a, b):
            if e.oid not in T.TEMPORAL_OIDS and not (isinstance(e, S.Const) and e.oid in (T.TEXT, T.UNKNOWN)):
                raise Refusal(E.UNDEFINED_FUNCTION, f"operator does not exist: {T.type_name(a.oid)} = {T.type_name(b.oid)}",
                              position=position_of(node))
        to = temporal_common(*kinds)

        def conv(e: S.Expr) -> S.Expr:
            if e.oid == to:
                return e
            if isinstance(e, S.Const):
                v = None if e.value is None else S.cast_value(e.value, e.oid, to, T.type_name(to))
                return S.Const(v, to)
            return zoned_cast(e, to, T.type_name(to), position_of(node))

        return conv(a), conv(b)
