"""Pass: inline wrappers. CTEs and FROM subqueries over one protected table that only filter, rename, cast
or compute per-row expressions are merged into the statement that reads them, as sqlglot's optimizer merges
subqueries, so the later passes see one flat SELECT.

BI tools wrap what they send: Superset's virtual datasets (``FROM (...) AS virtual_table``), Metabase's
models (``AS "source"``), Power BI's DirectQuery nesting (``select ... from (select ... group by ...) "_"
where not "_"."a0" is null limit 1000001``). Two merges cover them, applied innermost first:

- a *projection* (no aggregate, GROUP BY, DISTINCT, LIMIT, window) under any statement: the outer
  statement's columns become the inner expressions and the two WHERE clauses are ANDed;
- an *aggregate* under a statement that only picks, renames or filters its output rows: the outer target
  list, ORDER BY and LIMIT replace the inner ones and the outer WHERE joins the inner HAVING (it filters
  released values: post-processing).

Whatever else needs the wrapped rows (a row LIMIT or DISTINCT inside, an aggregate over an aggregate's
rows) is refused here with its reason; other shapes are left for ``check_shape`` to refuse.
"""

from __future__ import annotations

from sqlglot import exp

from pgcore import errors as E
from pgcore.errors import Refusal

from ..model.limits import Budget, too_complex
from ..model.schema import Catalog, TableSchema
from ..syntax.parse import position_of
from .nodes import figure_name, ident, in_nested_select, strip_paren, unsupported

POST_FILTERS = "lapras_post_filters"
"""Select meta key: the WHERE clauses of levels over windows, applied in order after them."""
STAGE = "lapras_stage"
"""Window meta key: how many post-filters run before the window is computed (their rows are what it sees)."""
_MAX_MERGED_NODES = 20_000  # Looker's pivot merges to ~400

_ROW_CLAUSES = ("distinct", "limit", "offset", "qualify", "laterals", "joins", "pivots", "sample", "locks")


def inline_wrappers(tree: exp.Expr, catalog: Catalog, budget: Budget) -> exp.Expr:
    """``tree`` with its CTEs and FROM subqueries over one protected table merged into it."""
    while isinstance(tree, exp.Subquery) and not tree.args.get("alias"):
        tree = tree.this
    if not isinstance(tree, exp.Select):
        return tree
    for w in tree.find_all(exp.Window):  # merging levels nests windows; the analyst's text may not
        if any(x is not w for x in w.find_all(exp.Window)):
            raise Refusal("42P20", "window function calls cannot be nested", position=position_of(w))
    _expand_ctes(tree)
    return _flatten(tree, catalog, budget)


# -- CTEs ----------------------------------------------------------------------------------------------


def _expand_ctes(sel: exp.Select) -> None:
    """Replace each reference to a (non-recursive) CTE by its body as a FROM subquery, then drop WITH."""
    w = sel.args.get("with_")
    if w is None or w.args.get("recursive"):
        return
    bodies: dict[str, exp.Expr] = {}
    for cte in w.expressions:
        body = cte.this
        if cte.args.get("alias") is None or cte.args["alias"].args.get("columns"):
            return  # column lists on a CTE name: left for check_shape to refuse
        _substitute_ctes(body, bodies)
        bodies[ident(cte.args["alias"].this)] = body
    sel.set("with_", None)
    _substitute_ctes(sel, bodies)


def _substitute_ctes(node: exp.Expr, bodies: dict[str, exp.Expr]) -> None:
    if not bodies:
        return
    for t in list(node.find_all(exp.Table)):
        if t.args.get("db") is not None or not isinstance(t.this, exp.Identifier):
            continue
        body = bodies.get(ident(t.this))
        if body is None:
            continue
        alias = t.args.get("alias")
        name = alias.this if alias is not None and alias.this is not None else t.this
        t.replace(exp.Subquery(this=body.copy(), alias=exp.TableAlias(this=name.copy())))


# -- FROM subqueries -----------------------------------------------------------------------------------


