"""Pass: lower a WHERE clause (and FILTER / CASE WHEN conditions) to the WHERE form (parser.analysis.condition).

Comparisons of an attribute with a constant or a parameter, IN lists, ANY/ALL(ARRAY[...]), BETWEEN,
IS [NOT] NULL, IS [NOT] DISTINCT FROM, combined with AND, OR, NOT; comparisons between constants fold.
"""

from __future__ import annotations

from datetime import date
from decimal import Decimal
from typing import Any

import numpy as np
from sqlglot import exp

from pgcore import errors as E
from pgcore import pgtypes as T
from pgcore.errors import Refusal

from .. import scalar as S
from ..model.predicate import merge_ranges, runs
from ..model.schema import Attribute
from ..semantics.values import NUMBER_OIDS
from ..syntax.parse import folded_items, position_of
from . import condition as C
from .cells import on_cells
from .context import Context
from .joint import product_values
from .nodes import (
    CMP_OPS,
    FLIP,
    flatten,
    is_param,
    param_index,
    sql_of,
    strip_paren,
    unsupported,
)
from .param_exprs import bound_cells, bound_table, computed_operand, has_param, is_param_expr, mapped_operand
from .scalars import NOT_CONSTANT, NotScalar, compile_scalar, fold

_WHERE_HINT = ("WHERE supports =, <>, <, <=, >, >=, BETWEEN, IN, IS [NOT] NULL on attributes compared with "
               "literals or parameters, combined with AND, OR, NOT.")


def lower_where(node: exp.Expr, ctx: Context) -> C.Cond:
    """The condition ``node`` over ``ctx``'s table."""
    return _Lowering(ctx).cond(node, 0)


def operand(node: exp.Expr, attr: Attribute | None, ctx: Context, op: str = "=") -> C.Operand:
    """A constant or a parameter compared with ``attr`` (None: a constant-only comparison)."""
    node = strip_paren(node)
    while isinstance(node, exp.Cast) and is_param(strip_paren(node.this)):
        node = strip_paren(node.this)  # $1::int4: the value is coerced to the attribute's type anyway
    if is_param(node):
        n = param_index(node)
        ctx.param_types[n] = attr.domain.param_oid if attr is not None else T.INT4
        return C.Param(n)
    if is_param_expr(node):  # $1::timestamp + interval '1 day', lower($1): evaluated at Bind
        return computed_operand(node, attr, ctx, op)
    value = fold(node, ctx.budget)
    if value is NOT_CONSTANT:
        if isinstance(node, exp.Column):
            raise unsupported("comparing two columns", node, hint="Compare an attribute with a literal or a parameter.")
        if node.find(exp.AggFunc):
            raise Refusal(E.GROUPING_ERROR, "aggregate functions are not allowed in WHERE", position=position_of(node))
        if node.find(exp.Select):
            raise unsupported("subquery", node)
        raise unsupported(f"expression {sql_of(node)!r} in WHERE", node,
                          hint="Compare an attribute with a literal or a parameter.")
    if attr is not None and value is not None:
        value = attr.domain.check_literal(value, position_of(node))
    return C.Lit(value)


def subject(node: exp.Expr, ctx: Context) -> exp.Expr:
    """The compared side with identity casts removed (``age::int``, ``city::text``)."""
    node = strip_paren(node)
    while isinstance(node, exp.Cast) and isinstance(strip_paren(node.this), exp.Column):
        attr = ctx.column(strip_paren(node.this))
        if not attr.domain.identity_cast(node.args["to"].this):
            break
        node = strip_paren(node.this)
    return node


