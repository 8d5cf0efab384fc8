"""ColumnType: everything the product knows about one kind of protected column, in one class.

A declared column's domain is an instance: it sizes the histogram axis and maps values to cells, reads
literals and bound parameters compared with the column, turns sets of cells into SQL conditions over the
stored column (pushed-down exact answers), formats cells in canonical query keys, names its PostgreSQL
type on the wire and in the catalog, and parses its own declaration from config.toml. The rest of the
code asks the domain; adding a column type is one subclass plus its registration (``parser.coltypes``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, ClassVar

import numpy as np

from pgcore import errors as E
from pgcore.errors import Refusal
from pgcore.pgtypes import FLOAT8, INT8

Value = Any
"""A cell value as Python carries it: int, str, Decimal, bool, date, datetime; None is NULL."""

_FORMAT_CACHE = 100_000  # cell sets a domain keeps formatted before its cache starts over
CMP_OPS = ("=", "<>", "<", "<=", ">", ">=")


class RangeBounds:
    """For a column type whose values lie in ``lo..hi`` (integers, clamped measures): SUM's sensitivity and
    AVG's clamp read from the range, without building the per-cell weights."""

    lo: Any
    hi: Any

    @property
    def max_abs(self) -> float:
        return float(max(abs(self.lo), abs(self.hi)))

    @property
    def sum_bounds(self) -> tuple[float, float]:
        return float(self.lo), float(self.hi)


class DeclarationError(ValueError):
    """A column declaration in config.toml is wrong; ``problems`` are (key suffix, message) pairs."""

    def __init__(self, problems: Sequence[tuple[str, str]]) -> None:
        super().__init__("; ".join(m for _, m in problems))
        self.problems = list(problems)


def clamp_sql(expr: str, lo: str, hi: str) -> str:
    """``expr`` clipped into ``lo..hi``; a NULL lands on ``lo`` (as ``LEAST(GREATEST(expr, lo), hi)`` does).

    Written as CASE rather than LEAST/GREATEST, which postgres_fdw cannot ship: on a sharded upstream an
    aggregate over a clipped column would otherwise be computed on the coordinator from every raw row."""
    return f"CASE WHEN {expr} IS NULL OR {expr} < {lo} THEN {lo} WHEN {expr} > {hi} THEN {hi} ELSE {expr} END"


