"""Per-unit contribution bounding in SQL: each privacy unit's rows cut to k, the same k in every process.

``bounded_rows_sql`` is the one definition of the rows kept (a ``row_number()`` window per unit over a
seeded hash of the row's text); ``table_ref`` is how every exact answer reads a table: its rows as they
are (no privacy unit), the window over them (``[lapras] bounding = "live"``), or the epoch's
materialisation of that window (``TableSchema.rows_from``, written by ``lapras.bounded``), which holds
exactly the rows the window keeps. With ``bounding = "statement"`` the window runs over the rows a
statement reads (``where``: its row filter, a public predicate) so a unit's k rows are among those rows
(docs/bounding.md); ``statement_rows`` is that FROM item.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, replace

from pgcore.identifiers import quote_ident

from ..model.linear import LinearQuery
from ..model.predicate import Ranges, merge_ranges
from ..model.schema import TableSchema
from .cellsql import attr_condition, cell_expr

__all__ = ["GroupAxis", "bounded_rows_sql", "bounding_seed", "clamped", "clamped_sensitivity", "grouped_rows_sql",
           "statement_groups", "statement_rows", "sum_factor", "table_ref"]

MAX_CASE_GROUPS = 64
"""Most groups whose row test is written as a CASE (groups of single cells of one column need none)."""


def bounding_seed(table: TableSchema) -> int:
    """A fixed 63-bit seed per table for the contribution bound's row order (public; not a secret: the
    guarantee holds for any choice that depends only on the unit's own rows)."""
    h = hashlib.blake2b(f"lapras-bound|{table.schema}|{table.name}".encode(), digest_size=8).digest()
    return int.from_bytes(h, "big") >> 1


def bounded_rows_sql(table: TableSchema, columns: Sequence[str] | None = None, where: str | None = None) -> str:
    """``SELECT`` the rows of a table with a privacy unit that every exact answer counts: per unit, the
    ``max_rows_per_unit`` rows with the smallest seeded hash of the whole row's text (ties: the text).

    The choice depends on that unit's own rows only (a stable transformation: one unit changes at most its
    k kept rows), not on physical order, and every process and restart keeps the same rows. The row text
    is hashed under the session settings ``parser.pushdown.sql.EXACT_SESSION_SQL`` fixes, so it reads the same
    everywhere. It is computed once per row: ``OFFSET 0`` keeps the inner query from being merged into the
    window's, where the planner would evaluate ``r::text`` once for the hash and again as the tie-break
    (measured: most of the window's cost). ``columns``: the stored columns to return (default: every
    column, plus ``lapras_row`` and ``lapras_unit_row``). ``where``: a condition on the table's columns
    applied before the window (a statement's row filter): the k rows are then each unit's among the rows
    it keeps, still chosen by the same hash order (over the whole row's text), so with no ``where`` they
    are the epoch materialisation's rows."""
    assert table.privacy_unit is not None
    ref = f"{quote_ident(table.schema)}.{quote_ident(table.name)}"
    unit = quote_ident(table.privacy_unit)
    cond = f" AND ({where})" if where else ""
    rows = f"SELECT r.*, r::text AS lapras_row FROM {ref} AS r WHERE r.{unit} IS NOT NULL{cond} OFFSET 0"
    ranked = (f"SELECT t.*, row_number() OVER (PARTITION BY t.{unit} ORDER BY "
              f"hashtextextended(t.lapras_row, {bounding_seed(table)}), t.lapras_row) AS lapras_unit_row "
              f"FROM ({rows}) AS t")
    cols = "u.*" if columns is None else ", ".join(f"u.{quote_ident(c)}" for c in columns)
    return f"SELECT {cols} FROM ({ranked}) AS u WHERE u.lapras_unit_row <= {int(table.max_rows_per_unit)}"


def table_ref(table: TableSchema) -> str:
    """The table as every exact answer reads it (a FROM item): with a privacy unit, each unit's rows
    bounded to k, from the epoch's materialisation when ``table.rows_from`` names one, else through the
    window of ``bounded_rows_sql``."""
    if table.privacy_unit is None:
        return f"{quote_ident(table.schema)}.{quote_ident(table.name)}"
    if table.rows_from is not None:
        return f"{table.rows_from} AS {quote_ident(table.name)}"
    return f"({bounded_rows_sql(table)}) AS {quote_ident(table.name)}"


