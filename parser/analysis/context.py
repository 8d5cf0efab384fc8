"""What the analysis passes share while lowering one SELECT: the resolved scope, the work budget, the
aggregate slots allocated so far, the GROUP BY dimensions and the parameter types."""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlglot import exp

from .. import scalar as S
from ..model.limits import Budget
from ..model.schema import Attribute, TableSchema
from .names import Scope
from .nodes import NotScalar, is_param
from .template import AggSpec, GroupDim


@dataclass
class Context:
    select: exp.Select
    scope: Scope
    budget: Budget
    param_types: dict[int, int] = field(default_factory=dict)
    aggs: list[AggSpec] = field(default_factory=list)
    agg_index: dict[AggSpec, int] = field(default_factory=dict)
    groups: tuple[GroupDim, ...] = ()
    declared: dict[int, int] = field(default_factory=dict)  # $n -> the type the client declared at Parse

    @property
    def table(self) -> TableSchema:
        return self.scope.table

    def column(self, col: exp.Column) -> Attribute:
        return self.scope.column(col)

    def slot(self, spec: AggSpec) -> int:
        """The aggregate slot computing ``spec`` (one per distinct aggregate of the statement)."""
        if spec not in self.agg_index:
            self.agg_index[spec] = len(self.aggs)
            self.aggs.append(spec)
        return self.agg_index[spec]

    def cell_leaf(self, n: exp.Expr, read: dict[str, Attribute] | None = None) -> S.Expr | None:
        """The leaf of a scalar over the rows' cells (a per-row value): a column read as its cell, and noted
        in ``read`` when given; a parameter, an aggregate, a subquery or a window has no value on the cells
        (claimed: not a scalar)."""
        if isinstance(n, exp.Column):
            a = self.column(n)
            if read is not None:
                read[a.name] = a
            return S.Cell(a.name, a.domain.oid)
        if is_param(n) or isinstance(n, exp.AggFunc | exp.Select | exp.Window):
            raise NotScalar(n)
        return None