class _Lowering:
    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    def subject(self, node: exp.Expr) -> exp.Expr:
        return subject(node, self.ctx)

    def column_subject(self, node: exp.Expr) -> Attribute:
        subject = self.subject(node)
        if not isinstance(subject, exp.Column):
            raise unsupported(f"expression {sql_of(subject)!r} in WHERE", subject)
        return self.ctx.column(subject)

    def cond(self, node: exp.Expr, depth: int) -> C.Cond:
        ctx = self.ctx
        ctx.budget.depth(depth)
        ctx.budget.tick()
        node = strip_paren(node)
        if isinstance(node, exp.And | exp.Or):
            parts = tuple(self.cond(x, depth + 1) for x in flatten(node, type(node)))
            return C.And(parts) if isinstance(node, exp.And) else C.Or(parts)
        if isinstance(node, exp.Not):
            return C.Not(self.cond(node.this, depth + 1))
        if isinstance(node, exp.Boolean):
            return C.Const(bool(node.this))
        if isinstance(node, exp.Null):
            return C.Const(None)
        if type(node) in CMP_OPS:
            return self.comparison(CMP_OPS[type(node)], node)
        if (isinstance(node, exp.Like | exp.ILike) and _bare_param(node.expression) is not None
                and node.this.find(exp.Column) is not None):
            # col LIKE $1 (a BI tool's "contains" filter, bound): the pattern is matched against each cell's
            # value at Bind, as a literal pattern is at planning.
            like = self.mapped("ilike" if isinstance(node, exp.ILike) else "like", node.this, (node.expression,), node)
            return C.Not(like) if node.args.get("negate") else like
        if isinstance(node, exp.NullSafeEQ | exp.NullSafeNEQ):
            left, right = self.subject(node.this), self.subject(node.expression)
            if not isinstance(left, exp.Column):
                left, right = right, left
            if not isinstance(left, exp.Column):
                raise unsupported(f"predicate {sql_of(node)!r}", node)
            attr = ctx.column(left)
            same = C.NotDistinct(attr.name, operand(right, attr, ctx))
            return same if isinstance(node, exp.NullSafeEQ) else C.Not(same)
        if isinstance(node, exp.Is) and isinstance(node.expression, exp.Boolean):
            return self.per_row(node)  # IS [NOT] TRUE / FALSE: never NULL, evaluated on the cells
        if isinstance(node, exp.Between | exp.Is | exp.In) and not isinstance(self.subject(node.this), exp.Column):
            bounds = ([node.args["low"], node.args["high"]] if isinstance(node, exp.Between) else
                      list(node.expressions) if isinstance(node, exp.In) else [])
            if any(_bare_param(b) is not None for b in bounds) and not node.args.get("symmetric"):
                if isinstance(node, exp.Between):  # expr BETWEEN $1 AND $2 (a date range picker's filter)
                    return C.And((self.mapped(">=", node.this, bounds[:1], node),
                                  self.mapped("<=", node.this, bounds[1:], node)))
                return self.mapped("=", node.this, bounds, node)  # expr IN ($1, $2): = any of them
            if node.args.get("query") is None and (not isinstance(node, exp.Is) or isinstance(node.expression, exp.Null)):
                return self.per_row(node)
        if isinstance(node, exp.Between):
            attr = self.column_subject(node.this)
            lo, hi = operand(node.args["low"], attr, ctx), operand(node.args["high"], attr, ctx)
            inside = C.And((C.Compare(attr.name, ">=", lo), C.Compare(attr.name, "<=", hi)))
            if node.args.get("symmetric"):
                # BETWEEN SYMMETRIC: either order of the bounds.
                return C.Or((inside, C.And((C.Compare(attr.name, ">=", hi), C.Compare(attr.name, "<=", lo)))))
            return inside
        if isinstance(node, exp.In):
            subject = self.subject(node.this)
            if node.args.get("query") is not None:
                raise unsupported("subquery", node.args["query"])
            if not isinstance(subject, exp.Column):
                raise unsupported(f"expression {sql_of(subject)!r} in WHERE", subject)
            attr = ctx.column(subject)
            folded = folded_items(node)
            if folded is not None:  # a long list of plain literals, read by the parser's scanner
                ctx.budget.in_list(len(folded))
                check = attr.domain.check_literal
                return C.In(attr.name, tuple(C.Lit(check(v, at + 1)) for v, at in folded))
            ctx.budget.in_list(len(node.expressions))
            return C.In(attr.name, tuple(operand(x, attr, ctx) for x in node.expressions))
        if isinstance(node, exp.Is):
            if not isinstance(node.expression, exp.Null):
                raise unsupported(f"IS {sql_of(node.expression)}", node)
            null = C.IsNull(self.column_subject(node.this).name)
            return C.Not(null) if node.args.get("negate") else null
        if isinstance(node, exp.Column):
            attr = ctx.column(node)
            if attr.domain.oid == T.BOOL:
                return C.Compare(attr.name, "=", C.Lit(True))  # WHERE flag
            raise Refusal(E.DATATYPE_MISMATCH, f"argument of WHERE must be type boolean, not type "
                          f"{attr.domain.sql_type}", position=position_of(node))
        if node.find(exp.Select):
            raise unsupported("subquery", node.find(exp.Select))
        if node.find(exp.AggFunc):
            raise Refusal(E.GROUPING_ERROR, "aggregate functions are not allowed in WHERE",
                          position=position_of(node.find(exp.AggFunc)))
        if node.find(exp.Column) is not None:
            return self.per_row(node)
        raise unsupported(f"predicate {sql_of(node)!r}", node, hint=_WHERE_HINT)

    def compile_cells(self, node: exp.Expr) -> S.Expr:
        """``node`` as a scalar over the cells of the columns it reads; what it cannot evaluate is refused."""
        try:
            return compile_scalar(node, self.ctx.cell_leaf, self.ctx.budget, exact=True)
        except NotScalar as u:
            raise unsupported(f"expression {sql_of(u.node)!r} in WHERE", u.node, hint=_WHERE_HINT) from None
        except Refusal as r:
            r.position = r.position or position_of(node)
            raise

    def per_row(self, node: exp.Expr) -> C.Cond:
        """A predicate over one attribute that is not a plain comparison (wrappers compute columns, e.g.
        ``age * 2 >= 80``): evaluated by the scalar evaluator on every cell of the public domain."""
        ctx = self.ctx
        attrs = {ctx.column(c).name for c in node.find_all(exp.Column)}
        if not attrs:  # no column: the same value on every row (a volatile function is refused by the compiler)
            value = fold(node, ctx.budget)
            if value is NOT_CONSTANT:
                raise unsupported(f"predicate {sql_of(node)!r}", node, hint=_WHERE_HINT)
            return C.Const(None if value is None else bool(value))
        if node.find(exp.Select) is not None:
            raise unsupported("subquery", node.find(exp.Select))
        if len(attrs) > 1:
            return self.per_rows(node, sorted(attrs), self.ctx.cell_leaf)
        attr = ctx.table.attribute(attrs.pop())
        assert attr is not None
        if has_param(node):  # strpos(city, $1) > 0: evaluated on the cells at Bind
            return bound_cells(node, attr, ctx)
        e = self.compile_cells(node)
        if e.oid not in (T.BOOL, T.UNKNOWN):
            raise Refusal(E.DATATYPE_MISMATCH, "argument of WHERE must be type boolean", position=position_of(node))
        results = on_cells(e, attr, ctx.budget, node, "condition")
        true = merge_ranges([(i, i) for i, v in enumerate(results) if v is True])
        false = merge_ranges([(i, i) for i, v in enumerate(results) if v is False])
        return C.Cells(attr.name, tuple(true), tuple(false))

    def mapped(self, op: str, expr: exp.Expr, others: list[exp.Expr] | tuple[exp.Expr, ...],
               node: exp.Expr) -> C.Cond:
        """``expr op x`` for each x of ``others`` (ORed: one for a comparison, several for IN), where ``expr``
        is a per-row expression over one attribute and each x a parameter or a constant (JDBC's
        ``CAST(ts AS DATE) >= ?``). ``expr`` is evaluated on every cell at planning (refused if it cuts a cell)
        and compared with the parameter's value at Bind; the parameter takes ``expr``'s type, as in PostgreSQL."""
        ctx = self.ctx
        attrs = {ctx.column(c).name for c in expr.find_all(exp.Column)}
        if len(attrs) != 1 or expr.find(exp.AggFunc) is not None or expr.find(exp.Select) is not None:
            return self.per_row(node)  # refused there with the reason (several columns, aggregates...)

        attr = ctx.table.attribute(attrs.pop())
        assert attr is not None
        e = self.compile_cells(expr)
        oid = T.TEXT if e.oid == T.UNKNOWN else e.oid
        if op in ("like", "ilike") and oid != T.TEXT:
            raise Refusal(E.UNDEFINED_FUNCTION, f"function {op}({T.type_name(oid)}, text) does not exist",
                          position=position_of(node), hint="Cast the column to text first, e.g. CAST(col AS TEXT).")
        if oid not in NUMBER_OIDS | T.TEMPORAL_OIDS | {T.TEXT, T.BOOL}:
            return self.per_row(node)
        values = tuple(S.objects(on_cells(e, attr, ctx.budget, node, "condition")).tolist())
        parts: list[C.Cond] = []
        for x in others:
            n = _bare_param(x)
            if n is not None:
                ctx.param_types[n] = oid
                parts.append(C.Mapped(attr.name, values, oid, op, C.Param(n)))
                continue
            computed = mapped_operand(x, oid, ctx)
            if computed is not None:
                parts.append(C.Mapped(attr.name, values, oid, op, computed))
                continue
            value = fold(x, ctx.budget)
            if value is NOT_CONSTANT:
                raise unsupported(f"expression {sql_of(x)!r} in WHERE", x, hint=_WHERE_HINT)
            parts.append(C.Mapped(attr.name, values, oid, op, C.Lit(value)))
        return parts[0] if len(parts) == 1 else C.Or(tuple(parts))

    def per_rows(self, node: exp.Expr, names: list[str], leaf: Any) -> C.Cond:
        """A predicate over several attributes (``n + k > 10``, ``a > b``): evaluated on their joint cells
        (``joint.product_values``; each cell must hold one value)."""
        ctx = self.ctx
        attrs = [a for a in (ctx.table.attribute(n) for n in names) if a is not None]
        if has_param(node):  # age + $1 > hours_per_week: evaluated on the joint cells at Bind
            return bound_table(node, attrs, ctx)
        e = self.compile_cells(node)
        if e.oid not in (T.BOOL, T.UNKNOWN):
            raise Refusal(E.DATATYPE_MISMATCH, "argument of WHERE must be type boolean", position=position_of(node))
        shape, out = product_values(e, attrs, ctx.budget, node, "predicate")
        true = np.equal(out, np.array(True, dtype=object)) & ~S.nulls(out)
        false = np.equal(out, np.array(False, dtype=object)) & ~S.nulls(out)
        return C.Table(tuple(names), shape, runs(true), runs(false))

    def comparison(self, op: str, node: exp.Expr) -> C.Cond:
        ctx = self.ctx
        left, right = self.subject(node.this), self.subject(node.expression)
        quantified = _quantified(right)
        if quantified is not None and isinstance(left, exp.Column):
            # x op ANY/ALL(ARRAY[...]) is how JDBC-style tools write IN lists: OR / AND of comparisons.
            every, items = quantified
            attr = ctx.column(left)
            ctx.budget.in_list(len(items))
            parts = tuple(C.Compare(attr.name, op, operand(x, attr, ctx)) for x in items)
            return C.And(parts) if every else C.Or(parts)
        array = _array_param(right)
        if array is not None and isinstance(left, exp.Column):  # col op ANY($1), col <> ALL($1)
            attr, (n, every) = ctx.column(left), array
            ctx.param_types[n] = T.ARRAY_OF.get(attr.domain.param_oid, T.ARRAY_OF[T.TEXT])
            return C.AnyOf(attr.name, op, C.Param(n), every)
        if isinstance(right, exp.Any):
            raise unsupported(f"{sql_of(right)}", right)
        if isinstance(left, exp.Column) and right.find(exp.Column) is None:
            attr = ctx.column(left)
            return C.Compare(attr.name, op, operand(right, attr, ctx, op))
        if isinstance(right, exp.Column) and left.find(exp.Column) is None:
            attr = ctx.column(right)
            return C.Compare(attr.name, FLIP[op], operand(left, attr, ctx, FLIP[op]))
        if _bare_param(right) is not None and left.find(exp.Column) is not None:
            return self.mapped(op, left, (right,), node)
        if _bare_param(left) is not None and right.find(exp.Column) is not None:
            return self.mapped(FLIP[op], right, (left,), node)
        if is_param_expr(right) and left.find(exp.Column) is not None:  # lower(city) = lower($1)
            return self.mapped(op, left, (right,), node)
        if is_param_expr(left) and right.find(exp.Column) is not None:
            return self.mapped(FLIP[op], right, (left,), node)
        if node.find(exp.Column) is not None and node.find(exp.AggFunc) is None:
            return self.per_row(node)
        a, b = operand(left, None, ctx), operand(right, None, ctx)
        if not isinstance(a, C.Lit) or not isinstance(b, C.Lit):
            raise unsupported("a parameter compared with a literal", node)
        if isinstance(a.value, date) or isinstance(b.value, date):
            value = fold(node, ctx.budget)  # dates compare through the scalar evaluator's type rules
            return C.Const(value if isinstance(value, bool) or value is None else bool(value))
        return C.Const(_const_compare(op, a.value, b.value, node))


