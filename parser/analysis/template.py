"""Template: a checked statement, independent of bound parameter values (what the parse cache stores).

The analysis passes build it: the WHERE form, the aggregates per group, the GROUP BY dimensions over the
public domain, the typed post-processing expressions, LIMIT/OFFSET. ``bind`` turns it into linear queries
once parameter values are known.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlglot import exp

from ..model.predicate import Ranges
from ..model.schema import TableSchema
from ..scalar import Expr, Param
from .condition import Cond, Operand


@dataclass(frozen=True)
class AggSpec:
    """One aggregate computed per group: COUNT over cells (non-NULL ``attr`` if given) or SUM of ``attr``."""

    kind: str  # "count" | "sum"
    attr: str | None
    filter: Cond | None = None
    weights: tuple[float, ...] | None = None  # SUM of a per-row expression: its value in each cell of attr
    expr: str | None = None  # SUM of an expression over measures, pushed down (weights: its bound per cell)


@dataclass(frozen=True)
class GroupDim:
    """One GROUP BY dimension: its attribute, its group keys and, per key, the attribute's cell ranges.

    A joint dimension (an expression over several attributes, ``analysis/joint.py``) names them in
    ``attrs`` (the space's order) and ``shape``; ``attr`` is then a label and each key's ranges index the
    flattened product of their cells (row-major)."""

    attr: str
    keys: tuple[object, ...]
    cells: tuple[Ranges, ...]
    oid: int
    node: exp.Expr | None = None  # the grouping expression (None: the plain attribute)
    attrs: tuple[str, ...] = ()
    shape: tuple[int, ...] = ()

    @property
    def names(self) -> tuple[str, ...]:
        """The attributes the dimension reads."""
        return self.attrs or (self.attr,)


@dataclass
class Template:
    """A checked statement, independent of bound parameter values."""

    table: TableSchema
    where: Cond | None
    groups: tuple[GroupDim, ...]
    aggs: list[AggSpec]
    outputs: list[Expr]
    having: Expr | None
    order: list[tuple[Expr, bool, bool]]  # (expr, descending, nulls_first)
    limit: Operand | None
    offset: Operand | None
    param_types: dict[int, int] = field(default_factory=dict)
    volatile: bool = False  # reads now() / current_date: resolved per statement, never cached
    # The product of the GROUP BY columns' domains is too large to enumerate: the groups are the cell
    # combinations DP partition selection releases under the WHERE clause (parser.bind.binder, parser.bind.partition).
    select_groups: bool = False
    # More groups than the limit before the WHERE clause is applied: the binder first drops the keys the
    # WHERE excludes by its own text (Grafana's time range over hourly cells) and refuses the statement (54000,
    # this message, hint and position) only when more than the limit remain and no partition selection
    # (``select_groups``) can pick them. Plain values, not the exception: templates are cached and shared.
    too_many: tuple[str, str, int | None] | None = None
    # WHERE clauses of the levels over window outputs (Looker's pivots), applied in order after HAVING and
    # the windows below each; ORDER BY, OFFSET and LIMIT then apply to the rows they keep.
    post_filters: tuple[Expr, ...] = ()

    @property
    def group_attrs(self) -> tuple[str, ...]:
        return tuple(a for d in self.groups for a in d.names)

    @property
    def n_groups(self) -> int:
        n = 1
        for d in self.groups:
            n *= len(d.keys)
        return n

    def post_params(self) -> list[Param]:
        """The ``$n`` parameters read after the release (HAVING, outputs, ORDER BY)."""
        roots = [*self.outputs, *([self.having] if self.having is not None else []), *(e for e, _, _ in self.order),
                 *self.post_filters]
        return [e for r in roots for e in r.walk() if isinstance(e, Param)]
