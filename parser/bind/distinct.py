"""COUNT(DISTINCT): derived histograms of a protected table whose cells are a statement's groups.

``COUNT(DISTINCT unit) ... GROUP BY g`` is not a linear function of the row histogram (a unit with rows in
two cells of one group counts once), but it is one cell of a *units-present histogram*: per group of the
statement, the number of privacy units with at least one row in it among the rows its WHERE/FILTER keeps,
each unit counted in at most g = ``table.unit_cells`` groups (chosen by a seeded hash of the group). One
unit moves at most g cells by 1 each.

``COUNT(DISTINCT col)`` is one cell of a *distinct-values histogram*: per group, the number of distinct
(group, value of col) pairs among the kept rows, each unit keeping at most g such pairs. Adding or removing
a unit adds or removes at most its g pairs, so it moves the histogram by a non-negative vector of total at
most g. That holds whatever the column's type or domain (only the per-group counts leave the database), so
it also counts a measure's, a timestamp's or a private-keys column's distinct stored values. Where each
cell of the column's domain holds one value (a public list, integers, booleans, days) the value counted is
the row's cell (``parser.pushdown.cellsql.counted_expr``: the stored value itself when it is in the
domain), so a unit adds at most min(g, values the group's rows can hold) to a group
(``parser.bind.distinct_caps``).

Both are histograms of the table derived by a fixed transformation, so each is a virtual
:class:`TableSchema` whose attributes are the group axes and whose ``unit_rows`` is g: the engine measures
linear queries over it, computes their sensitivity (``lapras.mechanisms.sensitivity``), and plans P's over
it, like any other table. Two statements with the same rows kept (canonical WHERE), the same grouping and
the same counted column name the same derived table (a digest of that definition), so their answers are
one release.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from ..analysis.template import Template
from ..coltypes import IntType
from ..model.linear import LinearQuery, make_linear_query
from ..model.predicate import Pred, Ranges, Space
from ..model.schema import Attribute, TableSchema

__all__ = ["Axis", "Derived", "DistinctQueries", "derived_table"]


@dataclass(frozen=True)
class Axis:
    """One group axis: the base attribute and, per group key (in order), the cells it covers."""

    attr: str
    cells: tuple[Ranges, ...]
    joint: tuple[LinearQuery, ...] = ()  # a joint dimension (analysis/joint.py): each key's cells as a count

    def plain(self, base: TableSchema) -> bool:
        """Key i is cell i of a non-nullable attribute, for every cell (a plain ``GROUP BY col``)."""
        if self.joint:
            return False
        a = base.attribute(self.attr)
        assert a is not None
        d = a.domain
        return not d.nullable and len(self.cells) == d.size and all(r == ((i, i),) for i, r in enumerate(self.cells))


@dataclass(frozen=True)
class Derived:
    """The definition of a derived histogram: what it counts, over which rows, per which groups."""

    base: TableSchema
    counted: str | None  # None: privacy units present; else the attribute whose distinct values are counted
    within: LinearQuery | None  # a count over the base whose predicate keeps the rows (None: every row)
    axes: tuple[Axis, ...]

    @property
    def label(self) -> str:
        return f"count(distinct {self.counted if self.counted is not None else self.base.privacy_unit or 'row'})"

    def digest(self) -> str:
        # Axes are written with their values: a selected key set (partition selection) names its keys.
        axes = []
        for a in self.axes:
            if a.joint:  # written with values too: the keys' cells as canonical keys
                axes.append(f"{a.attr}:" + ";".join(q.key for q in a.joint))
                continue
            attr = self.base.attribute(a.attr)
            assert attr is not None
            axes.append(f"{a.attr}:" + ";".join(attr.domain.format_ranges(rs) for rs in a.cells))
        text = "|".join([self.base.qualified_name, self.label, self.within.key if self.within else "all", *axes])
        return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


def derived_table(d: Derived) -> TableSchema:
    """The virtual table of ``d``: axes ``g0, g1, ...`` (group indices); one unit moves at most
    ``base.unit_cells`` of its counts by 1."""
    attrs = [Attribute(f"g{i}", IntType(0, len(ax.cells) - 1)) for i, ax in enumerate(d.axes)]
    name = f"{d.base.name}|{d.label}|{d.digest()}"
    return TableSchema(name, tuple(attrs), d.base.schema, privacy_unit=d.base.privacy_unit,
                       max_rows_per_unit=d.base.unit_cells, derived=d)


class DistinctQueries:
    """The COUNT(DISTINCT) queries of one aggregate of a bound statement: one derived table (built once),
    one linear query per group: the cell of that group."""

    def __init__(self, t: Template, space: Space, rows: Pred, counted: str | None) -> None:
        self.empty = rows is False
        within = None if rows is True or rows is False else make_linear_query(t.table, space, rows)
        # Axes in a canonical order (by attribute, then cells), not the GROUP BY's: ``GROUP BY a, b`` and
        # ``GROUP BY b, a`` count over one derived table, so their queries are one set (a repeat is free).
        axes = [Axis(d.attr, d.cells, _joint_cells(t.table, space, d.attrs, d.cells) if d.attrs else ())
                for d in t.groups]
        self.order = sorted(range(len(axes)), key=lambda i: (axes[i].attr, repr(axes[i].cells)))
        self.table = derived_table(Derived(t.table, counted, within, tuple(axes[i] for i in self.order)))
        names = [a.name for a in self.table.attributes]
        self.space = Space(sorted(names), [self.table.shape((n,))[0] for n in sorted(names)])

    def query(self, at: tuple[int, ...], empty: bool) -> LinearQuery:
        """The query of the group with key indices ``at``; ``empty``: the statement's rows miss it."""
        sp = self.space
        cells = [at[i] for i in self.order]  # the group's key index along each canonical axis
        pred: Pred = False if self.empty or empty else sp.all_of([sp.cells(f"g{j}", [(k, k)])
                                                                  for j, k in enumerate(cells)])
        q = make_linear_query(self.table, sp, pred)
        object.__setattr__(q, "source", self.table)
        return q


def _joint_cells(table: TableSchema, space: Space, attrs: tuple[str, ...], cells: tuple[Ranges, ...]
                 ) -> tuple[LinearQuery, ...]:
    """Each key of a joint dimension (runs over the product of ``attrs``' cells) as a count over the table:
    its canonical key names the axis, its predicate is the axis's SQL."""
    shape = table.shape(attrs)
    free = space.with_budget(None)  # masks are vectorised: charged by their runs, as the binder charges them
    out = []
    for runs in cells:
        if space.budget is not None:
            space.budget.tick(10 * len(runs))
        flat = np.zeros(int(np.prod(shape)), dtype=bool)
        for lo, hi in runs:
            flat[lo:hi + 1] = True
        out.append(make_linear_query(table, space, free.table(attrs, flat.reshape(shape))))
    return tuple(out)
