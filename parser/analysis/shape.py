"""Pass: check the statement's shape. One flat SELECT reads a protected table; writes, set operations,
CTEs and subqueries are refused here, each named, before any name is resolved."""

from __future__ import annotations

from sqlglot import exp

from pgcore import errors as E
from pgcore.errors import Refusal

from ..syntax.parse import position_of

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
