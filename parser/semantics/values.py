"""SQL values by type, as PostgreSQL computes them: comparison, the common type of CASE branches and
arithmetic, casts (and a value's text form), bound parameters, integer division. The functions (round,
lower, LIKE...) and their result types are in ``parser.semantics.functions``; the scalar evaluator
(``parser.scalar``) applies both per row.

Python carries the values: int (int4/int8), Decimal (numeric: exact), float (float8), str (text), bool;
None is NULL.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import date, datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal, localcontext
from typing import Any

from pgcore import errors as E
from pgcore import pgtypes as T
from pgcore.errors import Refusal

from . import datetimes as TM

INTEGER_OIDS = frozenset({T.INT4, T.INT8})
NUMBER_OIDS = frozenset({T.INT4, T.INT8, T.FLOAT8, T.NUMERIC})
_TEMPORAL_RANK = {T.DATE: 0, T.TIMESTAMP: 1, T.TIMESTAMPTZ: 2}


def compare(op: str, a: object, b: object) -> bool | None:
    if a is None or b is None:
        return None
    x: Any = a
    if op == "=":
        return bool(x == b)
    if op == "<>":
        return bool(x != b)
    if op == "<":
        return bool(x < b)
    if op == "<=":
        return bool(x <= b)
    if op == ">":
        return bool(x > b)
    if op == ">=":
        return bool(x >= b)
    raise AssertionError(op)


def round_count(x: float) -> int:
    """Noisy value -> nearest integer (post-processing; a SUM over a signed domain may be negative)."""
    return int(math.floor(x + 0.5))


def clamp_count(x: float) -> int:
    """Noisy COUNT -> integer at least 0: post-processing, so free. A count is never released negative,
    at the price of a small upward bias where the true count is near 0 (summing clamped counts of many
    empty groups over-counts; sum the groups in SQL instead, as one count)."""
    return max(round_count(x), 0)


def dec(v: Any) -> Decimal:
    return v if isinstance(v, Decimal) else Decimal(repr(v) if isinstance(v, float) else v)


def conform(v: Any, oid: int) -> Any:
    """A number as the Python type its column's type promises (int into float8 or numeric)."""
    if v is None or isinstance(v, bool) or not isinstance(v, int | float | Decimal):
        return v
    if oid == T.FLOAT8:
        return float(v)
    if oid == T.NUMERIC:
        return dec(v)
    return v


def common_type(oids: Sequence[int], what: str) -> int:
    """The type CASE / COALESCE / GREATEST branches resolve to (NULLs take the others' type)."""
    known = {o for o in oids if o != T.UNKNOWN}
    if not known:
        return T.UNKNOWN
    if known <= INTEGER_OIDS:
        return T.INT8 if T.INT8 in known else T.INT4
    if known <= NUMBER_OIDS:
        return T.FLOAT8 if T.FLOAT8 in known else T.NUMERIC
    if known <= T.TEMPORAL_OIDS:
        return temporal_common(*known)
    if len(known) == 1:
        return known.pop()
    raise Refusal(E.DATATYPE_MISMATCH, f"{what} types text and numeric cannot be matched")


def temporal_common(*oids: int) -> int:
    """date < timestamp < timestamptz: the type two temporal values compare as (PostgreSQL's casts)."""
    return max(oids, key=lambda o: _TEMPORAL_RANK[o])


def temporal_arith_type(op: str, a: int, b: int) -> int | None:
    """Result type of ``a op b`` when a date, timestamp or interval takes part; None: no such operator."""
    if op == "+" and (a in INTEGER_OIDS or a == T.INTERVAL) and b in T.TEMPORAL_OIDS:
        a, b = b, a
    if a == T.DATE and b in INTEGER_OIDS and op in "+-":
        return T.DATE
    if a == T.DATE and b == T.DATE and op == "-":
        return T.INT4
    if a in T.TEMPORAL_OIDS and b == T.INTERVAL and op in "+-":
        return T.TIMESTAMP if a == T.DATE else a
    if a == T.INTERVAL and b == T.INTERVAL and op in "+-":
        return T.INTERVAL
    if op == "*" and (a == T.INTERVAL) != (b == T.INTERVAL) and (b if a == T.INTERVAL else a) in INTEGER_OIDS:
        return T.INTERVAL  # Tableau's week start: -(EXTRACT(DOW FROM x))::bigint * INTERVAL '1 DAY'
    return None


def temporal_arith(op: str, x: Any, y: Any) -> Any:
    """``x op y`` for the operand types ``temporal_arith_type`` accepts."""
    if op == "*":
        iv, n = (x, int(y)) if isinstance(x, TM.Interval) else (y, int(x))
        out = TM.Interval(iv.months * n, iv.days * n, iv.micros * n)
        if max(abs(out.months), abs(out.days)) >= 2 ** 31 or abs(out.micros) >= 2 ** 63:
            raise Refusal(TM.DATETIME_FIELD_OVERFLOW, "interval out of range")
        return out
    if op == "+" and not isinstance(x, date | TM.Interval):
        x, y = y, x
    if isinstance(x, TM.Interval) and isinstance(y, TM.Interval):
        months, days, micros = (y.months, y.days, y.micros) if op == "+" else (-y.months, -y.days, -y.micros)
        return TM.Interval(x.months + months, x.days + days, x.micros + micros)
    if isinstance(y, TM.Interval):
        return TM.add_interval(x, y if op == "+" else -y)
    if isinstance(y, date):
        return (x - y).days
    try:
        return x + timedelta(days=int(y)) if op == "+" else x - timedelta(days=int(y))
    except OverflowError:
        raise Refusal(TM.DATETIME_FIELD_OVERFLOW, "date out of range") from None


