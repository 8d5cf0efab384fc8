"""Constant expressions over parameters: ``$1::timestamp + interval '1 day'``, ``lower($1)``,
``COALESCE($1, 'x')``, ``$1 * 2``. They read no column, so each is one value per execution: compiled here
once per template (per statement text, the client's declared parameter types and any truncation unit bound
in its GROUP BY) with PostgreSQL's parameter type resolution, and evaluated at Bind
(``parser.bind.binder``) as if the client had written its value as a literal.

Type resolution follows PostgreSQL's for an untyped parameter: ``$1::t`` is of type t; next to an operator
it takes the other operand's type (``$1 * 2``: integer; ``$1 - interval '7 days'``: interval, so comparing
that with a timestamp column is 42883, as in PostgreSQL); an argument of a text function, or one nothing
constrains, is text.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from sqlglot import exp

from pgcore import errors as E
from pgcore import pgtypes as T
from pgcore.errors import Refusal

from .. import scalar as S
from ..model.schema import Attribute
from ..semantics.values import NUMBER_OIDS
from ..syntax.parse import position_of
from . import condition as C
from .context import Context
from .joint import product_shape
from .nodes import NotScalar, is_param, param_index, sql_of, unsupported
from .scalars import compile_scalar


def has_param(node: exp.Expr) -> bool:
    """``node`` holds a parameter (``$n`` or ``?``)."""
    return any(is_param(n) for n in node.walk())


def is_param_expr(node: exp.Expr) -> bool:
    """``node`` reads parameters and nothing of a row (no column, aggregate, subquery or window)."""
    return has_param(node) and node.find(exp.Column, exp.AggFunc, exp.Select, exp.Window) is None


# Declared parameter types the evaluator computes with: the rest (0, json, uuid...) are left untyped.
_DECLARED = {T.INT2: T.INT4, T.INT4: T.INT4, T.INT8: T.INT8, T.NUMERIC: T.NUMERIC, T.FLOAT4: T.FLOAT8,
             T.FLOAT8: T.FLOAT8, T.TEXT: T.TEXT, T.VARCHAR: T.TEXT, T.BPCHAR: T.TEXT, T.NAME: T.TEXT, T.BOOL: T.BOOL,
             T.DATE: T.DATE, T.TIMESTAMP: T.TIMESTAMP, T.TIMESTAMPTZ: T.TIMESTAMPTZ, T.INTERVAL: T.INTERVAL}


def declared_types(oids: Sequence[int]) -> dict[int, int]:
    """The client's Parse-message parameter types (0: unspecified) as ``$n`` -> the evaluator's type."""
    return {i: _DECLARED[o] for i, o in enumerate(oids, 1) if o in _DECLARED}


def _leaf(ctx: Context) -> Callable[[exp.Expr], S.Expr | None]:
    def leaf(n: exp.Expr) -> S.Expr | None:
        if is_param(n):
            k = param_index(n)
            return S.Param(k, ctx.declared.get(k, T.UNKNOWN))
        if isinstance(n, exp.Column | exp.AggFunc | exp.Select | exp.Window):
            raise NotScalar(n)
        return None
    return leaf


def resolve_params(e: S.Expr, ctx: Context) -> None:
    """Parameters still untyped after compiling ``e`` are text (PostgreSQL's last resort); each one's type
    is recorded for Describe."""
    for x in e.walk():
        if isinstance(x, S.Param):
            if x.oid == T.UNKNOWN:
                x.oid = T.TEXT
            ctx.param_types.setdefault(x.index, x.oid)


def compile_param_expr(node: exp.Expr, ctx: Context) -> S.Expr:
    """``node``, an expression over parameters and constants, compiled with typed parameters."""
    try:
        e = compile_scalar(node, _leaf(ctx), ctx.budget, exact=True)
    except NotScalar as u:
        raise unsupported(f"expression {sql_of(u.node)!r} in WHERE", u.node,
                          hint="Compare an attribute with a literal, a parameter or an expression over them.") from None
    except Refusal as r:
        r.position = r.position or position_of(node)
        raise
    resolve_params(e, ctx)
    if e.oid == T.UNKNOWN:
        e.oid = T.TEXT
    return e


def _comparable(attr_oid: int, oid: int) -> bool:
    if attr_oid in T.TEMPORAL_OIDS:
        return oid in T.TEMPORAL_OIDS
    if attr_oid in NUMBER_OIDS:
        return oid in NUMBER_OIDS
    return oid == attr_oid


def computed_operand(node: exp.Expr, attr: Attribute | None, ctx: Context, op: str = "=") -> C.Computed:
    """The operand ``node`` (a parameter expression) compared with ``attr``; a type with no comparison
    operator against the attribute's is refused as PostgreSQL refuses it (42883)."""
    e = compile_param_expr(node, ctx)
    if attr is not None and not _comparable(attr.domain.oid, e.oid):
        raise Refusal(E.UNDEFINED_FUNCTION, f"operator does not exist: {T.type_name(attr.domain.oid)} {op} "
                      f"{T.type_name(e.oid)}", position=position_of(node),
                      hint="Cast the parameter to the column's type, e.g. $1::timestamp + interval '1 day'.")
    return C.Computed(sql_of(node), e.oid, e)


def mapped_operand(node: exp.Expr, oid: int, ctx: Context) -> C.Computed | None:
    """A parameter expression compared with a per-row expression of type ``oid`` (``lower(city) =
    lower($1)``), or None when ``node`` is not one."""
    if not is_param_expr(node):
        return None
    e = compile_param_expr(node, ctx)
    if not _comparable(oid, e.oid):
        raise Refusal(E.UNDEFINED_FUNCTION, f"operator does not exist: {T.type_name(oid)} = {T.type_name(e.oid)}",
                      position=position_of(node))
    return C.Computed(sql_of(node), e.oid, e)


def bound_cells(node: exp.Expr, attr: Attribute, ctx: Context) -> C.BoundCells:
    """``node``, a predicate over ``attr``'s cells and parameters, compiled for Bind (``C.BoundCells``)."""
    return C.BoundCells(attr.name, sql_of(node), _bound_predicate(node, ctx))


def bound_table(node: exp.Expr, attrs: Sequence[Attribute], ctx: Context) -> C.BoundTable:
    """``node``, a predicate over several attributes' cells and parameters (``age + $1 > hours_per_week``),
    compiled for Bind (``C.BoundTable``); what its product can never be (too large, two coarse columns) is
    refused now, without its values."""
    e = _bound_predicate(node, ctx)
    product_shape(list(attrs), ctx.budget, node, "condition")
    return C.BoundTable(tuple(a.name for a in attrs), sql_of(node), e, node)


def _bound_predicate(node: exp.Expr, ctx: Context) -> S.Expr:
    declared = _leaf(ctx)

    def leaf(n: exp.Expr) -> S.Expr | None:
        return declared(n) if is_param(n) else ctx.cell_leaf(n)

    try:
        e = compile_scalar(node, leaf, ctx.budget, exact=True)
    except NotScalar as u:
        raise unsupported(f"expression {sql_of(u.node)!r} in WHERE", u.node) from None
    except Refusal as r:
        r.position = r.position or position_of(node)
        raise
    resolve_params(e, ctx)
    if e.oid not in (T.BOOL, T.UNKNOWN):
        raise Refusal(E.DATATYPE_MISMATCH, "argument of WHERE must be type boolean", position=position_of(node))
    return e
