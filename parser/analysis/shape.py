"""Pass: check the statement's shape. One flat SELECT reads a protected table; writes, set operations,
CTEs and subqueries are refused here, each named, before any name is resolved. A scalar subquery that reads
no table (Looker's relative date filters, ``ts >= ((SELECT DATE_TRUNC('day', NOW()) - INTERVAL '6 day'))``)
is its expression, and is written as one first (``inline_constant_subqueries``)."""

from __future__ import annotations

from sqlglot import exp

from pgcore import errors as E
from pgcore.errors import Refusal

from ..syntax.parse import position_of

_NOT_SCALAR = (exp.From, exp.Join, exp.In, exp.Exists, exp.Any, exp.All, exp.Union, exp.With, exp.CTE)
_WRITES = (exp.Insert, exp.Update, exp.Delete, exp.Create, exp.Drop, exp.Alter, exp.Merge, exp.TruncateTable)


def check_shape(tree: exp.Expr) -> exp.Select:
    """The SELECT of ``tree``, or a refusal naming the construct that makes it something else."""
    while isinstance(tree, exp.Subquery) and not tree.args.get("alias"):
        tree = tree.this
    if isinstance(tree, _WRITES):
        verb = type(tree).__name__.upper().replace("TRUNCATETABLE", "TRUNCATE")
        raise Refusal(E.READ_ONLY, f"cannot execute {verb} in a read-only transaction",
                      hint="The proxy serves read-only aggregate queries.")
    if isinstance(tree, exp.SetOperation):
        op = type(tree).__name__.upper()
        raise Refusal(E.FEATURE_NOT_SUPPORTED, f"{op} is not supported on protected tables",
                      hint="Send each SELECT separately. " + E.SUPPORTED_HINT, position=position_of(tree.right))
    if not isinstance(tree, exp.Select):
        raise Refusal(E.FEATURE_NOT_SUPPORTED, f"{type(tree).__name__.upper()} statements are not supported on "
                      "protected tables", hint=E.SUPPORTED_HINT)
    w = tree.args.get("with_") or tree.args.get("with")
    if w is not None:
        raise Refusal(E.FEATURE_NOT_SUPPORTED, "WITH (common table expressions) is not supported on protected "
                      "tables", hint=E.SUPPORTED_HINT, position=position_of(w))
    for node in tree.walk():
        if node is tree:
            continue
        if isinstance(node, exp.Select | exp.Subquery | exp.SetOperation):
            where = " in FROM" if isinstance(node.parent, exp.From | exp.Join) else ""
            raise Refusal(E.FEATURE_NOT_SUPPORTED, f"subquery{where} is not supported on protected tables",
                          hint=E.SUPPORTED_HINT, position=position_of(node))
    return tree


def inline_constant_subqueries(tree: exp.Expr) -> exp.Expr:
    """``tree`` with each scalar subquery of the form ``(SELECT expr)`` (no FROM, WHERE or any other clause,
    no aggregate, window or ``*``) replaced by ``(expr)``: PostgreSQL evaluates such a subquery once, to the
    value ``expr`` has, so the statement means the same. Subqueries in FROM, IN, EXISTS, ANY are left alone."""
    for sel in [n for n in tree.find_all(exp.Select) if n is not tree]:
        args = {k for k, v in sel.args.items() if v}
        outs = sel.expressions
        if args != {"expressions"} or len(outs) != 1 or outs[0].find(exp.AggFunc, exp.Window, exp.Star):
            continue
        wrap: exp.Expr = sel
        while isinstance(wrap.parent, exp.Subquery) and not wrap.parent.args.get("alias"):
            wrap = wrap.parent
        if wrap is sel or isinstance(wrap.parent, _NOT_SCALAR) or wrap.parent is None:
            continue
        value = outs[0].this if isinstance(outs[0], exp.Alias) else outs[0]
        wrap.replace(exp.Paren(this=value.copy()))
    return tree
