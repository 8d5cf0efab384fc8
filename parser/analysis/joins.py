"""Pass: inline joins. A protected fact table joined to public dimension tables on their unique keys
(``orders o JOIN products p ON o.product_id = p.id``, INNER or LEFT, several dimensions, a dimension of a
dimension) becomes one statement over the fact table alone.

A dimension row can only relabel a fact row, never multiply it: the dimension's key must be unique
upstream (a one-column primary key or unique constraint, ``PublicTable.unique``). Each dimension column
is then a public function of the fact's key column, whose values are its declared domain: ``p.category``
becomes ``CASE WHEN o.product_id IN (1, 4, 9) THEN 'toys' WHEN ... END`` (NULL where no dimension row
matches, as a LEFT JOIN gives), built from the public table's rows read upstream. An INNER join also
keeps only the fact rows whose key matches: ``o.product_id IN (<matched keys>)`` joins the WHERE. The
later passes then see per-row expressions over a declared column, which they evaluate on its cells like
any other (GROUP BY, WHERE, aggregate arguments: ``SUM(o.quantity * p.unit_price)`` is a SUM with per-cell
weights whose sensitivity is its largest |weight|). Sensitivities are those of the fact table: nothing is
read from a dimension but its public rows.

Refused (0A000, before anything is measured): a join on a non-unique dimension key (1:N), a join of a
protected table with itself or with another protected table, a condition that is not one equality of a
fact (or joined dimension) column and the dimension's key, RIGHT / FULL / CROSS joins, ``*`` in a join's
target list (it would read fact rows), a public table that is not a base table upstream (a view could
read a protected table).
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from dataclasses import dataclass, field

from sqlglot import exp

from .. import errors as E
from ..errors import Refusal
from ..identifiers import display_ident
from ..limits import Budget
from ..public import PublicTable
from ..schema import Catalog, TableSchema
from ..syntax import position_of
from .nodes import ident, strip_paren

JOIN_HINT = ("A protected table may join public tables declared in config.toml ([public_tables.NAME]) on "
             "one equality of its key column with the public table's unique key, e.g. FROM orders o "
             "LEFT JOIN products p ON o.product_id = p.id; INNER and LEFT joins only.")

_INT_TYPES = ("smallint", "integer", "bigint")
_NUM_TYPES = ("numeric", "real", "double precision")
_TEXT_TYPES = ("text", "character varying", "character", "varchar", "char", "name", "citext")


def _refuse(msg: str, node: exp.Expr | None, hint: str = JOIN_HINT) -> Refusal:
    return Refusal(E.FEATURE_NOT_SUPPORTED, msg, hint=hint, position=position_of(node) if node is not None else None)


@dataclass
class _Source:
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
class _Dim:
    """A joined public table: for every value of the fact's key column (as text), its row or None."""

    table: PublicTable
    source: _Source
    root: str
    """The fact attribute whose values select this dimension's row."""
    rows: dict[str | None, tuple[str | None, ...] | None] = field(default_factory=dict)


def inline_joins(tree: exp.Expr, catalog: Catalog, budget: Budget) -> exp.Expr:
    """``tree`` with every SELECT that joins a protected table to public tables rewritten over the
    protected table alone (innermost first, so wrappers over a join see a plain SELECT)."""
    selects = [s for s in tree.find_all(exp.Select) if s.args.get("joins")]
    # Deepest first: find_all is breadth-first, so its reverse visits inner statements before outer ones.
    for sel in reversed(selects):
        budget.check_deadline()
        _rewrite(sel, catalog)
    return tree


def _source(node: exp.Expr) -> _Source:
    if not isinstance(node, exp.Table) or not isinstance(node.this, exp.Identifier):
        raise _refuse(f"JOIN of a {type(node).__name__.lower()} is not supported on protected tables", node)
    if node.args.get("sample") is not None:
        raise _refuse("TABLESAMPLE is not supported on protected tables", node)
    alias = node.args.get("alias")
    if alias is not None and alias.args.get("columns"):
        raise _refuse("column aliases on a joined table are not supported", node)
    return _Source(ident(node.this), ident(node.args["db"]) if node.args.get("db") is not None else None,
                   ident(alias.this) if alias is not None and alias.this is not None else None, node)


