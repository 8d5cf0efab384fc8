"""Per-row expressions over several columns, evaluated on the joint cells of the columns they read.

WHERE ``n + k > 10`` and GROUP BY ``CASE WHEN age < 30 AND sex = 1 THEN 'young m' ELSE 'other' END`` or
``concat(category, '-', country)`` are deterministic functions of a row's cells of those columns, so they
are evaluated once per combination of the columns' declared cells (vectorised by the scalar evaluator):
a condition becomes the set of combinations where it is TRUE (``condition.Table``), a grouping expression
one group per distinct value, each the set of combinations mapping to it (a joint ``GroupDim``). The
groups are disjoint sets of cells like any other grouping, so the engine's sensitivities hold as they are.

Work is bounded: at most ``MAX_PRODUCT`` combinations, and for GROUP BY at most ``MAX_GROUP_WORK``
combinations times groups (each group's cell set is built from a mask over the product); beyond them
54000 with a hint. One column whose cells hold many values (an hourly timestamp, a binned measure) may take
part if the expression is constant over each of its cells for every value of the others (the check
``on_cells`` makes for one column); two such columns are refused.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import numpy as np
from sqlglot import exp

from pgcore import errors as E
from pgcore.errors import Refusal
from pgcore.pgtypes import FLOAT8, NUMERIC

from .. import scalar as S
from ..model.schema import Attribute
from ..syntax.parse import position_of
from .cells import constant_per_cell, cuts_cells
from .nodes import sql_of, unsupported
from .template import GroupDim

MAX_PRODUCT = 1_000_000
"""An expression over several attributes is evaluated on at most this many combinations of their cells."""
MAX_GROUP_WORK = 20_000_000
"""A GROUP BY expression over several attributes: at most this many combinations times distinct values."""


def product_shape(attrs: list[Attribute], budget: Any, node: exp.Expr, what: str) -> tuple[int, ...]:
    """The shape of the attributes' product, refused when ``node`` cannot be evaluated on it: more than
    ``MAX_PRODUCT`` combinations, or two columns holding many values a cell."""
    coarse = [a for a in attrs if a.domain.last_values() is not None]
    if len(coarse) > 1:
        names = " and ".join(a.name for a in coarse)
        raise unsupported(f"{what} {sql_of(node)!r} over {names}", node,
                          hint=f"{names} hold many values a cell: one of them at most may take part in an "
                          "expression over several columns.")
    shape = tuple(a.domain.size for a in attrs)
    size = int(np.prod(shape))
    if size > MAX_PRODUCT:
        names = ", ".join(a.name for a in attrs)
        raise Refusal(E.PROGRAM_LIMIT_EXCEEDED, f"{what} {sql_of(node)!r} spans {size:,} combinations of "
                      f"{names} (at most {MAX_PRODUCT:,})", position=position_of(node),
                      hint=f"Group by {names} themselves and combine the keys in the SELECT list, or use a "
                      "coarser expression." if what.startswith("GROUP BY") else
                      "Filter each column on its own, or on coarser expressions.")
    budget.tick(size)
    return shape


def product_values(e: S.Expr, attrs: list[Attribute], budget: Any, node: exp.Expr,
                   what: str, params: list[object] | None = None) -> tuple[tuple[int, ...], np.ndarray]:
    """``e`` on every combination of the attributes' cells (row-major over ``attrs`` in the given order):
    the product's shape and one value per combination (an object array); ``params``: the bound parameters
    ``e`` reads (a condition bound at Bind)."""
    shape = product_shape(attrs, budget, node, what)
    size = int(np.prod(shape))
    coarse = [a for a in attrs if a.domain.last_values() is not None]
    cells: dict[str, list[Any]] = {}
    for i, a in enumerate(attrs):
        vals = S.objects(a.domain.cell_values)
        inner, outer = int(np.prod(shape[i + 1:])), int(np.prod(shape[:i]))
        cells[a.name] = np.tile(np.repeat(vals, inner), outer).tolist()
    try:
        bound = params or ()
        out = S.objects(e.ev(S.Env(size, cells, strict=True, params=bound)))
        if coarse:  # one value per combination: e must not cut the cells of the coarse column
            a = coarse[0]
            lasts = S.objects(a.domain.last_values() or [])
            i = attrs.index(a)
            inner, outer = int(np.prod(shape[i + 1:])), int(np.prod(shape[:i]))
            ends = dict(cells, **{a.name: np.tile(np.repeat(lasts, inner), outer).tolist()})
            if not constant_per_cell(e, S.Env(size, cells, params=bound), S.Env(size, ends, params=bound), budget,
                                     a.name):
                raise cuts_cells(what, node, a)
    except Refusal as r:
        r.position = r.position or position_of(node)
        raise
    return shape, out


def hashable(v: Any) -> object:
    """A key value as a dict key: equal numerics of different scales (1.0, 1.00) are one group."""
    if isinstance(v, Decimal):
        return v.normalize() if v == v.to_integral_value() else v
    return v


def ordered_keys(keys: list[object], oid: int) -> list[object]:
    """Group keys in PostgreSQL's order (NULL last), as they go out (typed as their column: float8 as
    floats, numeric as decimals)."""
    keys = sorted(keys, key=lambda k: (1, 0) if k is None else (0, k))
    return [None if k is None else _as_type(k, oid) for k in keys]


def _as_type(k: object, oid: int) -> object:
    if oid == FLOAT8:
        return float(k)  # type: ignore[arg-type]
    if oid == NUMERIC and isinstance(k, int | float) and not isinstance(k, bool):
        return Decimal(str(k))
    return k


def joint_dim(e: S.Expr, attrs: list[Attribute], oid: int, node: exp.Expr, budget: Any,
              max_groups: int) -> GroupDim:
    """A GROUP BY expression over several attributes (``attrs`` in the space's order): one group per
    distinct value over the product of their declared cells, each the runs of flat product indices that
    map to it."""
    shape, out = product_values(e, attrs, budget, node, "GROUP BY expression")
    index: dict[object, int] = {}
    codes = np.fromiter((index.setdefault(hashable(v), len(index)) for v in out), dtype=np.int64, count=len(out))
    names = ", ".join(a.name for a in attrs)
    if len(index) > max_groups:
        raise Refusal(E.PROGRAM_LIMIT_EXCEEDED, f"GROUP BY expression {sql_of(node)!r} has {len(index):,} "
                      f"distinct values over the cells of {names}, more than the limit of {max_groups:,}",
                      position=position_of(node), hint="Group by a coarser expression.")
    work = len(out) * len(index)
    if work > MAX_GROUP_WORK:
        raise Refusal(E.PROGRAM_LIMIT_EXCEEDED, f"GROUP BY expression {sql_of(node)!r} has {len(index):,} "
                      f"distinct values over {len(out):,} combinations of {names}: {work:,} units of work, more "
                      f"than the limit of {MAX_GROUP_WORK:,}", position=position_of(node),
                      hint=f"Group by {names} themselves and combine the keys in the SELECT list, or by a "
                      "coarser expression.")
    budget.tick(len(out))
    # Flat indices sorted by group, then split: each group's indices in order, as runs.
    order = np.argsort(codes, kind="stable")
    bounds = np.searchsorted(codes[order], np.arange(len(index) + 1))
    by_key: dict[object, tuple[tuple[int, int], ...]] = {}
    for k, code in index.items():
        idx = order[bounds[code]:bounds[code + 1]]  # ascending: the sort is stable
        cut = np.flatnonzero(np.diff(idx) != 1)
        starts, ends = np.concatenate(([0], cut + 1)), np.concatenate((cut, [len(idx) - 1]))
        by_key[k] = tuple((int(idx[a]), int(idx[b])) for a, b in zip(starts, ends, strict=True))
    keys = ordered_keys(list(by_key), oid)
    raw = sorted(by_key, key=lambda k: (1, 0) if k is None else (0, k))
    label = "(" + ", ".join(a.name for a in attrs) + ")"
    return GroupDim(label, tuple(keys), tuple(by_key[k] for k in raw), oid, node,
                    attrs=tuple(a.name for a in attrs), shape=shape)