def _bare_param(node: exp.Expr) -> int | None:
    """The index n of ``$n`` (also written ``$n::type`` or in parentheses), else None."""
    node = strip_paren(node)
    while isinstance(node, exp.Cast) and is_param(strip_paren(node.this)):
        node = strip_paren(node.this)
    return param_index(node) if is_param(node) else None


def _array_param(node: exp.Expr) -> tuple[int, bool] | None:
    """``ANY($n)`` -> (n, False); ``ALL($n)`` -> (n, True); else None."""
    if isinstance(node, exp.Any):
        n = _bare_param(node.this)
        return None if n is None else (n, False)
    if isinstance(node, exp.Anonymous) and str(node.this).upper() == "ALL" and len(node.expressions) == 1:
        n = _bare_param(node.expressions[0])
        return None if n is None else (n, True)
    return None


def _quantified(node: exp.Expr) -> tuple[bool, list[exp.Expr]] | None:
    """``ANY(ARRAY[...])`` -> (False, items); ``ALL(ARRAY[...])`` -> (True, items); else None."""
    if isinstance(node, exp.Any):
        arr = strip_paren(node.this)
        return (False, list(arr.expressions)) if isinstance(arr, exp.Array) else None
    if isinstance(node, exp.Anonymous) and str(node.this).upper() == "ALL" and len(node.expressions) == 1:
        arr = strip_paren(node.expressions[0])
        return (True, list(arr.expressions)) if isinstance(arr, exp.Array) else None
    return None


def _const_compare(op: str, a: Any, b: Any, node: exp.Expr) -> bool | None:
    """Literal-to-literal comparisons (``WHERE 1 = 1`` from BI tools) fold to constants."""
    if a is None or b is None:
        return None
    if isinstance(a, str) != isinstance(b, str):
        try:
            a, b = (Decimal(a) if isinstance(a, str) else a), (Decimal(b) if isinstance(b, str) else b)
        except ArithmeticError:
            raise Refusal(E.INVALID_TEXT_REPRESENTATION, "invalid input syntax for a literal comparison",
                          position=position_of(node)) from None
    return S.compare(op, a, b)
