"""SQL over protected tables -> linear queries over the tables' public domain histograms."""

from pgcore.errors import Refusal

from .model.limits import DEFAULT_MAX_GROUPS, Limits
from .model.linear import LinearQuery
from .model.schema import Attribute, Catalog, Domain, TableSchema
from .plan.queryplan import Column, QueryPlan
from .planner import Description, Planner, describe, parse_params_shape, plan_query
from .routing import references_protected

__all__ = [
    "DEFAULT_MAX_GROUPS",
    "Attribute",
    "Catalog",
    "Column",
    "Description",
    "Domain",
    "Limits",
    "LinearQuery",
    "Planner",
    "QueryPlan",
    "Refusal",
    "TableSchema",
    "describe",
    "parse_params_shape",
    "plan_query",
    "references_protected",
]
