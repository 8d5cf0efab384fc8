"""The SQL functions the scalar evaluator knows, as PostgreSQL computes them, and their result types:
round, floor, ceil, abs, coalesce, nullif, greatest, least, the numeric ones sign, sqrt, power, ln, exp,
trunc, the temporal ones date_trunc, extract, to_timestamp, to_char, and the text ones lower, upper,
length, strpos, substring, left, right, trim (with a character set), replace, translate, lpad / rpad,
repeat, initcap, octet_length, bit_length, md5, ascii, chr, concat, concat_ws, ``||``, starts_with,
split_part, reverse, LIKE / ILIKE. Each takes the row's argument values and the result type (``FUNCTIONS``); ``call_type``
gives that type. Value semantics (casts, common types, text form) come from ``parser.semantics.values``.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Callable, Sequence
from decimal import ROUND_CEILING, ROUND_DOWN, ROUND_FLOOR, ROUND_HALF_UP, Decimal
from typing import Any

from pgcore.errors import Refusal
from pgcore.pgtypes import BOOL, DATE, FLOAT8, INT4, NUMERIC, TEXT, TIMESTAMPTZ
from pgcore.sqlstate import (
    FEATURE_NOT_SUPPORTED,
    INVALID_ARGUMENT_FOR_LOG,
    INVALID_ARGUMENT_FOR_POWER,
    INVALID_ESCAPE_SEQUENCE,
    INVALID_PARAMETER_VALUE,
    PROGRAM_LIMIT_EXCEEDED,
    SUBSTRING_ERROR,
)

from . import collation
from . import datetimes as TM
from .regex import Unsupported, matches
from .tochar import to_char
from .values import INTEGER_OIDS, as_text, common_type, conform, dec


def _round(vs: list[Any], oid: int) -> Any:
    if any(v is None for v in vs):
        return None
    x, digits = vs[0], int(vs[1]) if len(vs) > 1 else 0
    if oid == NUMERIC:
        return dec(x).quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP)
    if len(vs) == 1:
        return float(round(float(x)))  # round(double precision) is rint: halves to even
    # round(numeric, n) over a float (a noisy value typed float8): halves away from zero, as numeric's
    q = 10.0 ** digits
    y = float(x) * q
    return math.floor(abs(y) + 0.5) * (1 if y >= 0 else -1) / q


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


def _as_result(fn: Callable[[list[Any], int], Any]) -> Callable[[list[Any], int], Any]:
    """``fn``'s value as its result type: a float for double precision, a decimal for numeric."""
    def f(vs: list[Any], oid: int) -> Any:
        v = fn(vs, oid)
        if v is None or isinstance(v, bool):
            return v
        if oid == FLOAT8:
            return float(v)
        return dec(v) if oid == NUMERIC and not isinstance(v, Decimal) else v
    return f


def _pick(fn: Callable[..., Any]) -> Callable[[list[Any], int], Any]:
    def f(vs: list[Any], oid: int) -> Any:
        vals = [v for v in vs if v is not None]
        if vals and oid == TEXT and not collation.current().code_point:  # the database's text order
            return fn(vals, key=collation.current().sort_key(vals))
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


def _trim(side: str) -> Callable[..., str]:
    """btrim / ltrim / rtrim(s [, characters]): the longest prefix / suffix of characters in the set."""
    def f(s: str, chars: str = " ") -> str:
        return s.strip(chars) if side == "b" else s.lstrip(chars) if side == "l" else s.rstrip(chars)
    return f


def _translate(s: str, src: str, dst: str) -> str:
    """translate: each character of ``src`` becomes the one at its place in ``dst`` (deleted past its end);
    a repeated character of ``src`` takes its first place, as PostgreSQL scans ``src`` left to right."""
    table: dict[str, str | None] = {}
    for i, ch in enumerate(src):
        table.setdefault(ch, dst[i] if i < len(dst) else None)
    return "".join(t for ch in s if (t := table.get(ch, ch)) is not None)


MAX_TEXT_CHARS = 1_000_000  # a per-row text result longer than this is refused (PostgreSQL's limit is 1 GB)


def _long(fn: str, n: int) -> None:
    if n > MAX_TEXT_CHARS:
        raise Refusal(PROGRAM_LIMIT_EXCEEDED, f"{fn}() over a declared value would be {n} characters long, more "
                      f"than {MAX_TEXT_CHARS:,}", hint="Per-row text values are evaluated on every declared value.")