def statement_rows(table: TableSchema, where: str | None, groups: GroupAxis | None = None) -> str:
    """The ``rows_from`` of ``table`` as a statement with row filter ``where`` reads it under
    ``bounding = "statement"``: each unit's rows among those ``where`` keeps, bounded to k, or with
    ``groups`` to c per group in g groups and ``GroupAxis.total`` in all (``grouped_rows_sql``), as a
    subquery."""
    if groups is not None:
        return f"({grouped_rows_sql(table, where, groups)})"
    return f"({bounded_rows_sql(table, where=where)})"


@dataclass(frozen=True)
class GroupAxis:
    """A statement's groups as disjoint sets of cells of one column: every query reads cells of exactly one
    group, and no two groups share a cell, so each cell's column of the statement's matrix lies in one
    group's block (the per-group bounds then hold per block; ``group_bound_norm``)."""

    attr: str
    sets: tuple[Ranges, ...]  # per group, the column's cells (disjoint across groups), in cell order
    clamps: tuple[tuple[str, float], ...] = ()
    """Columns whose per-group sum is clamped (``max_sum_per_group``) and their B, for the statement's
    SUMs over them (``clamped``)."""
    per_group: int = 0
    """Most clamped SUM queries in one group."""
    per_unit: bool = False
    """The groups are cells of a column declared ``per_unit`` (an attribute of the unit) and the statement
    splits on no other column: one group per unit (g = 1) with up to k rows in it (c = k)."""

    @property
    def count(self) -> int:
        return len(self.sets)

    def rows(self, table: TableSchema) -> int:
        """Rows one unit may add to one group (c): k for per-unit groups, else the table's c."""
        return table.unit_rows if self.per_unit else table.group_rows

    def units(self, table: TableSchema) -> int:
        """Groups one unit's rows may fall in (g): 1 for per-unit groups, else the table's g."""
        return 1 if self.per_unit else table.unit_cells

    def total(self, table: TableSchema) -> int:
        """Rows one unit may add to the whole statement. With ``max_rows_per_group`` declared (and for
        per-unit groups, 1 group of k): g groups of c rows, no total cap k on top (k bounds statements
        without groups), so a year read by month keeps c rows a month, not k rows a year. Without it (c is
        k, only g or a clamped SUM declared): at most k in all, as a statement without groups."""
        c, g = self.rows(table), self.units(table)
        if self.per_unit or table.max_rows_per_group is not None:
            return c * g
        return min(c * g, table.unit_rows)


def clamped(table: TableSchema, q: LinearQuery) -> bool:
    """``q`` is a plain SUM over a column with ``max_sum_per_group`` (its rows' own values, no per-row
    expression): under per-group bounds its answer adds each unit's sum in its group clamped to B."""
    return (q.value is not None and q.weights is None and q.expr is None
            and table.group_sum_bound(q.value) is not None)


def clamped_sensitivity(table: TableSchema, q: LinearQuery, groups: GroupAxis | None = None) -> float:
    """What one unit can add to a clamped SUM query ``q`` (its noise scale): at most |scale| B, and at most
    c rows (``groups``' c, else the table's) of at most its row-level sensitivity each."""
    bound = table.group_sum_bound(q.value) if q.value is not None else None
    assert bound is not None
    c = groups.rows(table) if groups is not None else table.group_rows
    return min(abs(q.scale) * bound, c * q.sensitivity)