def _flatten(sel: exp.Select, catalog: Catalog, budget: Budget) -> exp.Select:
    frm = sel.args.get("from_")
    if frm is None or sel.args.get("joins"):
        return sel
    src = frm.this
    if not isinstance(src, exp.Subquery):
        return sel
    inner = src.this
    while isinstance(inner, exp.Subquery) and not inner.args.get("alias"):
        inner = inner.this
    if not isinstance(inner, exp.Select) or inner.args.get("with_") is not None:
        return sel
    alias_node = src.args.get("alias")
    if alias_node is not None and alias_node.args.get("columns"):
        return sel
    budget.check_deadline()
    inner = _flatten(inner, catalog, budget)
    table = _protected_table(inner, catalog)
    if table is None:
        return sel
    alias = ident(alias_node.this) if alias_node is not None and alias_node.this is not None else None
    outputs = _outputs(inner, table)
    if _is_projection(inner):
        return _merge_projection(sel, inner, outputs, alias)
    if _aggregates(inner):
        return _merge_aggregate(sel, inner, outputs, alias)
    return sel


def _protected_table(sel: exp.Select, catalog: Catalog) -> TableSchema | None:
    frm = sel.args.get("from_")
    src = frm.this if frm is not None else None
    if not isinstance(src, exp.Table) or not isinstance(src.this, exp.Identifier) or sel.args.get("joins"):
        return None
    name = ident(src.this)
    schema = ident(src.args["db"]) if src.args.get("db") is not None else None
    return catalog.table(name, schema)


def _aggregates(sel: exp.Select) -> bool:
    parts = [*sel.expressions, sel.args.get("having"), sel.args.get("group")]
    return any(p is not None and (isinstance(p, exp.Group) or p.find(exp.AggFunc) is not None) for p in parts)


def _windows_only(sel: exp.Select, inner: exp.Select) -> bool:
    """Whether ``sel``, over an aggregate subquery, only adds window functions in its target list over its
    columns (Metabase's cumulative sum over a nested question: ``SUM("source"."count") OVER (ORDER BY
    "source"."ts" ROWS UNBOUNDED PRECEDING)``): merged, they are windows over the aggregate's groups."""
    parts = [*sel.expressions, sel.args.get("where"), sel.args.get("order")]  # not the FROM subquery
    wins = [w for p in parts if p is not None for w in p.find_all(exp.Window)]
    own = {id(w.this) for w in wins}
    if not wins or any(sel.args.get(k) for k in ("group", "having", "distinct")) or any(
            inner.args.get(k) is not None for k in ("limit", "offset")):
        return False
    if any(id(a) not in own for p in parts if p is not None for a in p.find_all(exp.AggFunc)) or any(
            len(list(w.find_all(exp.Window))) > 1 for w in wins):
        return False
    return not any(p is not None and p.find(exp.Window) is not None for p in parts[-2:])  # target list only


def _is_projection(sel: exp.Select) -> bool:
    if _aggregates(sel) or sel.find(exp.Window) is not None:
        return False
    for key in _ROW_CLAUSES:
        if sel.args.get(key):
            what = {"distinct": "DISTINCT", "limit": "LIMIT", "offset": "OFFSET"}.get(key)
            if what is not None:
                raise unsupported(f"{what} over the rows of a subquery", sel.args[key],
                                  hint="It would choose rows of a protected table; aggregate the table directly "
                                  "and filter with WHERE. " + E.SUPPORTED_HINT)
            return False
    return True


def _outputs(sel: exp.Select, table: TableSchema) -> list[tuple[str, exp.Expr]]:
    """The inner statement's output columns by name, ``*`` expanded to the table's declared attributes."""
    frm = sel.args["from_"].this
    qual = frm.args.get("alias")
    qualifier = qual.this if qual is not None and qual.this is not None else frm.this
    out: list[tuple[str, exp.Expr]] = []
    for item in sel.expressions:
        star = isinstance(item, exp.Star) or (isinstance(item, exp.Column) and isinstance(item.this, exp.Star))
        if star:
            for a in table.attributes:
                out.append((a.name, exp.Column(this=exp.to_identifier(a.name, quoted=True),
                                               table=qualifier.copy())))
        elif isinstance(item, exp.Alias):
            out.append((ident(item.args["alias"]), item.this))
        else:
            out.append((figure_name(item), item))
    return out


def _lookup(outputs: list[tuple[str, exp.Expr]], name: str, node: exp.Expr) -> exp.Expr | None:
    hits = [e for n, e in outputs if n == name]
    if len(hits) > 1:
        raise Refusal(E.AMBIGUOUS_COLUMN, f'column reference "{name}" is ambiguous', position=position_of(node))
    return hits[0] if hits else None


