"""A statement's split axis: the cells of one column cut at the statement's own literals.

``ts BETWEEN '2026-04-01' AND '2026-05-01 00:00:00'`` (an inclusive end on a cell boundary) or ``amount > 105``
inside a bin [100, 110) cuts a cell. The literals are public (they are the SQL's text, not data), so the
binder gives that statement a finer partition (``parser/bind/splits.py``): the column keeps its declared cells and
a virtual attribute, this ``SplitType``, holds each row's *rank*: how many of the statement's cut points
(sorted) its value has passed. A row then lies in one (cell, rank) pair, as before in one cell, so
per-row and per-unit contribution bounds are unchanged; the pairs that cannot hold rows (a rank outside the
cell's span) answer the same comparisons as a pair that can, so sensitivities computed over the product
are the same as over the finer partition itself. The rank is read from the stored column by the
comparisons as written (``"amount" > 105``), never from data.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from pgcore import pgtypes as T
from pgcore.identifiers import display_ident, quote_ident

from .base import ColumnType, Value


@dataclass(frozen=True, order=True)
class Cut:
    """A cut point: a value passes it when ``value > at`` (``strict``) or ``value >= at``."""

    at: Any
    strict: bool = False


@dataclass(frozen=True)
class SplitType(ColumnType):
    """Rank ``0..len(cuts)`` of a row's value of column ``source`` (of domain ``base``) among ``cuts``."""

    type_name = "split"
    oid = T.INT4
    raw_exact = True
    virtual: ClassVar[bool] = True

    source: str = ""
    base: Any = None
    cuts: tuple[Cut, ...] = ()

    @property
    def base_size(self) -> int:
        return len(self.cuts) + 1

    def _index(self, value: Value) -> int | None:
        i = int(value)
        return i if 0 <= i < self.base_size else None

    def _value(self, index: int) -> Value:
        return index

    @property
    def key_label(self) -> str:
        """How canonical keys name this axis: the column's name and ``~cut`` (never a declared name's form)."""
        return f"{display_ident(self.source)}~cut"

    def _passed(self, c: Cut, negate: bool = False) -> str:
        return self.base.cut_sql(quote_ident(self.source), c, negate)

    def cell_sql(self, col: str) -> str:
        # ``col`` is this axis's own (virtual) name: the rank is read from the stored source column. A NULL
        # passes nothing (rank 0), as clamping puts a NULL at the bottom of the range.
        whens = " ".join(f"WHEN {self._passed(c)} THEN {i + 1}" for i, c in reversed(list(enumerate(self.cuts))))
        return f"CASE {whens} ELSE 0 END"

    def literal_sql(self, value: Value) -> str:
        return str(int(value))

    def range_sql(self, e: str, lo: int, hi: int) -> str | None:
        return f"{e} BETWEEN {lo} AND {hi}"

    def raw_sql(self, col: str, ranges: Sequence[tuple[int, int]]) -> str | None:
        """Ranks ``a..b`` as the statement's comparisons on the stored column: past cut a-1, not past cut b."""
        m = len(self.cuts)
        conds = []
        for lo, hi in ranges:
            parts = []
            if lo > 0:
                parts.append(self._passed(self.cuts[lo - 1]))
            if hi < m:
                below = self._passed(self.cuts[hi], negate=True)
                parts.append(below if lo > 0 else f"({quote_ident(self.source)} IS NULL OR {below})")
            if not parts:
                return "TRUE"
            conds.append(" AND ".join(parts))
        if not conds:
            return "FALSE"
        return conds[0] if len(conds) == 1 else "(" + " OR ".join(f"({c})" for c in conds) + ")"

    def format_value(self, v: Value) -> str:
        return str(int(v))

    def format_ranges(self, rs: Sequence[tuple[int, int]]) -> str:
        """Ranks as the value intervals they hold (``(105,inf)``): the same text whichever other cuts the
        statement has, so keys of equal row sets are equal across statements."""
        m = len(self.cuts)
        out = []
        for lo, hi in rs:
            c = self.cuts[lo - 1] if lo > 0 else None
            d = self.cuts[hi] if hi < m else None
            left = "(-inf" if c is None else ("(" if c.strict else "[") + self.base.format_cut(c)
            right = "inf)" if d is None else self.base.format_cut(d) + ("]" if d.strict else ")")
            out.append(f"{left},{right}")
        return "{" + ",".join(out) + "}"

    def ddl_check(self, col: str) -> str:
        raise AssertionError("a split axis is never a catalog column")
