"""``numeric`` and ``float``: measures with a declared clamp range ``min..max``, optionally cut into
``bins`` (a width, or explicit edges).

SUM and AVG read each row's value clamped into ``[min, max]`` in the pushed-down SQL, so one row moves a
SUM by at most ``max(|min|, |max|)``: the sensitivity. Without bins the column has one cell (and NULL when
nullable): it can be summed and counted, not filtered or grouped. With bins each bin ``[e_i, e_i+1)`` is a
cell (the last one closed at ``max``); a comparison inside a bin cuts it, and the binder splits that bin
at the literal for the statement (``thresholds`` / ``cut_cells``, ``parser/bind/splits.py``)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from typing import Any

import numpy as np
from sqlglot import exp

from pgcore import errors as E
from pgcore import pgtypes as T
from pgcore.errors import Refusal

from .base import ColumnType, DeclarationError, RangeBounds, Value, clamp_sql
from .idkeys import id_keys_from_config
from .split import Cut

MAX_BINS = 100_000
_NUMERIC_CASTS = {exp.DataType.Type.DOUBLE, exp.DataType.Type.FLOAT, exp.DataType.Type.DECIMAL,
                  exp.DataType.Type.BIGDECIMAL}


def _num(v: Any) -> Fraction:
    """A number as the decimal it is written as: a float reads as its shortest decimal (0.2 is 1/5, not the
    binary double nearest to it), as config.toml and SQL spell bin edges and literals."""
    if isinstance(v, bool):
        raise TypeError(v)
    if isinstance(v, float):
        return Fraction(Decimal(repr(v)))
    return Fraction(str(v).strip()) if isinstance(v, str | Decimal) else Fraction(v)


def _fmt(x: Fraction | float | int) -> str:
    f = _num(x) if isinstance(x, float) else Fraction(x)
    if f.denominator == 1:
        return str(f.numerator)
    return format(Decimal(f.numerator) / Decimal(f.denominator), "f")


@dataclass(frozen=True)
class NumericType(RangeBounds, ColumnType, names=("numeric", "decimal"), pg=("numeric", T.NUMERIC)):
    """A clamped measure; ``edges`` (ascending, from ``lo`` to ``hi``) cut it into cells when declared."""
    raw_exact = True

    config_keys = frozenset({"min", "max", "bins", "keys"})
    sum_oid = T.NUMERIC
    avg_oid = T.NUMERIC
    summable = True
    measure = True  # SUM reads each row's clamped value, not its cell

    lo: float = 0.0
    hi: float = 0.0
    edges: tuple[float, ...] = ()  # empty: one cell, no WHERE / GROUP BY

    @property
    def binned(self) -> bool:
        return bool(self.edges)

    @property
    def base_size(self) -> int:
        return len(self.edges) - 1 if self.edges else 1

    def _py(self, x: float) -> Value:
        return Decimal(_fmt(x)) if self.oid == T.NUMERIC else float(x)

    def _value(self, index: int) -> Value:
        return self._py(self.edges[index] if self.edges else self.lo)

    def last_values(self) -> list[Value] | None:
        if not self.edges:
            lasts = [self._py(self.hi)]
        else:
            # Just below the next edge: a per-row expression must agree there. The last bin is closed at
            # max (clamped values land there) and is checked just below max too, so that floor(x / w) * w
            # over bins of width w is one bucket a bin (a value exactly at max counts in the last bin).
            lasts = [self._py(self.edges[i + 1] - (self.edges[i + 1] - self.edges[i]) * 1e-9)
                     for i in range(self.base_size)]
        return lasts + [None] if self.nullable else lasts

    def coarseness(self) -> str:
        return "one bin" if self.edges else "the whole clamp range (no bins declared)"

    def whole_cells_hint(self, name: str) -> str:
        if not self.edges:
            return (f"{name} has no bins: it may be summed, averaged and counted; declare bins = WIDTH (or edges) "
                    "to filter or group by it.")
        edges = [_fmt(e) for e in dict.fromkeys(self.edges)]
        shown = ", ".join(edges[:8]) + (", ..." if len(edges) > 8 else "")
        at = edges[min(2, len(edges) - 1)]
        return (f"{name}'s cells are bins [a, b) with edges {shown}: compare it with an edge ({name} >= {at}, "
                f"{name} < {at}) or bucket it by a multiple of the bin width (floor({name} / W) * W).")

    def _index(self, value: Value) -> int | None:
        try:
            x = _num(value)
        except (TypeError, ValueError, InvalidOperation, ZeroDivisionError):
            return None
        if not _num(self.lo) <= x <= _num(self.hi):
            return None
        if not self.edges:
            return 0
        k = int(np.searchsorted(np.asarray(self.edges), float(x), side="right")) - 1
        return min(max(k, 0), self.base_size - 1)

    def numeric_weights(self) -> np.ndarray:
        # Only sizes a SUM's sensitivity (LinearQuery.factors with a measure): each cell's largest |value|.
        w = np.full(self.base_size, self.max_abs)
        return np.append(w, 0.0) if self.nullable else w

    def check_literal(self, value: Value, position: int | None) -> Value:
        if isinstance(value, bool) or not isinstance(value, int | float | Decimal | str):
            raise Refusal(E.UNDEFINED_FUNCTION, f"operator does not exist: {self.sql_type} = {type(value).__name__}",
                          position=position)
        try:
            _num(value)
        except (ValueError, InvalidOperation, ZeroDivisionError):
            raise Refusal(E.INVALID_TEXT_REPRESENTATION, f'invalid input syntax for type {self.sql_type}: "{value}"',
                          position=position) from None
        return value

    def coerce_param(self, p: object) -> Value:
        if isinstance(p, bytes):
            p = p.decode()
        return self.check_literal(p, None)

    def read_text(self, raw: str) -> Value:
        return Decimal(raw) if self.oid == T.NUMERIC else float(raw)

    def _cut(self, op: str, x: Value) -> Refusal:
        if not self.edges:
            return Refusal(E.FEATURE_NOT_SUPPORTED, f"comparison {op} {x} on a {self.type_name} measure without bins",
                           hint="Declare bins = WIDTH or bins = [edges...] for the column to filter or group by it; "
                           "without bins it may only be summed, averaged and counted.")
        edges = ", ".join(_fmt(e) for e in dict.fromkeys(self.edges[:8])) + (", ..." if len(self.edges) > 8 else "")
        return Refusal(E.FEATURE_NOT_SUPPORTED, f"comparison {op} {x} cuts a bin of the {self.type_name} column",
                       hint=f"Its cells are bins [a, b) with edges {edges}: compare with >= and < at an edge.")

    def _split(self, op: str, q: Fraction, raw: Value) -> int:
        """How many cells lie entirely on the TRUE side's left of ``op q``; refused when ``q`` cuts a bin."""
        if op in ("<", ">="):
            if q <= _num(self.lo):
                return 0
            if q > _num(self.hi):
                return self.base_size
            for i, e in enumerate(self.edges[:-1]):
                if q == _num(e):
                    return i
        else:
            if q < _num(self.lo):
                return 0
            if q >= _num(self.hi):
                return self.base_size
        raise self._cut(op, raw)

    def ranges(self, op: str, x: Value) -> list[tuple[int, int]]:
        q = _num(x)
        n = self.base_size
        if op in ("=", "<>"):
            if q < _num(self.lo) or q > _num(self.hi):
                return [] if op == "=" else [(0, n - 1)]
            raise self._cut(op, x)
        k = self._split(op, q, x)
        below = [(0, k - 1)] if k else []
        above = [(k, n - 1)] if k < n else []
        return below if op in ("<", "<=") else above

    def identity_cast(self, to: object) -> bool:
        return to in _NUMERIC_CASTS

    def thresholds(self, op: str, x: Value) -> tuple[Any, ...] | None:
        if not self.edges:
            return None  # one cell: refused as before (declare bins to filter)
        q = _num(x)
        ge, gt = Cut(q, False), Cut(q, True)
        return {"<": (ge,), ">=": (ge,), "<=": (gt,), ">": (gt,), "=": (ge, gt), "<>": (ge, gt)}[op]

    def cut_cells(self, cut: Any) -> tuple[int, int]:
        q, n = Fraction(cut.at), self.base_size
        lo, hi = _num(self.lo), _num(self.hi)
        if q < lo or (q == lo and not cut.strict):
            return 0, 0
        if q > hi or (q == hi and cut.strict):
            return n, n
        i = self._index(q)
        assert i is not None
        return (i, i) if not cut.strict and q == _num(self.edges[i]) else (i, i + 1)

    def cut_sql(self, col: str, cut: Any, negate: bool = False) -> str:
        op = ("<=" if negate else ">") if cut.strict else ("<" if negate else ">=")
        return f"{col} {op} {self.literal_sql(cut.at)}"

    def format_cut(self, cut: Any) -> str:
        return _fmt(Fraction(cut.at))

    def weight_sql(self, col: str) -> str:
        clamped = clamp_sql(col, _fmt(self.lo), _fmt(self.hi))
        return f"CASE WHEN {col} IS NULL THEN NULL ELSE {clamped} END" if self.nullable else clamped

    def cell_sql(self, col: str) -> str:
        v = clamp_sql(col, _fmt(self.lo), _fmt(self.hi))
        if not self.edges:
            cell = _fmt(self.lo)
        else:
            parts = " ".join(f"WHEN {v} < {_fmt(e)} THEN {_fmt(self.edges[i])}" for i, e in enumerate(self.edges[1:-1]))
            cell = f"CASE {parts} ELSE {_fmt(self.edges[-2])} END" if parts else _fmt(self.edges[0])
        cell = f"({cell})::{self.sql_type}"
        return f"CASE WHEN {col} IS NULL THEN NULL ELSE {cell} END" if self.nullable else cell

    def literal_sql(self, value: Value) -> str:
        return _fmt(_num(value))

    def range_sql(self, e: str, lo: int, hi: int) -> str | None:
        return f"{e} BETWEEN {_fmt(self.edges[lo])} AND {_fmt(self.edges[hi])}" if self.edges else None

    def cell_start_sql(self, index: int) -> str | None:
        return _fmt(self.edges[index]) if self.edges else None

    def ddl_check(self, col: str) -> str:
        return "TRUE"  # stored values may lie outside the clamp range: it bounds contributions, not the data

    def format_value(self, v: Value) -> str:
        return _fmt(_num(v))

    @classmethod
    def from_config(cls, spec: Mapping[str, Any], nullable: bool) -> ColumnType:
        if "keys" in spec:  # an identifier stored as numeric: keys released by DP partition selection
            return id_keys_from_config(cls.sql_type, spec, nullable)
        lo, hi = spec.get("min"), spec.get("max")
        for k, v in (("min", lo), ("max", hi)):
            if v is None:
                raise DeclarationError([("", f"a {cls.type_name} measure needs min and max (its clamp range)")])
            if isinstance(v, bool) or not isinstance(v, int | float):
                raise DeclarationError([(k, "must be a number")])
        assert isinstance(lo, int | float) and isinstance(hi, int | float)
        if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
            raise DeclarationError([("", f"empty clamp range: max ({hi}) must be above min ({lo})")])
        return cls(float(lo), float(hi), _edges(spec.get("bins"), float(lo), float(hi)), nullable=nullable)