def arith_type(a: int, b: int) -> int:
    known = {a, b} - {T.UNKNOWN}
    if T.FLOAT8 in known:
        return T.FLOAT8
    if T.NUMERIC in known:
        return T.NUMERIC
    return T.INT4 if known == {T.INT4} else T.INT8


def cast_value(v: Any, src: int, to: int, type_name: str) -> Any:
    """``v::to`` as PostgreSQL casts it; a text that does not read as ``to`` raises 22P02."""
    if to == T.TEXT:
        return as_text(v)
    if to in T.TEMPORAL_OIDS:
        return TM.cast_temporal(v, to)
    if to == T.INTERVAL:
        return v if isinstance(v, TM.Interval) else TM.parse_interval(str(v))
    if to == T.BOOL:
        if isinstance(v, str):
            low = v.strip().lower()
            if low in ("t", "true", "y", "yes", "on", "1"):
                return True
            if low in ("f", "false", "n", "no", "off", "0"):
                return False
            raise Refusal(E.INVALID_TEXT_REPRESENTATION, f'invalid input syntax for type boolean: "{v}"')
        return bool(v)
    try:
        if to in INTEGER_OIDS:
            if isinstance(v, float) or src == T.FLOAT8:
                return int(round(float(v)))  # float8 -> int rounds half to even (rint)
            if isinstance(v, str):
                d = Decimal(v)
                if d != d.to_integral_value():
                    raise ValueError(v)
                return int(d)
            return int(dec(v).to_integral_value(rounding=ROUND_HALF_UP))  # numeric -> int: half away from 0
        if to == T.NUMERIC:
            return Decimal(str(v))
        if to == T.FLOAT8:
            return float(v)
    except (ValueError, ArithmeticError):
        raise Refusal(E.INVALID_TEXT_REPRESENTATION, f'invalid input syntax for type {type_name}: "{v}"') from None
    raise AssertionError(to)


def temporal_text(v: date) -> str:
    """A date or timestamp as PostgreSQL prints it (ISO DateStyle; a timestamptz in UTC)."""
    if not isinstance(v, datetime):
        return v.isoformat()
    text = v.replace(tzinfo=None).isoformat(" ")
    return text + "+00" if v.tzinfo is not None else text


def coerce_param(v: object, oid: int) -> object:
    """A bound parameter read as a number of the type it is compared with (text params arrive as text)."""
    if v is None or oid == T.TEXT:
        return v
    if oid in T.TEMPORAL_OIDS or oid == T.INTERVAL:
        return cast_value(v.decode() if isinstance(v, bytes) else v, T.TEXT, oid, "")
    if isinstance(v, bytes):
        v = v.decode()
    if isinstance(v, str):
        text = v.strip()
        try:
            v = float(text) if any(ch in text for ch in ".eEnN") else int(text)
        except ValueError:
            raise Refusal(E.INVALID_TEXT_REPRESENTATION, f'invalid input syntax for type numeric: "{v}"') from None
    if oid in INTEGER_OIDS and isinstance(v, float) and v.is_integer():
        return int(v)
    return v


def numeric_div(a: Decimal, b: Decimal) -> Decimal:
    """``a / b`` for numeric as PostgreSQL computes it (numeric.c's select_div_scale): at least 16 significant
    digits and at least either operand's scale, rounded half away from zero (``20000::numeric / 3`` is
    6666.6666666666666667); ``b`` is not zero."""

    def weight_first(x: Decimal) -> tuple[int, int]:  # the leading base-10000 digit and its weight (0, 0: zero)
        if not x:
            return 0, 0
        w = x.adjusted() // 4
        return w, int(abs(x).scaleb(-4 * w))

    (w1, f1), (w2, f2) = weight_first(a), weight_first(b)
    qweight = w1 - w2 - (1 if f1 < f2 else 0)
    rscale = min(max(16 - qweight * 4, _scale(a), _scale(b), 0), 1000)
    with localcontext() as ctx:
        ctx.prec = max(28, (a.adjusted() if a else 0) - b.adjusted() + rscale + 8)
        return (a / b).quantize(Decimal(1).scaleb(-rscale), rounding=ROUND_HALF_UP)


def _scale(x: Decimal) -> int:
    return max(0, -int(x.as_tuple().exponent))


def int_div(op: str, x: Any, y: Any) -> Any:
    q = abs(int(x)) // abs(int(y))
    q = q if (x >= 0) == (y >= 0) else -q  # truncation toward zero, as integer division in SQL
    return q if op == "/" else int(x) - q * int(y)


def as_text(v: Any) -> str:
    """A value as ``v::text`` prints it."""
    if isinstance(v, str):
        return v
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, date):
        return temporal_text(v)
    if isinstance(v, float):
        return _float_text(v)
    return str(v)


def _float_text(x: float) -> str:
    """float8 output as PostgreSQL prints it (shortest round-trip form; no trailing .0)."""
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    if math.isnan(x):
        return "NaN"
    if x != 0 and not 1e-4 <= abs(x) < 1e15:
        mantissa, exponent = f"{x:.17e}".split("e")
        short = repr(x).split("e")[0].replace(".0", "") if "e" in repr(x) else repr(float(mantissa)).rstrip("0").rstrip(".")
        return f"{short}e{int(exponent):+03d}"
    return str(int(x)) if x.is_integer() else repr(x)
