"""``boolean``: two cells, false then true (as PostgreSQL orders them), and NULL when nullable."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlglot import exp

from pgcore import errors as E
from pgcore import pgtypes as T
from pgcore.errors import Refusal

from .base import ColumnType, Value
from .intvalues import int_ranges

_TRUE = {"t", "true", "y", "yes", "on", "1"}
_FALSE = {"f", "false", "n", "no", "off", "0"}


def read_bool(v: Any, position: int | None = None) -> bool:
    if isinstance(v, bool):
        return v
    if isinstance(v, bytes):
        v = v.decode()
    if isinstance(v, str):
        low = v.strip().lower()
        if low in _TRUE:
            return True
        if low in _FALSE:
            return False
        raise Refusal(E.INVALID_TEXT_REPRESENTATION, f'invalid input syntax for type boolean: "{v}"', position=position)
    raise Refusal(E.UNDEFINED_FUNCTION, f"operator does not exist: boolean = {type(v).__name__}", position=position,
                  hint="Compare a boolean column with TRUE, FALSE or 't' / 'f'.")


@dataclass(frozen=True)
class BoolType(ColumnType, names=("boolean", "bool"), pg=("boolean", T.BOOL)):
    """A stored NULL lands on false when the domain is not nullable."""


    @property
    def base_size(self) -> int:
        return 2

    @property
    def distinct_cells(self) -> bool:
        return True

    def _index(self, value: Value) -> int | None:
        try:
            return int(read_bool(value))
        except Refusal:
            return None

    def _value(self, index: int) -> Value:
        return bool(index)

    def base_values(self) -> np.ndarray:
        return np.asarray([False, True], dtype=object)

    def check_literal(self, value: Value, position: int | None) -> Value:
        return read_bool(value, position)

    def coerce_param(self, p: object) -> Value:
        return read_bool(p)

    def read_text(self, raw: str) -> Value:
        try:
            return read_bool(raw)
        except Refusal as r:
            raise ValueError(r.message) from None

    def ranges(self, op: str, x: Value) -> list[tuple[int, int]]:
        return int_ranges(0, 1, op, int(read_bool(x)))

    def identity_cast(self, to: object) -> bool:
        return to == exp.DataType.Type.BOOLEAN

    def cell_sql(self, col: str) -> str:
        return col if self.nullable else f"COALESCE({col}, false)"

    def literal_sql(self, value: Value) -> str:
        return "true" if read_bool(value) else "false"

    def ddl_check(self, col: str) -> str:
        return "TRUE"

    def format_value(self, v: Value) -> str:
        return "true" if v else "false"

    @classmethod
    def from_config(cls, spec: Mapping[str, Any], nullable: bool) -> ColumnType:
        return cls(nullable=nullable)
