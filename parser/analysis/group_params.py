"""Parameters that shape the groups: ``date_trunc($1, ts)`` in GROUP BY (a dashboard's granularity picker,
sent bound by JDBC and psycopg) and ``ts AT TIME ZONE $1`` / ``timezone($1, ts)`` in a GROUP BY key (a viewer's
zone). The GROUP BY dimensions, hence the template, depend on the value, so such a
statement is analysed once per distinct value of those parameters (the planner caches one template per
text and value: a picker has a handful), each as the statement with the value written as a string literal in
the tree (never in the text), which PostgreSQL reads exactly as the untyped parameter: text for date_trunc.
Describe, which has no value, analyses it with ``DESCRIBE_VALUE`` for a unit and ``DESCRIBE_ZONE`` for a zone
(the type of the columns depends on neither); a zone that would cut the cells is refused at Bind as its
literal is."""

from __future__ import annotations

from collections.abc import Sequence

from sqlglot import exp

from pgcore.identifiers import fold

from .nodes import is_param, param_index, strip_paren

DESCRIBE_VALUE = "year"  # a unit whose buckets hold whole cells of every declared resolution
DESCRIBE_ZONE = "UTC"    # a zone that cuts no cell


def group_params(tree: exp.Expr) -> tuple[int, ...]:
    """The parameters that are a truncation's unit or a conversion's zone inside the GROUP BY expressions of
    a flat SELECT (``GROUP BY 1`` and output aliases read as the target-list item they name), in order; ()
    for none."""
    return tuple(sorted(_kinds(tree)))


def describe_values(tree: exp.Expr, indexes: Sequence[int]) -> tuple[str, ...]:
    """Describe's placeholder for each of ``indexes`` (``group_params(tree)``): a zone's or a unit's."""
    kinds = _kinds(tree)
    return tuple(DESCRIBE_ZONE if kinds.get(i) == "zone" else DESCRIBE_VALUE for i in indexes)


def _zone_arg(node: exp.Expr) -> exp.Expr | None:
    if isinstance(node, exp.AtTimeZone):
        return node.args.get("zone")
    if isinstance(node, exp.Anonymous) and node.name.lower() == "timezone" and len(node.expressions) == 2:
        return node.expressions[0]
    return None


def _kinds(tree: exp.Expr) -> dict[int, str]:
    if not isinstance(tree, exp.Select) or tree.args.get("group") is None:
        return {}
    items = tree.expressions
    aliases = {fold(i.alias): i.this for i in items if isinstance(i, exp.Alias)}
    found: dict[int, str] = {}
    for g in tree.args["group"].expressions:
        node = strip_paren(g)
        if isinstance(node, exp.Literal) and node.is_int and 1 <= int(node.this) <= len(items):
            node = items[int(node.this) - 1]
        elif isinstance(node, exp.Column) and not node.table and fold(node.name) in aliases:
            node = aliases[fold(node.name)]
        # Only a truncation's unit (date_trunc($1, ts)): a parameter elsewhere in a key (a bucket's bound,
        # a CASE threshold) is a value, bound per execution like any other, and typed as PostgreSQL types it.
        # A zone's parameter too: the wall times, hence the keys, depend on it.
        found.update((param_index(t.args["unit"]), "unit") for t in node.find_all(exp.TimestampTrunc, exp.DateTrunc)
                     if is_param(t.args.get("unit")))
        found.update((param_index(z), "zone") for t in node.find_all(exp.AtTimeZone, exp.Anonymous)
                     if (z := _zone_arg(t)) is not None and is_param(z))
    return found


def values_of(indexes: Sequence[int], params: Sequence[object] | None) -> tuple[str | None, ...] | None:
    """The bound values of ``indexes`` as text (None: NULL), or None when they are not all bound."""
    if params is None or any(i > len(params) for i in indexes):
        return None
    out: list[str | None] = []
    for i in indexes:
        v = params[i - 1]
        out.append(None if v is None else v.decode() if isinstance(v, bytes) else str(v))
    return tuple(out)


def with_values(tree: exp.Expr, indexes: Sequence[int], values: Sequence[str | None]) -> exp.Expr:
    """``tree`` with every occurrence of those parameters replaced by its value as a string literal."""
    by_index = dict(zip(indexes, values, strict=True))

    def put(node: exp.Expr) -> exp.Expr:
        if is_param(node) and param_index(node) in by_index:
            v = by_index[param_index(node)]
            return exp.Null() if v is None else exp.Literal.string(v)
        return node

    return tree.transform(put)
