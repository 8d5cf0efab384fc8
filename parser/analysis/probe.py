"""Pass: a shape probe (no aggregate, LIMIT 0 or 1) becomes a Template with its typed columns and no row.

Tools learn a query's columns by running it with a small LIMIT (Superset's virtual datasets send the SQL
with ``LIMIT 1``). The answer's shape is public (declared types); any row would be data, so none is
returned: no linear query is made and nothing is spent. WHERE is still checked, as PostgreSQL would.
"""

from __future__ import annotations

from sqlglot import exp

from pgcore.pgtypes import TEXT, UNKNOWN

from .. import scalar as S
from .context import Context
from .nodes import figure_name, ident, sql_of, unsupported
from .scalars import NotScalar, compile_scalar
from .template import GroupDim, Template
from .where import lower_where

NO_ROWS = GroupDim("", (), (), TEXT)
"""A grouping with no group: the result has no row whatever the data."""


def probe_template(ctx: Context) -> Template:
    """The columns of a shape probe, typed as PostgreSQL would type them, over no row."""
    sel = ctx.select
    if sel.args.get("where") is not None:
        lower_where(sel.args["where"].this, ctx)

    outputs: list[S.Expr] = []
    for item in sel.expressions:
        if isinstance(item, exp.Star) or (isinstance(item, exp.Column) and isinstance(item.this, exp.Star)):
            for a in ctx.scope.star(item):
                outputs.append(S.Const(None, a.domain.oid, a.name))
            continue
        node = item.this if isinstance(item, exp.Alias) else item
        try:
            e = compile_scalar(node, ctx.cell_leaf, ctx.budget, exact=True)
        except NotScalar as u:
            raise unsupported(f"expression {sql_of(u.node)!r} in SELECT", u.node) from None
        name = ident(item.args["alias"]) if isinstance(item, exp.Alias) else figure_name(node)
        outputs.append(S.Const(None, TEXT if e.oid == UNKNOWN else e.oid, name))
    return Template(ctx.table, None, (NO_ROWS,), [], outputs, None, [], None, None, ctx.param_types)
