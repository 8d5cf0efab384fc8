"""SQL values by type, as PostgreSQL computes them: comparison, casts, the common type of CASE branches,
the result types of arithmetic and functions, and the functions themselves (round, floor, ceil, abs,
coalesce, nullif, greatest, least, the numeric ones sign, sqrt, power, ln, exp, trunc, and the text ones
lower, upper, length, strpos, substring, left, right, trim, replace, concat, ``||``, starts_with,
split_part, reverse, LIKE / ILIKE). The scalar evaluator (``parser.scalar``) applies these per row.

Python carries the values: int (int4/int8), Decimal (numeric: exact), float (float8), str (text), bool;
None is NULL.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from datetime import date, datetime, timedelta
from decimal import ROUND_CEILING, ROUND_DOWN, ROUND_FLOOR, ROUND_HALF_UP, Decimal
from typing import Any

from . import errors as E
from . import temporal as TM
from .errors import Refusal
from .pgtypes import (
    BOOL,
    DATE,
    FLOAT8,
    INT4,
    INT8,
    INTERVAL,
    NUMERIC,
    TEMPORAL_OIDS,
    TEXT,
    TIMESTAMP,
    TIMESTAMPTZ,
    UNKNOWN,
)
from .sqlstate import (
    INVALID_ARGUMENT_FOR_LOG,
    INVALID_ARGUMENT_FOR_POWER,
    INVALID_ESCAPE_SEQUENCE,
    INVALID_PARAMETER_VALUE,
    SUBSTRING_ERROR,
)

INTEGER_OIDS = frozenset({INT4, INT8})
NUMBER_OIDS = frozenset({INT4, INT8, FLOAT8, NUMERIC})
_TEMPORAL_RANK = {DATE: 0, TIMESTAMP: 1, TIMESTAMPTZ: 2}


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
    if oid == FLOAT8:
        return float(v)
    if oid == NUMERIC:
        return dec(v)
    return v


def common_type(oids: Sequence[int], what: str) -> int:
    """The type CASE / COALESCE / GREATEST branches resolve to (NULLs take the others' type)."""
    known = {o for o in oids if o != UNKNOWN}
    if not known:
        return UNKNOWN
    if known <= INTEGER_OIDS:
        return INT8 if INT8 in known else INT4
    if known <= NUMBER_OIDS:
        return FLOAT8 if FLOAT8 in known else NUMERIC
    if known <= TEMPORAL_OIDS:
        return temporal_common(*known)
    if len(known) == 1:
        return known.pop()
    raise Refusal(E.DATATYPE_MISMATCH, f"{what} types text and numeric cannot be matched")


def temporal_common(*oids: int) -> int:
    """date < timestamp < timestamptz: the type two temporal values compare as (PostgreSQL's casts)."""
    return max(oids, key=lambda o: _TEMPORAL_RANK[o])


def temporal_arith_type(op: str, a: int, b: int) -> int | None:
    """Result type of ``a op b`` when a date, timestamp or interval takes part; None: no such operator."""
    if op == "+" and (a in INTEGER_OIDS or a == INTERVAL) and b in TEMPORAL_OIDS:
        a, b = b, a
    if a == DATE and b in INTEGER_OIDS and op in "+-":
        return DATE
    if a == DATE and b == DATE and op == "-":
        return INT4
    if a in TEMPORAL_OIDS and b == INTERVAL and op in "+-":
        return TIMESTAMP if a == DATE else a
    if a == INTERVAL and b == INTERVAL and op in "+-":
        return INTERVAL
    return None


def temporal_arith(op: str, x: Any, y: Any) -> Any:
    """``x op y`` for the operand types ``temporal_arith_type`` accepts."""
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
    known = {a, b} - {UNKNOWN}
    if FLOAT8 in known:
        return FLOAT8
    if NUMERIC in known:
        return NUMERIC
    return INT4 if known == {INT4} else INT8


def cast_value(v: Any, src: int, to: int, type_name: str) -> Any:
    """``v::to`` as PostgreSQL casts it; a text that does not read as ``to`` raises 22P02."""
    if to == TEXT:
        return as_text(v)
    if to in TEMPORAL_OIDS:
        return TM.cast_temporal(v, to)
    if to == INTERVAL:
        return v if isinstance(v, TM.Interval) else TM.parse_interval(str(v))
    if to == BOOL:
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
            if isinstance(v, float) or src == FLOAT8:
                return int(round(float(v)))  # float8 -> int rounds half to even (rint)
            if isinstance(v, str):
                d = Decimal(v)
                if d != d.to_integral_value():
                    raise ValueError(v)
                return int(d)
            return int(dec(v).to_integral_value(rounding=ROUND_HALF_UP))  # numeric -> int: half away from 0
        if to == NUMERIC:
            return Decimal(str(v))
        if to == FLOAT8:
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
    if v is None or oid == TEXT:
        return v
    if oid in TEMPORAL_OIDS or oid == INTERVAL:
        return cast_value(v.decode() if isinstance(v, bytes) else v, TEXT, oid, "")
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


def int_div(op: str, x: Any, y: Any) -> Any:
    q = abs(int(x)) // abs(int(y))
    q = q if (x >= 0) == (y >= 0) else -q  # truncation toward zero, as integer division in SQL
    return q if op == "/" else int(x) - q * int(y)


def _round(vs: list[Any], oid: int) -> Any:
    if any(v is None for v in vs):
        return None
    x, digits = vs[0], int(vs[1]) if len(vs) > 1 else 0
    if oid == NUMERIC:
        return dec(x).quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP)
    q = 10.0 ** digits
    y = float(x) * q
    r = math.floor(abs(y) + 0.5) * (1 if y >= 0 else -1)  # half away from zero, as numeric round
    return int(r) if oid in INTEGER_OIDS else r / q


