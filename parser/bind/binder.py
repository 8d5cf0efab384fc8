"""Bind parameter values into a Template: WHERE form -> cell sets (SQL three-valued logic) -> linear queries."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from pgcore import errors as E
from pgcore.errors import Refusal
from pgcore.pgtypes import BOOL

from ..analysis import condition as C
from ..analysis.template import Template
from ..model.limits import Budget, Limits
from ..model.linear import LinearQuery, make_linear_query, space_of, unit
from ..model.predicate import Pred, merge_ranges
from ..model.schema import Attribute, TableSchema
from ..plan.queryplan import Column, QueryPlan
from ..scalar import FUNCTIONS, coerce_param, compare, nulls
from ..syntax.parse import position_of
from .distinct import DistinctQueries
from .group_cells import GroupCells, all_groups, covers, filtered_elsewhere, group_indices, mask
from .group_limit import within_limit
from .operands import array_value, bound_cells, bound_table, count, missing, operand_value, typed_value
from .partition import (
    NeedsPartition,
    partition_request,
    private_columns,
    selected_groups,
    value_list_request,
)
from .splits import cut_compare, cutting, split_axes, split_table

TF = tuple[Pred, Pred]  # (cells where the condition is TRUE, where it is FALSE); the rest are NULL


class Binder:
    """Evaluates the WHERE form over one table's predicate space with given parameter values."""

    def __init__(self, table: TableSchema, params: Sequence[object], budget: Budget) -> None:
        self.table = table
        self.space = space_of(table).with_budget(budget)
        self.params = params
        self.budget = budget
        self.axes = split_axes(table)  # columns cut at the statement's literals (parser/bind/splits.py)

    def base(self, attr: Attribute) -> Pred:
        """Cells where the attribute is not NULL."""
        return self.space.cells(attr.name, [(0, attr.domain.base_size - 1)])

    def _true(self, attr: Attribute, op: str, x: Any) -> Pred:
        """Cells where ``attr op x`` (x not NULL) is TRUE; a literal inside a cell reads its split axis."""
        axis = self.axes.get(attr.name)
        if axis is not None and cutting(attr, op, x):
            return cut_compare(self.space, attr, axis, op, x)
        return self.space.cells(attr.name, attr.domain.ranges(op, x))

    def _cmp(self, attr: Attribute, op: str, x: Any) -> TF:
        if x is None:
            return False, False
        t = self._true(attr, op, x)
        return t, self.space.diff(self.base(attr), t)

    def _in(self, attr: Attribute, operands: tuple[C.Operand, ...]) -> TF:
        """``attr IN (...)``: the union of the equal cells; FALSE elsewhere unless a NULL is listed."""
        values = [operand_value(o, attr, self.params) for o in operands]
        self.budget.tick(len(values))
        cut = [attr.name in self.axes and v is not None and bool(cutting(attr, "=", v)) for v in values]
        hits = merge_ranges([r for v, c in zip(values, cut, strict=True) if v is not None and not c
                             for r in attr.domain.ranges("=", v)])
        t = self.space.any_of([self.space.cells(attr.name, hits), *(self._true(attr, "=", v)
                                                                    for v, c in zip(values, cut, strict=True) if c)])
        return t, (False if any(v is None for v in values) else self.space.diff(self.base(attr), t))

    def tf(self, cond: C.Cond) -> TF:
        sp = self.space
        match cond:
            case C.And(parts):
                both = [self.tf(x) for x in parts]
                return sp.all_of([p[0] for p in both]), sp.any_of([p[1] for p in both])
            case C.Or(parts):
                both = [self.tf(x) for x in parts]
                return sp.any_of([p[0] for p in both]), sp.all_of([p[1] for p in both])
            case C.Not(part):
                t, f = self.tf(part)
                return f, t
            case C.Const(value):
                return (True, False) if value is True else ((False, True) if value is False else (False, False))
            case C.IsTrue(part):
                # CASE WHEN takes a branch only where the condition is TRUE (unknown falls through).
                t = self.tf(part)[0]
                return t, sp.not_(t)
            case C.Compare(name, op, operand):
                attr = self._attr(name)
                return self._cmp(attr, op, operand_value(operand, attr, self.params))
            case C.In(name, operands):
                return self._in(self._attr(name), operands)
            case C.AnyOf(name, op, operand, every):
                attr = self._attr(name)
                items = array_value(operand, self.params)
                if items is None:
                    return False, False
                self.budget.in_list(len(items))
                both = [self._cmp(attr, op, None if v is None else attr.domain.coerce_param(v)) for v in items]
                if every:  # ALL: TRUE where every element compares TRUE (an empty array: everywhere)
                    return sp.all_of([p[0] for p in both]), sp.any_of([p[1] for p in both])
                return sp.any_of([p[0] for p in both]), sp.all_of([p[1] for p in both])
            case C.NotDistinct(name, operand):
                # IS NOT DISTINCT FROM: equality where NULL equals NULL; never unknown.
                attr = self._attr(name)
                x = operand_value(operand, attr, self.params)
                t = sp.not_(self.base(attr)) if x is None else self._cmp(attr, "=", x)[0]
                return t, sp.not_(t)
            case C.BoundCells(name):
                out = bound_cells(cond, self.table, self.params, self.budget)
                true, false = (merge_ranges([(i, i) for i, r in enumerate(out) if r is want]) for want in (True, False))
                return sp.cells(name, true), sp.cells(name, false)
            case C.Cells(name, true, false):
                return sp.cells(name, list(true)), sp.cells(name, list(false))
            case C.Mapped(name, values, oid, op, operand):
                return self._mapped(name, values, op, typed_value(operand, oid, self.params))
            case C.BoundTable(names):
                shape, results = bound_table(cond, self.table, self.params, self.budget)
                hits = [np.equal(results, np.array(want, dtype=object)) & ~nulls(results) for want in (True, False)]
                return sp.table(names, hits[0].reshape(shape)), sp.table(names, hits[1].reshape(shape))
            case C.Table(names, shape, true, false):
                return sp.table(names, mask(shape, true)), sp.table(names, mask(shape, false))
            case C.IsNull(name):
                base = self.base(self._attr(name))
                return sp.not_(base), base
        raise AssertionError(cond)

    def _mapped(self, name: str, values: tuple[object, ...], op: str, x: Any) -> TF:
        """Cells where ``value op x`` is TRUE and where it is FALSE (NULL values and a NULL x: neither)."""
        if x is None:
            return False, False
        self.budget.tick(len(values))
        like = FUNCTIONS[op] if op in ("like", "ilike") else None  # col LIKE $1: LIKE on each cell's value
        out = [compare(op, v, x) if like is None else like([v, x], BOOL) for v in values]
        true, false = (merge_ranges([(i, i) for i, r in enumerate(out) if r is want]) for want in (True, False))
        return self.space.cells(name, true), self.space.cells(name, false)

    def _attr(self, name: str) -> Attribute:
        attr = self.table.attribute(name)
        assert attr is not None
        return attr

    def where(self, cond: C.Cond | None) -> Pred:
        return True if cond is None else self.tf(cond)[0]


