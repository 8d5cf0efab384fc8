"""Per-row expressions over measures inside SUM / AVG (``SUM(ABS(x))``, ``SUM(x * x)``, ``SUM(a - b)``,
``SUM(CASE WHEN x > 0 THEN x END)``, ``CAST(x AS DOUBLE) / NULLIF(2, 0)``): pushed down as written over
the clamped columns, and bounded by interval arithmetic.

A measure's rows carry their own values, clamped into the declared [min, max]; the expression is not
evaluated by the planner but by the database, row by row. Its sensitivity is the largest |value| it can
take over the clamp ranges of its measures (per cell of the first one, its *carrier*: a bin's range when
it has bins) and the declared values of the other columns it reads, computed by interval arithmetic:
sound (the interval holds every value the expression can take; over-approximation is allowed, never
under), so the noise is calibrated to a true bound of one row's contribution. An expression that could
raise an error on some value in those ranges (division by a value that may be 0, the square root or
logarithm of a value that may be negative, an overflow) is refused: an error raised by one row would
reveal it. CASE conditions are not evaluated (every branch counts), so the bound is that of the union of
the branches.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import sqlglot
from sqlglot import exp

from pgcore import pgtypes as T
from pgcore.identifiers import quote_ident

from .. import scalar as S
from ..coltypes.numeric import NumericType
from ..model.schema import Attribute
from ..pushdown.cellsql import cell_expr
from ..semantics.values import INTEGER_OIDS, NUMBER_OIDS
from ..syntax.parse import _DIALECT

_BIG = 1e300  # float8 overflows near 1.8e308: a bound beyond this could overflow somewhere in the range
_INT4 = 2**31 - 1


class Unbounded(Exception):
    """The expression has no computable bound (or could raise an error); ``why`` says which part."""

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


@dataclass(frozen=True)
class Iv:
    """The non-NULL values an expression can take, within [lo, hi] (lo > hi: none), and whether it can be
    NULL."""

    lo: float
    hi: float
    null: bool = False

    @property
    def empty(self) -> bool:
        return self.lo > self.hi

    @property
    def max_abs(self) -> float:
        return 0.0 if self.empty else max(abs(self.lo), abs(self.hi))

    def contains_zero(self) -> bool:
        return not self.empty and self.lo <= 0 <= self.hi


NULL = Iv(math.inf, -math.inf, True)


def _iv(lo: float, hi: float, null: bool) -> Iv:
    if not (math.isfinite(lo) and math.isfinite(hi)) or max(abs(lo), abs(hi)) > _BIG:
        raise Unbounded("a value that may overflow")
    return Iv(lo, hi, null)


def _union(ivs: list[Iv]) -> Iv:
    live = [i for i in ivs if not i.empty]
    null = any(i.null for i in ivs)
    if not live:
        return Iv(math.inf, -math.inf, null)
    return Iv(min(i.lo for i in live), max(i.hi for i in live), null)


def _num(v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float | Decimal):
        raise Unbounded(f"the value {v!r}")
    return float(v)


def bound(e: S.Expr, ranges: dict[str, Iv], cells: dict[str, list[Any]]) -> Iv:
    """The interval of ``e``: measures read from ``ranges``; a sub-expression over one other declared
    column evaluated exactly on that column's cell values (``cells``)."""
    leaves = {x.attr for x in e.walk() if isinstance(x, S.Cell)}
    if not leaves & ranges.keys():
        if len(leaves) > 1:
            raise Unbounded("an expression over several non-measure columns")
        if not leaves:
            vals = e.ev(S.Env(1))
        else:
            (col,) = leaves
            vals = e.ev(S.Env(len(cells[col]), {col: cells[col]}))
        if e.oid not in NUMBER_OIDS | {T.UNKNOWN}:
            return Iv(0.0, 0.0, any(v is None for v in vals))  # a condition or text: only its nullness matters
        live = [_num(v) for v in vals if v is not None]
        null = any(v is None for v in vals)
        return _iv(min(live), max(live), null) if live else Iv(math.inf, -math.inf, True)
    if isinstance(e, S.Cell):
        return ranges[e.attr]
    if isinstance(e, S.Neg):
        a = bound(e.args[0], ranges, cells)
        return a if a.empty else Iv(-a.hi, -a.lo, a.null)
    if isinstance(e, S.Arith) and not e.temporal:
        return _arith(e.op, bound(e.args[0], ranges, cells), bound(e.args[1], ranges, cells), e.oid)
    if isinstance(e, S.Cast):
        a = bound(e.args[0], ranges, cells)
        if e.oid in (T.NUMERIC, T.FLOAT8):
            return a
        if e.oid in INTEGER_OIDS:
            if a.empty:
                return a
            lo, hi = math.floor(a.lo), math.ceil(a.hi)  # rounding moves a value by at most 0.5
            if e.oid == T.INT4 and max(abs(lo), abs(hi)) > _INT4:
                raise Unbounded("a cast to integer that may overflow")
            return _iv(lo, hi, a.null)
        raise Unbounded(f"a cast to {e.name}")
    if isinstance(e, S.Call):
        return _call(e, ranges, cells)
    if isinstance(e, S.Case):
        branches = [bound(v, ranges, cells) for _, v in e.whens]
        default = bound(e.default, ranges, cells) if e.default is not None else NULL
        return _union([*branches, default])
    raise Unbounded(f"{type(e).__name__.lower()} over a measure")