def _pad(left: bool) -> Callable[..., str]:
    """lpad / rpad(s, n [, fill]): ``s`` cut to n characters (on the right, for both), or filled to n."""
    def f(s: str, n: int, fill: str = " ") -> str:
        if n <= 0:
            return ""
        _long("lpad" if left else "rpad", n)
        if len(s) >= n or fill == "":
            return s[:n]
        pad = (fill * ((n - len(s)) // len(fill) + 1))[: n - len(s)]
        return pad + s if left else s + pad
    return f


def _repeat(s: str, n: int) -> str:
    if n <= 0 or s == "":
        return ""
    _long("repeat", len(s) * n)
    return s * n


def _chr(n: int) -> str:
    if n == 0:
        raise Refusal(PROGRAM_LIMIT_EXCEEDED, "null character not permitted")
    if n < 0 or n > 0x10FFFF or 0xD800 <= n <= 0xDFFF:
        raise Refusal(PROGRAM_LIMIT_EXCEEDED, f"requested character {'not valid' if n > 0 else 'too large'} for "
                      f"encoding: {n}")
    return chr(n)


def _concat_ws(vs: list[Any], oid: int) -> Any:
    """concat_ws(sep, ...): NULL when the separator is; NULL arguments skipped, the others read as text."""
    if vs[0] is None:
        return None
    return str(vs[0]).join(as_text(v) for v in vs[1:] if v is not None)


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
            s, pattern = collation.lower(s), collation.lower(pattern)
        return like_regex(pattern, escape or None).fullmatch(s) is not None
    return f


def _regex_match(s: str, pattern: str, icase: bool) -> bool:
    """``s ~ pattern`` (``~*``) with PostgreSQL's semantics (parser.semantics.regex; patterns checked at compile)."""
    try:
        return matches(s, pattern, icase)
    except Unsupported as u:
        raise Refusal(FEATURE_NOT_SUPPORTED, f"regular expression {pattern!r} on a declared value: {u}",
                      hint="Declared values with non-ASCII letters take case-sensitive patterns without \\d \\s "
                      "\\w (their meaning there is the database locale's).") from None


def _concat(vs: list[Any], oid: int) -> Any:
    """concat(...): NULL arguments are skipped; the others are read as text."""
    return "".join(as_text(v) for v in vs if v is not None)


TEXT_FUNCTIONS = frozenset({"to_char", "lower", "upper", "length", "strpos", "substring", "left", "right", "btrim", "ltrim",
                            "rtrim", "replace", "textcat", "starts_with", "split_part", "reverse", "like", "ilike",
                            "translate", "lpad", "rpad", "repeat", "initcap", "octet_length", "bit_length", "md5",
                            "ascii", "chr"})
"""Functions over text arguments (``concat`` takes any: its arguments are read as text)."""

FUNCTIONS: dict[str, Callable[[list[Any], int], Any]] = {
    "lower": _strict(collation.lower),
    "upper": _strict(collation.upper),
    "length": _strict(len),
    "strpos": _strict(lambda s, sub: s.find(sub) + 1),
    "substring": _strict(_substring),
    "left": _strict(lambda s, n: s[:n]),
    "right": _strict(_right),
    "btrim": _strict(_trim("b")),
    "ltrim": _strict(_trim("l")),
    "rtrim": _strict(_trim("r")),
    "translate": _strict(_translate),
    "lpad": _strict(_pad(True)),
    "rpad": _strict(_pad(False)),
    "repeat": _strict(_repeat),
    "initcap": _strict(collation.initcap),
    "octet_length": _strict(lambda s: len(s.encode("utf-8"))),
    "bit_length": _strict(lambda s: 8 * len(s.encode("utf-8"))),
    "md5": _strict(lambda s: hashlib.md5(s.encode("utf-8")).hexdigest()),
    "ascii": _strict(lambda s: ord(s[0]) if s else 0),
    "chr": _strict(_chr),
    "concat_ws": _concat_ws,
    "replace": _strict(_replace),
    "textcat": _strict(lambda a, b: as_text(a) + as_text(b)),
    "concat": _concat,
    "starts_with": _strict(lambda s, p: s.startswith(p)),
    "split_part": _strict(_split_part),
    "reverse": _strict(lambda s: s[::-1]),
    "to_char": _strict(to_char),  # patterns checked by the compiler (parser.semantics.tochar.parse)
    "regex_match": _strict(_regex_match),
    "like": _like(False),
    "ilike": _like(True),
    "sign": _as_result(_strict(lambda x: (x > 0) - (x < 0))),
    "sqrt": _as_result(_strict(_sqrt)),
    "power": _as_result(_strict(_power)),
    "ln": _as_result(_strict(_ln)),
    "exp": _as_result(_strict(lambda x: dec(x).exp() if isinstance(x, Decimal) else math.exp(x))),
    "trunc": _as_result(_strict(_trunc)),
    "date_trunc": _date_trunc,
    "extract": _as_result(_extract),
    "to_timestamp": _to_timestamp,
    "round": _as_result(_round),
    "floor": _as_result(_floor_ceil("floor")),
    "ceil": _as_result(_floor_ceil("ceil")),
    "abs": lambda vs, oid: None if vs[0] is None else abs(vs[0]),
    "coalesce": lambda vs, oid: conform(next((v for v in vs if v is not None), None), oid),
    "nullif": lambda vs, oid: None if vs[0] == vs[1] else vs[0],
    "greatest": _pick(max),
    "least": _pick(min),
}


def call_type(fn: str, oids: Sequence[int]) -> int:
    """Result type of ``fn`` over arguments of types ``oids`` (NUMERIC where PostgreSQL computes exactly)."""
    if fn in ("length", "strpos", "octet_length", "bit_length", "ascii"):
        return INT4
    if fn in ("like", "ilike", "starts_with"):
        return BOOL
    if fn in TEXT_FUNCTIONS or fn in ("concat", "concat_ws"):
        return TEXT
    first = oids[0]
    # PostgreSQL has these for double precision and numeric only: an integer argument resolves to the
    # double precision one (float8 is its category's preferred type); round(x, n) and trunc(x, n) take
    # numeric only.
    if fn in ("sign", "trunc", "sqrt", "ln", "exp", "power", "round", "floor", "ceil"):
        if fn in ("round", "trunc") and len(oids) > 1:
            return NUMERIC
        return NUMERIC if first == NUMERIC else FLOAT8
    if fn in ("abs", "nullif"):
        return first
    if fn == "date_trunc":
        return TIMESTAMPTZ if oids[1] in (DATE, TIMESTAMPTZ) else oids[1]
    if fn == "extract":
        return NUMERIC
    if fn == "to_timestamp":
        return TIMESTAMPTZ
    return common_type(oids, fn.upper())
