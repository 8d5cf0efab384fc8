"""DP partition selection, the parser's side: which keys a statement needs selected, and the plan over them.

A GROUP BY (or value list) over a column with ``keys = "private"`` has no public list of groups, and a
value list of public columns filtered on other columns (``SELECT city FROM t WHERE state = 'WA' GROUP BY
city``) would tell which values occur there. The binder raises :class:`NeedsPartition` with a :class:`PartitionRequest`: the selection's identity (table,
key columns, the WHERE clause's canonical linear query, so every spelling of one filter is one selection)
and the SQL that makes PostgreSQL count, per key, the privacy units holding it under the filter (each
unit kept in at most ``TableSchema.unit_cells`` keys, :func:`parser.pushdown.sql.unit_cells_sql`). The engine
selects (or replays) the released keys; :func:`selected_table` then gives the table with those keys as the
column's domain, over which the same statement plans as any other; a public value list lists the groups
covering a released cell (:func:`parser.bind.binder.bind` with ``selected``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from pgcore import errors as E
from pgcore.errors import Refusal
from pgcore.identifiers import display_ident, qualified, quote_ident

from ..coltypes.base import ColumnType
from ..coltypes.idkeys import IntKeysType
from ..coltypes.text import TextType
from ..model.linear import make_linear_query
from ..model.predicate import Pred, Ranges, Space
from ..model.schema import Catalog, TableSchema

if TYPE_CHECKING:
    from ..analysis.template import Template
from ..pushdown.cellsql import cell_expr
from ..pushdown.sql import predicate_sql, unit_cells_sql


@dataclass(frozen=True)
class PartitionRequest:
    """One partition selection: its ledger key, the per-key unit-count SQL and the per-unit key bound."""

    table: str
    schema: str
    columns: tuple[str, ...]
    filter_key: str
    sql: str
    max_keys: int
    kind: str = "private"  # private: keys are the column's text; cells: keys are cell indices of public columns
    domains: tuple[ColumnType, ...] = field(default=(), compare=False, repr=False)
    # "values": a value list filtered elsewhere; "groups": an aggregate whose GROUP BY has too many
    # combinations to list (``n_groups`` of them): the same cells selection, another refusal without budget
    purpose: str = field(default="values", compare=False)
    n_groups: int = field(default=0, compare=False)

    @property
    def key(self) -> str:
        # Names as in canonical keys (pgcore.identifiers.display_ident): odd ones quoted, so unambiguous.
        cols = ",".join(display_ident(c) for c in self.columns)
        kind = "keys" if self.kind == "private" else "cells"
        return f"{qualified(self.schema, self.table)}|{kind}({cols})|{self.filter_key}"

    def encode(self, keys: Sequence[Sequence[object]]) -> list[list[object]]:
        """Released keys as the ledger stores them (JSON): text for private keys, cell indices for public
        columns (rows outside every cell dropped)."""
        if self.kind == "private":
            return [[None if v is None else str(v) for v in k] for k in keys]
        out: list[list[object]] = []
        for k in keys:
            idx: list[object] = [d.index_of(v) for d, v in zip(self.domains, k, strict=True)]
            if None not in idx:
                out.append(idx)
        return out


class NeedsPartition(Refusal):
    """The statement needs its keys selected first. Where no selection runs (no partition budget, or a caller
    without an engine) it is the refusal the user sees: 42501 for a filtered value list (as before partition
    selection existed), 0A000 for private keys."""

    def __init__(self, request: PartitionRequest) -> None:
        cols = ", ".join(map(display_ident, request.columns))
        enable = "set [privacy] partition_fraction in config.toml to answer it with DP partition selection"
        if request.kind == "cells" and request.purpose == "groups":
            super().__init__(E.PROGRAM_LIMIT_EXCEEDED,
                             f"GROUP BY {cols} has {request.n_groups} groups in the public domain, too many "
                             "to list: the groups present must be chosen by DP partition selection",
                             hint=f"Group by fewer columns, or {enable}.")
        elif request.kind == "cells":
            super().__init__(E.INSUFFICIENT_PRIVILEGE,
                             f"permission denied: a list of the values of {cols} filtered on other columns "
                             "would reveal which values occur in the data",
                             hint="A value list without aggregates returns the declared public domain; filter it "
                                  f"on its own column only, ask for counts, or {enable}.")
        else:
            super().__init__(E.FEATURE_NOT_SUPPORTED,
                             f"the keys of {cols} are private: grouping by it needs DP partition selection",
                             hint=enable[0].upper() + enable[1:] + ".")
        self.request = request


def private_columns(table: TableSchema, attrs: Sequence[str]) -> tuple[str, ...]:
    out = []
    for name in attrs:
        a = table.attribute(name)
        if a is not None and isinstance(a.domain, TextType) and a.domain.private_keys:
            out.append(a.name)
    return tuple(out)


def partition_request(table: TableSchema, columns: tuple[str, ...], space: Space, where: Pred) -> PartitionRequest:
    """The selection of private ``columns``' keys among the rows satisfying ``where`` (NULL is never a key)."""
    exprs = [f"{quote_ident(c)}::text" for c in columns]
    return _request(table, columns, space, where, exprs, [f"{quote_ident(c)} IS NOT NULL" for c in columns],
                    "private", ())


