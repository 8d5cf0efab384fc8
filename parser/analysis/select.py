"""Pass: check the SELECT as a whole before its clauses are lowered: it must aggregate (no raw rows,
no ``*``, no window functions, no DISTINCT rows), its target list must name declared columns, and it may
not use clauses the proxy does not support. Checks run in PostgreSQL's order, so errors match its own."""

from __future__ import annotations

from decimal import Decimal, InvalidOperation

from sqlglot import exp

from ..syntax.parse import position_of
from .context import Context
from .nodes import non_aggregate, star_refusal, strip_paren, unsupported
from .windows import HINT as WINDOW_HINT

_UNSUPPORTED_CLAUSES = ("qualify", "connect", "laterals", "pivots", "locks", "into", "sample")


def has_aggregate(sel: exp.Select) -> bool:
    for part in [*sel.expressions, sel.args.get("having"), sel.args.get("order")]:
        if part is not None and part.find(exp.AggFunc) is not None:
            return True
    return False


def is_probe(sel: exp.Select) -> bool:
    """A statement that only asks for the shape of rows: no aggregate, no grouping, LIMIT 0 or 1, or a
    WHERE clause false by its own text (``WHERE 1 = 0``, ``WHERE false``).

    Superset probes a virtual dataset's SQL with ``LIMIT 1`` for its column names and types, Tableau and
    Power BI with ``WHERE (1 = 0)``; such a probe is answered with the columns and no row, whatever the
    data, so it reads nothing and spends nothing.
    """
    if has_aggregate(sel) or sel.args.get("group") is not None or sel.args.get("distinct") is not None:
        return False
    if any(sel.args.get(k) is not None for k in ("having", "offset")) or sel.find(exp.Window):
        return False
    where = sel.args.get("where")
    if where is not None and _never_true(where.this):
        return True  # PostgreSQL returns no row whatever the data
    # ORDER BY ... LIMIT 1 asks for an extreme row (data), not for a shape.
    if sel.args.get("order") is not None:
        return False
    limit = sel.args.get("limit")
    value = strip_paren(limit.expression) if isinstance(limit, exp.Limit) else None
    return isinstance(value, exp.Literal) and not value.is_string and str(value.this) in ("0", "1")


def _never_true(cond: exp.Expr) -> bool:
    """Whether ``cond`` is FALSE or NULL by its text alone: ``false``, ``1 = 0``, ``0 <> 0``, or a conjunction
    holding one of them."""
    c = strip_paren(cond)
    if isinstance(c, exp.Boolean):
        return not c.this
    if isinstance(c, exp.And):
        return _never_true(c.this) or _never_true(c.expression)
    if isinstance(c, exp.EQ | exp.NEQ):
        a, b = strip_paren(c.this), strip_paren(c.expression)
        if isinstance(a, exp.Literal) and isinstance(b, exp.Literal) and not a.is_string and not b.is_string:
            try:
                same = Decimal(str(a.this)) == Decimal(str(b.this))
            except InvalidOperation:
                return False
            return same if isinstance(c, exp.NEQ) else not same
    return False


def is_value_list(sel: exp.Select) -> bool:
    """``SELECT DISTINCT col ...`` or ``SELECT col ... GROUP BY col`` without aggregates: the values of the keys.

    Filter pickers and dimension lists ask this; the answer is the declared public domain (minus the values
    the WHERE clause excludes by its own text), so no data is read.
    """
    distinct = sel.args.get("distinct")
    if has_aggregate(sel) or (distinct is not None and distinct.args.get("on") is not None):
        return False
    return (distinct is not None) != (sel.args.get("group") is not None)


