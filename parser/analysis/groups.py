"""Pass: lower GROUP BY to dimensions over the public domain.

A plain attribute groups by its declared values. An expression over one attribute (Metabase binning such
as ``floor((age - 17.0) / 10.0) * 10.0 + 17.0``, CASE buckets) is evaluated on every value of the
attribute's declared domain by the scalar evaluator; the groups are the distinct results, each the set
of cells that map to it. Only public information is used, so empty groups exist as with a plain attribute.
An expression over several attributes (``concat(category, '-', country)``, ``a + b``) is evaluated on
their joint cells (``joint.py``).
"""

from __future__ import annotations

from sqlglot import exp

from pgcore import errors as E
from pgcore.errors import Refusal
from pgcore.pgtypes import TEXT, UNKNOWN

from ..model.predicate import merge_ranges
from ..model.schema import Attribute
from ..syntax.parse import position_of
from .cells import on_cells
from .context import Context
from .joint import hashable, joint_dim, ordered_keys
from .nodes import ident, is_param, sql_of, strip_paren, unsupported
from .scalars import NotScalar, compile_scalar
from .template import GroupDim

_BUCKET_HINT = "GROUP BY takes attributes, or deterministic expressions over them (arithmetic, CASE, functions)."


def plain_dim(attr: Attribute) -> GroupDim:
    d = attr.domain
    return GroupDim(attr.name, tuple(d), tuple(((i, i),) for i in range(d.size)), d.oid)


def _plain(attr: Attribute, node: exp.Expr) -> GroupDim:
    if attr.domain.measure and not getattr(attr.domain, "edges", ()):
        kind = "numeric" if attr.domain.type_name == "float" else attr.domain.type_name  # a float is never a key
        raise unsupported(f"GROUP BY {attr.domain.type_name} measure {attr.name}", node,
                          hint=f"A measure's values are not public keys: declare bins for {attr.name} (one group "
                          "a bin, keyed by its lower edge), or declare an identifier such as a ZIP code as "
                          f"{{ type = \"{kind}\", keys = \"private\" }} (its keys chosen by DP partition selection).")
    return plain_dim(attr)  # a binned measure: one group a bin, keyed by the bin's lower edge (as time cells)


def lower_group_by(ctx: Context) -> tuple[GroupDim, ...]:
    sel = ctx.select
    grp = sel.args.get("group")
    if grp is None:
        return ()
    for key in ("grouping_sets", "cube", "rollup"):
        if grp.args.get(key):
            raise unsupported(key.replace("_", " ").upper(), grp)
    dims: list[GroupDim] = []
    for item in grp.expressions:
        node = _target(strip_paren(item), item, ctx)
        if isinstance(node, exp.AggFunc) or node.find(exp.AggFunc):
            raise Refusal(E.GROUPING_ERROR, "aggregate functions are not allowed in GROUP BY",
                          position=position_of(node))
        dim = _plain(ctx.column(node), node) if isinstance(node, exp.Column) else _bucket(node, ctx)
        if all(not (d.attr == dim.attr and d.node == dim.node) for d in dims):
            dims.append(dim)
    return tuple(dims)


def _target(node: exp.Expr, item: exp.Expr, ctx: Context) -> exp.Expr:
    """What a GROUP BY item denotes: a select-list position, an output name, or itself."""
    items = ctx.select.expressions
    if isinstance(node, exp.Literal) and not node.is_string:
        pos = int(str(node.this))
        if not 1 <= pos <= len(items):
            raise Refusal(E.INVALID_COLUMN_REFERENCE, f"GROUP BY position {pos} is not in select list",
                          position=position_of(node))
        target = items[pos - 1]
        node = strip_paren(target.this if isinstance(target, exp.Alias) else target)
        if isinstance(node, exp.AggFunc) or node.find(exp.AggFunc):
            raise Refusal(E.GROUPING_ERROR, "aggregate functions are not allowed in GROUP BY",
                          position=position_of(item))
    elif isinstance(node, exp.Column) and not node.args.get("table"):
        name = ident(node.this)
        if ctx.table.attribute(name) is None:
            # PostgreSQL falls back to an output column name when no input column matches.
            for target in items:
                if isinstance(target, exp.Alias) and ident(target.args["alias"]) == name:
                    return strip_paren(target.this)
    return node


def _bucket(node: exp.Expr, ctx: Context) -> GroupDim:
    """A GROUP BY expression over exactly one attribute, evaluated on its public domain."""
    if node.find(exp.Window) is not None or node.find(exp.Select) is not None:
        raise unsupported(f"GROUP BY expression {sql_of(node)!r}", node)
    attrs = {ctx.column(c).name for c in node.find_all(exp.Column)}
    if not attrs:
        raise unsupported(f"GROUP BY expression {sql_of(node)!r}", node, hint=_BUCKET_HINT)

    try:
        e = compile_scalar(node, ctx.cell_leaf, ctx.budget, exact=True)
    except NotScalar as u:
        param = next((n for n in u.node.walk() if is_param(n)), None)
        if param is not None:  # the keys would depend on the value: only a unit's or a zone's is bound per value
            raise unsupported(f"a parameter ({sql_of(param)}) in the GROUP BY expression {sql_of(node)!r}", param,
                              hint="Write its value as a literal; a parameter may shape the groups only as "
                              "date_trunc's unit or AT TIME ZONE's zone.") from None
        raise unsupported(f"GROUP BY expression part {sql_of(u.node)!r}", u.node, hint=_BUCKET_HINT) from None
    except Refusal as r:
        r.position = r.position or position_of(node)
        raise
    oid = _key_type(e.oid)
    if len(attrs) > 1:  # evaluated on the joint cells of the attributes it reads
        joint = [a for a in (ctx.table.attribute(n) for n in sorted(attrs)) if a is not None]
        return joint_dim(e, joint, oid, node, ctx.budget, ctx.budget.limits.max_groups)
    attr = ctx.table.attribute(attrs.pop())
    assert attr is not None
    results = on_cells(e, attr, ctx.budget, node, "GROUP BY expression")
    by_key: dict[object, list[tuple[int, int]]] = {}
    for i, key in enumerate(results):
        by_key.setdefault(hashable(key), []).append((i, i))
    keys = sorted(by_key, key=lambda k: (1, 0) if k is None else (0, k))
    return GroupDim(attr.name, tuple(ordered_keys(keys, oid)), tuple(merge_ranges(by_key[k]) for k in keys), oid,
                    node)


def _key_type(oid: int) -> int:
    """Bucket keys go out with the type PostgreSQL gives the expression (``extract`` numeric, ``length``
    integer); an untyped literal as text."""
    return TEXT if oid == UNKNOWN else oid

