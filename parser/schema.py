"""Public schema of the protected tables: each attribute's declared domain.

The domain is public knowledge (it comes from config.toml, never from the data). Every other package
reads the protected tables through these types: the parser to build linear queries, the engine to size
marginals, the proxy to answer catalog queries.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

DomainKind = Literal["int", "categorical"]
Value = int | str | None


@dataclass(frozen=True)
class Domain:
    """Ordered public domain of one attribute.

    Integer domains are the inclusive range ``lo..hi``; categorical domains list their values. A nullable
    domain has one extra cell, NULL, placed last. Cell ``i`` of the attribute's histogram axis holds value
    ``value_at(i)``.
    """

    kind: DomainKind
    lo: int = 0
    hi: int = -1
    values: tuple[str, ...] = ()
    nullable: bool = False

    @property
    def base_size(self) -> int:
        """Number of non-NULL cells."""
        return self.hi - self.lo + 1 if self.kind == "int" else len(self.values)

    @property
    def size(self) -> int:
        """Number of cells, NULL included when the domain admits it."""
        return self.base_size + (1 if self.nullable else 0)

    @property
    def null_index(self) -> int | None:
        return self.base_size if self.nullable else None

    def index_of(self, value: Value) -> int | None:
        """Cell index of ``value``, or None when the value is not in the domain."""
        if value is None:
            return self.null_index
        if self.kind == "int":
            if isinstance(value, bool) or not isinstance(value, int):
                return None
            return value - self.lo if self.lo <= value <= self.hi else None
        try:
            return self.values.index(str(value))
        except ValueError:
            return None

    def value_at(self, index: int) -> Value:
        if self.nullable and index == self.base_size:
            return None
        if not 0 <= index < self.base_size:
            raise IndexError(index)
        return self.lo + index if self.kind == "int" else self.values[index]

    def __iter__(self) -> Iterator[Value]:
        return (self.value_at(i) for i in range(self.size))

    def numeric_weights(self) -> np.ndarray:
        """Per-cell weight of SUM over this attribute (NULL cells weigh 0, as SQL SUM ignores NULL)."""
        if self.kind != "int":
            raise TypeError("SUM needs an integer domain")
        w = np.arange(self.lo, self.hi + 1, dtype=np.float64)
        return np.append(w, 0.0) if self.nullable else w

    @property
    def max_abs(self) -> float:
        """Largest absolute value in the domain: the sensitivity of SUM over it under add/remove-one-row."""
        if self.kind != "int":
            raise TypeError("SUM needs an integer domain")
        return float(max(abs(self.lo), abs(self.hi)))


@dataclass(frozen=True)
class Attribute:
    name: str
    domain: Domain
    description: str = ""

    @property
    def sql_type(self) -> str:
        """PostgreSQL type the proxy reports for the column."""
        return "integer" if self.domain.kind == "int" else "text"


@dataclass(frozen=True)
class TableSchema:
    """A protected table: its name, its PostgreSQL schema and its attributes with public domains."""

    name: str
    attributes: tuple[Attribute, ...]
    schema: str = "public"
    _by_name: dict[str, Attribute] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        self._by_name.update({a.name: a for a in self.attributes})

    def attribute(self, name: str) -> Attribute | None:
        return self._by_name.get(name.lower())

    @property
    def qualified_name(self) -> str:
        return f"{self.schema}.{self.name}"

    def shape(self, attrs: tuple[str, ...]) -> tuple[int, ...]:
        """Histogram shape of the marginal over ``attrs``."""
        return tuple(self._by_name[a].domain.size for a in attrs)


@dataclass(frozen=True)
class Catalog:
    """All protected tables the proxy serves."""

    tables: tuple[TableSchema, ...]

    def table(self, name: str, schema: str | None = None) -> TableSchema | None:
        name = name.lower()
        for t in self.tables:
            if t.name == name and (schema is None or schema.lower() == t.schema):
                return t
        return None