def check_select(ctx: Context) -> str:
    """Check the SELECT; its kind: ``"aggregate"``, ``"values"`` (see ``is_value_list``) or ``"probe"``
    (see ``is_probe``)."""
    sel, table = ctx.select, ctx.table
    values = is_value_list(sel)
    if sel.args.get("distinct") is not None and not has_aggregate(sel) and not values:
        raise non_aggregate(table, sel)
    probe = is_probe(sel)
    stars = [e for e in sel.expressions
             if isinstance(e, exp.Star) or (isinstance(e, exp.Column) and isinstance(e.this, exp.Star))]
    if stars and not probe:
        raise star_refusal(table, stars[0])
    # PostgreSQL resolves the target list before WHERE and GROUP BY: report its unknown columns first.
    cols = [c for item in sel.expressions for c in item.find_all(exp.Column) if not isinstance(c.this, exp.Star)]
    for c in sorted(cols, key=lambda c: position_of(c) or 0):
        if not (ctx.scope.is_unit(c) and _in_count_distinct(c)):
            ctx.column(c)
    if stars:
        for s in stars:
            ctx.scope.star(s)
    win = next((w for w in sel.find_all(exp.Window) if values or probe or not _output_window(w, sel)), None)
    if win is not None:
        raise unsupported("window function", win, hint=WINDOW_HINT)
    if values:
        if sel.args.get("distinct") is not None:
            # DISTINCT over the target list is GROUP BY over it.
            sel.set("group", exp.Group(expressions=[(i.this if isinstance(i, exp.Alias) else i).copy()
                                                    for i in sel.expressions]))
            sel.set("distinct", None)
        return "values"
    if sel.args.get("distinct") is not None:
        raise unsupported("SELECT DISTINCT", sel)
    if probe:
        return "probe"
    if not has_aggregate(sel):
        raise non_aggregate(table, sel)
    for key in _UNSUPPORTED_CLAUSES:
        if sel.args.get(key):
            raise unsupported(key.upper(), sel.args[key] if isinstance(sel.args[key], exp.Expr) else sel)
    return "aggregate"


def _output_window(win: exp.Window, sel: exp.Select) -> bool:
    """Whether ``win`` is in a target-list item of a grouped statement (then answered over its groups,
    parser/analysis/windows.py; Looker's percent of total ``COUNT(*) / NULLIF(SUM(COUNT(*)) OVER (), 0)``):
    a window over rows, in another clause, inside an aggregate or another window, is not."""
    if sel.args.get("group") is None and not any(
            a.find_ancestor(exp.Window) is None or a.find_ancestor(exp.Window).this is not a
            for part in sel.expressions for a in part.find_all(exp.AggFunc)):
        return False  # no aggregate but the windows' own functions: a window over the table's rows
    node: exp.Expr = win
    while node.parent is not None and node.parent is not sel:
        node = node.parent
        # A window inside another one's argument, PARTITION BY or ORDER BY comes from merging the levels
        # over an aggregate (parser/analysis/inline.py refuses it written by the analyst): computed first.
        if isinstance(node, exp.AggFunc) and not (isinstance(node.parent, exp.Window) and node.parent.this is node):
            return False
        if isinstance(node, exp.Select):
            return False
    return node.parent is sel and node.arg_key in ("expressions", "order")


def _in_count_distinct(col: exp.Column) -> bool:
    """The privacy unit is referenced only as COUNT(DISTINCT unit) (casts allowed around it), or as a branch
    value of a CASE that is COUNT(DISTINCT)'s argument (``COUNT(DISTINCT CASE WHEN p THEN unit END)``)."""
    child: exp.Expr = col
    node: exp.Expr | None = col.parent
    while isinstance(node, exp.Cast | exp.Paren):
        child, node = node, node.parent
    if isinstance(node, exp.If) and child.arg_key == "true" or isinstance(node, exp.Case) and child.arg_key == "default":
        node = node.parent if isinstance(node, exp.If) else node
        node = node.parent if isinstance(node, exp.Case) else None
        while isinstance(node, exp.Cast | exp.Paren):
            node = node.parent
    return isinstance(node, exp.Distinct) and isinstance(node.parent, exp.Count)
