"""Pass: check the SELECT as a whole before its clauses are lowered: it must aggregate (no raw rows,
no ``*``, no window functions, no DISTINCT rows), its target list must name declared columns, and it may
not use clauses the proxy does not support. Checks run in PostgreSQL's order, so errors match its own."""

from __future__ import annotations

from sqlglot import exp

from ..syntax import position_of
from .context import Context
from .nodes import non_aggregate, star_refusal, unsupported

_UNSUPPORTED_CLAUSES = ("qualify", "connect", "laterals", "pivots", "locks", "into", "sample")


def has_aggregate(sel: exp.Select) -> bool:
    for part in [*sel.expressions, sel.args.get("having"), sel.args.get("order")]:
        if part is not None and part.find(exp.AggFunc) is not None:
            return True
    return False


def check_select(ctx: Context) -> None:
    sel, table = ctx.select, ctx.table
    if sel.args.get("distinct") is not None and not has_aggregate(sel):
        raise non_aggregate(table, sel)
    stars = [e for e in sel.expressions
             if isinstance(e, exp.Star) or (isinstance(e, exp.Column) and isinstance(e.this, exp.Star))]
    if stars:
        raise star_refusal(table, stars[0])
    # PostgreSQL resolves the target list before WHERE and GROUP BY: report its unknown columns first.
    cols = [c for item in sel.expressions for c in item.find_all(exp.Column) if not isinstance(c.this, exp.Star)]
    for c in sorted(cols, key=lambda c: position_of(c) or 0):
        ctx.column(c)
    win = sel.find(exp.Window)
    if win is not None:
        raise unsupported("window function", win)
    if sel.args.get("distinct") is not None:
        raise unsupported("SELECT DISTINCT", sel)
    if not has_aggregate(sel):
        raise non_aggregate(table, sel)
    for key in _UNSUPPORTED_CLAUSES:
        if sel.args.get(key):
            raise unsupported(key.upper(), sel.args[key] if isinstance(sel.args[key], exp.Expr) else sel)
