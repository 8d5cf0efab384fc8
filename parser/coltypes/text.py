"""``text`` (also ``categorical``): a text column whose cells are a declared list of values."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlglot import exp

from pgcore import errors as E
from pgcore import pgtypes as T
from pgcore.errors import Refusal
from pgcore.identifiers import split_qualified

from ..semantics.collation import compare_text
from .base import ColumnType, DeclarationError, Value

_TEXT_CASTS = {exp.DataType.Type.TEXT, exp.DataType.Type.VARCHAR, exp.DataType.Type.CHAR}


def quote_literal(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


@dataclass(frozen=True)
class TextType(ColumnType, names=("text", "categorical"), pg=("text", T.TEXT)):
    """Declared values in declared order. A stored value outside the list becomes NULL when the domain
    is nullable and the first declared value otherwise (so every row lands in exactly one cell).

    ``keys = "private"`` declares a column with no public list (cities, product names): it is grouped on
    only through DP partition selection (:mod:`parser.bind.partition`), which plans the statement again over
    the released keys as a ``keys = "selected"`` domain, where a stored value outside them is in no cell."""

    config_keys = frozenset({"values", "values_from", "keys"})
    ordered_keys = False
    raw_exact = True

    values: tuple[str, ...] = ()
    # "schema.table.column" of a public table the DBA declares (SQL quoting); read when each epoch is prepared
    values_from: str = ""
    keys: str = "public"  # public | private (no list: partition selection) | selected (a released set)

    @property
    def private_keys(self) -> bool:
        return self.keys == "private"

    @property
    def base_size(self) -> int:
        return len(self.values)

    @property
    def distinct_cells(self) -> bool:
        return self.keys == "public" and bool(self.values)  # a selected set's other values are in no cell

    def _index(self, value: Value) -> int | None:
        try:
            return self.values.index(str(value))
        except ValueError:
            return None

    def _value(self, index: int) -> Value:
        return self.values[index]

    def base_values(self) -> np.ndarray:
        return np.asarray(self.values)

    def check_literal(self, value: Value, position: int | None) -> Value:
        if value is not None and not isinstance(value, str):
            kind = "boolean" if isinstance(value, bool) else ("integer" if isinstance(value, int) else "numeric")
            raise Refusal(E.UNDEFINED_FUNCTION, f"operator does not exist: text = {kind}", position=position,
                          hint="Compare a text attribute with a quoted string.")
        return value

    def read_text(self, raw: str) -> Value:
        return raw

    def coerce_param(self, p: object) -> Value:
        return p.decode() if isinstance(p, bytes) else str(p)

    def ranges(self, op: str, x: Value) -> list[tuple[int, int]]:
        if self.private_keys:
            raise Refusal(E.FEATURE_NOT_SUPPORTED, "a condition on a column with private keys is not supported",
                          hint="Group by the column instead: its keys are released by DP partition selection.")
        if op not in ("=", "<>"):
            return self._ordered(op, str(x))
        idx = self._index(str(x))
        eq = [] if idx is None else [(idx, idx)]
        if op == "=":
            return eq
        n = self.base_size
        return [(0, n - 1)] if idx is None else [(0, idx - 1), (idx + 1, n - 1)]

    def _ordered(self, op: str, x: str) -> list[tuple[int, int]]:
        """The cells whose value is ``op x`` in the database's collation (parser.semantics.collation): the declared
        values and the literal are public, so the database may sort them."""
        vals = list(self.values)
        hits = compare_text(op, vals, [x] * len(vals))
        out: list[tuple[int, int]] = []
        for i, hit in enumerate(hits):
            if hit:
                if out and out[-1][1] == i - 1:
                    out[-1] = (out[-1][0], i)
                else:
                    out.append((i, i))
        return out

    def identity_cast(self, to: object) -> bool:
        return to in _TEXT_CASTS

    def cell_sql(self, col: str) -> str:
        if not self.values:
            return "NULL::text"  # private keys: no cell until a set is selected
        values = ", ".join(quote_literal(v) for v in self.values)
        # A selected set's other values are in no cell (folding them into a released key would add them).
        fallback = "NULL" if self.nullable or self.keys == "selected" else quote_literal(self.values[0])
        return f"CASE WHEN {col}::text IN ({values}) THEN {col}::text ELSE {fallback} END"

    def literal_sql(self, value: Value) -> str:
        return quote_literal(str(value))

    def raw_sql(self, col: str, ranges: Sequence[tuple[int, int]]) -> str | None:
        # Stored values outside the list (and NULL) land in the fallback cell: the first value, or NULL
        # (none at all for a selection's keys).
        cells = {i for lo, hi in ranges for i in range(lo, hi + 1)}
        fallback = self.null_index if self.nullable else (None if self.keys == "selected" else 0)
        listed = [quote_literal(self.values[i]) for i in sorted(cells) if i < self.base_size]
        named = "" if not listed else (f"{col}::text = {listed[0]}" if len(listed) == 1 else
                                       f"{col}::text IN ({', '.join(listed)})")
        if fallback not in cells:
            return named or "FALSE"
        if len(listed) == self.base_size:
            return "TRUE"
        # The listed values first: the fallback value is usually the common one, and PostgreSQL evaluates
        # OR from the left, so most rows pay one comparison rather than a scan of the whole list.
        everything = ", ".join(quote_literal(v) for v in self.values)
        return f"({named + ' OR ' if named else ''}{col} IS NULL OR {col}::text NOT IN ({everything}))"

    def ddl_check(self, col: str) -> str:
        if self.keys != "public":
            return "true"
        return f"{col} IN ({', '.join(quote_literal(v) for v in self.values)})"

    def format_value(self, v: Value) -> str:
        return json.dumps(v)

    @classmethod
    def from_config(cls, spec: Mapping[str, Any], nullable: bool) -> ColumnType:
        keys = spec.get("keys", "public")
        if keys not in ("public", "private"):
            raise DeclarationError([("keys", "must be \"public\" (declared values) or \"private\" (no public "
                                     "list: grouped through DP partition selection)")])
        if keys == "private":
            if "values" in spec or "values_from" in spec:
                raise DeclarationError([("keys", "a column with private keys has no values or values_from")])
            return cls(values=(), keys="private", nullable=nullable)
        source = spec.get("values_from")
        if source is not None:
            parts = split_qualified(source) if isinstance(source, str) else None
            if parts is None or len(parts) != 3:
                raise DeclarationError([("values_from", "must name a public table's column as "
                                         "\"schema.table.column\", written as in SQL (quote odd names: "
                                         "'\"My Schema\".\"Cities\".\"City Name\"')")])
            if "values" in spec:
                raise DeclarationError([("values", "give either values or values_from, not both")])
            return cls(values=(), values_from=source, nullable=nullable)
        values = spec.get("values")
        if not isinstance(values, list) or not values:
            raise DeclarationError([("", "empty domain: a categorical column needs a non-empty list `values`")])
        if not all(isinstance(v, str) for v in values):
            raise DeclarationError([("values", "categorical values must be strings")])
        if len(set(values)) != len(values):
            raise DeclarationError([("values", "values must be distinct")])
        return cls(values=tuple(values), nullable=nullable)