def _arith(op: str, a: Iv, b: Iv, oid: int) -> Iv:
    null = a.null or b.null
    if a.empty or b.empty:
        return Iv(math.inf, -math.inf, True)
    if op == "+":
        return _iv(a.lo + b.lo, a.hi + b.hi, null)
    if op == "-":
        return _iv(a.lo - b.hi, a.hi - b.lo, null)
    if op == "*":
        ps = [a.lo * b.lo, a.lo * b.hi, a.hi * b.lo, a.hi * b.hi]
        return _iv(min(ps), max(ps), null)
    if op in ("/", "%"):
        if b.contains_zero():
            raise Unbounded("a division by a value that may be 0")
        if op == "%":
            m = min(a.max_abs, b.max_abs)
            return _iv(0.0 if a.lo >= 0 else -m, 0.0 if a.hi <= 0 else m, null)
        qs = [a.lo / b.lo, a.lo / b.hi, a.hi / b.lo, a.hi / b.hi]  # integer division truncates: within these
        return _iv(min(qs), max(qs), null)
    raise Unbounded(f"operator {op}")


def _call(e: S.Call, ranges: dict[str, Iv], cells: dict[str, list[Any]]) -> Iv:
    fn = e.fn
    args = [bound(a, ranges, cells) for a in e.args]
    a = args[0]
    if fn == "abs":
        if a.empty:
            return a
        lo = 0.0 if a.contains_zero() else min(abs(a.lo), abs(a.hi))
        return Iv(lo, a.max_abs, a.null)
    if fn in ("round", "trunc", "floor", "ceil"):
        return a if a.empty else _iv(math.floor(a.lo), math.ceil(a.hi), a.null or any(x.null for x in args[1:]))
    if fn == "sign":
        return a if a.empty else Iv(-1.0 if a.lo < 0 else 0.0 if a.lo == 0 else 1.0,
                                    1.0 if a.hi > 0 else 0.0 if a.hi == 0 else -1.0, a.null)
    if fn == "coalesce":
        out: list[Iv] = []
        for x in args:
            out.append(Iv(x.lo, x.hi, False))
            if not x.null:
                return _union(out)
        return _union([*out, NULL])
    if fn == "nullif":
        return Iv(a.lo, a.hi, True)
    if fn in ("greatest", "least"):
        return _union(args)  # the result is one of the arguments
    if fn == "sqrt":
        if not a.empty and a.lo < 0:
            raise Unbounded("the square root of a value that may be negative")
        return a if a.empty else _iv(math.sqrt(a.lo), math.sqrt(a.hi), a.null)
    if fn == "power" and isinstance(e.args[1], S.Const) and isinstance(e.args[1].value, int) and 0 <= e.args[1].value <= 8:
        n = int(e.args[1].value)
        if a.empty or n == 0:
            return Iv(1.0, 1.0, a.null) if not a.empty else a
        ps = [a.lo ** n, a.hi ** n] + ([0.0] if a.contains_zero() else [])
        return _iv(min(ps), max(ps), a.null)
    raise Unbounded(f"{fn}() over a measure")


def carrier_cells(attr: Attribute) -> list[Iv]:
    """The interval of a measure's clamped values in each of its cells (a bin, or the whole clamp range;
    the NULL cell last)."""
    d = attr.domain
    assert isinstance(d, NumericType)
    if d.edges:
        cells = [Iv(float(d.edges[i]), float(d.edges[i + 1]), False) for i in range(d.base_size)]
    else:
        cells = [Iv(float(d.lo), float(d.hi), False)]
    return cells + [NULL] if d.nullable else cells


def whole(attr: Attribute) -> Iv:
    d = attr.domain
    assert isinstance(d, NumericType)
    return Iv(float(d.lo), float(d.hi), d.nullable)


def pushed_sql(node: exp.Expr, attrs: list[Attribute]) -> str:
    """The expression as PostgreSQL evaluates it on a row, each column read as the exact answers read it:
    a measure clamped into its range, another column as its cell's value. ``attrs``: the attribute of
    each column of ``node``, in ``find_all`` order."""
    out = node.copy()
    for col, attr in zip(list(out.find_all(exp.Column)), attrs, strict=True):
        text = attr.domain.weight_sql(quote_ident(attr.name)) if attr.domain.measure else cell_expr(attr)
        col.replace(exp.paren(sqlglot.parse_one(text, dialect=_DIALECT), copy=False))
    return str(out.sql(dialect=_DIALECT))