def _rewrite(sel: exp.Select, catalog: Catalog) -> None:
    frm = sel.args.get("from_")
    joins: list[exp.Join] = list(sel.args.get("joins") or [])
    if frm is None:
        return
    first = _source(frm.this) if isinstance(frm.this, exp.Table) else None
    sources = [first] if first is not None else []
    for j in joins:
        if isinstance(j.this, exp.Table):
            sources.append(_source(j.this))
    protected = [(s, catalog.table(s.name, s.schema)) for s in sources]
    protected = [(s, t) for s, t in protected if t is not None]
    if not protected:
        return  # no protected table here: not this pass's statement (a subquery elsewhere may be)
    if len(protected) > 1:
        a, b = protected[0][1], protected[1][1]
        assert a is not None and b is not None
        if (a.name, a.schema) == (b.name, b.schema):
            raise _refuse(f"a join of protected table {display_ident(a.name)} with itself is not supported: it "
                          "would pair one person's rows with each other and multiply their contribution",
                          protected[1][0].node)
        raise _refuse(f"a join of two protected tables ({display_ident(a.name)}, {display_ident(b.name)}) is not "
                      "supported", protected[1][0].node,
                      hint="Join a protected table only with public tables (dimensions). " + JOIN_HINT)
    fact_src, fact = protected[0]
    assert fact is not None
    if fact_src is not first:
        raise _refuse(f"protected table {display_ident(fact.name)} must come first in FROM, its public tables "
                      "joined to it", fact_src.node)
    _check_star(sel, fact)
    dims: list[_Dim] = []
    filters: list[exp.Expr | None] = []
    for j in joins:
        kind = (j.args.get("kind") or "").upper()
        side = (j.args.get("side") or "").upper()
        if side in ("RIGHT", "FULL") or kind in ("CROSS", "OUTER", "SEMI", "ANTI") or j.args.get("method"):
            what = side or kind or (j.args.get("method") or "").upper()
            raise _refuse(f"{what} JOIN is not supported on protected tables", j)
        if j.args.get("using"):
            raise _refuse("JOIN ... USING is not supported on protected tables", j,
                          hint="Write the condition with ON. " + JOIN_HINT)
        on = j.args.get("on")
        if on is None:
            raise _refuse("a join without an ON condition (a cross join) is not supported on protected tables", j)
        src = _source(j.this)
        pub = catalog.public_table(src.name, src.schema)
        if pub is None:
            full = f"{src.schema}.{src.name}" if src.schema else src.name
            raise _refuse(f"JOIN with {full}, which is not declared public, is not supported on protected tables",
                          j.this, hint="A protected table may join only tables declared public in config.toml "
                                       "([public_tables.NAME]). " + JOIN_HINT)
        if pub.problem is not None or not pub.loaded:
            raise _refuse(f"public table {display_ident(pub.name)} cannot be joined: "
                          f"{pub.problem or 'it has not been read from the database'}", j.this)
        if any(d.source.refname == src.refname for d in dims) or src.refname == fact_src.refname:
            raise Refusal("42712", f'table name "{src.refname}" specified more than once', position=position_of(j.this))
        dim = _join(fact, fact_src, dims, pub, src, on)
        if side != "LEFT":
            filters.append(_inner_filter(fact, fact_src, dim, j))
        dims.append(dim)
    _substitute(sel, fact, fact_src, dims)
    sel.set("joins", None)
    for f in filters:
        if f is not None:
            where = sel.args.get("where")
            sel.set("where", exp.Where(this=f if where is None else exp.and_(exp.Paren(this=where.this), f)))


def _check_star(sel: exp.Select, fact: TableSchema) -> None:
    for item in sel.expressions:
        star = isinstance(item, exp.Star) or (isinstance(item, exp.Column) and isinstance(item.this, exp.Star))
        if star:
            raise _refuse(f"* in the target list of a join with protected table {display_ident(fact.name)} is not "
                          "supported: it would read its rows", item,
                          hint="Name the columns, and aggregate the protected table's (COUNT, SUM, AVG ... "
                               "GROUP BY dimension columns).")


def _quals(col: exp.Column) -> list[str]:
    return [ident(p) for p in (col.args.get("catalog"), col.args.get("db"), col.args.get("table")) if p is not None]


