"""Wide integer columns (ids, epoch seconds, cents) cut into declared ``bins``: each bin of integers
``[e_i, e_i+1)`` is a cell (the last closed at ``max``; a one-value bin when ``max`` starts one), and SUM
reads each row's value clamped into ``[min, max]``, as for a binned ``numeric`` measure.

Edges are Python ints, never floats, so a bigint id range keeps every edge exact. Comparisons follow
integer semantics: ``x <= 1699`` is ``x < 1700``, so it is answered when 1700 is an edge."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from typing import Any, ClassVar

from sqlglot import exp

from pgcore import pgtypes as T

from .base import ColumnType, DeclarationError, Value, clamp_sql
from .intvalues import _NUMERIC_CASTS, check_int_literal, read_int
from .numeric import MAX_BINS, NumericType
from .split import Cut

_INT_BOUNDS = {"smallint": (-(2**15), 2**15 - 1), "integer": (-(2**31), 2**31 - 1), "bigint": (-(2**63), 2**63 - 1)}


@dataclass(frozen=True)
class BinnedIntType(NumericType, pg=("integer", T.INT4)):
    """Integers ``lo..hi`` in bins with integer ``edges``; ``width`` > 0 when the bins are uniform (the
    last one may be shorter), which lets the pushed-down SQL find a row's bin by arithmetic."""

    config_names: ClassVar[tuple[str, ...]] = ()  # reached through IntType.from_config with `bins`
    sum_oid = T.INT8
    avg_oid = T.NUMERIC

    width: int = 0

    def _py(self, x: float) -> Value:
        return int(x)

    def last_values(self) -> list[Value] | None:
        lasts: list[Value] = [int(self.edges[i + 1]) - 1 for i in range(self.base_size - 1)] + [int(self.hi)]
        return lasts + [None] if self.nullable else lasts

    def _index(self, value: Value) -> int | None:
        if isinstance(value, bool):
            return None
        try:
            q = Fraction(str(value).strip()) if isinstance(value, str | Decimal) else Fraction(value)
        except (TypeError, ValueError, InvalidOperation, ZeroDivisionError):
            return None
        if q.denominator != 1 or not self.lo <= q <= self.hi:
            return None
        v = int(q)
        if self.width:
            return min((v - int(self.lo)) // self.width, self.base_size - 1)
        lo, hi = 0, self.base_size - 1  # last edge <= v, by bisection over the int edges
        while lo < hi:
            mid = (lo + hi + 1) // 2
            lo, hi = (mid, hi) if self.edges[mid] <= v else (lo, mid - 1)
        return lo

    def check_literal(self, value: Value, position: int | None) -> Value:
        return check_int_literal(value, position, self.sql_type)

    def coerce_param(self, p: object) -> Value:
        return read_int(p, self.sql_type)

    def read_text(self, raw: str) -> Value:
        return int(raw)

    def ranges(self, op: str, x: Value) -> list[tuple[int, int]]:
        q = Fraction(str(x).strip()) if isinstance(x, str | Decimal) else Fraction(x)
        # Over integers, <= q is < floor(q)+1 and > q is >= floor(q)+1: one edge test covers both.
        if op == "<=":
            return super().ranges("<", math.floor(q) + 1)
        if op == ">":
            return super().ranges(">=", math.floor(q) + 1)
        if op in ("<", ">="):
            return super().ranges(op, math.ceil(q))
        if q.denominator != 1:  # = or <> with a fraction: no integer equals it
            return [] if op == "=" else [(0, self.base_size - 1)]
        k = self._index(int(q))
        if k is not None and self._single(k):
            return [(k, k)] if op == "=" else [r for r in ((0, k - 1), (k + 1, self.base_size - 1)) if r[0] <= r[1]]
        return super().ranges(op, q)

    def thresholds(self, op: str, x: Value) -> tuple[Any, ...] | None:
        q = Fraction(str(x).strip()) if isinstance(x, str | Decimal) else Fraction(x)
        # Integers: every cut is ">= an integer" (> q is >= floor(q) + 1), so equal cuts are one point.
        if op in ("<", ">="):
            return (Cut(math.ceil(q)),)
        if op in ("<=", ">"):
            return (Cut(math.floor(q) + 1),)
        if q.denominator != 1:
            return None  # = or <> with a fraction: exact as it is (no integer equals it)
        return Cut(int(q)), Cut(int(q) + 1)

    def cut_sql(self, col: str, cut: Any, negate: bool = False) -> str:
        return f"{col} {'<' if negate else '>='} {int(cut.at)}"

    def format_cut(self, cut: Any) -> str:
        return str(int(cut.at))

    def _single(self, k: int) -> bool:
        """Cell ``k`` holds one integer (a bin of width one), so ``= v`` selects it exactly."""
        top = int(self.hi) if k == self.base_size - 1 else int(self.edges[k + 1]) - 1
        return top == int(self.edges[k])

    def identity_cast(self, to: object) -> bool:
        return to in _NUMERIC_CASTS and to not in (exp.DataType.Type.DOUBLE, exp.DataType.Type.FLOAT)

    def cell_sql(self, col: str) -> str:
        if not self.width:
            return super().cell_sql(col)
        # Arithmetic instead of one CASE arm per bin: a million-bin id column stays a short expression.
        # Clamping to the last bin's first width keeps a value at max (the closed end) in the last bin.
        lo = int(self.lo)
        top = min(int(self.hi), int(self.edges[-2]) + self.width - 1)
        cell = f"{lo} + ({clamp_sql(col, str(lo), str(top))} - {lo}) / {self.width} * {self.width}"
        cell = f"({cell})::{self.sql_type}"
        return f"CASE WHEN {col} IS NULL THEN NULL ELSE {cell} END" if self.nullable else cell

    def literal_sql(self, value: Value) -> str:
        return str(int(Fraction(str(value))))

    def format_value(self, v: Value) -> str:
        return str(int(v))

    @classmethod
    def from_bins(cls, spec: Mapping[str, Any], nullable: bool) -> ColumnType:
        """The domain of an integer column declared with ``min``, ``max`` and ``bins``."""
        lo, hi, bins = spec.get("min"), spec.get("max"), spec.get("bins")
        bad = [k for k, v in (("min", lo), ("max", hi)) if isinstance(v, bool) or not isinstance(v, int)]
        if bad:
            raise DeclarationError([(k, "must be an integer") for k in bad])
        assert isinstance(lo, int) and isinstance(hi, int)
        floor, ceil = _INT_BOUNDS[cls.sql_type]
        if hi <= lo:
            raise DeclarationError([("", f"empty domain: max ({hi}) must be above min ({lo})")])
        if lo < floor or hi > ceil:
            raise DeclarationError([("", f"min..max must lie within the {cls.sql_type} range")])
        width = 0
        # Bins are given by their first integers; each runs up to the next one's start (the last up to max
        # inclusive), so max on a width's boundary is a bin of its own, as integer division puts it.
        if isinstance(bins, int) and not isinstance(bins, bool):
            if bins <= 0:
                raise DeclarationError([("bins", "a bin width must be a positive integer")])
            n = (hi - lo) // bins + 1
            if n > MAX_BINS:
                raise DeclarationError([("bins", f"{n} bins are too many (at most {MAX_BINS:,}); use a wider bin")])
            starts = [lo + i * bins for i in range(n)]
            width = bins
        elif isinstance(bins, list) and bins and all(isinstance(e, int) and not isinstance(e, bool) for e in bins):
            starts = sorted(set(bins) | {lo})
            if starts[0] < lo or starts[-1] > hi:
                raise DeclarationError([("bins", f"bin starts must lie within min..max ({lo}..{hi})")])
            if len(starts) > MAX_BINS:
                raise DeclarationError([("bins", f"{len(starts)} bins are too many (at most {MAX_BINS:,})")])
        else:
            raise DeclarationError([("bins", "an integer column's bins are a positive integer width or a list of "
                                             "integer bin starts")])
        edges = [*starts, hi]
        return cls(lo, hi, tuple(edges), nullable=nullable, width=width)


@dataclass(frozen=True)
class BinnedSmallIntType(BinnedIntType, pg=("smallint", T.INT2)):
    """Binned smallint values."""


@dataclass(frozen=True)
class BinnedBigIntType(BinnedIntType, pg=("bigint", T.INT8)):
    """Binned bigint values: their sum is numeric, as PostgreSQL's sum(bigint)."""

    sum_oid = T.NUMERIC