def _substitute(sel: exp.Select, outputs: list[tuple[str, exp.Expr]], alias: str | None,
                keep_output_names: bool) -> None:
    """Replace the columns of ``sel`` that name the subquery's outputs by copies of their expressions.

    ``keep_output_names``: names of ``sel``'s own outputs that ORDER BY / GROUP BY may use stay as they are.
    """
    own = {ident(i.args["alias"]) for i in sel.expressions if isinstance(i, exp.Alias)}
    items = sel.expressions
    # A bare column in the target list keeps its name once replaced by an expression.
    for i, item in enumerate(items):
        if isinstance(item, exp.Column) and not isinstance(item.this, exp.Star):
            items[i] = exp.alias_(item, exp.to_identifier(ident(item.this), quoted=True), copy=False)
    sel.set("expressions", _expand_star(items, outputs, alias))
    for col in list(sel.find_all(exp.Column)):
        if isinstance(col.this, exp.Star) or in_nested_select(col, sel):
            continue
        quals = [p for p in (col.args.get("catalog"), col.args.get("db"), col.args.get("table")) if p is not None]
        if quals and (len(quals) > 1 or alias is None or ident(quals[-1]) != alias):
            raise Refusal(E.UNDEFINED_TABLE, f'missing FROM-clause entry for table "{ident(quals[-1])}"',
                          position=position_of(col))
        name = ident(col.this)
        # As in PostgreSQL, a bare name in ORDER BY means an output column first; in GROUP BY an input one.
        mine = not quals and keep_output_names and name in own
        if mine and col.find_ancestor(exp.Order) is not None:
            continue
        target = _lookup(outputs, name, col)
        if target is None:
            if mine and col.find_ancestor(exp.Group, exp.Having) is not None:
                continue
            raise Refusal(E.UNDEFINED_COLUMN, f'column "{".".join([*(ident(q) for q in quals), name])}" does '
                          "not exist", position=position_of(col))
        new = target.copy()
        if not isinstance(new, exp.Column | exp.Literal | exp.Paren):
            new = exp.Paren(this=new)
        col.replace(new)


def _expand_star(items: list[exp.Expr], outputs: list[tuple[str, exp.Expr]], alias: str | None) -> list[exp.Expr]:
    out: list[exp.Expr] = []
    for item in items:
        star = isinstance(item, exp.Star) or (isinstance(item, exp.Column) and isinstance(item.this, exp.Star))
        qual = item.args.get("table") if isinstance(item, exp.Column) else None
        if star and (qual is None or (alias is not None and ident(qual) == alias)):
            out.extend(exp.alias_(exp.Column(this=exp.to_identifier(n, quoted=True)),
                                  exp.to_identifier(n, quoted=True)) for n, _ in outputs)
        else:
            out.append(item)
    return out


def _as_list(node: object) -> list[exp.Expr]:
    return node if isinstance(node, list) else [node] if isinstance(node, exp.Expr) else []


def _and(a: exp.Expr | None, b: exp.Expr | None) -> exp.Expr | None:
    if a is None or b is None:
        return a if b is None else b
    return exp.And(this=exp.Paren(this=a), expression=exp.Paren(this=b))


def _merge_projection(sel: exp.Select, inner: exp.Select, outputs: list[tuple[str, exp.Expr]],
                      alias: str | None) -> exp.Select:
    """``SELECT f(c) FROM (SELECT g(t.a) AS c FROM t WHERE p) s WHERE q`` -> ``SELECT f(g(t.a)) FROM t
    WHERE p AND q[c := g(t.a)]``."""
    _substitute(sel, outputs, alias, keep_output_names=True)
    inner_where = inner.args["where"].this if inner.args.get("where") is not None else None
    outer_where = sel.args["where"].this if sel.args.get("where") is not None else None
    cond = _and(inner_where, outer_where)
    sel.set("where", exp.Where(this=cond) if cond is not None else None)
    sel.set("from_", inner.args["from_"])
    return sel


def _resolve_inner_refs(inner: exp.Select, key: str) -> None:
    """Inner GROUP BY / ORDER BY items given as select-list positions or output aliases become the
    expressions they denote, so the inner target list can be replaced."""
    clause = inner.args.get(key)
    if clause is None:
        return
    items = inner.expressions
    aliases = {ident(i.args["alias"]): i.this for i in items if isinstance(i, exp.Alias)}
    for item in clause.expressions:
        node = item.this if isinstance(item, exp.Ordered) else item
        node = strip_paren(node)
        target = None
        if isinstance(node, exp.Literal) and not node.is_string:
            pos = int(str(node.this))
            if not 1 <= pos <= len(items):
                raise Refusal(E.INVALID_COLUMN_REFERENCE, f"{'GROUP' if key == 'group' else 'ORDER'} BY position "
                              f"{pos} is not in select list", position=position_of(node))
            t = items[pos - 1]
            target = t.this if isinstance(t, exp.Alias) else t
        elif isinstance(node, exp.Column) and node.args.get("table") is None and ident(node.this) in aliases:
            target = aliases[ident(node.this)]
        if target is not None:
            node.replace(target.copy())


