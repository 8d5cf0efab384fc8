"""The analysis passes: a parsed statement -> a checked, parameter-free Template.

Each pass is a module with one entry function, run in this order (PostgreSQL's order of checks, so that
a statement with several faults gets the error PostgreSQL would give first):

    inline_joins     a protected table joined to public tables on unique keys: dimension columns become
                     functions of the fact's key (CASE over its cells)
    inline_wrappers  CTEs and FROM subqueries that only filter, rename or compute per row: merged in
    check_shape      one flat SELECT (no writes, set operations, CTEs, subqueries)
    resolve_names    FROM names one protected table; columns resolve to its declared attributes
    check_select     aggregates only, no *, no windows, no DISTINCT rows, no unsupported clauses
                     (a shape probe, LIMIT 0/1 without aggregates, becomes its columns and no row: probe.py)
    lower_where      WHERE -> the WHERE form (parser.analysis.condition)
    lower_group_by   GROUP BY -> dimensions over the public domain (buckets via the scalar evaluator)
    lower_outputs    target list -> post-processing expressions over aggregate slots and group keys
    lower_clauses    HAVING, ORDER BY, LIMIT / OFFSET
"""

from __future__ import annotations

from dataclasses import replace

from sqlglot import exp

from pgcore import errors as E
from pgcore.errors import Refusal
from pgcore.identifiers import display_ident

from ..bind.partition import private_columns
from ..model.limits import Budget
from ..model.schema import Catalog
from ..syntax.parse import position_of
from .clauses import lower_clauses
from .context import Context
from .groups import lower_group_by
from .inline import inline_wrappers
from .joins import inline_joins
from .names import resolve_names
from .nodes import strip_paren
from .outputs import lower_outputs
from .probe import probe_template
from .select import check_select
from .shape import check_shape, inline_constant_subqueries
from .template import Template
from .where import lower_where

__all__ = ["analyze"]


def _check_private_keys(select: exp.Select, ctx: Context) -> None:
    """A column with private keys has no cells until its keys are selected: it may be grouped on (its keys
    then come from DP partition selection), never read by WHERE, HAVING or an aggregate, whose answer over
    an empty domain would be a silent exact 0."""
    private = set(private_columns(ctx.table, [a.name for a in ctx.table.attributes]))
    if not private:
        return
    # An aggregate's FILTER (WHERE ...) is a sibling of its call in sqlglot's tree, not under it.
    posts = select.meta.get("lapras_post_filters", [])
    roots = [select.args.get("where"), select.args.get("having"), *posts, *select.find_all(exp.AggFunc),
             *(a for f in posts for a in f.find_all(exp.AggFunc)),
             *(f.expression for f in select.find_all(exp.Filter))]
    # COUNT(DISTINCT col) counts the stored values (parser.bind.distinct), never the column's cells: allowed.
    counted = {id(strip_paren(d.expressions[0])) for d in select.find_all(exp.Distinct)
               if isinstance(d.parent, exp.Count) and len(d.expressions) == 1
               and isinstance(strip_paren(d.expressions[0]), exp.Column)}
    for root in roots:
        for col in root.find_all(exp.Column) if root is not None else ():
            if id(col) in counted:
                continue
            try:
                attr = ctx.column(col)
            except Refusal:
                continue  # an output alias or an unknown name: the passes below say which
            if attr.name in private:
                raise Refusal(E.FEATURE_NOT_SUPPORTED,
                              f"{display_ident(attr.name)} has private keys: it can be grouped on, not filtered "
                              "or aggregated",
                              hint="Group by it (its keys come from DP partition selection) and filter on other "
                                   "columns.", position=position_of(col))


def _one_cell_keys(t: Template) -> bool:
    """Every GROUP BY dimension is a plain public column whose keys are one cell each (so a released cell
    combination is one group)."""
    for d in t.groups:
        if d.attrs or d.node is not None:
            return False
        a = t.table.attribute(d.attr)
        if a is None or getattr(a.domain, "keys", "public") != "public" or a.domain.last_values() is not None:
            return False
        if any(len(r) != 1 or r[0][0] != r[0][1] for r in d.cells):
            return False
    return True


def analyze(tree: exp.Expr, catalog: Catalog, budget: Budget, declared: dict[int, int] | None = None) -> Template:
    """Run the passes over one parsed statement; ``declared``: parameter types the client declared (``$n``
    -> oid, ``param_exprs.declared_types``), which type a parameter inside an expression as in PostgreSQL."""
    tree = inline_constant_subqueries(tree)
    select = check_shape(inline_wrappers(inline_joins(tree, catalog, budget), catalog, budget))
    ctx = Context(select, resolve_names(select, catalog), budget, declared=dict(declared or {}))
    _check_private_keys(select, ctx)
    if check_select(ctx) == "probe":
        return probe_template(ctx)
    where = lower_where(select.args["where"].this, ctx) if select.args.get("where") is not None else None
    budget.check_deadline()
    ctx.groups = lower_group_by(ctx)
    outputs = lower_outputs(ctx)
    clauses = lower_clauses(ctx, outputs)
    t = Template(ctx.table, where, ctx.groups, ctx.aggs, outputs, clauses.having, clauses.order, clauses.limit,
                 clauses.offset, ctx.param_types, volatile=budget.now is not None,
                 post_filters=tuple(clauses.post_filters))
    limit = budget.limits.max_groups
    if t.n_groups <= limit:
        return t
    too_many = Refusal(E.PROGRAM_LIMIT_EXCEEDED,
                       f"GROUP BY {', '.join(t.group_attrs)} has {t.n_groups} groups in the public domain, "
                       f"more than the limit of {limit}",
                       hint="Group by fewer or coarser attributes, or filter with WHERE and group by less.",
                       position=position_of(select.args.get("group")))
    # Too many combinations to list: the groups present are chosen by DP partition selection (as BigQuery
    # does for every GROUP BY), charged like any selection; the aggregates run over them. Either way, a
    # WHERE clause may leave few groups by its own text (a time range over hourly cells): the binder
    # counts those first, once parameters are bound, and falls back to this only when they are too many.
    selectable = _one_cell_keys(t)
    if not selectable and where is None:
        raise too_many
    return replace(t, select_groups=selectable, too_many=None if where is None else (
        too_many.message, too_many.hint or "", too_many.position))