def statement_groups(table: TableSchema, queries: Sequence[LinearQuery]) -> GroupAxis | None:
    """The statement's groups when per-group bounds apply to it: a table with a privacy unit whose c or g
    is below k (or with a clamped SUM), queries over the table itself (no derived histogram), and a column
    every query's boxes pin, on which the queries' cell sets are pairwise equal or disjoint (the finest
    such column), in at least two groups (more than ``MAX_CASE_GROUPS`` only when each is one non-NULL
    cell); else None (the plain k bound, always sound). When every column that splits the statement so is
    declared ``per_unit`` (its GROUP BY keys are attributes of the unit; its WHERE may read any column),
    the groups are per-unit (``GroupAxis.per_unit``: g = 1, c = k). A function of the statement only, so
    the engine (for the sensitivity) and the exact source (for the rows) find the same groups."""
    if table.privacy_unit is None:
        return None
    live = [q for q in queries if not q.is_zero]
    if not live or any(q.source is not None for q in live):
        return None
    sums = [q for q in live if clamped(table, q)]
    if table.group_rows >= table.unit_rows and table.unit_cells >= table.unit_rows and not sums:
        return None
    per_box = [set(a for a, _ in box) for q in live for box in q.boxes]
    pinned = set.intersection(*per_box) if per_box else set()
    best: GroupAxis | None = None
    per_unit = True  # every column splitting the statement is an attribute of the unit
    for name in sorted(pinned):
        sets = sorted({merge_ranges([r for box in q.boxes for a, rs in box if a == name for r in rs]) for q in live})
        cells = [r for rs in sets for r in rs]
        ordered = sorted(cells)
        if len(sets) < 2 or any(lo <= hi for (_, hi), (lo, _) in zip(ordered, ordered[1:], strict=False)):
            continue  # one set (a filter), or two groups sharing a cell of this column
        declared = table.attribute(name)
        per_unit = per_unit and declared is not None and declared.per_unit
        if best is None or len(sets) > best.count:
            best = GroupAxis(name, tuple(sets))
    if best is None:
        return None  # one group (no GROUP BY): the k bound
    if per_unit:
        # Each unit's rows kept in one group only (whatever the column holds: a unit whose value varies
        # keeps one of its groups), k rows in it: group_bound_norm(k, k, 1) = k, the k bound, with no c cut.
        best = replace(best, per_unit=True)
    single = all(len(rs) == 1 and rs[0][0] == rs[0][1] for rs in best.sets)
    attr = table.attribute(best.attr)
    assert attr is not None
    null = attr.domain.null_index
    if best.count > MAX_CASE_GROUPS and not (single and all(rs[0][0] != null for rs in best.sets)):
        return None
    if not sums:
        return best
    index = {rs: i for i, rs in enumerate(best.sets)}
    per: dict[int, int] = {}
    for q in sums:
        g = index[merge_ranges([r for box in q.boxes for a, rs in box if a == best.attr for r in rs])]
        per[g] = per.get(g, 0) + 1
    columns = sorted({q.value for q in sums if q.value is not None})
    bounds = tuple((c, float(table.group_sum_bound(c) or 0.0)) for c in columns)
    return replace(best, clamps=bounds, per_group=max(per.values()))


def _group_sql(table: TableSchema, groups: GroupAxis) -> str:
    """Each row's group key: its cell of the column when every group is one (non-NULL) cell, else the first
    cell index of the group its cell is in (NULL: in none)."""
    attr = table.attribute(groups.attr)
    assert attr is not None
    if groups.count > MAX_CASE_GROUPS:
        return f"({cell_expr(attr)})::text"
    whens = " ".join(f"WHEN {attr_condition(attr, rs)} THEN '{rs[0][0]}'" for rs in groups.sets)
    return f"CASE {whens} END"