def _join(fact: TableSchema, fact_src: _Source, dims: list[_Dim], pub: PublicTable, src: _Source,
          on: exp.Expr) -> _Dim:
    cond = strip_paren(on)
    if not isinstance(cond, exp.EQ):
        raise _refuse("a join condition other than one equality of a key with the public table's unique key "
                      "is not supported on protected tables", on)
    left, right = strip_paren(cond.this), strip_paren(cond.expression)
    if not isinstance(left, exp.Column) or not isinstance(right, exp.Column):
        raise _refuse("a join condition must compare two columns (the fact's key and the public table's key)", on)
    if _belongs(right, src, pub) and not _belongs(left, src, pub):
        left, right = right, left
    if not _belongs(left, src, pub) or _belongs(right, src, pub):
        raise _refuse(f"the join condition must compare a column of {display_ident(pub.name)} with a column of "
                      "the tables joined before it", on)
    key = ident(left.this)
    if pub.column(key) is None:
        raise Refusal(E.UNDEFINED_COLUMN, f"column {src.refname}.{key} does not exist", position=position_of(left))
    if key not in pub.unique:
        raise _refuse(f"the join key {display_ident(pub.name)}.{display_ident(key)} is not unique upstream (no "
                      "primary key or unique constraint on it): one fact row could match several rows (a 1:N "
                      "join), multiplying its contribution", on,
                      hint=f"Declare a PRIMARY KEY or UNIQUE constraint on {pub.qualified_name}({key}) "
                           "upstream, or join on a column that has one.")
    by_key = {row[pub.index(key)]: row for row in pub.rows}
    other = _resolve(right, fact, fact_src, dims)
    if isinstance(other, _Dim):
        i = _column_index(other, right)
        rows = {k: (by_key.get(r[i]) if r is not None else None) for k, r in other.rows.items()}
        return _Dim(pub, src, other.root, rows)
    attr = fact.attribute(other)
    if attr is None:
        if other == fact.privacy_unit:
            raise _refuse("a join on the privacy unit is not supported: it is not a public column", right)
        raise Refusal(E.UNDEFINED_COLUMN, f"column {fact_src.refname}.{other} does not exist",
                      position=position_of(right),
                      hint=f"Protected table {display_ident(fact.name)} exposes its declared attributes: "
                           + ", ".join(display_ident(a.name) for a in fact.attributes) + ".")
    d = attr.domain
    if d.measure or d.last_values() is not None:
        raise _refuse(f"{display_ident(attr.name)} holds several values per cell ({d.coarseness()}): it cannot be "
                      "a join key", right, hint="Join on a column declared with one cell per value (integers, "
                                                "a text list, days). " + JOIN_HINT)
    rows = {}
    for v in d.cell_values:
        k = _key_text(v, right)
        rows[k] = by_key.get(k) if k is not None else None
    return _Dim(pub, src, attr.name, rows)


def _key_text(v: object, node: exp.Expr) -> str | None:
    """A fact domain value as PostgreSQL prints it (what the public table's text rows hold)."""
    if v is None:
        return None
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | str):
        return str(v)
    if isinstance(v, datetime.date) and not isinstance(v, datetime.datetime):
        return v.isoformat()
    raise _refuse(f"a join key of type {type(v).__name__} is not supported", node)


def _belongs(col: exp.Column, src: _Source, pub: PublicTable) -> bool:
    quals = _quals(col)
    if quals:
        return src.qualifies(quals, pub.schema)
    return pub.column(ident(col.this)) is not None


def _column_index(dim: _Dim, col: exp.Column) -> int:
    name = ident(col.this)
    if dim.table.column(name) is None:
        raise Refusal(E.UNDEFINED_COLUMN, f"column {dim.source.refname}.{name} does not exist",
                      position=position_of(col))
    return dim.table.index(name)


def _resolve(col: exp.Column, fact: TableSchema, fact_src: _Source, dims: list[_Dim]) -> _Dim | str:
    """The dimension a column reference names, or the fact column's name (PostgreSQL's resolution)."""
    name = ident(col.this)
    quals = _quals(col)
    if quals:
        for d in dims:
            if d.source.qualifies(quals, d.table.schema):
                return d
        if fact_src.qualifies(quals, fact.schema):
            return name
        raise Refusal(E.UNDEFINED_TABLE, f'missing FROM-clause entry for table "{quals[-1]}"',
                      position=position_of(col))
    hits: list[_Dim | str] = [d for d in dims if d.table.column(name) is not None]
    if fact.attribute(name) is not None or name == fact.privacy_unit:
        hits.append(name)
    if len(hits) > 1:
        raise Refusal(E.AMBIGUOUS_COLUMN, f'column reference "{name}" is ambiguous', position=position_of(col))
    return hits[0] if hits else name


def _fact_column(fact_src: _Source, attr: str) -> exp.Column:
    table = exp.to_identifier(fact_src.refname, quoted=True)
    col = exp.Column(this=exp.to_identifier(attr, quoted=True), table=table)
    if fact_src.alias is None and fact_src.schema is not None:
        col.set("db", exp.to_identifier(fact_src.schema, quoted=True))
    return col