def _edges(bins: Any, lo: float, hi: float) -> tuple[float, ...]:
    if bins is None:
        return ()
    if isinstance(bins, int | float) and not isinstance(bins, bool):
        if bins <= 0:
            raise DeclarationError([("bins", "a bin width must be > 0")])
        # In decimal, as written: bins = 0.1 from 0 puts an edge at 0.3, not at 0.30000000000000004.
        start, step, top = (Decimal(repr(float(x))) for x in (lo, bins, hi))
        n = math.ceil((top - start) / step)
        if n > MAX_BINS:
            raise DeclarationError([("bins", f"{n} bins are too many (at most {MAX_BINS:,}); use a wider bin")])
        edges = [float(start + i * step) for i in range(n)] + [hi]
    elif isinstance(bins, list) and all(isinstance(e, int | float) and not isinstance(e, bool) for e in bins):
        edges = sorted({float(e) for e in bins} | {lo, hi})
        if edges[0] < lo or edges[-1] > hi:
            raise DeclarationError([("bins", f"edges must lie within min..max ({lo}..{hi})")])
    else:
        raise DeclarationError([("bins", "must be a bin width (number) or a list of edges")])
    return tuple(float(e) for e in edges)


@dataclass(frozen=True)
class FloatType(NumericType, names=("float", "double precision", "float8"), pg=("double precision", T.FLOAT8)):
    """A clamped double-precision measure, cut into cells by ``bins`` when declared, as ``numeric``."""

    config_keys = frozenset({"min", "max", "bins"})  # a float's text is not exact: never a key
    sum_oid = T.FLOAT8
    avg_oid = T.FLOAT8
