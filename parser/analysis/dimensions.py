"""Dimension columns as public functions of a fact table's key column (used by ``joins.py``).

A joined public table (``Dim``) maps each declared value of the fact's key column (as PostgreSQL prints
it) to its row, or to None where no row matches; a column of it becomes ``CASE WHEN <key> IN (...) THEN
<value> ... END`` over those values, and an INNER join keeps the keys that match (``inner_filter``).
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from dataclasses import dataclass, field

from sqlglot import exp

from pgcore import errors as E
from pgcore.errors import Refusal

from ..model.public import PublicTable
from ..model.schema import TableSchema
from ..syntax.parse import position_of
from .nodes import ident

_INT_TYPES = ("smallint", "integer", "bigint")
_NUM_TYPES = ("numeric", "real", "double precision")
_TEXT_TYPES = ("text", "character varying", "character", "varchar", "char", "name", "citext")


def refuse(msg: str, node: exp.Expr | None, hint: str | None = None) -> Refusal:
    return Refusal(E.FEATURE_NOT_SUPPORTED, msg, hint=hint, position=position_of(node) if node is not None else None)


@dataclass
class Source:
    """One FROM item: its table, the name that qualifies its columns, and its schema."""

    name: str
    schema: str | None
    alias: str | None
    node: exp.Table

    @property
    def refname(self) -> str:
        return self.alias if self.alias is not None else self.name

    def qualifies(self, quals: Sequence[str], schema: str) -> bool:
        """Whether a column qualified by ``quals`` (db, table) names this source (PostgreSQL's rules)."""
        if not quals or quals[-1] != self.refname:
            return False
        return len(quals) == 1 or (self.alias is None and len(quals) == 2 and quals[0] == schema)


@dataclass
class Dim:
    """A joined public table: for every value of the fact's key column (as text), its row or None."""

    table: PublicTable
    source: Source
    root: str
    """The fact attribute whose values select this dimension's row."""
    rows: dict[str | None, tuple[str | None, ...] | None] = field(default_factory=dict)


def qualifiers(col: exp.Column) -> list[str]:
    return [ident(p) for p in (col.args.get("catalog"), col.args.get("db"), col.args.get("table")) if p is not None]


def key_text(v: object, node: exp.Expr) -> str | None:
    """A fact domain value as PostgreSQL prints it (what the public table's text rows hold)."""
    if v is None:
        return None
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | str):
        return str(v)
    if isinstance(v, datetime.date) and not isinstance(v, datetime.datetime):
        return v.isoformat()
    raise refuse(f"a join key of type {type(v).__name__} is not supported", node)


def column_index(dim: Dim, col: exp.Column) -> int:
    name = ident(col.this)
    if dim.table.column(name) is None:
        raise Refusal(E.UNDEFINED_COLUMN, f"column {dim.source.refname}.{name} does not exist",
                      position=position_of(col))
    return dim.table.index(name)


def fact_column(fact_src: Source, attr: str) -> exp.Column:
    table = exp.to_identifier(fact_src.refname, quoted=True)
    col = exp.Column(this=exp.to_identifier(attr, quoted=True), table=table)
    if fact_src.alias is None and fact_src.schema is not None:
        col.set("db", exp.to_identifier(fact_src.schema, quoted=True))
    return col


def fact_literal(key: str, fact: TableSchema, attr: str) -> exp.Expr:
    d = fact.attribute(attr)
    assert d is not None
    sample = next((v for v in d.domain.cell_values if v is not None), None)
    if isinstance(sample, int) and not isinstance(sample, bool):
        return exp.Literal.number(key)
    if isinstance(sample, bool):
        return exp.Boolean(this=key == "true")
    return exp.Literal.string(key)


def in_keys(fact: TableSchema, fact_src: Source, attr: str, keys: list[str]) -> exp.Expr:
    col = fact_column(fact_src, attr)
    if not keys:
        return exp.false()
    return exp.In(this=col, expressions=[fact_literal(k, fact, attr) for k in keys])


def inner_filter(fact: TableSchema, fact_src: Source, dim: Dim, node: exp.Expr) -> exp.Expr | None:
    """The fact rows an INNER join keeps: those whose key has a dimension row (None: every row)."""
    matched = [k for k, r in dim.rows.items() if k is not None and r is not None]
    if len(matched) == len(dim.rows):
        return None  # every cell matches and none is NULL
    return in_keys(fact, fact_src, dim.root, matched)


def value_literal(text: str, typ: str, node: exp.Expr) -> exp.Expr:
    base = typ.split("(")[0].strip()
    if base in _INT_TYPES or base in _NUM_TYPES:
        return exp.Literal.number(text)
    if base in _TEXT_TYPES:
        return exp.Literal.string(text)
    if base == "boolean":
        return exp.Boolean(this=text == "true")
    if base == "date":
        return exp.Cast(this=exp.Literal.string(text), to=exp.DataType.build("date"))
    raise refuse(f"a public column of type {typ} is not supported in a join", node)


def null_of(typ: str) -> exp.Expr:
    base = typ.split("(")[0].strip()
    name = {"integer": "int", "smallint": "int", "bigint": "bigint", "double precision": "float",
            "real": "float", "boolean": "boolean", "date": "date"}.get(base, "numeric" if base == "numeric" else "text")
    return exp.Cast(this=exp.Null(), to=exp.DataType.build(name))


def dimension_value(fact: TableSchema, fact_src: Source, dim: Dim, col: exp.Column,
                     name: str | None = None) -> exp.Expr:
    """``CASE WHEN <fact key> IN (...) THEN <value> ... END``: the column as a function of the fact's key."""
    i = column_index(dim, col) if name is None else dim.table.index(name)
    typ = dim.table.columns[i].type
    groups: dict[str, list[str]] = {}
    for k, row in dim.rows.items():
        v = row[i] if row is not None else None
        if k is None or v is None:
            continue
        groups.setdefault(v, []).append(k)
    if not groups:
        return null_of(typ)
    ifs = [exp.If(this=in_keys(fact, fact_src, dim.root, keys), true=value_literal(v, typ, col))
           for v, keys in groups.items()]
    return exp.Paren(this=exp.Case(ifs=ifs))
