"""Pass: lower the target list (and, for the clauses pass, HAVING and ORDER BY expressions) to typed
post-processing expressions over the groups: aggregates, group keys, parameters and constants combined
by the scalar evaluator's operators; output columns named as PostgreSQL names them."""

from __future__ import annotations

from sqlglot import exp

from pgcore import errors as E
from pgcore.errors import Refusal
from pgcore.pgtypes import TEXT, UNKNOWN

from .. import scalar as S
from ..syntax.parse import position_of
from .aggregates import lower_aggregate
from .context import Context
from .nodes import figure_name, ident, is_param, param_index, sql_of, strip_paren, unsupported
from .param_exprs import resolve_params
from .scalars import NotScalar, compile_scalar
from .where import lower_where
from .windows import lower_window


def lower_outputs(ctx: Context) -> list[S.Expr]:
    """One expression per target-list item, named by its alias or as PostgreSQL would name it."""
    outputs = []
    for item in ctx.select.expressions:
        node = item.this if isinstance(item, exp.Alias) else item
        if is_param(node):  # SELECT $1 AS label: an untyped parameter standing alone is text, as in PostgreSQL
            ctx.param_types.setdefault(param_index(node), TEXT)
        bare = strip_paren(node)
        e = lower_expr(node, ctx, "SELECT")
        e.name = ident(item.args["alias"]) if isinstance(item, exp.Alias) else figure_name(bare.this) \
            if isinstance(bare, exp.Window) else figure_name(node)
        if e.oid == UNKNOWN:
            e.oid = TEXT  # an untyped NULL goes out as text, as PostgreSQL resolves it
        outputs.append(e)
    return outputs


def lower_expr(node: exp.Expr, ctx: Context, where: str) -> S.Expr:
    """An output / HAVING / ORDER BY expression over aggregates and group keys."""

    def leaf(n: exp.Expr) -> S.Expr | None:
        return _leaf(n, ctx)

    try:
        e = compile_scalar(node, leaf, ctx.budget, exact=False)
    except NotScalar as u:
        n = u.node
        if isinstance(n, exp.Cast):
            raise unsupported(f"CAST to {n.args['to'].this.value}", n) from None
        if n.find(exp.Select):
            raise unsupported("subquery", n.find(exp.Select)) from None
        raise unsupported(f"expression {sql_of(n)!r} in {where}", n) from None
    resolve_params(e, ctx)  # COUNT(*) + $1: bigint; lower($1): text (PostgreSQL's resolution)
    return e


def _leaf(node: exp.Expr, ctx: Context) -> S.Expr | None:
    if isinstance(node, exp.Window):  # in the target list (parser/analysis/select.py checked where it stands)
        return lower_window(node, figure_name(node.this), lambda n: lower_expr(n, ctx, "SELECT"))
    if isinstance(node, exp.Filter):
        agg = node.this
        cond = node.expression.this if isinstance(node.expression, exp.Where) else node.expression
        if not isinstance(agg, exp.AggFunc | exp.WithinGroup):
            raise unsupported("FILTER on a non-aggregate", node)
        return lower_aggregate(agg, lower_where(cond, ctx), figure_name(node), ctx)
    if isinstance(node, exp.AggFunc | exp.WithinGroup):
        return lower_aggregate(node, None, figure_name(node), ctx)
    for i, dim in enumerate(ctx.groups):
        if dim.node is not None and node == dim.node:
            return S.Key(i, dim.oid, figure_name(node))
    if isinstance(node, exp.Column):
        attr = ctx.column(node)
        plain = [i for i, d in enumerate(ctx.groups) if d.node is None and d.attr == attr.name]
        if not plain:
            raise Refusal(E.GROUPING_ERROR, f'column "{ctx.scope.refname}.{attr.name}" must appear in the GROUP BY '
                          "clause or be used in an aggregate function", position=position_of(node))
        return S.Key(plain[0], ctx.groups[plain[0]].oid, attr.name)
    if isinstance(node, exp.Parameter | exp.Placeholder):
        n = param_index(node)  # typed by what it meets (an operator, a cast, a function), else text
        return S.Param(n, ctx.declared.get(n, ctx.param_types.get(n, UNKNOWN)))
    if isinstance(node, exp.Select | exp.Subquery):
        raise unsupported("subquery", node)
    return None
