"""``int``: an integer column whose cells are the declared range ``min..max``, one value a cell."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
from sqlglot import exp

from .. import errors as E
from .. import pgtypes as T
from ..errors import Refusal
from ..temporal import Interval
from .base import ColumnType, DeclarationError, Value, clamp_sql

if TYPE_CHECKING:
    from .intbins import BinnedIntType

MAX_CELLS = 1_000_000
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


@dataclass(frozen=True)
class IntType(ColumnType):
    """Integers ``lo..hi`` (with ``bins``, a wide range in bins; with ``keys = "private"``, an identifier such as a ZIP code, coltypes/idkeys.py). Stored values outside are clipped into the range (which bounds a row's SUM
    contribution); a NULL in a non-nullable domain lands on ``lo`` (GREATEST ignores NULLs)."""

    type_name = "int"
    config_names: ClassVar[tuple[str, ...]] = ("int", "integer", "int4")
    config_keys = frozenset({"min", "max", "bins", "keys"})
    sql_type = "integer"
    oid = T.INT4
    param_oid = T.INT4
    summable = True
    raw_exact = True

    lo: int = 0
    hi: int = -1

    @property
    def base_size(self) -> int:
        return self.hi - self.lo + 1

    def _index(self, value: Value) -> int | None:
        if isinstance(value, bool):
            return None
        if isinstance(value, float | str | Decimal):
            try:
                d = Decimal(str(value).strip())
            except InvalidOperation:
                return None
            if d != d.to_integral_value():
                return None
            value = int(d)
        if not isinstance(value, int):
            return None
        return value - self.lo if self.lo <= value <= self.hi else None

    def _value(self, index: int) -> Value:
        return self.lo + index

    def base_values(self) -> np.ndarray:
        return np.arange(self.lo, self.hi + 1, dtype=np.int64)

    def numeric_weights(self) -> np.ndarray:
        w = np.arange(self.lo, self.hi + 1, dtype=np.float64)
        return np.append(w, 0.0) if self.nullable else w

    @property
    def max_abs(self) -> float:
        return float(max(abs(self.lo), abs(self.hi)))

    @property
    def sum_bounds(self) -> tuple[float, float]:
        return float(self.lo), float(self.hi)

    def check_literal(self, value: Value, position: int | None) -> Value:
        return check_int_literal(value, position, self.sql_type)

    def read_text(self, raw: str) -> Value:
        return int(float(raw))

    def coerce_param(self, p: object) -> Value:
        return read_int(p, self.sql_type)

    def ranges(self, op: str, x: Value) -> list[tuple[int, int]]:
        return int_ranges(self.lo, self.hi, op, x)

    def identity_cast(self, to: object) -> bool:
        return to in _NUMERIC_CASTS

    def cell_sql(self, col: str) -> str:
        clipped = clamp_sql(col, str(self.lo), str(self.hi))
        return f"CASE WHEN {col} IS NULL THEN NULL ELSE {clipped} END" if self.nullable else clipped

    def literal_sql(self, value: Value) -> str:
        return str(value)

    def range_sql(self, e: str, lo: int, hi: int) -> str | None:
        return f"{e} BETWEEN {self._value(lo)} AND {self._value(hi)}"

    def raw_sql(self, col: str, ranges: Sequence[tuple[int, int]]) -> str | None:
        # Single interior values (an IN list) as one `col IN (...)`, which PostgreSQL hashes, rather than
        # one OR'd pair of comparisons each: 10,000 of those took seconds over a few thousand rows.
        last = self.base_size - 1
        single = {r for r in ranges if r[0] == r[1] and 0 < r[0] < last and r[0] != self.null_index}
        if len(single) < 2:
            return super().raw_sql(col, ranges)
        listed = f"{col} IN ({', '.join(str(self.lo + lo) for lo, _ in sorted(single))})"
        rest = [r for r in ranges if r not in single]
        other = super().raw_sql(col, rest) if rest else "FALSE"
        if other is None or other == "TRUE":
            return other
        return listed if other == "FALSE" else f"({listed} OR {other})"

    def cell_start_sql(self, index: int) -> str | None:
        return str(self.lo + index)

    def ddl_check(self, col: str) -> str:
        return f"{col} BETWEEN {self.lo} AND {self.hi}"

    def format_value(self, v: Value) -> str:
        return str(v)

    @classmethod
    def binned_type(cls) -> type[BinnedIntType]:
        """The class of this integer width declared with ``bins`` (wide ranges: ids, epoch seconds, cents)."""
        from .intbins import BinnedBigIntType, BinnedIntType, BinnedSmallIntType

        return {"smallint": BinnedSmallIntType, "bigint": BinnedBigIntType}.get(cls.sql_type, BinnedIntType)

    @classmethod
    def from_config(cls, spec: Mapping[str, Any], nullable: bool) -> ColumnType:
        if "keys" in spec:  # an identifier (zip, npi): keys released by DP partition selection
            from .idkeys import id_keys_from_config

            return id_keys_from_config(cls.sql_type, spec, nullable)
        if spec.get("bins") is not None:
            return cls.binned_type().from_bins(spec, nullable)
        lo, hi = spec.get("min"), spec.get("max")
        bad = [k for k, v in (("min", lo), ("max", hi)) if v is not None and (isinstance(v, bool) or not isinstance(v, int))]
        if bad:
            raise DeclarationError([(k, "must be an integer") for k in bad])
        if lo is None or hi is None:
            raise DeclarationError([("", "an int column needs min and max (its public range)")])
        if hi < lo:
            raise DeclarationError([("", f"empty domain: max ({hi}) is below min ({lo})")])
        if hi - lo + 1 > MAX_CELLS:
            raise DeclarationError([("", f"domain of {hi - lo + 1} values is too large; bin the column "
                                         f"(at most {MAX_CELLS:,}): bins = WIDTH makes a wide range a "
                                         "column of bins; an identifier (ZIP, NPI) takes keys = \"private\"")])
        return cls(lo, hi, nullable=nullable)


@dataclass(frozen=True)
class SmallIntType(IntType):
    """Integers ``lo..hi`` stored as smallint; with ``bins``, a wide range of them in bins."""

    type_name = "smallint"
    config_names = ("smallint", "int2")
    sql_type = "smallint"
    oid = T.INT2
    param_oid = T.INT2


@dataclass(frozen=True)
class BigIntType(IntType):
    """Integers ``lo..hi`` stored as bigint (ids, epoch seconds, cents); with ``bins``, a wide range in bins."""

    type_name = "bigint"
    config_names = ("bigint", "int8")
    sql_type = "bigint"
    oid = T.INT8
    param_oid = T.INT8
    sum_oid = T.NUMERIC
