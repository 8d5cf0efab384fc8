"""references_protected: does a statement read a protected table anywhere? (the proxy's router asks)."""

from __future__ import annotations

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from pgcore.identifiers import fold, mention_pattern

from .model.schema import Catalog


def _table_matches(node: exp.Table, catalog: Catalog) -> bool:
    if not isinstance(node.this, exp.Identifier):
        return False
    db = node.args.get("db")
    schema = fold(db) if isinstance(db, exp.Identifier) else None
    return catalog.table(fold(node.this), schema) is not None


def _parse(sql: str) -> tuple[exp.Expr, ...] | None:
    try:
        return tuple(t for t in sqlglot.parse(sql, read="postgres") if t is not None)
    except SqlglotError:
        return None


def _is_string(node: exp.Expr) -> bool:
    return (isinstance(node, exp.Literal) and node.is_string) or isinstance(node, exp.RawString)


def references_protected(sql_or_ast: str | exp.Expr, catalog: Catalog) -> bool:
    """True if the statement reads any protected table anywhere (subqueries, CTEs, joins, set operations).

    Conservative by design: when the text cannot be parsed, any word equal to a protected table's name
    counts, and so does a protected name inside a string argument of a function call (functions such as
    ``query_to_xml('select * from t', ...)`` run SQL text). A false positive only means the parser, not
    the upstream, answers (or refuses) the statement. Nothing is cached here: a parse tree is many times
    the size of its text (the proxy's router caches its decisions by digest instead).
    """
    pattern = mention_pattern(t.name for t in catalog.tables)
    trees: tuple[exp.Expr, ...] | None
    if isinstance(sql_or_ast, exp.Expr):
        trees = (sql_or_ast,)
        text = sql_or_ast.sql(dialect="postgres")
    else:
        text = sql_or_ast
        trees = _parse(sql_or_ast)
    if trees is None:
        return bool(pattern is not None and pattern.search(text))
    for tree in trees:
        if isinstance(tree, exp.Command) and pattern is not None:
            # sqlglot kept the statement as text (EXPLAIN ANALYZE, PREPARE, DO, DECLARE CURSOR...): any
            # mention of a protected name counts, since these can run a query over it.
            if pattern.search(tree.sql(dialect="postgres")):
                return True
            continue
        for node in tree.walk():
            if isinstance(node, exp.Table) and _table_matches(node, catalog):
                return True
            if (pattern is not None and _is_string(node) and node.find_ancestor(exp.Func) is not None
                    and pattern.search(str(node.this))):
                return True
    return False
