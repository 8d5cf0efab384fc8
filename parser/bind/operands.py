"""Operands at Bind: a WHERE form's literal, parameter or parameter expression read as the type it is
compared with, bound arrays, LIMIT / OFFSET counts, and the protocol error for missing parameters."""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any

import numpy as np
from sqlglot import exp

from pgcore import errors as E
from pgcore.arrays import array_items
from pgcore.errors import Refusal
from pgcore.pgtypes import BOOL, TEXT, type_name

from ..analysis import condition as C
from ..analysis.cells import constant_per_cell
from ..analysis.joint import product_values
from ..model.limits import Budget
from ..model.schema import Attribute, TableSchema
from ..scalar import Env, Expr, Param, cast_value, coerce_param
from ..semantics.values import as_text


@lru_cache(maxsize=64)
def missing(params: Sequence[object], needed: int, at_least: bool = True) -> Refusal:
    return Refusal(E.PROTOCOL_VIOLATION, f"bind message supplies {len(params)} parameters, but prepared "
                   f"statement requires {'at least ' if at_least else ''}{needed}")


def _bound(e: Expr, params: Sequence[object]) -> list[object]:
    """The parameters as ``e``'s parameter nodes read them (text decoded; a typed value sent to a text
    parameter as its text)."""
    values = [p.decode() if isinstance(p, bytes) else p for p in params]
    for x in e.walk():
        if isinstance(x, Param) and x.oid == TEXT and values[x.index - 1] is not None:
            values[x.index - 1] = as_text(values[x.index - 1])
    return values


def computed(operand: C.Computed, params: Sequence[object]) -> Any:
    """The value of a parameter expression with the statement's parameters bound (None is NULL); errors
    (22P02 for a value that does not read as its parameter's type, 22012, 22008) as PostgreSQL raises them."""
    return operand.expr.ev(Env(1, params=_bound(operand.expr, params)))[0]


def operand_value(operand: C.Operand, attr: Attribute, params: Sequence[object]) -> Any:
    """The operand's value coerced to the attribute's type (parameters arrive as text or Python values); a
    parameter expression's value is read as a literal of that value is."""
    if isinstance(operand, C.Lit):
        return operand.value
    if isinstance(operand, C.Computed):
        v = computed(operand, params)
        return None if v is None else attr.domain.check_literal(v, None)
    if operand.index > len(params):
        raise missing(params, operand.index)
    p = params[operand.index - 1]
    return None if p is None else attr.domain.coerce_param(p)


def typed_value(operand: C.Operand, oid: int, params: Sequence[object]) -> Any:
    """The operand read as SQL type ``oid`` (a per-row expression's type), as PostgreSQL reads a parameter
    compared with it; a value that does not read as that type fails with 22P02 / 22007 before anything runs."""
    if isinstance(operand, C.Lit):
        v = operand.value
    elif isinstance(operand, C.Computed):
        v = computed(operand, params)
        if v is None or operand.oid == oid or oid in (BOOL, TEXT):
            return v
        return cast_value(v, operand.oid, oid, type_name(oid))  # ts::date = $1::timestamp - interval '1 day'
    else:
        if operand.index > len(params):
            raise missing(params, operand.index)
        v = params[operand.index - 1]
    if v is None:
        return None
    v = v.decode() if isinstance(v, bytes) else v
    if oid == BOOL:
        return cast_value(v, TEXT, BOOL, "boolean")
    if oid == TEXT:
        return str(v)
    return coerce_param(v, oid)


def array_value(operand: C.Param, params: Sequence[object]) -> list[Any] | None:
    """The array bound to ``operand`` as a list (None: a NULL array); a text array literal is read here when
    the client sent it untyped."""
    if operand.index > len(params):
        raise missing(params, operand.index)
    v = params[operand.index - 1]
    if v is None or isinstance(v, list | tuple):
        return None if v is None else list(v)
    return array_items(v.decode() if isinstance(v, bytes) else str(v))


def count(spec: C.Operand | None, params: Sequence[object], what: str) -> int | None:
    if spec is None:
        return None
    if isinstance(spec, C.Lit):
        return int(spec.value)  # type: ignore[call-overload]
    assert isinstance(spec, C.Param)  # LIMIT / OFFSET take a literal or a parameter (analysis/clauses.py)
    if spec.index > len(params):
        raise missing(params, spec.index)
    p = params[spec.index - 1]
    if p is None:
        return None
    try:
        n = int(p.decode() if isinstance(p, bytes) else p)  # type: ignore[call-overload]
    except (TypeError, ValueError):
        raise Refusal(E.INVALID_TEXT_REPRESENTATION, f'invalid input syntax for type bigint: "{p}"') from None
    if n < 0:
        raise Refusal(E.INVALID_ROW_COUNT if what == "LIMIT" else E.INVALID_OFFSET_COUNT, f"{what} must not be negative")
    return n


def bound_table(cond: C.BoundTable, table: TableSchema, params: Sequence[object],
                budget: Budget) -> tuple[tuple[int, ...], np.ndarray]:
    """A per-row predicate over several attributes reading parameters, on every combination of their cells
    with the parameters bound (``analysis/joint.py``): the product's shape and one result a combination;
    refused (0A000) where, with these values, it is not constant over a cell of its coarse column."""
    attrs = [a for a in (table.attribute(n) for n in cond.attrs) if a is not None]
    assert isinstance(cond.node, exp.Expr)
    return product_values(cond.expr, attrs, budget, cond.node, "condition", params=_bound(cond.expr, params))


def bound_cells(cond: C.BoundCells, table: TableSchema, params: Sequence[object], budget: Budget) -> list[Any]:
    """A per-row predicate reading parameters, on every cell of its attribute with the parameters bound;
    refused (0A000) where, with these values, it is not constant over a cell."""
    attr = table.attribute(cond.attr)
    assert attr is not None
    d = attr.domain
    values, bound = d.cell_values, _bound(cond.expr, params)
    budget.tick(len(values))
    results = cond.expr.ev(Env(len(values), {attr.name: values}, params=bound))
    lasts = d.last_values()
    if lasts is not None and not constant_per_cell(cond.expr, Env(len(values), {attr.name: values}, params=bound),
                                                   Env(len(lasts), {attr.name: lasts}, params=bound), budget):
        raise Refusal(E.FEATURE_NOT_SUPPORTED, f"condition {cond.sql!r} cuts the cells of column {attr.name} "
                      f"(cells of {d.coarseness()}) with the bound parameters",
                      hint=f"{attr.name} is declared with cells of {d.coarseness()}: compare it with values on "
                      "cell boundaries.")
    return results