def _merge_aggregate(sel: exp.Select, inner: exp.Select, outputs: list[tuple[str, exp.Expr]],
                     alias: str | None) -> exp.Select:
    """``SELECT s.k, s.n FROM (SELECT k, COUNT(*) AS n FROM t GROUP BY k) s WHERE s.n > 10 ORDER BY 2 LIMIT 5``
    -> ``SELECT k AS k, COUNT(*) AS n FROM t GROUP BY k HAVING COUNT(*) > 10 ORDER BY 2 LIMIT 5``.

    Over an aggregate that computes windows (Looker's pivots nest four levels of ranks), the outer WHERE
    filters the windows' results: it becomes a *post-filter* (``POST_FILTERS`` in the select's meta, applied
    after the windows, in order), and the outer level's own windows are tagged with the number of
    post-filters below them (``STAGE``): they are computed over the groups those filters keep. All of it is
    post-processing of the released groups (parser/plan/postprocess.py)."""
    own = [w for k in ("expressions", "where", "group", "having", "order") for p in _as_list(sel.args.get(k))
           for w in p.find_all(exp.Window)]  # not the FROM subquery's
    if (_aggregates(sel) or sel.args.get("distinct") or own) and not _windows_only(sel, inner):
        if inner.find(exp.Window) is not None:
            raise unsupported("this query over the outputs of window functions", inner.find(exp.Window),
                              hint="Window functions are answered in the target list of each level over the "
                              "aggregate, WHERE / ORDER BY / LIMIT over their results; an aggregate or DISTINCT "
                              "over them is not. " + E.SUPPORTED_HINT)
        node = sel.find(exp.AggFunc) or sel.args.get("group") or sel.args.get("distinct") or sel
        raise unsupported("an aggregate over the rows of an aggregate subquery", node,
                          hint="It needs the subquery's rows (which groups exist). Query the aggregate directly. "
                          + E.SUPPORTED_HINT)
    for key in ("qualify", "laterals", "joins", "pivots", "sample", "locks"):
        if sel.args.get(key):
            return sel
    outer_rows = any(sel.args.get(k) is not None for k in ("where", "order", "offset"))
    if (inner.args.get("limit") is not None or inner.args.get("offset") is not None) and (
            outer_rows or sel.args.get("limit") is not None):
        raise unsupported("filtering, ordering or limiting a subquery that has LIMIT/OFFSET",
                          inner.args.get("limit") or inner.args.get("offset"),
                          hint="Put ORDER BY, LIMIT and the filter on the aggregate query itself.")
    filters: list[exp.Expr] = list(inner.meta.get(POST_FILTERS, []))
    windowed = bool(filters) or any(e.find(exp.Window) is not None for e in inner.expressions)
    # This level's WHERE runs before its own windows (PostgreSQL's order): they see the rows it keeps.
    for w in own:
        w.meta[STAGE] = len(filters) + (1 if windowed and sel.args.get("where") is not None else 0)
    _resolve_inner_refs(inner, "group")
    _resolve_inner_refs(inner, "order")
    _substitute(sel, outputs, alias, keep_output_names=True)
    inner.set("expressions", sel.expressions)
    if sel.args.get("where") is not None and windowed:
        filters.append(sel.args["where"].this)
        inner.meta[POST_FILTERS] = filters
    elif sel.args.get("where") is not None:
        having = inner.args["having"].this if inner.args.get("having") is not None else None
        inner.set("having", exp.Having(this=_and(having, sel.args["where"].this)))
    if sel.args.get("order") is not None:
        inner.set("order", sel.args["order"])
    for key in ("limit", "offset"):
        if sel.args.get(key) is not None:
            inner.set(key, sel.args[key])
    # Each level copies the expressions it names: bound the merged size (and so the work over the groups).
    if sum(1 for root in (inner, *filters) for _ in root.walk()) > _MAX_MERGED_NODES:
        raise too_complex("the levels over the aggregate name its window columns too many times",
                          "Name each window column once per level, or compute the ranks in the client.")
    return inner
