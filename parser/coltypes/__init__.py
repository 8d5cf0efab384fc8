"""Column types of protected tables: one class each (``base.ColumnType``), registered here by the names
a config's ``type`` may use."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .base import ColumnType, DeclarationError
from .boolean import BoolType
from .intbins import BinnedBigIntType, BinnedIntType, BinnedSmallIntType
from .integer import BigIntType, IntType, SmallIntType
from .numeric import FloatType, NumericType
from .temporal import DateType, TemporalType, TimestampType, TimestamptzType
from .text import TextType
from .timeofday import TimeType

__all__ = ["COLUMN_TYPES", "BigIntType", "BinnedBigIntType", "BinnedIntType", "BinnedSmallIntType", "BoolType", "ColumnType", "DateType", "FloatType", "NumericType", "DeclarationError", "IntType", "TemporalType", "TextType",
           "SmallIntType", "TimeType", "TimestampType", "TimestamptzType", "from_config"]

COLUMN_TYPES: dict[str, type[ColumnType]] = {}


def register(cls: type[ColumnType]) -> type[ColumnType]:
    for name in cls.config_names:
        COLUMN_TYPES[name] = cls
    return cls


for _cls in (IntType, SmallIntType, BigIntType, TextType, DateType, TimestampType, TimestamptzType, TimeType, NumericType, FloatType, BoolType):
    register(_cls)

COMMON_KEYS = frozenset({"type", "nullable", "description", "per_unit"})
"""Keys every column type takes. ``per_unit = true`` says the column is an attribute of the privacy unit (one
value on all of a unit's rows): the column's declaration (``parser.model.schema.Attribute.per_unit``), not
its domain, so the column type only checks it is a boolean."""


def from_config(spec: Mapping[str, Any]) -> ColumnType:
    """The domain a column's TOML table declares; DeclarationError lists (key suffix, message) problems."""
    kind = spec.get("type")
    cls = COLUMN_TYPES.get(kind) if isinstance(kind, str) else None
    if cls is None:
        names = ", ".join(f'"{n}"' for n in COLUMN_TYPES)
        raise DeclarationError([("type", f"must be one of {names}, got {kind!r}")])
    allowed_keys = COMMON_KEYS | cls.config_keys  # once, not per key: configs have tens of thousands of columns
    unknown = [k for k in spec if k not in allowed_keys]
    if unknown:
        allowed = ", ".join(sorted(allowed_keys))
        raise DeclarationError([(k, f"unknown key for a {cls.type_name} column (allowed here: {allowed})")
                                for k in unknown])
    nullable = spec.get("nullable", False)
    if not isinstance(nullable, bool):
        raise DeclarationError([("nullable", f"must be true or false, got {nullable!r}")])
    per_unit = spec.get("per_unit", False)
    if not isinstance(per_unit, bool):
        raise DeclarationError([("per_unit", f"must be true or false, got {per_unit!r}")])
    return cls.from_config(spec, nullable)