@dataclass(frozen=True)
class ColumnType:
    """The declared public domain of one column. Cells ``0..base_size-1`` hold values in order; a
    nullable domain has one extra cell, NULL, placed last."""

    type_name: ClassVar[str] = ""  # the `type` a config declares (first of `config_names`)
    config_names: ClassVar[tuple[str, ...]] = ()
    config_keys: ClassVar[frozenset[str]] = frozenset()  # keys besides type, nullable, description
    sql_type: ClassVar[str] = ""  # PostgreSQL type of the column (catalog DDL, demo table)
    oid: ClassVar[int] = 0  # type oid of cell values (scalar evaluator, group keys on the wire)
    param_oid: ClassVar[int] = 0  # type a parameter compared with the column takes
    summable: ClassVar[bool] = False  # SUM / AVG allowed
    measure: ClassVar[bool] = False  # SUM reads each row's (clamped) value; False: the cell's value
    sum_oid: ClassVar[int] = INT8  # type of SUM(col) (int8: rounded); AVG is float8 unless avg_oid says
    avg_oid: ClassVar[int] = FLOAT8

    nullable: bool = field(default=False, kw_only=True)

    def __init_subclass__(cls, names: tuple[str, ...] = (), pg: tuple[str, int] | None = None,
                          **kwargs: Any) -> None:
        """A column type declares in its class line the ``names`` a config may give it (the first is its
        ``type_name``) and ``pg``, the PostgreSQL type (name, oid) it is stored as, which is also the type of
        its cell values and of a parameter compared with it (``sql_type``, ``oid``, ``param_oid``) and, for a
        type without ``names`` of its own and no ``type_name`` in its body, its ``type_name``."""
        super().__init_subclass__(**kwargs)
        if names:
            cls.type_name, cls.config_names = names[0], names
        if pg is not None:
            cls.sql_type, cls.oid = pg
            cls.param_oid = cls.oid
            if not names and "type_name" not in cls.__dict__:
                cls.type_name = pg[0]  # a type no config names directly is named by its PostgreSQL type

    # -- cells ------------------------------------------------------------------------------------

    @property
    def base_size(self) -> int:
        """Number of non-NULL cells."""
        raise NotImplementedError

    @property
    def size(self) -> int:
        """Number of cells, NULL included when the domain admits it."""
        return self.base_size + (1 if self.nullable else 0)

    @property
    def null_index(self) -> int | None:
        return self.base_size if self.nullable else None

    def index_of(self, value: Value) -> int | None:
        """Cell of ``value`` (a Python value, as the database driver returns it), or None outside."""
        if value is None:
            return self.null_index
        return self._index(value)

    def _index(self, value: Value) -> int | None:
        raise NotImplementedError

    def value_at(self, index: int) -> Value:
        if self.nullable and index == self.base_size:
            return None
        if not 0 <= index < self.base_size:
            raise IndexError(index)
        return self._value(index)

    def _value(self, index: int) -> Value:
        raise NotImplementedError

    def __iter__(self) -> Iterator[Value]:
        return iter(self.cell_values)

    @cached_property
    def cell_values(self) -> list[Value]:
        """Every cell's value in cell order (NULL last when nullable), computed once per domain."""
        return [self.value_at(i) for i in range(self.size)]

    def last_values(self) -> list[Value] | None:
        """Per cell, the last value it holds, when a cell holds more than one value (None: one value each).
        A per-row expression is exact over cells only if it agrees at both ends of every cell."""
        return None

    @property
    def distinct_cells(self) -> bool:
        """Each cell holds exactly one stored value, the one ``cell_sql`` gives its rows (a public list of
        values, integers, booleans, days): COUNT(DISTINCT col) then counts cells
        (``parser.pushdown.cellsql.counted_expr``), so no unit adds a value the domain does not list. False
        where a cell holds many stored values (hours, bins) or there is no public list (private keys)."""
        return False

    def coarseness(self) -> str:
        """How wide a cell is, for hints (``one hour``)."""
        return "one value"

    def whole_cells_hint(self, name: str) -> str:
        """How to use column ``name`` through whole cells: the hint of a refusal that cuts its cells."""
        return (f"{name} is declared with cells of {self.coarseness()}: use it through whole cells (date_trunc, "
                f"extract or to_char of a unit of at least {self.coarseness()}, ::date, comparisons with cell "
                "boundaries).")

    def base_values(self) -> np.ndarray:
        """The non-NULL cell values in cell order (the demo generator draws from them)."""
        return np.asarray([self._value(i) for i in range(self.base_size)], dtype=object)

    # -- sums -------------------------------------------------------------------------------------

    def numeric_weights(self) -> np.ndarray:
        """Per-cell weight of SUM over this column (NULL cells weigh 0, as SQL SUM ignores NULL)."""
        raise Refusal(E.UNDEFINED_FUNCTION, f"function sum({self.sql_type}) does not exist")

    @property
    def max_abs(self) -> float:
        """Largest |value|: the sensitivity of SUM over the column under add/remove-one-row."""
        w = self.numeric_weights()
        return float(np.max(np.abs(w))) if len(w) else 0.0

    @property
    def sum_bounds(self) -> tuple[float, float]:
        """Smallest and largest value a SUM term can take (AVG is clamped into them)."""
        w = self.numeric_weights()[: self.base_size]
        return float(w.min()), float(w.max())

    # -- literals and parameters ------------------------------------------------------------------

    def check_literal(self, value: Value, position: int | None) -> Value:
        """A constant compared with the column, as PostgreSQL would type it (raises 22P02 / 42883)."""
        return value

    def read_text(self, raw: str) -> Value:
        """A stored value from its text form (a CSV field); ValueError when it does not read as the type."""
        raise NotImplementedError

    def coerce_param(self, p: object) -> Value:
        """A bound parameter value (text or a Python value) as a value comparable with the cells."""
        return p

    def ranges(self, op: str, x: Value) -> list[tuple[int, int]]:
        """Non-NULL cell index ranges where ``cell op x`` holds (``x`` not NULL)."""
        raise NotImplementedError

    def identity_cast(self, to: object) -> bool:
        """True when casting the column to the sqlglot type ``to`` keeps its values (``age::int``)."""
        return False

    # -- cells cut at a statement's literals (parser/bind/splits.py, coltypes/split.py) -----------------

    virtual: ClassVar[bool] = False
    """A statement's split axis (``coltypes.split.SplitType``), not a stored column."""

    def thresholds(self, op: str, x: Value) -> tuple[Any, ...] | None:
        """The cut points (``split.Cut``) deciding ``value op x``: ``>=`` / ``>`` hold past the first, ``<``
        / ``<=`` before it, ``=`` past the first and not the second. None: the type is never split (its
        comparisons are exact or refused as they are)."""
        return None

    def cut_cells(self, cut: Any) -> tuple[int, int]:
        """``(a, b)``: no value of cells ``0..a-1`` passes ``cut``, every value of cells ``b..`` does; ``b`` is
        ``a`` when the cut falls on a cell boundary, else ``a + 1`` (cell ``a`` is cut)."""
        raise NotImplementedError

    def cut_sql(self, col: str, cut: Any, negate: bool = False) -> str:
        """The stored column ``col`` passing ``cut`` (``negate``: not passing it; NULL is neither)."""
        raise NotImplementedError

    def format_cut(self, cut: Any) -> str:
        """A cut point's value in canonical keys."""
        raise NotImplementedError

    # -- SQL --------------------------------------------------------------------------------------

    def cell_sql(self, col: str) -> str:
        """SQL mapping the stored column ``col`` to its cell value (clipped / folded; NULL kept if nullable)."""
        raise NotImplementedError

    def literal_sql(self, value: Value) -> str:
        raise NotImplementedError

    def weight_sql(self, col: str) -> str:
        """SQL of one row's term in SUM(col) (its clamped value; NULL adds nothing)."""
        return self.cell_sql(col)

    def range_sql(self, e: str, lo: int, hi: int) -> str | None:
        """A condition on the cell expression ``e`` for non-NULL cells lo..hi (lo < hi); None lists them."""
        return None

    def cell_start_sql(self, index: int) -> str | None:
        """For a type whose cell ``i`` holds the stored values in ``[start(i), start(i + 1))`` (values below
        the domain in cell 0, above it in the last): ``start(i)`` as a literal comparable with the stored
        column. None: cells are not such intervals."""
        return None

    raw_exact: ClassVar[bool] = False
    """``raw_sql`` holds exactly for the rows whose cell is in the ranges (not only for a superset of them)."""

    def raw_sql(self, col: str, ranges: Sequence[tuple[int, int]]) -> str | None:
        """A condition on the stored column ``col`` that every row whose cell lies in ``ranges`` satisfies,
        or None when the type has no such plain form. Exactly those rows where ``raw_exact``.

        Pushed-down SQL reads rows with it rather than with cell expressions: a plain comparison is cheap,
        and PostgreSQL can use an index or prune partitions with it, which it cannot with a CASE. For cells
        that are intervals of the stored values (``cell_start_sql``) it is exact: a value below the domain
        is in cell 0 and above it in the last (as the clamp puts them), a NULL in cell 0 unless nullable."""
        if self.cell_start_sql(0) is None:
            return None
        conds: list[str] = []
        last = self.base_size - 1
        for lo, hi in ranges:
            if self.null_index is not None and hi == self.null_index:
                conds.append(f"{col} IS NULL")
                hi -= 1
            if hi < lo:
                continue
            parts = []
            if lo > 0:
                parts.append(f"{col} >= {self.cell_start_sql(lo)}")
            if hi < last:
                parts.append(f"{col} < {self.cell_start_sql(hi + 1)}")
            if not parts and not self.nullable:
                return "TRUE"  # every cell, NULL's included
            if not parts:
                cond = f"{col} IS NOT NULL"
            else:
                cond = " AND ".join(parts)
                if lo == 0 and not self.nullable:  # a NULL lands in cell 0 (clamp_sql)
                    cond = f"({col} IS NULL OR {cond})"
            conds.append(cond)
        if not conds:
            return "FALSE"
        return conds[0] if len(conds) == 1 else "(" + " OR ".join(conds) + ")"

    def ddl_check(self, col: str) -> str:
        """CHECK constraint body of the catalog's shadow column."""
        raise NotImplementedError

    # -- canonical keys ---------------------------------------------------------------------------

    def format_value(self, v: Value) -> str:
        raise NotImplementedError

    def format_ranges(self, rs: Sequence[tuple[int, int]]) -> str:
        """Cells in a query key: runs written ``a..b`` where the type is ordered, values listed otherwise.
        Cached per domain: a GROUP BY's thousands of queries write the same few cell sets again and again."""
        cache: dict[Sequence[Sequence[int]], str] | None = self.__dict__.get("_formatted")
        if cache is None or len(cache) > _FORMAT_CACHE:
            cache = {}
            object.__setattr__(self, "_formatted", cache)  # not a field: equality and hashing ignore it
        key = rs if isinstance(rs, tuple) else tuple(map(tuple, rs))
        hit = cache.get(key)
        if hit is None:
            hit = cache[key] = self._format_ranges(rs)
        return hit

    def _format_ranges(self, rs: Sequence[tuple[int, int]]) -> str:
        items: list[str] = []
        for lo, hi in rs:
            top = hi - 1 if self.nullable and hi == self.null_index else hi
            if top >= lo:
                if self.ordered_keys:
                    a, b = self.format_value(self._value(lo)), self.format_value(self._value(top))
                    items.append(a if lo == top else f"{a}..{b}")
                else:
                    items.extend(self.format_value(self._value(i)) for i in range(lo, top + 1))
            if top != hi:
                items.append("null")
        return "{" + ",".join(items) + "}"

    ordered_keys: ClassVar[bool] = True

    # -- config -----------------------------------------------------------------------------------

    @classmethod
    def from_config(cls, spec: Mapping[str, Any], nullable: bool) -> ColumnType:
        """The domain a config declares (``spec`` is the column's TOML table); DeclarationError if wrong."""
        raise NotImplementedError
