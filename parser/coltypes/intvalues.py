"""Integer values as PostgreSQL reads them beside an integer column: the integers a comparison keeps, a
bound parameter, a literal's type checks (shared by plain and binned integer columns)."""

from __future__ import annotations

import math
from datetime import date, datetime
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from typing import Any

from sqlglot import exp

from pgcore import errors as E
from pgcore.errors import Refusal

from ..semantics.datetimes import Interval
from .base import Value

_NUMERIC_CASTS = {exp.DataType.Type.INT, exp.DataType.Type.BIGINT, exp.DataType.Type.SMALLINT,
                  exp.DataType.Type.DOUBLE, exp.DataType.Type.FLOAT, exp.DataType.Type.DECIMAL,
                  exp.DataType.Type.BIGDECIMAL}


def int_ranges(lo: int, hi: int, op: str, x: Any) -> list[tuple[int, int]]:
    """Offsets (from ``lo``) of the integers in ``lo..hi`` where ``v op x`` holds, as ranges."""
    n = hi - lo + 1
    try:
        q = Fraction(x) if not isinstance(x, Decimal) else Fraction(str(x))
    except (ValueError, InvalidOperation, TypeError):
        return []
    if op in ("=", "<>"):
        hit = q.denominator == 1 and lo <= q <= hi
        eq = [(int(q) - lo, int(q) - lo)] if hit else []
        if op == "=":
            return eq
        return [(0, n - 1)] if not eq else [(0, eq[0][0] - 1), (eq[0][0] + 1, n - 1)]
    if op in ("<", "<="):
        top = math.ceil(q) - 1 if op == "<" else math.floor(q)
        return [(0, min(top, hi) - lo)] if top >= lo else []
    if op in (">", ">="):
        bot = math.floor(q) + 1 if op == ">" else math.ceil(q)
        return [(max(bot, lo) - lo, n - 1)] if bot <= hi else []
    raise AssertionError(op)


def read_int(p: object, type_name: str = "integer") -> Value:
    """A bound parameter compared with an integer column: an int, or an exact number for ranges."""
    if isinstance(p, bytes):
        p = p.decode()
    if isinstance(p, bool):
        raise Refusal(E.UNDEFINED_FUNCTION, f"operator does not exist: {type_name} = boolean")
    if isinstance(p, int | Decimal):
        return p
    if isinstance(p, float):
        return Decimal(repr(p))
    try:
        return int(str(p).strip())
    except ValueError:
        raise Refusal(E.INVALID_TEXT_REPRESENTATION, f'invalid input syntax for type {type_name}: "{p}"') from None


def check_int_literal(value: Value, position: int | None, type_name: str = "integer") -> Value:
    if isinstance(value, date | Interval):
        other = "interval" if isinstance(value, Interval) else ("timestamp" if isinstance(value, datetime) else "date")
        raise Refusal(E.UNDEFINED_FUNCTION, f"operator does not exist: {type_name} = {other}", position=position,
                      hint=f"An {type_name} column compares with numbers; dates and intervals apply to date and "
                      "timestamp columns.")
    if isinstance(value, bool):
        raise Refusal(E.UNDEFINED_FUNCTION, f"operator does not exist: {type_name} = boolean", position=position,
                      hint="No operator matches the given name and argument types.")
    if isinstance(value, str):
        try:
            int(value.strip())
        except ValueError:
            raise Refusal(E.INVALID_TEXT_REPRESENTATION, f'invalid input syntax for type {type_name}: "{value}"',
                          position=position) from None
    return value
