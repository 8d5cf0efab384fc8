"""Pass: resolve names. FROM names one protected table (an alias may rename it); column references
resolve to its declared attributes as PostgreSQL resolves them (unquoted names fold to lower case)."""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from pgcore import errors as E
from pgcore.errors import Refusal
from pgcore.identifiers import display_ident

from ..model.schema import Attribute, Catalog, TableSchema
from ..syntax.parse import position_of
from .nodes import ident, star_refusal, unsupported


@dataclass(frozen=True)
class Scope:
    """The one table a SELECT reads, and the name (alias or table name) that qualifies its columns."""

    table: TableSchema
    alias: str | None

    @property
    def refname(self) -> str:
        """The name that qualifies the table's columns (PostgreSQL's refname): the alias, else the table."""
        return self.alias if self.alias is not None else self.table.name

    def column(self, col: exp.Column) -> Attribute:
        """Resolve a column reference (any case unless quoted; qualified by table, schema or alias)."""
        if isinstance(col.this, exp.Star):
            raise star_refusal(self.table, col)
        qual = [p for p in (col.args.get("catalog"), col.args.get("db"), col.args.get("table")) if p is not None]
        if qual:
            names = [ident(p) for p in qual]
            want = self.refname
            ok = names[-1] == want and (len(names) < 2 or (self.alias is None and names[-2] == self.table.schema))
            if not ok:
                raise Refusal(E.UNDEFINED_TABLE, f'missing FROM-clause entry for table "{names[-1]}"',
                              position=position_of(col))
        name = ident(col.this)
        attr = self.table.attribute(name)
        if attr is None:
            # PostgreSQL's wording (errorMissingColumn): a bare name in quotes, a qualified one as
            # relation.column, unquoted.
            shown = f"{ident(qual[-1])}.{name}" if qual else f'"{name}"'
            raise Refusal(E.UNDEFINED_COLUMN, f"column {shown} does not exist", position=position_of(col),
                          hint=f"Protected table {display_ident(self.table.name)} exposes its declared "
                          "attributes: " + ", ".join(display_ident(a.name) for a in self.table.attributes) + ".")
        return attr

    def is_unit(self, col: exp.Column) -> bool:
        """Whether the reference names the table's privacy unit (never an attribute; COUNT(DISTINCT) only)."""
        unit = self.table.privacy_unit
        if unit is None or isinstance(col.this, exp.Star) or ident(col.this) != unit:
            return False
        qual = col.args.get("table")
        return qual is None or ident(qual) == self.refname

    def star(self, node: exp.Expr) -> tuple[Attribute, ...]:
        """The attributes ``*`` or ``alias.*`` stands for (declared order)."""
        qual = node.args.get("table") if isinstance(node, exp.Column) else None
        if qual is not None and ident(qual) != self.refname:
            raise Refusal(E.UNDEFINED_TABLE, f'missing FROM-clause entry for table "{ident(qual)}"',
                          position=position_of(node))
        return self.table.attributes


def resolve_names(sel: exp.Select, catalog: Catalog) -> Scope:
    """The scope of ``sel``: its FROM must be exactly one protected table, without JOIN or TABLESAMPLE."""
    if sel.args.get("joins"):
        raise unsupported("JOIN", sel.args["joins"][0], hint="Query one protected table at a time; " + E.SUPPORTED_HINT)
    frm = sel.args.get("from_") or sel.args.get("from")
    if frm is None:
        raise Refusal(E.FEATURE_NOT_SUPPORTED, "statement does not read a protected table")
    src = frm.this
    if not isinstance(src, exp.Table) or not isinstance(src.this, exp.Identifier):
        raise unsupported(f"FROM {type(src).__name__.lower()}", src)
    if src.args.get("sample") is not None:
        raise unsupported("TABLESAMPLE", src.args["sample"])
    name = ident(src.this)
    schema = ident(src.args["db"]) if src.args.get("db") else None
    table = catalog.table(name, schema)
    if table is None:
        full = f"{schema}.{name}" if schema else name
        raise Refusal(E.UNDEFINED_TABLE, f'relation "{full}" does not exist', position=position_of(src))
    alias = src.args.get("alias")
    return Scope(table, ident(alias.this) if alias is not None and alias.this is not None else None)
