"""Scalar expressions over a column's public cells: the value of a bucket or filter expression on every
cell of the attribute's domain (cached per domain: dashboards repeat the same buckets), and the check that
an expression takes one value over each cell (else it would cut the cells and is refused)."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from sqlglot import exp

from pgcore import errors as E
from pgcore.errors import Refusal

from .. import scalar as S
from ..model.limits import Budget
from ..model.schema import Attribute
from ..semantics import session_zone
from ..syntax.parse import position_of
from .nodes import sql_of
from .zoned import ZONE_HINT as SESSION_ZONE_HINT


def on_cells(e: S.Expr, attr: Attribute, budget: Budget, node: exp.Expr, what: str) -> list[Any]:
    """``e`` (over ``attr`` only) on every cell of the attribute's public domain, one value a cell.

    Where a cell holds many values (a timestamp's hour), ``e`` must be constant over every cell, else the
    cell would be cut: refused with a hint naming the resolution, never rounded. It is when every step
    from the column up to the first sub-expression equal at both ends of every cell is monotone
    (date_trunc, extract, casts, arithmetic with constants, floor, ordering comparisons with constants).
    """
    d = attr.domain
    # Long expressions (IN lists of hundreds of values) are cheap to evaluate and costly to key by their text.
    cacheable = budget.now is None and sum(len(x.values) if isinstance(x, S.InList) else 1 for x in e.walk()) <= 64
    key = (d, attr.name, what, sql_of(node), session_zone.cache_tag()) if cacheable else None
    hit = _CELLS.get(key) if key is not None else None
    if hit is not None and key is not None:
        _CELLS.move_to_end(key)
        return hit
    values = d.cell_values
    budget.tick(len(values))
    try:
        results = e.ev(S.Env(len(values), {attr.name: values}, strict=True))
        lasts = d.last_values()
        if lasts is not None:
            starts, ends = S.Env(len(values), {attr.name: values}), S.Env(len(lasts), {attr.name: lasts})
            if not constant_per_cell(e, starts, ends, budget):
                raise cuts_cells(what, node, attr)
    except Refusal as r:
        r.position = r.position or position_of(node)
        raise
    if key is not None:  # an expression reading now() differs from one statement to the next
        _CELLS[key] = results
        while len(_CELLS) > _CELLS_MAX:
            _CELLS.popitem(last=False)
    return results


# Dashboards repeat the same buckets (date_trunc('day', ts)) in many statements: their per-cell values are
# kept for the domain, whatever the statement (a few hundred entries of one value a cell).
_CELLS: OrderedDict[tuple[Any, ...], list[Any]] = OrderedDict()
_CELLS_MAX = 256


def clear_cell_cache() -> None:
    """Forget the per-cell values of bucket expressions (benchmarks measure cold planning with it)."""
    _CELLS.clear()


_MONOTONE_CALLS = {"date_trunc", "extract", "floor", "ceil", "round", "to_timestamp"}


def _monotone(e: S.Expr) -> bool:
    """``e`` is monotone in its one non-constant argument within a cell (cells never cross midnight)."""
    if isinstance(e, S.Cast | S.Neg | S.AtZone):  # AT TIME ZONE: unless a cell holds a step back (_state)
        return True
    if isinstance(e, S.Call):
        # to_char is not monotone ('MM' repeats every year), but each of its fields (parser.semantics.tochar: year,
        # quarter, month and its names, week, day and its names, hour, AM/PM, minute, second, fractions) is
        # constant on a cell at least as long as its unit and differs between a cell's first and last
        # instant otherwise (0 vs 59, 00 vs 23, 12 vs 11 for HH12, AM vs PM, 000 vs 999): comparing the two
        # ends decides it, as for a monotone step (cells are at most a day).
        return e.fn in _MONOTONE_CALLS or e.fn == "to_char"
    if isinstance(e, S.Arith):
        return e.op in "+-" or isinstance(e.args[1], S.Const) or (e.op == "*" and isinstance(e.args[0], S.Const))
    if isinstance(e, S.Cmp):
        return e.op in ("<", "<=", ">", ">=")
    return False


# Over every cell: one value; not one value; a time zone's step back inside a cell (a fall-back), below which no
# ancestor may be judged by the ends of the cells: the ends could agree while the inside of a cell differs.
_CONSTANT, _VARYING, _UNORDERED = 0, 1, 2


def constant_per_cell(e: S.Expr, starts: S.Env, ends: S.Env, budget: Budget, varying: str | None = None) -> bool:
    """True when ``e`` takes one value over every cell (see ``on_cells``); raises nothing. ``varying``: the
    one attribute whose cells hold many values, the others' cells being one value each (``joint.py``:
    each row of ``starts`` / ``ends`` is a combination of cells); None: every cell read varies."""
    return _state(e, starts, ends, budget, varying) == _CONSTANT


def _state(e: S.Expr, starts: S.Env, ends: S.Env, budget: Budget, varying: str | None) -> int:
    if isinstance(e, S.Cell):
        return _CONSTANT if varying is not None and e.attr != varying else _VARYING
    if not any(isinstance(x, S.Cell) and (varying is None or x.attr == varying) for x in e.walk()):
        return _CONSTANT
    if isinstance(e, S.IsNull) and isinstance(_uncast(e.args[0]), S.Cell):
        return _CONSTANT  # NULL is a cell of its own: the other cells hold non-NULL values only
    inner = [_state(a, starts, ends, budget, varying) for a in e.args]
    moving = sum(c != _CONSTANT for c in inner)
    if _UNORDERED in inner or (moving and isinstance(e, S.AtZone) and not e.monotone(starts, ends)):
        return _UNORDERED
    if moving and (not _monotone(e) or moving > 1):
        return _VARYING
    budget.tick(2 * starts.n)
    return _CONSTANT if e.ev(starts) == e.ev(ends) else _VARYING


def _uncast(e: S.Expr) -> S.Expr:
    """``e`` without the steps that keep NULL and only NULL NULL: casts, AT TIME ZONE a constant zone."""
    while isinstance(e, S.Cast) or (isinstance(e, S.AtZone) and isinstance(e.args[0], S.Const)
                                    and e.args[0].value is not None):
        e = e.args[-1]
    return e


def cuts_cells(what: str, node: exp.Expr, attr: Attribute) -> Refusal:
    """The refusal of an expression that is not constant on each cell of ``attr`` (an hourly timestamp cut
    by minutes): answering it would need the rows inside a cell."""
    d = attr.domain
    return Refusal(E.FEATURE_NOT_SUPPORTED, f"{what} {sql_of(node)!r} cuts the cells of column {attr.name} "
                   f"(cells of {d.coarseness()})", position=position_of(node),
                   hint=d.whole_cells_hint(attr.name) + (_ZONE_HINT if _zoned(node) else "")
                   + (" " + SESSION_ZONE_HINT if session_zone.current() is not None else ""))


_ZONE_HINT = (" AT TIME ZONE shifts the cells by the zone's offset: the result must still fall on whole cells "
              "(zones off the hour cut hourly cells; a zone other than UTC cuts day cells).")


def _zoned(node: exp.Expr) -> bool:
    return any(isinstance(n, exp.AtTimeZone) or (isinstance(n, exp.Anonymous) and n.name.lower() == "timezone")
               for n in node.walk())
