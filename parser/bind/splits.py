"""Cells cut at a statement's literals: a finer partition for that statement only.

Grafana's ``$__timeFilter`` (``"ts" BETWEEN '2026-01-01T00:00:00Z' AND '2026-01-31T23:59:59Z'``), an inclusive
end on a cell boundary, or ``amount > 105`` inside a bin [100, 110) each cut a cell. The literals are the
analyst's SQL, public, so the statement is answered as written: ``split_table`` adds to the table, for each
column such a comparison cuts, a virtual axis (``coltypes.split.SplitType``) ranking each row's value among
the statement's cut points, and ``cut_compare`` writes a cutting comparison as the whole cells it covers plus,
in each cut cell, the ranks past (or before) its cut point. The pushed-down SQL reads the rank through the
comparisons themselves (``"amount" > 105``). Nothing here reads data.

Where the finer partition goes: the statement's linear queries (keys name a split axis ``col~cut`` with the
value intervals it keeps, so a query whose cells are whole declared cells keeps its usual key and may be
answered from the matrix mechanism's release or a stored answer; one that reads a split axis is answered
fresh), the exact answers and the contribution bound's row filter (both from the queries' cells), EXPLAIN
(``describe``). GROUP BY keeps the declared cells: a split only refines the filter. Only plain comparisons
of a column with a literal or parameter are split; an expression that cuts a cell (``date_trunc('minute',
ts)`` on hourly cells, a CASE in GROUP BY) is refused as before.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from typing import Any

from pgcore import errors as E
from pgcore.errors import Refusal
from pgcore.identifiers import MAX_NAME_BYTES, display_ident

from ..analysis import condition as C
from ..coltypes.base import ColumnType
from ..coltypes.split import Cut, SplitType
from ..model.predicate import Pred, Space
from ..model.schema import Attribute, TableSchema

MAX_CUTS = 64
"""Most cut points one statement may add (over all its columns): each is one more rank on an axis."""

Values = Callable[[C.Operand, Attribute], Any]


def cutting(attr: Attribute, op: str, x: Any) -> tuple[Cut, ...]:
    """The cut points of ``attr op x`` that fall inside a cell (none: the comparison is exact as it is)."""
    if x is None:
        return ()
    ths = attr.domain.thresholds(op, x)
    if not ths:
        return ()
    out = []
    for c in ths:
        a, b = attr.domain.cut_cells(c)
        if b > a:
            out.append(c)
    return tuple(out)


def _comparisons(cond: C.Cond | None, table: TableSchema, value: Values,
                 items: Callable[[C.Param], list[Any] | None]) -> Iterator[tuple[Attribute, str, Any]]:
    """Every (attribute, op, value) a condition compares an attribute with a constant by."""
    if cond is None:
        return
    match cond:
        case C.And(parts) | C.Or(parts):
            for p in parts:
                yield from _comparisons(p, table, value, items)
        case C.Not(part) | C.IsTrue(part):
            yield from _comparisons(part, table, value, items)
        case C.Compare(name, op, operand):
            attr = table.attribute(name)
            assert attr is not None
            yield attr, op, value(operand, attr)
        case C.NotDistinct(name, operand):
            attr = table.attribute(name)
            assert attr is not None
            yield attr, "=", value(operand, attr)
        case C.In(name, operands):
            attr = table.attribute(name)
            assert attr is not None
            if not splittable(attr):
                return  # a long IN list over a column never split (text, integers): nothing to look at
            for o in operands:
                yield attr, "=", value(o, attr)
        case C.AnyOf(name, op, operand):
            attr = table.attribute(name)
            assert attr is not None
            for v in items(operand) or ():
                yield attr, op, None if v is None else attr.domain.coerce_param(v)


def splittable(attr: Attribute) -> bool:
    """The column's type may cut cells at literals (binned measures and integers, timestamps)."""
    return type(attr.domain).thresholds is not ColumnType.thresholds


