"""references_protected: does a statement read a protected table anywhere? (the proxy's router asks)."""

from __future__ import annotations

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from pgcore.identifiers import fold, mention_pattern

from .model.schema import Catalog
from .syntax.parse import folded_items


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


def references_protected(sql_or_ast: str | exp.Expr | tuple[exp.Expr, ...], catalog: Catalog) -> bool:
    """True if the statement reads any protected table anywhere (subqueries, CTEs, joins, set operations).

    Conservative by design: when the text cannot be parsed, any word equal to a protected table's name
    counts, and so does a protected name inside a string argument of a function call (functions such as
    ``query_to_xml('select * from t', ...)`` run SQL text). A false positive only means the parser, not
    the upstream, answers (or refuses) the statement. Nothing is cached here: a parse tree is many times
    the size of its text (the proxy's router caches its decisions by digest instead). A tuple is the trees of
    ``parser.syntax.parse.parse_statements``, whose folded IN lists are read item by item.
    """
    pattern = mention_pattern(t.name for t in catalog.tables)
    trees: tuple[exp.Expr, ...] | None
    if isinstance(sql_or_ast, exp.Expr):
        trees = (sql_or_ast,)
    elif isinstance(sql_or_ast, tuple):
        trees = sql_or_ast
    else:
        trees = _parse(sql_or_ast)
        if trees is None:
            return bool(pattern is not None and pattern.search(sql_or_ast))
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
            if pattern is None or not (_is_string(node) or isinstance(node, exp.In)):
                continue
            items = folded_items(node) if isinstance(node, exp.In) else None
            if items is not None:
                # A long IN list the scanner folded: its string items, as the literals they stand for.
                if node.find_ancestor(exp.Func) is not None and any(
                        isinstance(v, str) and pattern.search(v) for v, _ in items):
                    return True
                continue
            if (_is_string(node) and not _is_fold_mark(node) and node.find_ancestor(exp.Func) is not None
                    and pattern.search(str(node.this))):
                return True
    return False


def _is_fold_mark(node: exp.Expr) -> bool:
    return isinstance(node.parent, exp.In) and folded_items(node.parent) is not None