def _fact_literal(key: str, fact: TableSchema, attr: str) -> exp.Expr:
    d = fact.attribute(attr)
    assert d is not None
    sample = next((v for v in d.domain.cell_values if v is not None), None)
    if isinstance(sample, int) and not isinstance(sample, bool):
        return exp.Literal.number(key)
    if isinstance(sample, bool):
        return exp.Boolean(this=key == "true")
    return exp.Literal.string(key)


def _in_keys(fact: TableSchema, fact_src: _Source, attr: str, keys: list[str]) -> exp.Expr:
    col = _fact_column(fact_src, attr)
    if not keys:
        return exp.false()
    return exp.In(this=col, expressions=[_fact_literal(k, fact, attr) for k in keys])


def _inner_filter(fact: TableSchema, fact_src: _Source, dim: _Dim, node: exp.Expr) -> exp.Expr | None:
    """The fact rows an INNER join keeps: those whose key has a dimension row (None: every row)."""
    matched = [k for k, r in dim.rows.items() if k is not None and r is not None]
    if len(matched) == len(dim.rows):
        return None  # every cell matches and none is NULL
    return _in_keys(fact, fact_src, dim.root, matched)


def _value_literal(text: str, typ: str, node: exp.Expr) -> exp.Expr:
    base = typ.split("(")[0].strip()
    if base in _INT_TYPES or base in _NUM_TYPES:
        return exp.Literal.number(text)
    if base in _TEXT_TYPES:
        return exp.Literal.string(text)
    if base == "boolean":
        return exp.Boolean(this=text == "true")
    if base == "date":
        return exp.Cast(this=exp.Literal.string(text), to=exp.DataType.build("date"))
    raise _refuse(f"a public column of type {typ} is not supported in a join", node)


def _null_of(typ: str) -> exp.Expr:
    base = typ.split("(")[0].strip()
    name = {"integer": "int", "smallint": "int", "bigint": "bigint", "double precision": "float",
            "real": "float", "boolean": "boolean", "date": "date"}.get(base, "numeric" if base == "numeric" else "text")
    return exp.Cast(this=exp.Null(), to=exp.DataType.build(name))


def _dimension_value(fact: TableSchema, fact_src: _Source, dim: _Dim, col: exp.Column) -> exp.Expr:
    """``CASE WHEN <fact key> IN (...) THEN <value> ... END``: the column as a function of the fact's key."""
    i = _column_index(dim, col)
    typ = dim.table.columns[i].type
    groups: dict[str, list[str]] = {}
    for k, row in dim.rows.items():
        v = row[i] if row is not None else None
        if k is None or v is None:
            continue
        groups.setdefault(v, []).append(k)
    if not groups:
        return _null_of(typ)
    ifs = [exp.If(this=_in_keys(fact, fact_src, dim.root, keys), true=_value_literal(v, typ, col))
           for v, keys in groups.items()]
    return exp.Paren(this=exp.Case(ifs=ifs))


def _in_nested(col: exp.Expr, sel: exp.Select) -> bool:
    p = col.parent
    while p is not None and p is not sel:
        if isinstance(p, exp.Select | exp.Subquery):
            return True
        p = p.parent
    return False


def _substitute(sel: exp.Select, fact: TableSchema, fact_src: _Source, dims: list[_Dim]) -> None:
    """Replace each reference to a dimension column by its value as a function of the fact's key."""
    items = sel.expressions
    for i, item in enumerate(items):
        if isinstance(item, exp.Column) and not isinstance(item.this, exp.Star):
            if isinstance(_resolve(item, fact, fact_src, dims), _Dim):
                # The output keeps the column's name, as PostgreSQL names it.
                items[i] = exp.alias_(item, exp.to_identifier(ident(item.this), quoted=True), copy=False)
    sel.set("expressions", items)  # sets the new items' parents
    for col in list(sel.find_all(exp.Column)):
        if isinstance(col.this, exp.Star) or _in_nested(col, sel):
            continue
        if col.find_ancestor(exp.Join) is not None:
            continue  # the ON conditions go with the joins
        target = _resolve(col, fact, fact_src, dims)
        if isinstance(target, _Dim):
            col.replace(_dimension_value(fact, fact_src, target, col))
        elif _quals(col) and not fact_src.qualifies(_quals(col), fact.schema):
            raise Refusal(E.UNDEFINED_TABLE, f'missing FROM-clause entry for table "{_quals(col)[-1]}"',
                          position=position_of(col))