def split_name(column: str, cuts: Sequence[Cut]) -> str:
    """The split axis's attribute name: the column's, a digest of its cut points (caches keyed by names
    never mix two statements' cuts), padded past the 63 bytes a declared column's name may have."""
    digest = hashlib.blake2b(repr(tuple(cuts)).encode(), digest_size=8).hexdigest()
    name = f"{column}~cut~{digest}"
    return name + "~" * max(0, MAX_NAME_BYTES + 1 - len(name.encode("utf-8")))


def split_table(table: TableSchema, conds: Sequence[C.Cond | None], value: Values,
                items: Callable[[C.Param], list[Any] | None]) -> TableSchema | None:
    """``table`` with a split axis for each column the conditions' comparisons cut, or None when none does."""
    found: dict[str, set[Cut]] = {}
    for cond in conds:
        for attr, op, x in _comparisons(cond, table, value, items):
            cs = cutting(attr, op, x)
            if cs:
                found.setdefault(attr.name, set()).update(cs)
    if not found:
        return None
    total = sum(len(cs) for cs in found.values())
    if total > MAX_CUTS:
        cols = ", ".join(display_ident(n) for n in sorted(found))
        raise Refusal(E.PROGRAM_LIMIT_EXCEEDED, f"the statement's literals cut cells of {cols} at {total} points, "
                      f"more than the limit of {MAX_CUTS}",
                      hint="Compare with cell boundaries (bin edges, whole time cells), or use fewer literals.")
    extra = []
    for name in sorted(found):
        column = table.attribute(name)
        assert column is not None
        cuts = tuple(sorted(found[name]))
        extra.append(Attribute(split_name(name, cuts), SplitType(source=name, base=column.domain, cuts=cuts)))
    return replace(table, attributes=(*table.attributes, *extra), _by_name={})


def split_axes(table: TableSchema) -> dict[str, Attribute]:
    """Column name -> its split axis, for the columns ``table`` (a statement's) splits."""
    return {a.domain.source: a for a in table.attributes if isinstance(a.domain, SplitType)}


def has_splits(table: TableSchema) -> bool:
    """True when ``table`` is a statement's finer partition (``split_table``)."""
    return any(a.domain.virtual for a in table.attributes)


def cut_compare(space: Space, attr: Attribute, axis: Attribute, op: str, x: Any) -> Pred:
    """Cells (over the column and its split axis) where ``attr op x`` is TRUE: whole cells, and in a cut
    cell the ranks past (or before) the cut point."""
    dom, split = attr.domain, axis.domain
    assert isinstance(split, SplitType)
    n, m = dom.base_size, len(split.cuts)
    base = space.cells(attr.name, [(0, n - 1)])

    def passed(c: Cut) -> Pred:
        a, b = dom.cut_cells(c)
        p: Pred = space.cells(attr.name, [(b, n - 1)]) if b < n else False
        if b > a:
            rank = split.cuts.index(c)
            part = space.and_(space.cells(attr.name, [(a, a)]), space.cells(axis.name, [(rank + 1, m)]))
            p = space.or_(p, part)
        return p

    ths = dom.thresholds(op, x)
    assert ths is not None  # a cutting comparison (``cutting``) has cut points
    if op in (">=", ">"):
        return passed(ths[0])
    if op in ("<", "<="):
        return space.diff(base, passed(ths[0]))
    equal = space.diff(passed(ths[0]), passed(ths[1]))
    return equal if op == "=" else space.diff(base, equal)


def describe(table: TableSchema) -> list[str]:
    """EXPLAIN's lines for a statement whose literals cut cells."""
    axes = split_axes(table)
    if not axes:
        return []
    lines = ["  cells split at the statement's literals (this statement only; a query reading a split cell is "
             "answered fresh, not from P's release):"]
    for name, axis in sorted(axes.items()):
        d = axis.domain
        assert isinstance(d, SplitType)
        points = ", ".join(("> " if c.strict else ">= ") + d.base.format_cut(c) for c in d.cuts)
        lines.append(f"    {display_ident(name)}: {points}")
    return lines
