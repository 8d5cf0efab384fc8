"""Bind parameter values into a Template: WHERE IR -> cell sets (SQL three-valued logic) -> linear queries."""

from __future__ import annotations

import math
from collections.abc import Sequence
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from functools import lru_cache
from typing import Any

from . import errors as E
from .analyze import Template, WhereIR
from .errors import Refusal
from .linear import LinearQuery, make_linear_query, unit
from .plan import QueryPlan
from .predicate import Pred, Ranges, Space
from .schema import Attribute, TableSchema

TF = tuple[Pred, Pred]
"""(cells where the condition is TRUE, cells where it is FALSE); the rest are NULL (unknown)."""


@lru_cache(maxsize=64)
def space_of(table: TableSchema) -> Space:
    """The predicate space of a table: its attributes in sorted order (the canonical order)."""
    names = sorted(a.name for a in table.attributes)
    return Space(names, [table.shape((n,))[0] for n in names])


def _value(operand: tuple[str, Any], attr: Attribute, params: Sequence[object]) -> Any:
    """The operand's value coerced to the attribute's type (parameters arrive as text or Python values)."""
    kind, v = operand
    if kind == "lit":
        return v
    if v > len(params):
        raise Refusal(E.PROTOCOL_VIOLATION, f"bind message supplies {len(params)} parameters, but prepared "
                      f"statement requires at least {v}")
    p = params[v - 1]
    if p is None:
        return None
    if isinstance(p, bytes):
        p = p.decode()
    if attr.domain.kind != "int":
        return str(p)
    if isinstance(p, bool):
        raise Refusal(E.UNDEFINED_FUNCTION, "operator does not exist: integer = boolean")
    if isinstance(p, int):
        return p
    if isinstance(p, float):
        return Decimal(repr(p))
    if isinstance(p, Decimal):
        return p
    text = str(p).strip()
    try:
        return int(text)
    except ValueError:
        raise Refusal(E.INVALID_TEXT_REPRESENTATION, f'invalid input syntax for type integer: "{p}"') from None


def _int_ranges(attr: Attribute, op: str, x: Any) -> list[tuple[int, int]]:
    """Non-NULL cell index ranges of an integer attribute where ``attr op x`` holds."""
    dom = attr.domain
    n = dom.base_size
    try:
        q = Fraction(x) if not isinstance(x, Decimal) else Fraction(str(x))
    except (ValueError, InvalidOperation):
        return []
    lo, hi = dom.lo, dom.hi
    if op in ("=", "<>"):
        hit = q.denominator == 1 and lo <= q <= hi
        eq = [(int(q) - lo, int(q) - lo)] if hit else []
        if op == "=":
            return eq
        return [(0, n - 1)] if not eq else [(0, eq[0][0] - 1), (eq[0][0] + 1, n - 1)]
    if op == "<":
        top = math.ceil(q) - 1
        return [(0, min(top, hi) - lo)] if top >= lo else []
    if op == "<=":
        top = math.floor(q)
        return [(0, min(top, hi) - lo)] if top >= lo else []
    if op == ">":
        bot = math.floor(q) + 1
        return [(max(bot, lo) - lo, n - 1)] if bot <= hi else []
    if op == ">=":
        bot = math.ceil(q)
        return [(max(bot, lo) - lo, n - 1)] if bot <= hi else []
    raise AssertionError(op)


class Binder:
    """Evaluates a Template's WHERE IR over one table's predicate space with given parameter values."""

    def __init__(self, table: TableSchema, params: Sequence[object]) -> None:
        self.table = table
        self.space = space_of(table)
        self.params = params

    def _base(self, attr: Attribute) -> Pred:
        """Cells where the attribute is not NULL."""
        return self.space.cells(attr.name, [(0, attr.domain.base_size - 1)])

    def _cmp(self, attr: Attribute, op: str, x: Any) -> TF:
        if x is None:
            return False, False
        base = self._base(attr)
        if attr.domain.kind == "int":
            t = self.space.cells(attr.name, _int_ranges(attr, op, x))
        else:
            if op not in ("=", "<>"):
                raise Refusal(E.FEATURE_NOT_SUPPORTED, f"ordering comparison {op} on text attribute {attr.name} is "
                              "not supported", hint="Use = , <>, IN or NOT IN on text attributes.")
            idx = attr.domain.index_of(str(x))
            eq = self.space.cells(attr.name, [] if idx is None or idx == attr.domain.null_index else [(idx, idx)])
            t = eq if op == "=" else self.space.diff(base, eq)
        return t, self.space.diff(base, t)

    def tf(self, ir: WhereIR) -> TF:
        tag = ir[0]
        sp = self.space
        if tag == "and":
            parts = [self.tf(x) for x in ir[1]]
            return sp.all_of([p[0] for p in parts]), sp.any_of([p[1] for p in parts])
        if tag == "or":
            parts = [self.tf(x) for x in ir[1]]
            return sp.any_of([p[0] for p in parts]), sp.all_of([p[1] for p in parts])
        if tag == "not":
            t, f = self.tf(ir[1])
            return f, t
        if tag == "const":
            return (True, False) if ir[1] is True else ((False, True) if ir[1] is False else (False, False))
        if tag == "istrue":
            # CASE WHEN takes a branch only where the condition is TRUE (unknown falls through).
            t = self.tf(ir[1])[0]
            return t, sp.not_(t)
        attr = self.table.attribute(ir[1])
        assert attr is not None
        if tag == "cmp":
            return self._cmp(attr, ir[2], _value(ir[3], attr, self.params))
        if tag == "in":
            parts = [self._cmp(attr, "=", _value(o, attr, self.params)) for o in ir[2]]
            return sp.any_of([p[0] for p in parts]), sp.all_of([p[1] for p in parts])
        if tag == "notdistinct":
            # IS NOT DISTINCT FROM: equality where NULL equals NULL; never unknown.
            x = _value(ir[2], attr, self.params)
            t = sp.not_(self._base(attr)) if x is None else self._cmp(attr, "=", x)[0]
            return t, sp.not_(t)
        if tag == "isnull":
            base = self._base(attr)
            return sp.not_(base), base
        raise AssertionError(tag)

    def where(self, ir: WhereIR | None) -> Pred:
        return True if ir is None else self.tf(ir)[0]


