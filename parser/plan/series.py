"""Superset's series limit: an aggregate JOINed to a top-N subquery of the same table, split into two DP
statements.

Superset limits a chart to its N largest series by joining the query to
``(SELECT k AS k__, <metric> AS mme_inner__ FROM t WHERE ... GROUP BY k ORDER BY mme_inner__ DESC LIMIT N)
AS series_limit ON k = k__``. Which series are largest is data, so it cannot be a rewrite: the proxy answers
the subquery first as its own DP statement (noisy totals, charged like any statement, stored and repeated
free), keeps the top N keys of those noisy totals, and answers the outer statement with ``k IN (those keys)``
in place of the JOIN (a second DP statement, charged too). Both parts are post-processing-free of each other:
the keys the second part filters on are the released output of the first.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from ..analysis.nodes import ident, strip_paren
from ..model.schema import Catalog


@dataclass(frozen=True)
class SeriesLimit:
    """The two statements of a series-limited query: ``inner`` (the top-N subquery, its key columns first)
    and the outer statement with the JOIN replaced by a filter on the chosen keys (``outer(keys)``)."""

    inner: str
    n_keys: int
    _outer: exp.Select
    _key_exprs: tuple[exp.Expr, ...]

    def outer(self, keys: Sequence[Sequence[object]]) -> str:
        """The outer statement restricted to the series ``keys`` (one tuple of key values per series)."""
        sel = self._outer.copy()
        if not keys:
            cond: exp.Expr = exp.false()
        elif len(self._key_exprs) == 1:
            cond = exp.In(this=self._key_exprs[0].copy(), expressions=[_literal(k[0]) for k in keys])
        else:
            cond = exp.or_(*[exp.and_(*[exp.EQ(this=e.copy(), expression=_literal(v))
                                        for e, v in zip(self._key_exprs, k, strict=True)]) for k in keys])
        where = sel.args.get("where")
        sel.set("where", exp.Where(this=exp.and_(exp.Paren(this=where.this), exp.Paren(this=cond))
                                   if where is not None else cond))
        return sel.sql(dialect="postgres")


def _literal(v: object) -> exp.Expr:
    if v is None:
        return exp.null()
    if isinstance(v, bool):
        return exp.true() if v else exp.false()
    if isinstance(v, int | float):
        return exp.Literal.number(v)
    return exp.Literal.string(str(v))


_JOIN = re.compile(r"\bjoin\b", re.IGNORECASE)


def series_limit(sql: str, catalog: Catalog) -> SeriesLimit | None:
    """The split of ``sql`` if it is a series-limited aggregate over one protected table, else None."""
    if _JOIN.search(sql) is None:
        return None  # no join, no split: every refused statement comes here, most of them without one
    try:
        trees = sqlglot.parse(sql, read="postgres")
    except SqlglotError:
        return None
    if len(trees) != 1 or not isinstance(trees[0], exp.Select):
        return None
    sel = trees[0]
    joins = sel.args.get("joins") or []
    frm = sel.args.get("from_")
    if len(joins) != 1 or frm is None or not isinstance(frm.this, exp.Table):
        return None
    join = joins[0]
    sub = join.this
    if (join.args.get("side") not in (None, "") or join.args.get("kind") not in (None, "", "INNER")
            or not isinstance(sub, exp.Subquery) or sub.args.get("alias") is None):
        return None
    inner = sub.this
    if (not isinstance(inner, exp.Select) or inner.args.get("limit") is None or inner.args.get("group") is None
            or inner.args.get("joins")):
        return None
    inner = _without_positions(inner)
    if inner is None:
        return None
    inner_from = inner.args.get("from_")
    if inner_from is None or not isinstance(inner_from.this, exp.Table) or not _same_table(
            frm.this, inner_from.this, catalog):
        return None
    alias = ident(sub.args["alias"].this)
    outputs = {ident(i.args["alias"]): i.this for i in inner.expressions if isinstance(i, exp.Alias)}
    pairs = _equalities(join.args.get("on"))
    if pairs is None:
        return None
    outer_keys: list[exp.Expr] = []
    inner_keys: list[str] = []
    def subquery_column(node: exp.Expr) -> str | None:
        """The subquery output a column names (Superset writes it unqualified: ``ON race = race__``)."""
        if not isinstance(node, exp.Column):
            return None
        qual = node.args.get("table")
        name = ident(node.this)
        return name if name in outputs and (qual is None or ident(qual) == alias) else None

    for a, b in pairs:
        for mine, theirs in ((a, b), (b, a)):
            name = subquery_column(theirs)
            if name is not None and subquery_column(mine) is None:
                outer_keys.append(mine)
                inner_keys.append(name)
                break
        else:
            return None
    # The top-N statement: the join keys first (so the chosen keys are its leading columns), then the rest.
    items = [exp.alias_(outputs[k].copy(), exp.to_identifier(k, quoted=True)) for k in inner_keys]
    items += [i.copy() for i in inner.expressions
              if not (isinstance(i, exp.Alias) and ident(i.args["alias"]) in inner_keys)]
    top = inner.copy()
    top.set("expressions", items)
    outer = sel.copy()
    outer.set("joins", None)
    return SeriesLimit(top.sql(dialect="postgres"), len(inner_keys), outer, tuple(outer_keys))


def _without_positions(inner: exp.Select) -> exp.Select | None:
    """``inner`` with ``GROUP BY 1`` / ``ORDER BY 2 DESC`` (Tableau's top-N subquery) written as the outputs
    they name, since the keys are put first; None when a position names no output."""
    inner = inner.copy()
    outs = inner.expressions
    for clause in (inner.args.get("group"), inner.args.get("order")):
        for item in clause.expressions if clause is not None else []:
            holder = item if isinstance(item, exp.Ordered) else None
            node = strip_paren(item.this if holder is not None else item)
            if not (isinstance(node, exp.Literal) and not node.is_string):
                continue
            n = int(str(node.this)) if str(node.this).isdigit() else 0
            if not 1 <= n <= len(outs):
                return None
            out = outs[n - 1]
            if holder is not None and isinstance(out, exp.Alias):  # ORDER BY an output: by its name
                target: exp.Expr = exp.column(exp.to_identifier(ident(out.args["alias"]), quoted=True))
            else:
                target = (out.this if isinstance(out, exp.Alias) else out).copy()
            (holder.this if holder is not None else item).replace(target)
    return inner


def _same_table(a: exp.Table, b: exp.Table, catalog: Catalog) -> bool:
    def resolve(t: exp.Table) -> object:
        schema = ident(t.args["db"]) if t.args.get("db") is not None else None
        return catalog.table(ident(t.this), schema) if isinstance(t.this, exp.Identifier) else None

    ta = resolve(a)
    return ta is not None and ta is resolve(b)


def _equalities(on: exp.Expr | None) -> list[tuple[exp.Expr, exp.Expr]] | None:
    if on is None:
        return None
    out: list[tuple[exp.Expr, exp.Expr]] = []
    stack = [strip_paren(on)]
    while stack:
        node = strip_paren(stack.pop())
        if isinstance(node, exp.And):
            stack.extend([node.this, node.expression])
        elif isinstance(node, exp.EQ):
            out.append((strip_paren(node.this), strip_paren(node.expression)))
        else:
            return None
    return out