def value_list_request(table: TableSchema, columns: tuple[str, ...], space: Space, where: Pred) -> PartitionRequest:
    """The selection of the cells of public ``columns`` holding rows that satisfy ``where``."""
    attrs = [table.attribute(c) for c in columns]
    assert all(a is not None for a in attrs)
    return _request(table, columns, space, where, [cell_expr(a) for a in attrs], [], "cells",  # type: ignore[arg-type]
                    tuple(a.domain for a in attrs))  # type: ignore[union-attr]


def _request(table: TableSchema, columns: tuple[str, ...], space: Space, where: Pred, exprs: list[str],
             extra: list[str], kind: str, domains: tuple[ColumnType, ...]) -> PartitionRequest:
    filt = make_linear_query(table, space, where)
    conds = ["FALSE"] if filt.is_zero else [predicate_sql(table, filt)]
    conds = [c for c in conds if c != "TRUE"] + extra
    inner = unit_cells_sql(table, exprs, " AND ".join(f"({c})" for c in conds) or None)
    names = ", ".join(f"k.c{i}" for i in range(len(columns)))
    sql = f"SELECT {names}, count(*) FROM ({inner}) AS k GROUP BY {names}"
    # The filter's canonical linear query names it: every spelling of one filter is one selection.
    filter_key = "where:" + (filt.key.split("|", 2)[2] if not filt.is_zero else "false")
    return PartitionRequest(table.name, table.schema, columns, filter_key, sql, table.unit_cells, kind, domains)


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
    attrs = []
    for a in table.attributes:
        if a.name == columns[0]:
            dom = a.domain
            released = [str(k[0]) for k in keys]
            # Numeric identifiers (coltypes/idkeys.py) keep their type and numeric order; text sorts as text.
            values = dom.sorted_keys(released) if isinstance(dom, IntKeysType) else tuple(sorted(set(released)))
            kind = type(dom) if isinstance(dom, TextType) else TextType
            a = replace(a, domain=kind(values=values, keys="selected", nullable=False))
        attrs.append(a)
    return replace(table, attributes=tuple(attrs), _by_name={})


def selected_catalog(catalog: Catalog, table: TableSchema) -> Catalog:
    """``catalog`` with ``table`` in place of the protected table of the same name."""
    return replace(catalog, tables=tuple(table if (t.name, t.schema) == (table.name, table.schema) else t
                                         for t in catalog.tables))


Group = tuple[tuple[tuple[object, ...], list[tuple[str | tuple[str, ...], Ranges]]], tuple[int, ...]]


def selected_groups(t: Template, selected: frozenset[tuple[int, ...]]) -> list[Group]:
    """The groups of the released cell combinations only (each dimension a plain column, one cell a key), in
    key order, as the binder would list them among the whole product: ((key, cells per dimension), key
    indices)."""
    of_cell = [{r[0][0]: i for i, r in enumerate(d.cells)} for d in t.groups]
    out: list[Group] = []
    for combo in selected:
        found = [of_cell[k].get(c) for k, c in enumerate(combo)]
        if any(i is None for i in found):
            continue
        at = tuple(int(i) for i in found if i is not None)
        key = tuple(d.keys[i] for d, i in zip(t.groups, at, strict=True))
        cells: list[tuple[str | tuple[str, ...], Ranges]] = [(d.attr, d.cells[i]) for d, i in
                                                             zip(t.groups, at, strict=True)]
        out.append(((key, cells), at))
    return sorted(out, key=lambda g: g[1])