def bind(t: Template, params: Sequence[object], budget: Budget | None = None,
         selected: frozenset[tuple[int, ...]] | None = None) -> QueryPlan:
    """Build the QueryPlan: one linear query per (group of the public domain, aggregate).

    ``selected``: the cells (index tuples over the GROUP BY attributes) a partition selection released for
    this value list's filter; only groups covering one of them are listed."""
    budget = budget if budget is not None else Budget(Limits())
    needed = max(t.param_types, default=0)
    if needed > len(params):
        raise missing(params, needed, at_least=False)
    for param in t.post_params():
        if param.index <= len(params):
            coerce_param(params[param.index - 1], param.oid)  # a bad HAVING value fails now, before a release
    finer = split_table(t.table, [t.where, *(spec.filter for spec in t.aggs)],
                        lambda o, a: operand_value(o, a, params), lambda p: array_value(p, params))
    if finer is not None:  # literals inside cells: this statement's finer partition (parser/bind/splits.py)
        t = replace(t, table=finer)
    b = Binder(t.table, params, budget)
    sp = b.space
    base = b.where(t.where)
    # COUNT(DISTINCT col) counts stored values, not cells: a private-keys column may be counted.
    if private_columns(t.table, [spec.attr for spec in t.aggs if spec.attr is not None and spec.kind != "distinct"]):
        raise Refusal(E.FEATURE_NOT_SUPPORTED, "an aggregate over a column with private keys is not supported",
                      hint="Group by the column: its keys are released by DP partition selection.")
    private = private_columns(t.table, t.group_attrs)
    _check_joint(t, private)
    if len(set(private)) > 1:  # refused before anything is selected or charged
        raise Refusal(E.FEATURE_NOT_SUPPORTED, "GROUP BY more than one column with private keys is not supported",
                      hint="Group by one private-keys column (with any public ones).")
    if private:
        raise NeedsPartition(partition_request(t.table, private[:1], sp, base))
    joint = GroupCells(t.table, sp, budget)  # one cache of group restrictions for the limit and the queries
    t = within_limit(t, joint.restrict, base, selected, budget.limits.max_groups)
    agg_preds = []
    for spec in t.aggs:
        p = base if spec.filter is None else sp.and_(base, b.where(spec.filter))
        if spec.kind == "count" and spec.attr is not None:
            p = sp.and_(p, b.base(b._attr(spec.attr)))  # COUNT(col) skips NULL cells
        agg_preds.append(p)
    derived = {i: DistinctQueries(t, sp, p, spec.attr) for i, (spec, p) in enumerate(zip(t.aggs, agg_preds, strict=True))
               if spec.kind == "distinct"}
    if not t.aggs and t.groups and selected is None and filtered_elsewhere(t, sp.support(base)):
        # Which values occur where another column has some value is data: DP partition selection.
        if any(d.attrs for d in t.groups):
            raise Refusal(E.FEATURE_NOT_SUPPORTED, "a value list of an expression over several columns, filtered "
                          "on other columns, is not supported",
                          hint="Add an aggregate (count(*)), or filter only on the columns the expression reads.")
        raise NeedsPartition(value_list_request(t.table, t.group_attrs, sp, base))
    if t.select_groups and selected is None:
        # Too many combinations to list: DP partition selection picks the ones holding rows under the WHERE.
        raise NeedsPartition(replace(value_list_request(t.table, t.group_attrs, sp, base), purpose="groups",
                                     n_groups=t.n_groups))
    queries: list[LinearQuery] = []
    index: dict[LinearQuery, int] = {}
    slots: list[list[int]] = []
    factors: list[list[float]] = []
    groups = []
    limit = count(t.limit, params, "LIMIT")
    # LIMIT 0 (how Tableau and others ask for a query's columns) shows no row whatever is measured: measure
    # nothing, so describing an aggregate costs nothing.
    listed = selected_groups(t, selected) if t.select_groups and selected is not None else \
        zip(all_groups(t), group_indices(t), strict=True)
    for (key, cells), at in listed if limit != 0 else []:
        if t.groups:
            # A group the WHERE clause excludes by its own text is a known zero, not data: omitted (a pie
            # filtered with IN shows only its slices). Groups that merely might be empty stay.
            gp = base
            for gattr, granges in cells:
                gp = joint.restrict(gp, gattr, granges)
            if gp is False:
                continue
            if selected is not None and not covers(cells, selected):
                continue  # not released by the partition selection
        groups.append((key, cells))
        row, frow = [], []
        for i, (spec, p) in enumerate(zip(t.aggs, agg_preds, strict=True)):
            for gattr, granges in cells:
                p = joint.restrict(p, gattr, granges)
            budget.add_boxes(sp.count_boxes(p))
            if i in derived:
                q, factor = derived[i].query(at, p is False), 1.0
            else:
                summed = spec.kind == "sum"
                q, factor = unit(make_linear_query(t.table, sp, p, spec.attr if summed else None,
                                                   weights=spec.weights if summed else None,
                                                   expr=spec.expr if summed else None))
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
        columns=tuple(Column(e.name, e.oid) for e in t.outputs),
        template=t,
        group_keys=tuple(k for k, _ in groups),
        slots=tuple(tuple(r) for r in slots),
        factors=tuple(tuple(f) for f in factors),
        params=tuple(params),
        limit=limit,
        offset=count(t.offset, params, "OFFSET"),
    )


def _check_joint(t: Template, private: Sequence[str]) -> None:
    """What a joint GROUP BY dimension (an expression over several columns) cannot take part in yet."""
    joint = [d for d in t.groups if d.attrs]
    if not joint:
        return
    if any(a in private for d in joint for a in d.attrs):
        raise Refusal(E.FEATURE_NOT_SUPPORTED, "a GROUP BY expression over a column with private keys and other "
                      "columns is not supported", hint="Group by the private-keys column itself.",
                      position=position_of(joint[0].node))