def _floor_ceil(mode: str) -> Callable[[list[Any], int], Any]:
    def f(vs: list[Any], oid: int) -> Any:
        x = vs[0]
        if x is None:
            return None
        if oid == NUMERIC:
            return dec(x).to_integral_value(rounding=ROUND_FLOOR if mode == "floor" else ROUND_CEILING)
        r = math.floor(x) if mode == "floor" else math.ceil(x)
        return r if oid in INTEGER_OIDS else float(r)
    return f


def _pick(fn: Callable[[list[Any]], Any]) -> Callable[[list[Any], int], Any]:
    def f(vs: list[Any], oid: int) -> Any:
        vals = [v for v in vs if v is not None]
        return conform(fn(vals), oid) if vals else None
    return f


def _date_trunc(vs: list[Any], oid: int) -> Any:
    unit, x = vs
    if unit is None or x is None:
        return None
    out = TM.trunc(str(unit), x)
    if out.tzinfo is None and oid == TIMESTAMPTZ:
        return out.replace(tzinfo=TM.UTC)  # a date truncates to a timestamptz, as in PostgreSQL
    return out


def _extract(vs: list[Any], oid: int) -> Any:
    field, x = vs
    return None if field is None or x is None else TM.extract(str(field), x)


def _to_timestamp(vs: list[Any], oid: int) -> Any:
    return None if vs[0] is None else TM.from_epoch(vs[0])


def _strict(fn: Callable[..., Any]) -> Callable[[list[Any], int], Any]:
    """A function that is NULL when any argument is (PostgreSQL's STRICT functions)."""
    def f(vs: list[Any], oid: int) -> Any:
        return None if any(v is None for v in vs) else fn(*vs)
    return f


def _substring(s: str, start: int, count: int | None = None) -> str:
    """substring(s FROM start [FOR count]): characters start .. start+count-1, 1-based, clipped."""
    if count is not None and count < 0:
        raise Refusal(SUBSTRING_ERROR, "negative substring length not allowed")
    end = len(s) + 1 if count is None else start + count
    return s[max(start, 1) - 1:max(end, 1) - 1]


def _right(s: str, n: int) -> str:
    return (s[-n:] if n > 0 else "") if n >= 0 else s[-n:]


def _replace(s: str, old: str, new: str) -> str:
    return s if old == "" else s.replace(old, new)


def _split_part(s: str, delim: str, n: int) -> str:
    if n == 0:
        raise Refusal(INVALID_PARAMETER_VALUE, "field position must not be zero")
    parts = s.split(delim) if delim else [s]
    if s == "":
        return ""
    i = n - 1 if n > 0 else len(parts) + n
    return parts[i] if 0 <= i < len(parts) else ""


def _sqrt(x: Any) -> Any:
    if x < 0:
        raise Refusal(INVALID_ARGUMENT_FOR_POWER, "cannot take square root of a negative number")
    return dec(x).sqrt() if isinstance(x, Decimal) else math.sqrt(x)


def _ln(x: Any) -> Any:
    if x == 0:
        raise Refusal(INVALID_ARGUMENT_FOR_LOG, "cannot take logarithm of zero")
    if x < 0:
        raise Refusal(INVALID_ARGUMENT_FOR_LOG, "cannot take logarithm of a negative number")
    return dec(x).ln() if isinstance(x, Decimal) else math.log(x)


def _power(x: Any, y: Any) -> Any:
    if x == 0 and y < 0:
        raise Refusal(INVALID_ARGUMENT_FOR_POWER, "zero raised to a negative power is undefined")
    if x < 0 and y != int(y):
        raise Refusal(INVALID_ARGUMENT_FOR_POWER, "a negative number raised to a non-integer power yields a complex "
                      "result")
    if isinstance(x, Decimal) or isinstance(y, Decimal):
        return dec(x) ** dec(y) if dec(y) != dec(y).to_integral_value() else dec(x) ** int(y)
    return float(x) ** float(y)


def _trunc(x: Any, digits: int = 0) -> Any:
    if isinstance(x, Decimal):
        return x.quantize(Decimal(1).scaleb(-digits), rounding=ROUND_DOWN)
    q = 10.0 ** digits
    return math.trunc(float(x) * q) / q


