"""``int``: an integer column whose cells are the declared range ``min..max``, one value a cell."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

import numpy as np

from pgcore import pgtypes as T

from .base import ColumnType, DeclarationError, RangeBounds, Value, clamp_sql
from .idkeys import id_keys_from_config
from .intbins import BinnedBigIntType, BinnedIntType, BinnedSmallIntType
from .intvalues import _NUMERIC_CASTS, check_int_literal, int_ranges, read_int

MAX_CELLS = 1_000_000
@dataclass(frozen=True)
class IntType(RangeBounds, ColumnType, names=("int", "integer", "int4"), pg=("integer", T.INT4)):
    """Integers ``lo..hi`` (with ``bins``, a wide range in bins; with ``keys = "private"``, an identifier such as a ZIP code, coltypes/idkeys.py). Stored values outside are clipped into the range (which bounds a row's SUM
    contribution); a NULL in a non-nullable domain lands on ``lo`` (GREATEST ignores NULLs)."""

    config_keys = frozenset({"min", "max", "bins", "keys"})
    summable = True
    raw_exact = True

    lo: int = 0
    hi: int = -1

    @property
    def base_size(self) -> int:
        return self.hi - self.lo + 1

    @property
    def distinct_cells(self) -> bool:
        return True

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
        return {"smallint": BinnedSmallIntType, "bigint": BinnedBigIntType}.get(cls.sql_type, BinnedIntType)

    @classmethod
    def from_config(cls, spec: Mapping[str, Any], nullable: bool) -> ColumnType:
        if "keys" in spec:  # an identifier (zip, npi): keys released by DP partition selection
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
class SmallIntType(IntType, names=("smallint", "int2"), pg=("smallint", T.INT2)):
    """Integers ``lo..hi`` stored as smallint; with ``bins``, a wide range of them in bins."""


@dataclass(frozen=True)
class BigIntType(IntType, names=("bigint", "int8"), pg=("bigint", T.INT8)):
    """Integers ``lo..hi`` stored as bigint (ids, epoch seconds, cents); with ``bins``, a wide range in bins."""

    sum_oid = T.NUMERIC