def grouped_rows_sql(table: TableSchema, where: str | None, groups: GroupAxis) -> str:
    """``SELECT`` the rows a GROUP BY statement reads under per-group bounds: among the rows ``where`` keeps,
    each unit's rows in at most g of the statement's groups (``GroupAxis.units``: 1 for per-unit groups;
    its groups chosen by a seeded hash of the unit and the group key: the same for every statement with
    those groups, and a different choice per unit, so no group is always the one left out) and at most c
    rows in one group (``GroupAxis.rows``: k for per-unit groups), and at most ``GroupAxis.total`` in all
    (g c with c declared: no cut to k, which bounds statements without groups), rows chosen by the seeded
    hash of the row text as everywhere;
    with ``groups.clamps``, each row's factor per clamped column (``sum_factor``). Each choice depends on
    that unit's own rows only (a stable transformation)."""
    assert table.privacy_unit is not None
    ref = f"{quote_ident(table.schema)}.{quote_ident(table.name)}"
    unit = quote_ident(table.privacy_unit)
    seed = bounding_seed(table)
    cond = f" AND ({where})" if where else ""
    rows = (f"SELECT r.*, r::text AS lapras_row, {_group_sql(table, groups)} AS lapras_group FROM {ref} AS r "
            f"WHERE r.{unit} IS NOT NULL{cond} OFFSET 0")
    order = f"hashtextextended(t.lapras_row, {seed}), t.lapras_row"
    c, g = groups.rows(table), groups.units(table)
    ranked = (f"SELECT t.*, row_number() OVER (PARTITION BY t.{unit}, t.lapras_group ORDER BY {order}) "
              f"AS lapras_group_row, dense_rank() OVER (PARTITION BY t.{unit} ORDER BY "
              f"hashtextextended(t.{unit}::text || ':' || t.lapras_group, {groups_seed(table)}), t.lapras_group) "
              f"AS lapras_unit_group "
              f"FROM ({rows}) AS t WHERE t.lapras_group IS NOT NULL")
    cut = f"WHERE t.lapras_group_row <= {int(c)} AND t.lapras_unit_group <= {int(g)}"
    cap = groups.total(table)
    if cap >= c * g:  # c rows in each of g groups: the total needs no cut of its own
        out = f"SELECT t.* FROM ({ranked}) AS t {cut}"
    else:
        kept = (f"SELECT t.*, row_number() OVER (PARTITION BY t.{unit} ORDER BY {order}) AS lapras_unit_row "
                f"FROM ({ranked}) AS t {cut}")
        out = f"SELECT u.* FROM ({kept}) AS u WHERE u.lapras_unit_row <= {int(cap)}"
    if not groups.clamps:
        return out
    # Per clamped column, each row's factor: B over the unit's sum of |value| in its group (kept rows),
    # at most 1; any of those rows' sums times it is then at most B in absolute value.
    factors = []
    for i, (name, bound) in enumerate(groups.clamps):
        attr = table.attribute(name)
        assert attr is not None
        total = (f"SUM(abs(({attr.domain.weight_sql(quote_ident(name))})::float8)) OVER "
                 f"(PARTITION BY f.{unit}, f.lapras_group)")
        factors.append(f"COALESCE(LEAST(1.0::float8, {float(bound)!r}::float8 / NULLIF({total}, 0)), 1.0) "
                       f"AS {sum_factor(i)}")
    return f"SELECT f.*, {', '.join(factors)} FROM ({out}) AS f"


def sum_factor(i: int) -> str:
    """The column of ``grouped_rows_sql`` holding the i-th clamped column's per-row factor."""
    return f"lapras_sum_factor_{int(i)}"


def groups_seed(table: TableSchema) -> int:
    """A fixed 63-bit seed per table for the order in which a unit's groups are kept (public, as
    ``bounding_seed``)."""
    h = hashlib.blake2b(f"lapras-groups|{table.schema}|{table.name}".encode(), digest_size=8).digest()
    return int.from_bytes(h, "big") >> 1


def unit_sum_histogram_sql(table: TableSchema, column: str, thresholds: Sequence[float]) -> str:
    """``SELECT bin, count(*)``: units counted per bin of ``thresholds`` (ascending) by the sum of their c
    largest |value| of ``column`` over all their rows (``width_bucket``: the number of thresholds at or below
    it), for the automatic per-group bound (``lapras.auto_bound``). Each unit is in exactly one bin."""
    assert table.privacy_unit is not None
    attr = table.attribute(column)
    assert attr is not None
    ref = f"{quote_ident(table.schema)}.{quote_ident(table.name)}"
    unit = quote_ident(table.privacy_unit)
    value = f"abs(({attr.domain.weight_sql(f'r.{quote_ident(column)}')})::float8)"
    edges = ", ".join(f"{float(t)!r}" for t in thresholds)
    ranked = (f"SELECT r.{unit} AS u, COALESCE({value}, 0) AS v, row_number() OVER (PARTITION BY r.{unit} "
              f"ORDER BY COALESCE({value}, 0) DESC) AS n FROM {ref} AS r WHERE r.{unit} IS NOT NULL")
    units = f"SELECT s.u, SUM(s.v) AS x FROM ({ranked}) AS s WHERE s.n <= {int(table.group_rows)} GROUP BY s.u"
    return (f"SELECT width_bucket(t.x, ARRAY[{edges}]::float8[]) AS b, count(*) FROM ({units}) AS t "
            f"GROUP BY 1 ORDER BY 1")