def like_regex(pattern: str, escape: str | None = "\\") -> re.Pattern[str]:
    """The regular expression a LIKE pattern denotes (``%`` any string, ``_`` one character)."""
    key = (pattern, escape)
    hit = _LIKE_CACHE.get(key)
    if hit is not None:
        return hit
    out, i = [], 0
    while i < len(pattern):
        ch = pattern[i]
        if escape and ch == escape:
            if i + 1 >= len(pattern):
                raise Refusal(INVALID_ESCAPE_SEQUENCE, "LIKE pattern must not end with escape character")
            out.append(re.escape(pattern[i + 1]))
            i += 2
            continue
        out.append(".*" if ch == "%" else "." if ch == "_" else re.escape(ch))
        i += 1
    rx = re.compile("".join(out), re.DOTALL)
    if len(_LIKE_CACHE) > 1024:
        _LIKE_CACHE.clear()
    _LIKE_CACHE[key] = rx
    return rx


_LIKE_CACHE: dict[tuple[str, str | None], re.Pattern[str]] = {}


def _like(fold: bool) -> Callable[[list[Any], int], Any]:
    def f(vs: list[Any], oid: int) -> Any:
        s, pattern, *esc = vs
        if s is None or pattern is None:
            return None
        escape = esc[0] if esc else "\\"
        if fold:
            s, pattern = s.lower(), pattern.lower()
        return like_regex(pattern, escape or None).fullmatch(s) is not None
    return f


def _concat(vs: list[Any], oid: int) -> Any:
    """concat(...): NULL arguments are skipped; the others are read as text."""
    return "".join(as_text(v) for v in vs if v is not None)


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


TEXT_FUNCTIONS = frozenset({"to_char", "lower", "upper", "length", "strpos", "substring", "left", "right", "btrim", "ltrim",
                            "rtrim", "replace", "textcat", "starts_with", "split_part", "reverse", "like", "ilike"})
"""Functions over text arguments (``concat`` takes any: its arguments are read as text)."""

FUNCTIONS: dict[str, Callable[[list[Any], int], Any]] = {
    "lower": _strict(str.lower),
    "upper": _strict(str.upper),
    "length": _strict(len),
    "strpos": _strict(lambda s, sub: s.find(sub) + 1),
    "substring": _strict(_substring),
    "left": _strict(lambda s, n: s[:n]),
    "right": _strict(_right),
    "btrim": _strict(lambda s: s.strip(" ")),
    "ltrim": _strict(lambda s: s.lstrip(" ")),
    "rtrim": _strict(lambda s: s.rstrip(" ")),
    "replace": _strict(_replace),
    "textcat": _strict(lambda a, b: as_text(a) + as_text(b)),
    "concat": _concat,
    "starts_with": _strict(lambda s, p: s.startswith(p)),
    "split_part": _strict(_split_part),
    "reverse": _strict(lambda s: s[::-1]),
    "to_char": _strict(lambda v, fmt: v.strftime(fmt)),  # formats checked by the compiler (TO_CHAR_FORMAT)
    "like": _like(False),
    "ilike": _like(True),
    "sign": _strict(lambda x: (x > 0) - (x < 0)),
    "sqrt": _strict(_sqrt),
    "power": _strict(_power),
    "ln": _strict(_ln),
    "exp": _strict(lambda x: dec(x).exp() if isinstance(x, Decimal) else math.exp(x)),
    "trunc": _strict(_trunc),
    "date_trunc": _date_trunc,
    "extract": _extract,
    "to_timestamp": _to_timestamp,
    "round": _round,
    "floor": _floor_ceil("floor"),
    "ceil": _floor_ceil("ceil"),
    "abs": lambda vs, oid: None if vs[0] is None else abs(vs[0]),
    "coalesce": lambda vs, oid: conform(next((v for v in vs if v is not None), None), oid),
    "nullif": lambda vs, oid: None if vs[0] == vs[1] else vs[0],
    "greatest": _pick(max),
    "least": _pick(min),
}


def call_type(fn: str, oids: Sequence[int]) -> int:
    """Result type of ``fn`` over arguments of types ``oids`` (NUMERIC where PostgreSQL computes exactly)."""
    if fn in ("length", "strpos"):
        return INT4
    if fn in ("like", "ilike", "starts_with"):
        return BOOL
    if fn in TEXT_FUNCTIONS or fn == "concat":
        return TEXT
    first = oids[0]
    if fn in ("sign", "trunc", "sqrt", "ln", "exp", "power"):
        return NUMERIC if first in INTEGER_OIDS and fn in ("sign", "trunc") or first == NUMERIC else FLOAT8
    if fn == "round":
        if first == FLOAT8:
            return FLOAT8
        return first if first in INTEGER_OIDS and len(oids) == 1 else NUMERIC
    if fn in ("floor", "ceil"):
        return FLOAT8 if first == FLOAT8 else NUMERIC
    if fn in ("abs", "nullif"):
        return first
    if fn == "date_trunc":
        return TIMESTAMPTZ if oids[1] in (DATE, TIMESTAMPTZ) else oids[1]
    if fn == "extract":
        return NUMERIC
    if fn == "to_timestamp":
        return TIMESTAMPTZ
    return common_type(oids, fn.upper())
