"""DP partition selection, the parser's side: which keys a statement needs selected, and the plan over them.

A GROUP BY (or value list) over a column with ``keys = "private"`` has no public list of groups. The
binder raises :class:`NeedsPartition` with a :class:`PartitionRequest`: the selection's identity (table,
key columns, the WHERE clause's canonical linear query, so every spelling of one filter is one selection)
and the SQL that makes PostgreSQL count, per key, the privacy units holding it under the filter (each
unit kept in at most ``TableSchema.unit_cells`` keys, :func:`parser.sql.unit_cells_sql`). The engine
selects (or replays) the released keys; :func:`selected_table` then gives the table with those keys as the
column's domain, over which the same statement plans as any other.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from . import errors as E
from .coltypes.text import TextType
from .errors import Refusal
from .identifiers import display_ident, qualified
from .linear import make_linear_query
from .predicate import Pred, Space
from .schema import Attribute, Catalog, TableSchema
from .sql import predicate_sql, quote_ident, unit_cells_sql


@dataclass(frozen=True)
class PartitionRequest:
    """One partition selection: its ledger key, the per-key unit-count SQL and the per-unit key bound."""

    table: str
    schema: str
    columns: tuple[str, ...]
    filter_key: str
    sql: str
    max_keys: int

    @property
    def key(self) -> str:
        # Names as in canonical keys (parser.identifiers.display_ident): odd ones quoted, so unambiguous.
        cols = ",".join(display_ident(c) for c in self.columns)
        return f"{qualified(self.schema, self.table)}|keys({cols})|{self.filter_key}"


class NeedsPartition(Refusal):
    """The statement groups on private keys: select them first (a refusal wherever that is not done)."""

    def __init__(self, request: PartitionRequest) -> None:
        super().__init__(E.FEATURE_NOT_SUPPORTED,
                         f"grouping by {', '.join(map(display_ident, request.columns))} needs DP partition "
                         "selection",
                         hint="Run it through the proxy's DP service, which selects the keys first.")
        self.request = request


def private_columns(table: TableSchema, attrs: Sequence[str]) -> tuple[str, ...]:
    out = []
    for name in attrs:
        a = table.attribute(name)
        if a is not None and isinstance(a.domain, TextType) and a.domain.private_keys:
            out.append(a.name)
    return tuple(out)


def partition_request(table: TableSchema, columns: tuple[str, ...], space: Space, where: Pred) -> PartitionRequest:
    """The selection of ``columns``' keys among the rows satisfying ``where`` (NULL keys are never keys)."""
    filt = make_linear_query(table, space, where)
    conds = [] if filt.is_zero else [predicate_sql(table, filt)]
    if filt.is_zero:
        conds = ["FALSE"]
    conds = [c for c in conds if c != "TRUE"] + [f"{quote_ident(c)} IS NOT NULL" for c in columns]
    inner = unit_cells_sql(table, [f"{quote_ident(c)}::text" for c in columns], " AND ".join(f"({c})" for c in conds))
    names = ", ".join(f"k.c{i}" for i in range(len(columns)))
    sql = f"SELECT {names}, count(*) FROM ({inner}) AS k GROUP BY {names}"
    filter_key = "where:" + (filt.key.split("|", 2)[2] if not filt.is_zero else "false")
    return PartitionRequest(table.name, table.schema, columns, filter_key, sql, table.unit_cells)


def has_selected_keys(table: TableSchema, attrs: Sequence[str] | None = None) -> bool:
    """True when a column of ``table`` (among ``attrs``) has a partition selection's keys as its domain."""
    names = attrs if attrs is not None else [a.name for a in table.attributes]
    for name in names:
        a = table.attribute(name)
        if a is not None and getattr(a.domain, "keys", "") == "selected":
            return True
    return False


def selected_table(table: TableSchema, columns: Sequence[str], keys: Sequence[Sequence[object]]) -> TableSchema:
    """``table`` with each selected column's domain the released keys (sorted; a stored value outside
    them is in no cell)."""
    if len(columns) != 1:
        raise Refusal(E.FEATURE_NOT_SUPPORTED, "GROUP BY more than one column with private keys is not supported",
                      hint="Group by one private-keys column (with any public ones).")
    values = tuple(sorted({str(k[0]) for k in keys}))
    attrs = []
    for a in table.attributes:
        if a.name == columns[0]:
            a = Attribute(a.name, TextType(values=values, keys="selected", nullable=False), a.description)
        attrs.append(a)
    return replace(table, attributes=tuple(attrs), _by_name={})


def selected_catalog(catalog: Catalog, table: TableSchema) -> Catalog:
    """``catalog`` with ``table`` in place of the protected table of the same name."""
    return Catalog(tuple(table if (t.name, t.schema) == (table.name, table.schema) else t for t in catalog.tables))
