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
fact (or joined dimension) column and the dimension's key, RIGHT / FULL / CROSS joins, ``*`` in the
target list of a join that is the statement itself (it would read fact rows; in a FROM subquery, a BI
tool's dataset, ``*`` stands for the fact's attributes and the dimensions' columns, and the statement
around it aggregates them or is refused as a row read), a public table that is not a base table upstream
(a view could read a protected table).
"""

from __future__ import annotations

from sqlglot import exp

from pgcore import errors as E
from pgcore.errors import Refusal
from pgcore.identifiers import display_ident

from ..model.limits import Budget
from ..model.public import PublicTable
from ..model.schema import Catalog, TableSchema
from ..syntax.parse import position_of
from .dimensions import (
    Dim,
    Source,
    column_index,
    dimension_value,
    fact_column,
    inner_filter,
    key_text,
    qualifiers,
)
from .nodes import ident, in_nested_select, strip_paren

JOIN_HINT = ("A protected table may join public tables declared in config.toml ([public_tables.NAME]) on "
             "one equality of its key column with the public table's unique key, e.g. FROM orders o "
             "LEFT JOIN products p ON o.product_id = p.id; INNER and LEFT joins only.")


def refuse(msg: str, node: exp.Expr | None, hint: str = JOIN_HINT) -> Refusal:
    return Refusal(E.FEATURE_NOT_SUPPORTED, msg, hint=hint, position=position_of(node) if node is not None else None)


def inline_joins(tree: exp.Expr, catalog: Catalog, budget: Budget) -> exp.Expr:
    """``tree`` with every SELECT that joins a protected table to public tables rewritten over the
    protected table alone (innermost first, so wrappers over a join see a plain SELECT)."""
    selects = [s for s in tree.find_all(exp.Select) if s.args.get("joins")]
    # Deepest first: find_all is breadth-first, so its reverse visits inner statements before outer ones.
    for sel in reversed(selects):
        budget.check_deadline()
        _rewrite(sel, catalog)
    return tree


def _source(node: exp.Expr) -> Source:
    if not isinstance(node, exp.Table) or not isinstance(node.this, exp.Identifier):
        raise refuse(f"JOIN of a {type(node).__name__.lower()} is not supported on protected tables", node)
    if node.args.get("sample") is not None:
        raise refuse("TABLESAMPLE is not supported on protected tables", node)
    alias = node.args.get("alias")
    if alias is not None and alias.args.get("columns"):
        raise refuse("column aliases on a joined table are not supported", node)
    return Source(ident(node.this), ident(node.args["db"]) if node.args.get("db") is not None else None,
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
            raise refuse(f"a join of protected table {display_ident(a.name)} with itself is not supported: it "
                          "would pair one person's rows with each other and multiply their contribution",
                          protected[1][0].node)
        raise refuse(f"a join of two protected tables ({display_ident(a.name)}, {display_ident(b.name)}) is not "
                      "supported", protected[1][0].node,
                      hint="Join a protected table only with public tables (dimensions). " + JOIN_HINT)
    fact_src, fact = protected[0]
    assert fact is not None
    if fact_src is not first:
        raise refuse(f"protected table {display_ident(fact.name)} must come first in FROM, its public tables "
                      "joined to it", fact_src.node)
    wrapped = _is_wrapped(sel)
    if not wrapped:
        _check_star(sel, fact)
    dims: list[Dim] = []
    filters: list[exp.Expr | None] = []
    for j in joins:
        kind = (j.args.get("kind") or "").upper()
        side = (j.args.get("side") or "").upper()
        if side in ("RIGHT", "FULL") or kind in ("CROSS", "OUTER", "SEMI", "ANTI") or j.args.get("method"):
            what = side or kind or (j.args.get("method") or "").upper()
            raise refuse(f"{what} JOIN is not supported on protected tables", j)
        if j.args.get("using"):
            raise refuse("JOIN ... USING is not supported on protected tables", j,
                          hint="Write the condition with ON. " + JOIN_HINT)
        on = j.args.get("on")
        if on is None:
            raise refuse("a join without an ON condition (a cross join) is not supported on protected tables", j)
        src = _source(j.this)
        pub = catalog.public_table(src.name, src.schema)
        if pub is None:
            full = f"{src.schema}.{src.name}" if src.schema else src.name
            raise refuse(f"JOIN with {full}, which is not declared public, is not supported on protected tables",
                          j.this, hint="A protected table may join only tables declared public in config.toml "
                                       "([public_tables.NAME]). " + JOIN_HINT)
        if pub.problem is not None or not pub.loaded:
            raise refuse(f"public table {display_ident(pub.name)} cannot be joined: "
                          f"{pub.problem or 'it has not been read from the database'}", j.this)
        if any(d.source.refname == src.refname for d in dims) or src.refname == fact_src.refname:
            raise Refusal("42712", f'table name "{src.refname}" specified more than once', position=position_of(j.this))
        dim = _join(fact, fact_src, dims, pub, src, on)
        if side != "LEFT":
            filters.append(inner_filter(fact, fact_src, dim, j))
        dims.append(dim)
    if wrapped:
        _expand_stars(sel, fact, fact_src, dims)
    _substitute(sel, fact, fact_src, dims)
    sel.set("joins", None)
    for f in filters:
        if f is not None:
            where = sel.args.get("where")
            sel.set("where", exp.Where(this=f if where is None else exp.and_(exp.Paren(this=where.this), f)))


def _is_wrapped(sel: exp.Select) -> bool:
    """Whether ``sel`` is a FROM subquery of another statement (a BI tool's dataset: Superset's
    ``FROM (SELECT * FROM orders o JOIN products p ...) AS virtual_table``), whose rows only the statement
    around it reads (and aggregates, or is refused as a row read)."""
    sub = sel.parent
    return isinstance(sub, exp.Subquery) and isinstance(sub.parent, exp.From | exp.Join)


def _expand_stars(sel: exp.Select, fact: TableSchema, fact_src: Source, dims: list[Dim]) -> None:
    """``*`` and ``t.*`` in a wrapped join: the fact's declared attributes and the dimensions' columns
    (each already a function of the fact's key), named as PostgreSQL names them."""
    out: list[exp.Expr] = []
    for item in sel.expressions:
        star = isinstance(item, exp.Star) or (isinstance(item, exp.Column) and isinstance(item.this, exp.Star))
        if not star:
            out.append(item)
            continue
        quals = qualifiers(item) if isinstance(item, exp.Column) else []
        if not quals or fact_src.qualifies(quals, fact.schema):
            out += [exp.alias_(fact_column(fact_src, a.name), exp.to_identifier(a.name, quoted=True))
                    for a in fact.attributes]
        for d in dims:
            if quals and not d.source.qualifies(quals, d.table.schema):
                continue
            for c in d.table.columns:
                ref = exp.Column(this=exp.to_identifier(c.name, quoted=True))
                out.append(exp.alias_(dimension_value(fact, fact_src, d, ref, c.name),
                                      exp.to_identifier(c.name, quoted=True)))
        if quals and not fact_src.qualifies(quals, fact.schema) and not any(
                d.source.qualifies(quals, d.table.schema) for d in dims):
            raise Refusal(E.UNDEFINED_TABLE, f'missing FROM-clause entry for table "{quals[-1]}"',
                          position=position_of(item))
    sel.set("expressions", out)


def _check_star(sel: exp.Select, fact: TableSchema) -> None:
    for item in sel.expressions:
        star = isinstance(item, exp.Star) or (isinstance(item, exp.Column) and isinstance(item.this, exp.Star))
        if star:
            raise refuse(f"* in the target list of a join with protected table {display_ident(fact.name)} is not "
                          "supported: it would read its rows", item,
                          hint="Name the columns, and aggregate the protected table's (COUNT, SUM, AVG ... "
                               "GROUP BY dimension columns).")


def _join(fact: TableSchema, fact_src: Source, dims: list[Dim], pub: PublicTable, src: Source,
          on: exp.Expr) -> Dim:
    cond = strip_paren(on)
    if not isinstance(cond, exp.EQ):
        raise refuse("a join condition other than one equality of a key with the public table's unique key "
                      "is not supported on protected tables", on)
    left, right = strip_paren(cond.this), strip_paren(cond.expression)
    if not isinstance(left, exp.Column) or not isinstance(right, exp.Column):
        raise refuse("a join condition must compare two columns (the fact's key and the public table's key)", on)
    if _belongs(right, src, pub) and not _belongs(left, src, pub):
        left, right = right, left
    if not _belongs(left, src, pub) or _belongs(right, src, pub):
        raise refuse(f"the join condition must compare a column of {display_ident(pub.name)} with a column of "
                      "the tables joined before it", on)
    key = ident(left.this)
    if pub.column(key) is None:
        raise Refusal(E.UNDEFINED_COLUMN, f"column {src.refname}.{key} does not exist", position=position_of(left))
    if key not in pub.unique:
        raise refuse(f"the join key {display_ident(pub.name)}.{display_ident(key)} is not unique upstream (no "
                      "primary key or unique constraint on it): one fact row could match several rows (a 1:N "
                      "join), multiplying its contribution", on,
                      hint=f"Declare a PRIMARY KEY or UNIQUE constraint on {pub.qualified_name}({key}) "
                           "upstream, or join on a column that has one.")
    by_key = {row[pub.index(key)]: row for row in pub.rows}
    other = _resolve(right, fact, fact_src, dims)
    if isinstance(other, Dim):
        i = column_index(other, right)
        rows = {k: (by_key.get(r[i]) if r is not None else None) for k, r in other.rows.items()}
        return Dim(pub, src, other.root, rows)
    attr = fact.attribute(other)
    if attr is None:
        if other == fact.privacy_unit:
            raise refuse("a join on the privacy unit is not supported: it is not a public column", right)
        raise Refusal(E.UNDEFINED_COLUMN, f"column {fact_src.refname}.{other} does not exist",
                      position=position_of(right),
                      hint=f"Protected table {display_ident(fact.name)} exposes its declared attributes: "
                           + ", ".join(display_ident(a.name) for a in fact.attributes) + ".")
    d = attr.domain
    if d.measure or d.last_values() is not None:
        raise refuse(f"{display_ident(attr.name)} holds several values per cell ({d.coarseness()}): it cannot be "
                      "a join key", right, hint="Join on a column declared with one cell per value (integers, "
                                                "a text list, days). " + JOIN_HINT)
    rows = {}
    for v in d.cell_values:
        k = key_text(v, right)
        rows[k] = by_key.get(k) if k is not None else None
    return Dim(pub, src, attr.name, rows)


def _belongs(col: exp.Column, src: Source, pub: PublicTable) -> bool:
    quals = qualifiers(col)
    if quals:
        return src.qualifies(quals, pub.schema)
    return pub.column(ident(col.this)) is not None


def _resolve(col: exp.Column, fact: TableSchema, fact_src: Source, dims: list[Dim]) -> Dim | str:
    """The dimension a column reference names, or the fact column's name (PostgreSQL's resolution)."""
    name = ident(col.this)
    quals = qualifiers(col)
    if quals:
        for d in dims:
            if d.source.qualifies(quals, d.table.schema):
                return d
        if fact_src.qualifies(quals, fact.schema):
            return name
        raise Refusal(E.UNDEFINED_TABLE, f'missing FROM-clause entry for table "{quals[-1]}"',
                      position=position_of(col))
    hits: list[Dim | str] = [d for d in dims if d.table.column(name) is not None]
    if fact.attribute(name) is not None or name == fact.privacy_unit:
        hits.append(name)
    if len(hits) > 1:
        raise Refusal(E.AMBIGUOUS_COLUMN, f'column reference "{name}" is ambiguous', position=position_of(col))
    return hits[0] if hits else name


def _substitute(sel: exp.Select, fact: TableSchema, fact_src: Source, dims: list[Dim]) -> None:
    """Replace each reference to a dimension column by its value as a function of the fact's key."""
    items = sel.expressions
    for i, item in enumerate(items):
        if isinstance(item, exp.Column) and not isinstance(item.this, exp.Star):
            if isinstance(_resolve(item, fact, fact_src, dims), Dim):
                # The output keeps the column's name, as PostgreSQL names it.
                items[i] = exp.alias_(item, exp.to_identifier(ident(item.this), quoted=True), copy=False)
    sel.set("expressions", items)  # sets the new items' parents
    for col in list(sel.find_all(exp.Column)):
        if isinstance(col.this, exp.Star) or in_nested_select(col, sel):
            continue
        if col.find_ancestor(exp.Join) is not None:
            continue  # the ON conditions go with the joins
        target = _resolve(col, fact, fact_src, dims)
        if isinstance(target, Dim):
            col.replace(dimension_value(fact, fact_src, target, col))
        elif qualifiers(col) and not fact_src.qualifies(qualifiers(col), fact.schema):
            raise Refusal(E.UNDEFINED_TABLE, f'missing FROM-clause entry for table "{qualifiers(col)[-1]}"',
                          position=position_of(col))
