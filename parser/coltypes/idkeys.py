"""Numeric identifier keys: an ``int``, ``smallint``, ``bigint`` or ``numeric`` column declared with
``keys = "private"`` (ZIP codes, NPI numbers, customer ids).

Such a column has no public list of values and no bins: it is grouped on only through DP partition
selection over its stored values (:mod:`parser.bind.partition`), as a text column with private keys is. The
selection compares the values' canonical text (``col::text``); the released keys are then the column's
cells, listed in numeric order and returned as numbers of the column's own type (``GROUP BY zip`` reports
an integer column to the client before and after the selection).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

import numpy as np

from pgcore import pgtypes as T

from .base import ColumnType, DeclarationError, Value
from .text import TextType


@dataclass(frozen=True)
class IntKeysType(TextType, pg=("integer", T.INT4)):
    """An integer column whose values are private keys (no values list, no range)."""

    type_name = "int"
    config_names = ()  # reached through the integer and numeric types' `keys`
    config_keys = frozenset({"keys"})
    ordered_keys = False

    def number(self, text: str) -> Value:
        return int(text)

    def _value(self, index: int) -> Value:
        return self.number(self.values[index])

    def _index(self, value: Value) -> int | None:
        try:
            return self.values.index(str(self.number(str(value).strip())))
        except (ValueError, InvalidOperation):
            return None

    def base_values(self) -> np.ndarray:
        return np.asarray([self.number(v) for v in self.values], dtype=object)

    def read_text(self, raw: str) -> Value:
        return self.number(raw)

    def format_value(self, v: Value) -> str:
        return str(v)

    def sorted_keys(self, keys: list[str]) -> tuple[str, ...]:
        """Released keys in the column's numeric order, each written as PostgreSQL's ``::text`` writes it."""
        return tuple(str(n) for n in sorted({self.number(k) for k in keys}))


@dataclass(frozen=True)
class SmallIntKeysType(IntKeysType, pg=("smallint", T.INT2)):
    """A smallint column whose values are private keys."""


@dataclass(frozen=True)
class BigIntKeysType(IntKeysType, pg=("bigint", T.INT8)):
    """A bigint column whose values are private keys."""


@dataclass(frozen=True)
class NumericKeysType(IntKeysType, pg=("numeric", T.NUMERIC)):
    """A numeric column whose values are private keys: released as PostgreSQL writes them (``12.50``)."""

    def number(self, text: str) -> Value:
        return Decimal(text)

    def sorted_keys(self, keys: list[str]) -> tuple[str, ...]:
        # numeric::text keeps the stored scale ('1.50' and '1.5' are distinct keys); ordered by value, then text
        return tuple(sorted(set(keys), key=lambda k: (Decimal(k), k)))


_BY_SQL_TYPE: dict[str, type[IntKeysType]] = {"integer": IntKeysType, "smallint": SmallIntKeysType,
                                               "bigint": BigIntKeysType, "numeric": NumericKeysType}


def id_keys_from_config(sql_type: str, spec: Mapping[str, Any], nullable: bool) -> ColumnType:
    """The private-keys type of a numeric column declared with ``keys``; DeclarationError if misdeclared."""
    keys = spec.get("keys")
    if keys == "public":
        raise DeclarationError([("keys", "a number column's public keys are its min..max range (or its bins): "
                                 "omit keys, or write keys = \"private\" for an identifier")])
    if keys != "private":
        raise DeclarationError([("keys", "must be \"private\" (an identifier grouped through DP partition "
                                 "selection)")])
    extra = [k for k in ("min", "max", "bins") if k in spec]
    if extra:
        raise DeclarationError([(k, "a column with private keys has no range or bins: its values are released "
                                 "by DP partition selection") for k in extra])
    return _BY_SQL_TYPE[sql_type](values=(), keys="private", nullable=nullable)
