"""How a statement's noise is scaled, and what P's release already says about it: the queries' effective
sensitivities under the exact source's per-group bounds (``calibration``) and their free estimates from
the epoch's matrix-mechanism release (``free_estimates``). Public quantities only: used both to answer
and to state errors ahead (EXPLAIN)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import replace

import numpy as np

from lapras.exact import ExactSource
from lapras.matrix_mechanism import MMRelease, StatementCells
from lapras.mechanisms.sensitivity import axis_unit_norm, statement_sensitivity
from parser.model.linear import LinearQuery
from parser.model.schema import TableSchema
from parser.pushdown.bounding import clamped, clamped_sensitivity, statement_groups

Sensitivity = Callable[[Sequence[LinearQuery], int | None], float]


def calibration(exact: ExactSource, table: TableSchema,
                queries: Sequence[LinearQuery]) -> tuple[list[LinearQuery], Sensitivity]:
    """The queries as their noise is scaled, and the sensitivity of any subset of them (with a work
    limit), for the exact answers ``exact`` gives them: with per-group bounds (the source's
    ``group_bounds``: c rows per group, g groups, ``GroupAxis.total`` in all; g = 1, c = k for per-unit groups) the
    unclamped queries' sensitivity is their largest column norm times ``group_bound_norm``, and each SUM
    clamped per group (``max_sum_per_group``) is scaled by what one unit can add to it
    (``clamped_sensitivity``) and adds 1 per clamped query of a group to the squared sensitivity, in at
    most min(g, total, groups) groups;
    else the queries as they are and the k bound. Use it wherever a statement's noise is stated (EXPLAIN):
    the exact answers and this come from the same ``statement_groups``."""
    bounds = getattr(exact, "group_bounds", None)
    groups = bounds(table, queries) if bounds is not None else None
    if groups is None:
        return list(queries), lambda qs, work: statement_sensitivity(table, qs, work)
    # c and g are the statement's: per-unit groups (GROUP BY an attribute of the unit) are g = 1, c = k.
    g = groups.units(table)
    # A unit adds at most c rows to each of at most g groups and total() in all (grouped_rows_sql enforces
    # exactly these): with c declared that is g c, and the norm sqrt(min(g, groups)) c, which may exceed k.
    total = groups.total(table)
    norm = axis_unit_norm(table, groups)
    effective = [replace(q, sensitivity=clamped_sensitivity(table, q, groups)) if clamped(table, q) else q
                 for q in queries]
    live_groups = min(g, total, groups.count)

    def sensitivity(qs: Sequence[LinearQuery], work: int | None) -> float:
        plain = [q for q in qs if not clamped(table, q)]
        rows = statement_sensitivity(table, plain, work, norm) if plain else 0.0
        if len(plain) == len(qs):
            return rows
        return math.sqrt(rows**2 + groups.per_group * live_groups)

    return effective, sensitivity


def free_estimates(table: TableSchema, queries: Sequence[LinearQuery], mm: MMRelease | None,
                   statement: Sequence[LinearQuery] = ()) -> tuple[np.ndarray, np.ndarray]:
    """Per query the estimate P's release gives and its variance (nan and inf where it gives none), using
    only groups whose rows are bounded among cells ``statement`` (all the asking statement's queries) reads."""
    vals = np.full(len(queries), np.nan)
    var = np.full(len(queries), np.inf)
    if mm is None:
        return vals, var
    sizes_of: dict[str, dict[str, int]] = {}
    reads_of: dict[str, StatementCells] = {}
    for i, q in enumerate(queries):
        if q.measure:
            continue  # the release measured counts; a measure's sum is not a function of them
        t = q.source if q.source is not None else table  # a derived table (COUNT(DISTINCT)) or the table
        sizes = sizes_of.get(t.name)
        if sizes is None:
            sizes = sizes_of[t.name] = {a.name: a.domain.size for a in t.attributes}
        reads = reads_of.get(t.name)
        if reads is None:
            reads = reads_of[t.name] = StatementCells(
                [(tuple(r.marginal), r.factors(t)) for r in (statement or queries)
                 if not r.is_zero and not r.measure and _source_name(r) == _source_name(q)], sizes,
                statement_groups(t, statement or queries) if q.source is None else None)
        est = mm.estimate(t.name, tuple(q.marginal), q.factors(t), sizes, reads)
        if est is not None:
            vals[i], var[i] = est
    return vals, var


def _source_name(q: LinearQuery) -> str | None:
    """The derived histogram a query reads (COUNT(DISTINCT)), None for the table itself."""
    return q.source.name if q.source is not None else None
