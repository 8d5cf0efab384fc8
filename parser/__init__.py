"""SQL over protected tables -> linear queries over the tables' public domain histograms."""

from .errors import Refusal
from .limits import DEFAULT_MAX_GROUPS, Limits
from .linear import LinearQuery
from .plan import Column, QueryPlan
from .planner import Description, Planner, describe, parse_params_shape, plan_query
from .routing import references_protected
from .schema import Attribute, Catalog, Domain, TableSchema

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