def _limit(spec: tuple[str, Any] | None, params: Sequence[object], what: str) -> int | None:
    if spec is None:
        return None
    kind, v = spec
    if kind == "lit":
        return int(v)
    if v > len(params):
        raise Refusal(E.PROTOCOL_VIOLATION, f"bind message supplies {len(params)} parameters, but prepared "
                      f"statement requires at least {v}")
    p = params[v - 1]
    if p is None:
        return None
    try:
        n = int(p.decode() if isinstance(p, bytes) else p)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise Refusal(E.INVALID_TEXT_REPRESENTATION, f'invalid input syntax for type bigint: "{p}"') from None
    if n < 0:
        raise Refusal(E.INVALID_ROW_COUNT if what == "LIMIT" else E.INVALID_OFFSET_COUNT, f"{what} must not be negative")
    return n


def bind(t: Template, params: Sequence[object]) -> QueryPlan:
    """Build the QueryPlan: one linear query per (group of the public domain, aggregate)."""
    needed = max(t.param_types, default=0)
    if needed > len(params):
        raise Refusal(E.PROTOCOL_VIOLATION, f"bind message supplies {len(params)} parameters, but prepared "
                      f"statement requires {needed}")
    b = Binder(t.table, params)
    sp = b.space
    base = b.where(t.where)
    filters = [base if a.filter is None else sp.and_(base, b.where(a.filter)) for a in t.aggs]
    agg_preds = []
    for spec, p in zip(t.aggs, filters, strict=True):
        if spec.kind == "count" and spec.attr is not None:
            attr = t.table.attribute(spec.attr)
            assert attr is not None
            p = sp.and_(p, b._base(attr))  # COUNT(col) skips NULL cells
        agg_preds.append(p)
    groups = _groups(t)
    queries: list[LinearQuery] = []
    index: dict[LinearQuery, int] = {}
    slots: list[list[int]] = []
    factors: list[list[float]] = []
    for _, cells in groups:
        row, frow = [], []
        for spec, p in zip(t.aggs, agg_preds, strict=True):
            for gattr, granges in cells:
                p = sp.restrict(p, gattr, granges)
            q, factor = unit(make_linear_query(t.table, sp, p, spec.attr if spec.kind == "sum" else None))
            if q not in index:
                index[q] = len(queries)
                queries.append(q)
            row.append(index[q])
            frow.append(factor)
        slots.append(row)
        factors.append(frow)
    return QueryPlan(
        table=t.table.name,
        queries=tuple(queries),
        columns=tuple(_columns(t)),
        template=t,
        group_keys=tuple(k for k, _ in groups),
        slots=tuple(tuple(r) for r in slots),
        factors=tuple(tuple(f) for f in factors),
        params=tuple(params),
        limit=_limit(t.limit, params, "LIMIT"),
        offset=_limit(t.offset, params, "OFFSET"),
    )


def _groups(t: Template) -> list[tuple[tuple[object, ...], list[tuple[str, Ranges]]]]:
    """Every group of the product of the GROUP BY dimensions, in key order (empty groups included): its key
    values and, per dimension, the attribute cells it covers."""
    out: list[tuple[tuple[object, ...], list[tuple[str, Ranges]]]] = [((), [])]
    for dim in t.groups:
        out = [(k + (key,), c + [(dim.attr, cells)]) for k, c in out for key, cells in zip(dim.keys, dim.cells,
                                                                                        strict=True)]
    return out


def _columns(t: Template) -> list[Any]:
    from .plan import Column

    return [Column(e.name, e.oid) for e in t.outputs]
