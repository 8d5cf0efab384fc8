"""``date``, ``timestamp`` and ``timestamptz``: a declared range ``min..max`` cut into cells of one
``resolution`` (day, hour or minute), in UTC.

Cell ``i`` holds the instants ``[lo + i*step, lo + (i+1)*step)``. A comparison on a cell boundary
(``ts >= '2026-03-01'``) selects whole cells; one inside a cell (``ts >= '2026-03-01 10:30'`` on hourly
cells, an inclusive end ``ts <= '2026-05-01 00:00:00'``) cuts it: the binder splits that cell at the
literal for the statement (``thresholds`` / ``cut_cells``, ``parser/bind/splits.py``), never rounding. A date
holds one value a cell, so an instant inside a day decides whole days.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from functools import cached_property
from typing import Any, ClassVar

import numpy as np
from sqlglot import exp

from pgcore import errors as E
from pgcore import pgtypes as T
from pgcore.errors import Refusal

from ..semantics.datetimes import Interval, cast_temporal, parse_datetime
from .base import ColumnType, DeclarationError, Value, clamp_sql
from .split import Cut

MAX_CELLS = 1_000_000
RESOLUTIONS = {"day": timedelta(days=1), "hour": timedelta(hours=1), "minute": timedelta(minutes=1)}
_ONE_US = timedelta(microseconds=1)


def _naive(v: Any, oid: int) -> datetime:
    """A value compared with the column, as a naive UTC timestamp (text reads as the column's type)."""
    out = cast_temporal(v, oid) if isinstance(v, str) else v
    if isinstance(out, datetime):
        return out.astimezone(UTC).replace(tzinfo=None) if out.tzinfo is not None else out
    if isinstance(out, date):
        return datetime(out.year, out.month, out.day)
    raise Refusal(E.UNDEFINED_FUNCTION, f"cannot compare {type(v).__name__} with {T.type_name(oid)}")


class BoundaryInsideCell(Refusal):
    pass


@dataclass(frozen=True)
class TemporalType(ColumnType):
    """Cells of ``resolution`` from ``lo`` (aligned) to the cell holding ``hi``; values naive UTC here."""

    summable = False
    eps: ClassVar[timedelta] = _ONE_US  # the smallest step between two values of the type
    raw_exact = True
    config_keys = frozenset({"min", "max", "resolution"})

    lo: datetime = datetime(2000, 1, 1)
    hi: datetime = datetime(2000, 1, 1)
    resolution: str = "day"

    @property
    def step(self) -> timedelta:
        return RESOLUTIONS[self.resolution]

    @property
    def base_size(self) -> int:
        return (self.hi - self.lo) // self.step + 1

    @property
    def end(self) -> datetime:
        """The first instant after the last cell."""
        return self.lo + self.base_size * self.step

    def start_of(self, index: int) -> datetime:
        return self.lo + index * self.step

    def _out(self, ts: datetime) -> Value:
        """A naive UTC timestamp as this type's Python value."""
        return ts

    def instant(self, v: Any) -> datetime:
        """A value compared with the column as the naive UTC instant the cells are cut in."""
        return _naive(v, self.oid)

    def _value(self, index: int) -> Value:
        return self._out(self.start_of(index))

    def cell_last(self, index: int) -> Value:
        """The last value of cell ``index`` (its start for a date: one value a cell)."""
        return self._out(self.start_of(index + 1) - self.eps)

    def last_values(self) -> list[Value] | None:
        return self._lasts

    @cached_property
    def _lasts(self) -> list[Value]:
        lasts = [self.cell_last(i) for i in range(self.base_size)]
        return lasts + [None] if self.nullable else lasts

    def coarseness(self) -> str:
        return f"one {self.resolution}"

    def whole_cells_hint(self, name: str) -> str:
        # Dashboards choose the bucket: Grafana's $__timeGroup follows the panel's interval, Superset's the
        # chart's time grain.
        return (super().whole_cells_hint(name) + f" In Grafana set the panel's Min interval to 1{self.resolution[0]} "
                f"or more; in Superset choose a time grain of {'an' if self.resolution == 'hour' else 'a'} "
                f"{self.resolution} or more.")

    def _index(self, value: Value) -> int | None:
        try:
            ts = self.instant(value)
        except Refusal:
            return None
        if not self.lo <= ts < self.end:
            return None
        return (ts - self.lo) // self.step

    def base_values(self) -> np.ndarray:
        return np.asarray([self._value(i) for i in range(self.base_size)], dtype=object)

    def check_literal(self, value: Value, position: int | None) -> Value:
        if isinstance(value, bool | int | Decimal | float | Interval):
            kind = {bool: "boolean", int: "integer"}.get(type(value), "interval" if isinstance(value, Interval)
                                                         else "numeric")
            raise Refusal(E.UNDEFINED_FUNCTION, f"operator does not exist: {self.sql_type} = {kind}",
                          position=position, hint=f"Compare a {self.sql_type} column with a {self.sql_type} literal "
                          f"such as '{self.format_value(self._value(0))}'.")
        if isinstance(value, date) and not isinstance(value, str):
            # A date or timestamp against a timestamptz column, or a timestamptz against a date or timestamp
            # column, meet in the session's zone, as PostgreSQL compares them.
            aware = isinstance(value, datetime) and value.tzinfo is not None
            if aware != (self.oid == T.TIMESTAMPTZ):
                value = cast_temporal(value, T.TIMESTAMPTZ if self.oid == T.TIMESTAMPTZ else T.TIMESTAMP)
        try:
            return self.instant(value)  # an instant: a date column compared with 10:00 keeps the hour
        except Refusal as r:
            r.position = r.position or position
            raise

    def read_text(self, raw: str) -> Value:
        try:
            return parse_datetime(raw, self.oid)
        except Refusal as r:
            raise ValueError(r.message) from None

    def coerce_param(self, p: object) -> Value:
        if isinstance(p, bytes):
            p = p.decode()
        return self.check_literal(p, None)

    def boundary(self, b: datetime, op: str = "", x: datetime | None = None) -> int:
        """How many cells lie entirely before the instant ``b``; refused when ``b`` cuts a cell (``op x`` is
        the comparison that asked, for the message)."""
        if b <= self.lo:
            return 0
        if b >= self.end:
            return self.base_size
        k, r = divmod(b - self.lo, self.step)
        if r:
            start = self.start_of(k)
            raise BoundaryInsideCell(
                E.FEATURE_NOT_SUPPORTED,
                f"comparison {op} '{self._fmt_instant(x if x is not None else b)}' cuts a cell of a "
                f"{self.sql_type} column declared with resolution {self.resolution}",
                hint=f"Cells are whole {self.resolution}s: compare with a cell boundary such as "
                f"'{self._fmt_instant(start)}' or '{self._fmt_instant(start + self.step)}' (>= and < keep "
                f"boundaries exact), or round with date_trunc('{self.resolution}', ...).")
        return k

    def ranges(self, op: str, x: Value) -> list[tuple[int, int]]:
        ts = self.instant(x)
        n = self.base_size
        if op == "<":
            k = self.boundary(ts, op, ts)
            return [(0, k - 1)] if k else []
        if op == ">=":
            k = self.boundary(ts, op, ts)
            return [(k, n - 1)] if k < n else []
        if op == "<=":
            k = self.boundary(ts + self.eps, op, ts)
            return [(0, k - 1)] if k else []
        if op == ">":
            k = self.boundary(ts + self.eps, op, ts)
            return [(k, n - 1)] if k < n else []
        a, b = self.boundary(ts, op, ts), self.boundary(ts + self.eps, op, ts)
        if op == "=":
            return [(a, b - 1)] if b > a else []
        if op == "<>":
            return [r for r in ((0, a - 1), (b, n - 1)) if r[0] <= r[1]]
        raise AssertionError(op)

    def identity_cast(self, to: object) -> bool:
        return to == self.sqlglot_type

    sqlglot_type: ClassVar[object] = None

    def thresholds(self, op: str, x: Value) -> tuple[Any, ...] | None:
        # Values are whole microseconds: > x is >= x + 1us, so every cut is ">= an instant".
        ts = self.instant(x)
        at, after = Cut(ts), Cut(ts + self.eps)
        return {"<": (at,), ">=": (at,), "<=": (after,), ">": (after,), "=": (at, after), "<>": (at, after)}[op]

    def cut_cells(self, cut: Any) -> tuple[int, int]:
        b = cut.at
        if b <= self.lo:
            return 0, 0
        if b >= self.end:
            return self.base_size, self.base_size
        k, r = divmod(b - self.lo, self.step)
        return (k, k + 1) if r else (k, k)

    def _instant_sql(self, ts: datetime) -> str:
        """An instant as a literal compared with the stored column."""
        return self.literal_sql(ts)

    def cut_sql(self, col: str, cut: Any, negate: bool = False) -> str:
        return f"{col} {'<' if negate else '>='} {self._instant_sql(cut.at)}"

    def format_cut(self, cut: Any) -> str:
        return str(cut.at.isoformat())

    # -- SQL ----------------------------------------------------------------------------------------

    def _fmt_instant(self, ts: datetime) -> str:
        if ts.second or ts.microsecond:
            return ts.isoformat(" ")
        return ts.strftime("%Y-%m-%d %H:%M") if (ts.hour or ts.minute) else ts.strftime("%Y-%m-%d")

    def literal_sql(self, value: Value) -> str:
        return f"TIMESTAMP '{_naive(value, self.oid).isoformat(' ')}'"

    def _stored_sql(self, col: str) -> str:
        """The stored column as a naive UTC timestamp."""
        return col

    def cell_sql(self, col: str) -> str:
        trunc = f"date_trunc('{self.resolution}', {self._stored_sql(col)})"
        clipped = clamp_sql(trunc, self.literal_sql(self.lo), self.literal_sql(self.start_of(self.base_size - 1)))
        return f"CASE WHEN {col} IS NULL THEN NULL ELSE {clipped} END" if self.nullable else clipped

    def range_sql(self, e: str, lo: int, hi: int) -> str | None:
        return f"{e} BETWEEN {self.literal_sql(self.start_of(lo))} AND {self.literal_sql(self.start_of(hi))}"

    def cell_start_sql(self, index: int) -> str | None:
        return self.literal_sql(self.start_of(index))

    def ddl_check(self, col: str) -> str:
        return f"{self._stored_sql(col)} >= {self.literal_sql(self.lo)} AND {self._stored_sql(col)} < {self.literal_sql(self.end)}"

    def format_value(self, v: Value) -> str:
        ts = self.instant(v)
        return ts.strftime("%Y-%m-%d") if self.oid == T.DATE else ts.strftime("%Y-%m-%dT%H:%M")

    # -- config -------------------------------------------------------------------------------------

    @classmethod
    def from_config(cls, spec: Mapping[str, Any], nullable: bool) -> ColumnType:
        problems: list[tuple[str, str]] = []
        res = spec.get("resolution", "day")
        if res not in RESOLUTIONS or (cls.type_name == "date" and res != "day"):
            allowed = "day" if cls.type_name == "date" else "day, hour or minute"
            raise DeclarationError([("resolution", f"must be {allowed}, got {res!r}")])
        bounds: dict[str, datetime] = {}
        for key in ("min", "max"):
            v = spec.get(key)
            if v is None:
                problems.append(("", f"a {cls.type_name} column needs min and max (its public range)"))
                continue
            try:
                bounds[key] = _naive(v if isinstance(v, date) else str(v), cls.oid)
            except Refusal as r:
                problems.append((key, f"{r.message}; write a date such as 2026-01-01 or \"2026-01-01T00:00:00Z\""))
        if problems:
            raise DeclarationError(problems[:1] if problems[0][0] == "" else problems)
        lo, hi = bounds["min"], bounds["max"]
        step = RESOLUTIONS[res]
        if hi < lo:
            raise DeclarationError([("", f"empty domain: max ({hi}) is below min ({lo})")])
        if (lo - datetime(2000, 1, 1)) % step:
            raise DeclarationError([("min", f"must fall on a {res} boundary (cells are whole {res}s)")])
        hi = lo + (hi - lo) // step * step
        cells = (hi - lo) // step + 1
        if cells > MAX_CELLS:
            raise DeclarationError([("", f"{cells} cells of one {res} are too many (at most {MAX_CELLS:,}); "
                                         "use a coarser resolution or a shorter range")])
        return cls(lo, hi, res, nullable=nullable)


@dataclass(frozen=True)
class DateType(TemporalType, names=("date",), pg=("date", T.DATE)):
    """Days ``min..max``, one cell per ``resolution`` (a day unless declared coarser)."""

    eps = timedelta(days=1)
    sqlglot_type = exp.DataType.Type.DATE

    def _out(self, ts: datetime) -> Value:
        return ts.date()

    def cell_last(self, index: int) -> Value:
        return self._value(index)

    def last_values(self) -> list[Value] | None:
        return None

    @property
    def distinct_cells(self) -> bool:
        return self.step == timedelta(days=1)  # one day a cell: one date

    def literal_sql(self, value: Value) -> str:
        return f"DATE '{_naive(value, self.oid).date().isoformat()}'"

    def thresholds(self, op: str, x: Value) -> tuple[Any, ...] | None:
        return None  # one value a cell: never cut (an instant inside a day is decided in ranges)

    def ranges(self, op: str, x: Value) -> list[tuple[int, int]]:
        # A date compared with a timestamp inside a day (``d >= TIMESTAMP '2026-03-01 10:00'``, PostgreSQL
        # reads the date as its midnight): each cell holds one value, its day, so nothing is cut.
        ts = self.instant(x)
        day = self.lo + (ts - self.lo) // self.eps * self.eps
        if ts == day:
            return super().ranges(op, ts)
        if op in ("=", "<>"):
            return [] if op == "=" else [(0, self.base_size - 1)]
        # v < ts and v >= ts compare with the next day; v <= ts and v > ts with the day itself.
        return super().ranges(op, day + self.eps if op in ("<", ">=") else day)

    def cell_sql(self, col: str) -> str:
        clipped = clamp_sql(col, self.literal_sql(self.lo), self.literal_sql(self.start_of(self.base_size - 1)))
        return f"CASE WHEN {col} IS NULL THEN NULL ELSE {clipped} END" if self.nullable else clipped


@dataclass(frozen=True)
class TimestampType(TemporalType, names=("timestamp",), pg=("timestamp", T.TIMESTAMP)):
    """Instants ``min..max`` without time zone, one cell per ``resolution`` (day, hour or minute)."""

    sqlglot_type = exp.DataType.Type.TIMESTAMP


@dataclass(frozen=True)
class TimestamptzType(TemporalType, names=("timestamptz",), pg=("timestamptz", T.TIMESTAMPTZ)):
    """Stored as timestamptz; cells are UTC instants (days start at 00:00 UTC)."""

    sqlglot_type = exp.DataType.Type.TIMESTAMPTZ

    def _out(self, ts: datetime) -> Value:
        return ts.replace(tzinfo=UTC)

    def _stored_sql(self, col: str) -> str:
        return f"({col} AT TIME ZONE 'UTC')"

    def cell_start_sql(self, index: int) -> str | None:
        # compared with the stored timestamptz itself (not its UTC reading), so an index on it applies
        return self._instant_sql(self.start_of(index))

    def _instant_sql(self, ts: datetime) -> str:
        return f"TIMESTAMPTZ '{ts.isoformat(' ')}+00'"

