"""Public schema of the protected tables: each attribute's declared domain.

The domain is public knowledge (it comes from config.toml, never from the data). Every other package
reads the protected tables through these types: the parser to build linear queries, the engine to size
marginals, the proxy to answer catalog queries.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from pgcore.identifiers import qualified

from ..coltypes import ColumnType, IntType, TextType
from .public import PublicTable

Domain = ColumnType
"""The declared public domain of an attribute: an instance of its column type (``parser.coltypes``)."""
Value = object

__all__ = ["Attribute", "Catalog", "ColumnType", "Domain", "IntType", "TableSchema", "TextType", "Value",
           "listed_values", "value_list_sources", "with_value_lists"]


@dataclass(frozen=True)
class Attribute:
    name: str
    domain: Domain
    description: str = ""
    per_unit: bool = False
    """Declared an attribute of the privacy unit (``per_unit = true``: one value on all of a unit's rows, a
    customer's region). A GROUP BY on such columns only is bounded one group per unit, k rows in it
    (``parser.pushdown.bounding.statement_groups``); enforced there, so a wrong declaration costs accuracy,
    never privacy."""

    @property
    def sql_type(self) -> str:
        """PostgreSQL type the proxy reports for the column."""
        return self.domain.sql_type


@dataclass(frozen=True)
class TableSchema:
    """A protected table: its name, its PostgreSQL schema and its attributes with public domains."""

    name: str
    attributes: tuple[Attribute, ...]
    schema: str = "public"
    privacy_unit: str | None = None
    """The column naming the person (or other unit) a row belongs to; None: every row is its own unit."""
    max_rows_per_unit: int = 1
    """With a privacy unit: at most this many rows of each unit are kept (chosen by a seeded hash of the
    row, so the choice is the same in every process); neighbouring tables differ by one unit's rows."""
    max_groups_per_unit: int | None = None
    """With a privacy unit: cells one unit may be present in, in a histogram of units or of distinct values
    (chosen by a seeded hash of the cell); None = ``max_rows_per_unit``."""
    max_rows_per_group: int | None = None
    """With a privacy unit: rows one unit may add to one group of a GROUP BY statement (c; under
    ``bounding = "statement"``, with at most ``unit_cells`` groups and k rows in all per unit); None = k."""
    max_sum_per_group: tuple[tuple[str, float], ...] = ()
    """With a privacy unit: (column, B) pairs: under ``bounding = "statement"`` a unit's SUM(column) inside
    one group of a GROUP BY statement is scaled down to at most B in absolute value."""
    auto_sum_per_group: tuple[str, ...] = ()
    """With a privacy unit: columns declared ``max_sum_per_group = { column = "auto" }``: their B is chosen
    once per epoch from a DP quantile (``lapras.auto_bound``); the engine then reads this table with the
    chosen (column, B) pairs added to ``max_sum_per_group`` (until then those columns are not clamped)."""
    sum_factors: Any = field(default=None, compare=False, repr=False)
    """Column -> SQL name of the per-row factor that clamps a unit's sum in its group (``max_sum_per_group``),
    on the copies exact-answer sources make over ``parser.pushdown.bounding.grouped_rows_sql``; None in catalogs."""
    rows_from: str | None = field(default=None, compare=False, repr=False)
    """SQL naming a relation that holds this table's rows already bounded to k per unit (the epoch's
    materialisation, ``lapras.bounded``); ``parser.pushdown.bounding.table_ref`` then reads it as it is. Set only on
    the copies exact-answer sources make; None in every catalog."""
    derived: Any = field(default=None, compare=False, repr=False)
    """A virtual table derived from a protected one (``parser.bind.distinct.Derived``: units or distinct values
    present per group); None for a protected table itself."""
    _by_name: dict[str, Attribute] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        self._by_name.update({a.name: a for a in self.attributes})

    def attribute(self, name: str) -> Attribute | None:
        """The attribute named exactly ``name`` (fold SQL identifiers first: ``pgcore.identifiers.fold``)."""
        return self._by_name.get(name)

    @property
    def qualified_name(self) -> str:
        """``schema.name`` as SQL shows it (odd names quoted); also the prefix of canonical keys."""
        return qualified(self.schema, self.name)

    @property
    def unit_rows(self) -> int:
        """Rows one privacy unit may contribute (k): sensitivities scale by it (1 for row-level tables)."""
        return self.max_rows_per_unit if self.privacy_unit is not None else 1

    @property
    def unit_cells(self) -> int:
        """Cells one privacy unit may be present in (g; k when unset): the per-unit bound of every histogram
        of units present or distinct values present, read from all the unit's rows (the k-row bound is for
        counts and sums; presence is bounded by g directly). 1 for row-level tables: a row is in one cell."""
        if self.privacy_unit is None:
            return 1
        g = self.max_groups_per_unit
        return self.max_rows_per_unit if g is None else g

    @property
    def group_rows(self) -> int:
        """Rows one privacy unit may add to one group of a statement (c; k when unset, and never above k)."""
        c = self.max_rows_per_group
        return self.unit_rows if c is None or self.privacy_unit is None else min(c, self.unit_rows)

    def group_sum_bound(self, column: str) -> float | None:
        """B of ``max_sum_per_group`` for ``column`` (None: none declared, or no privacy unit)."""
        if self.privacy_unit is None:
            return None
        return dict(self.max_sum_per_group).get(column)

    @property
    def unit_table(self) -> str:
        """The protected table whose privacy unit this table's rows belong to (itself unless derived):
        releases over tables sharing it see the same unit, so their squared sensitivities add."""
        return self.derived.base.name if self.derived is not None else self.name

    def shape(self, attrs: tuple[str, ...]) -> tuple[int, ...]:
        """Histogram shape of the marginal over ``attrs``."""
        return tuple(self._by_name[a].domain.size for a in attrs)


@dataclass(frozen=True)
class Catalog:
    """All protected tables the proxy serves, and the public tables they may join (``parser.model.public``)."""

    tables: tuple[TableSchema, ...]
    public: tuple[PublicTable, ...] = ()
    collation: Any = field(default=None, compare=False, repr=False)
    """How the upstream database orders text (``parser.semantics.collation.Collation``); None: code point order."""

    def table(self, name: str, schema: str | None = None) -> TableSchema | None:
        """The table named exactly ``name`` (in ``schema`` if given): names are case-sensitive, as
        PostgreSQL's are once folded (``pgcore.identifiers.fold``)."""
        for t in self.tables:
            if t.name == name and (schema is None or schema == t.schema):
                return t
        return None

    def public_table(self, name: str, schema: str | None = None) -> PublicTable | None:
        """The public table named exactly ``name`` (in ``schema`` if given)."""
        for t in self.public:
            if t.name == name and (schema is None or schema == t.schema):
                return t
        return None


def value_list_sources(catalog: Catalog) -> list[str]:
    """The ``values_from`` tables (``schema.table.column``) of the catalog's text columns, sorted."""
    return sorted({a.domain.values_from for t in catalog.tables for a in t.attributes
                   if isinstance(a.domain, TextType) and a.domain.values_from})


def with_value_lists(catalog: Catalog, lists: Mapping[str, Sequence[str]]) -> Catalog:
    """``catalog`` with each ``values_from`` column's values taken from ``lists`` (by source); columns whose
    source is not in ``lists`` keep their values. Unchanged tables and attributes stay the same objects, so
    comparing a plan's table with the catalog's (:func:`listed_values`) stays cheap."""
    tables = []
    for t in catalog.tables:
        attrs = []
        for a in t.attributes:
            d = a.domain
            if isinstance(d, TextType) and d.values_from in lists and tuple(lists[d.values_from]) != d.values:
                a = replace(a, domain=replace(d, values=tuple(lists[d.values_from])))
            attrs.append(a)
        changed = any(x is not y for x, y in zip(attrs, t.attributes, strict=True))
        tables.append(replace(t, attributes=tuple(attrs), _by_name={}) if changed else t)
    if all(x is y for x, y in zip(tables, catalog.tables, strict=True)):
        return catalog
    return replace(catalog, tables=tuple(tables))


def listed_values(table: TableSchema) -> tuple[tuple[str, ...], ...]:
    """The value lists of the table's ``values_from`` columns: what cell indices of those columns mean."""
    return tuple(a.domain.values for a in table.attributes
                 if isinstance(a.domain, TextType) and a.domain.values_from)
