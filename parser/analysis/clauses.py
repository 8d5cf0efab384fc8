"""Pass: lower the clauses applied to the result rows: HAVING and ORDER BY (post-processing of noisy
values) and LIMIT / OFFSET (constants or parameters)."""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from pgcore import errors as E
from pgcore.errors import Refusal
from pgcore.pgtypes import INT8

from .. import scalar as S
from ..syntax.parse import position_of
from . import condition as C
from .context import Context
from .nodes import ident, is_param, param_index, sql_of, strip_paren, unsupported
from .outputs import lower_expr
from .scalars import fold


@dataclass
class Clauses:
    having: S.Expr | None
    order: list[tuple[S.Expr, bool, bool]]  # (expr, descending, nulls_first)
    limit: C.Operand | None
    offset: C.Operand | None
    post_filters: list[S.Expr]  # the WHERE clauses of levels over windows (parser/analysis/inline.py), in order


def lower_clauses(ctx: Context, outputs: list[S.Expr]) -> Clauses:
    sel = ctx.select
    having = lower_expr(sel.args["having"].this, ctx, "HAVING") if sel.args.get("having") is not None else None
    order = _order_by(ctx, outputs)
    post = [lower_expr(f, ctx, "WHERE") for f in sel.meta.get("lapras_post_filters", [])]
    return Clauses(having, order, _count(ctx, "limit"), _count(ctx, "offset"), post)


def _order_by(ctx: Context, outputs: list[S.Expr]) -> list[tuple[S.Expr, bool, bool]]:
    order = ctx.select.args.get("order")
    if order is None:
        return []
    out = []
    names = [o.name for o in outputs]
    for ordered in order.expressions:
        node = strip_paren(ordered.this)
        desc = bool(ordered.args.get("desc"))
        # sqlglot fills in PostgreSQL's default (NULLs sort as larger than any value).
        nulls_first = bool(ordered.args.get("nulls_first"))
        if isinstance(node, exp.Literal) and not node.is_string:
            pos = int(str(node.this))
            if not 1 <= pos <= len(outputs):
                raise Refusal(E.INVALID_COLUMN_REFERENCE, f"ORDER BY position {pos} is not in select list",
                              position=position_of(node))
            out.append((outputs[pos - 1], desc, nulls_first))
            continue
        if isinstance(node, exp.Column) and not node.args.get("table") and ident(node.this) in names:
            name = ident(node.this)
            if names.count(name) > 1:
                raise Refusal(E.AMBIGUOUS_COLUMN, f'ORDER BY "{name}" is ambiguous', position=position_of(node))
            out.append((outputs[names.index(name)], desc, nulls_first))
            continue
        out.append((lower_expr(node, ctx, "ORDER BY"), desc, nulls_first))
    return out


def _count(ctx: Context, key: str) -> C.Operand | None:
    """LIMIT or OFFSET: None (absent, ALL or NULL), a non-negative integer, or a parameter."""
    node = ctx.select.args.get(key)
    if node is None:
        return None
    value = node.args.get("count") if isinstance(node, exp.Fetch) else node.expression
    if isinstance(node, exp.Fetch) and node.args.get("limit_options") is not None:
        opts = node.args["limit_options"]
        if opts.args.get("percent") or opts.args.get("with_ties"):
            raise unsupported("FETCH ... PERCENT / WITH TIES", node)
    value = strip_paren(value) if value is not None else None
    if value is None or (isinstance(value, exp.Var) and str(value.this).upper() == "ALL"):
        return None
    if is_param(value):
        n = param_index(value)
        ctx.param_types[n] = INT8
        return C.Param(n)
    lit = fold(value, ctx.budget)
    if lit is None:
        return None
    if not isinstance(lit, int) or isinstance(lit, bool):
        raise unsupported(f"{key.upper()} {sql_of(value)}", value)
    if lit < 0:
        raise Refusal(E.INVALID_ROW_COUNT if key == "limit" else E.INVALID_OFFSET_COUNT,
                      f"{key.upper()} must not be negative", position=position_of(value))
    return C.Lit(lit)
