"""Per-row values inside aggregates: an aggregate's argument compiled by the one scalar compiler and turned
into what the linear queries read.

Over declared cells the value is a per-cell weight (``SUM(s * s)``, ``SUM(COALESCE(n, 0))``,
``SUM(CAST(flag AS INT))``): evaluated on every cell of the attribute's public domain, vectorised, so a
SUM is one linear query whose sensitivity is its largest |weight| (computed from the domain, times the
privacy unit's row bound in the engine). An expression over several attributes is split over the cells of
all but the largest one (each part a filtered SUM; rows of different parts are disjoint). Over a measure
(numeric / float, whose rows carry their own clamped values) the value must be affine, ``a * x + b`` (and a
constant where x is NULL, for COALESCE): it is ``a * SUM(x) + b * COUNT(x) + c * COUNT(x IS NULL)``, post-
processing of measured slots, so its sensitivity stays the clamp's. Anything else over a measure is
refused: its bound over the clamp range is not computed here.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import numpy as np
from sqlglot import exp

from pgcore import errors as E
from pgcore import pgtypes as T
from pgcore.errors import Refusal

from .. import scalar as S
from ..model.predicate import merge_ranges
from ..model.schema import Attribute
from ..semantics.values import INTEGER_OIDS, NUMBER_OIDS
from ..syntax.parse import position_of
from . import condition as C
from . import measure_expr as ME
from .cells import on_cells
from .context import Context
from .nodes import sql_of, unsupported
from .scalars import NotScalar, compile_scalar

MAX_SPLIT = 256
"""An expression over several attributes is split over at most this many cells of the smaller ones."""


@dataclass(frozen=True)
class CellPart:
    """Per-cell values of ``attr`` (None: NULL) on the rows where ``where`` holds (None: all)."""

    attr: str
    values: tuple[Any, ...]
    where: C.Cond | None


@dataclass(frozen=True)
class Affine:
    """``a * x + b`` over measure ``attr``; ``null`` is the value where x is NULL (None: NULL)."""

    attr: str
    a: float
    b: float
    null: float | None


@dataclass(frozen=True)
class MeasureExpr:
    """Any other expression over measures (``parser.analysis.measure_expr``): pushed down as ``sql`` (over
    clamped measures and cell values); ``bounds`` the largest |value| a row can add in each cell of
    ``carrier`` (its first measure); [lo, hi] every value it can take; ``null`` whether it can be NULL."""

    carrier: str
    sql: str
    bounds: tuple[float, ...]
    lo: float
    hi: float
    null: bool


@dataclass(frozen=True)
class RowValue:
    """A compiled aggregate argument: cell parts, an affine form of a measure or another expression over
    measures; ``oid`` its SQL type."""

    oid: int
    parts: tuple[CellPart, ...] = ()
    affine: Affine | None = None
    expr: MeasureExpr | None = None


def _hint(kind: str) -> str:
    return (f"{kind} takes a per-row expression over declared columns (arithmetic, CASE, COALESCE, CAST, "
            "functions of one row); over a numeric or float measure only a * x + b.")


def row_value(node: exp.Expr, kind: str, ctx: Context) -> RowValue:
    """The per-row value ``node`` inside aggregate ``kind`` (SUM, AVG, COUNT)."""
    attrs: dict[str, Attribute] = {}
    try:
        e = compile_scalar(node, lambda n: ctx.cell_leaf(n, attrs), ctx.budget, exact=True)
    except NotScalar as u:
        raise unsupported(f"expression {sql_of(u.node)!r} inside {kind}", u.node, hint=_hint(kind)) from None
    except Refusal as r:
        r.position = r.position or position_of(node)
        raise
    if kind != "COUNT" and e.oid not in NUMBER_OIDS | {T.UNKNOWN}:
        raise Refusal(E.UNDEFINED_FUNCTION, f"function {kind.lower()}({T.type_name(e.oid)}) does not exist",
                      position=position_of(node), hint=f"{kind} needs a numeric value; CAST(flag AS INT) reads a "
                      "boolean as 0 / 1.")
    measures = [a for a in attrs.values() if a.domain.measure]
    if measures:
        form = _affine(e) if len(attrs) == 1 else None
        if form is not None:
            a, b, null = form
            return RowValue(e.oid, affine=Affine(measures[0].name, a, b, null))
        return RowValue(e.oid, expr=_measure_expr(e, node, sorted(measures, key=lambda m: m.name), attrs, kind, ctx))
    if not attrs:
        raise NotScalar(node)  # a constant: the caller's own forms (SUM(1), COUNT(NULL))
    return RowValue(e.oid, parts=_cell_parts(e, list(attrs.values()), node, kind, ctx))


def _measure_expr(e: S.Expr, node: exp.Expr, measures: list[Attribute], attrs: dict[str, Attribute], kind: str,
                  ctx: Context) -> MeasureExpr:
    """The expression pushed down as written, with its bound per cell of its first measure."""
    carrier = measures[0]
    others = {a.name: ME.whole(a) for a in measures[1:]}
    cells = {a.name: list(a.domain.cell_values) for a in attrs.values() if not a.domain.measure}
    per_cell = []
    try:
        for iv in ME.carrier_cells(carrier):
            per_cell.append(ME.bound(e, {carrier.name: iv, **others}, cells))
    except ME.Unbounded as u:
        raise unsupported(f"expression {sql_of(node)!r} inside {kind}: {u.why}", node,
                          hint=f"{carrier.name} is a measure: the bound of one row's value is computed from the "
                          "clamp ranges by interval arithmetic (arithmetic, ABS, CASE, COALESCE, NULLIF, casts, "
                          "GREATEST / LEAST, ROUND, SQRT of non-negative ranges, division by non-zero ranges).") from None
    total = ME._union(per_cell)
    if any(lit.is_string and any(ord(ch) < 32 and ch not in "\t\n\r" for ch in str(lit.this))
           for lit in node.find_all(exp.Literal)):  # the SQL generator would not write them back as written
        raise unsupported(f"expression {sql_of(node)!r} inside {kind}: a text literal with control characters",
                          node)
    columns = [ctx.column(c) for c in node.find_all(exp.Column)]
    return MeasureExpr(carrier.name, ME.pushed_sql(node, columns), tuple(c.max_abs for c in per_cell),
                       total.lo, total.hi, total.null)


def _cell_parts(e: S.Expr, attrs: list[Attribute], node: exp.Expr, kind: str, ctx: Context) -> tuple[CellPart, ...]:
    """Per-cell values of ``e`` over the largest attribute, one part per cell combination of the others."""
    attrs = sorted(attrs, key=lambda a: (-a.domain.size, a.name))
    main, others = attrs[0], attrs[1:]
    if not others:
        return (CellPart(main.name, tuple(on_cells(e, main, ctx.budget, node, f"value inside {kind}")), None),)
    for a in attrs:
        if a.domain.last_values() is not None:
            raise unsupported(f"expression {sql_of(node)!r} over {a.name} and other columns inside {kind}", node,
                              hint=f"{a.name} holds many values a cell ({a.domain.coarseness()}); use it alone.")
    combos = math.prod(a.domain.size for a in others)
    if combos > MAX_SPLIT:
        raise Refusal(E.PROGRAM_LIMIT_EXCEEDED, f"expression {sql_of(node)!r} inside {kind} spans {combos} cells of "
                      f"{', '.join(a.name for a in others)} (at most {MAX_SPLIT})", position=position_of(node),
                      hint="Each cell of the smaller columns is a separate filtered sum; group by them instead.")
    values = main.domain.cell_values
    ctx.budget.tick(combos * len(values))
    parts = []
    for combo in itertools.product(*(range(a.domain.size) for a in others)):
        cells: dict[str, list[Any]] = {main.name: list(values)}
        conds: list[C.Cond] = []
        for a, i in zip(others, combo, strict=True):
            cells[a.name] = [a.domain.value_at(i)] * len(values)
            rest = merge_ranges([(0, i - 1), (i + 1, a.domain.size - 1)])
            conds.append(C.Cells(a.name, ((i, i),), rest))
        out = e.ev(S.Env(len(values), cells, strict=True))
        where = conds[0] if len(conds) == 1 else C.And(tuple(conds))
        parts.append(CellPart(main.name, tuple(out), where))
    return tuple(parts)


def _affine(e: S.Expr) -> tuple[float, float, float | None] | None:
    """(a, b, value where x is NULL) when ``e`` is ``a * x + b`` in its one measure x, else None."""
    if isinstance(e, S.Cell):
        return 1.0, 0.0, None
    if isinstance(e, S.Const):
        if isinstance(e.value, bool) or not isinstance(e.value, int | float | Decimal):
            return None
        c = float(e.value)
        return 0.0, c, c
    if isinstance(e, S.Neg):
        f = _affine(e.args[0])
        return None if f is None else (-f[0], -f[1], None if f[2] is None else -f[2])
    if isinstance(e, S.Cast):
        # Casts to numeric or float keep the value; to an integer they round (not affine).
        return _affine(e.args[0]) if e.oid in (T.NUMERIC, T.FLOAT8) else None
    if isinstance(e, S.Call) and e.fn == "coalesce" and len(e.args) == 2:
        f, g = _affine(e.args[0]), _affine(e.args[1])
        if f is None or g is None or g[0] != 0:
            return None
        return f[0], f[1], f[2] if f[2] is not None else g[2]
    if isinstance(e, S.Arith) and not e.temporal:
        f, g = _affine(e.args[0]), _affine(e.args[1])
        if f is None or g is None:
            return None
        if e.op in "+-":
            sign = 1.0 if e.op == "+" else -1.0
            null = None if f[2] is None or g[2] is None else f[2] + sign * g[2]
            return f[0] + sign * g[0], f[1] + sign * g[1], null
        if e.op == "*" and (f[0] == 0 or g[0] == 0) and e.oid not in INTEGER_OIDS:
            k, h = (f[1], g) if f[0] == 0 else (g[1], f)
            return k * h[0], k * h[1], None if h[2] is None else k * h[2]
        if e.op == "/" and g[0] == 0 and g[1] != 0 and e.oid not in INTEGER_OIDS:
            return f[0] / g[1], f[1] / g[1], None if f[2] is None else f[2] / g[1]
    return None


def weights(values: tuple[Any, ...]) -> tuple[float, ...]:
    """Per-cell values as SUM weights (NULL adds nothing)."""
    return tuple(0.0 if v is None else float(v) for v in values)


def non_null(part: CellPart) -> C.Cond:
    """The rows of ``part`` whose value is not NULL (what COUNT and AVG's denominator count)."""
    live = [(i, i) for i, v in enumerate(part.values) if v is not None]
    dead = [(i, i) for i, v in enumerate(part.values) if v is None]
    cells: C.Cond = C.Cells(part.attr, merge_ranges(live), merge_ranges(dead))
    return cells if part.where is None else C.And((part.where, cells))


def bounds(values: tuple[Any, ...]) -> tuple[float, float]:
    """Smallest and largest non-NULL value (AVG is clamped into them)."""
    live = np.array([float(v) for v in values if v is not None])
    return (float(live.min()), float(live.max())) if len(live) else (math.inf, -math.inf)
