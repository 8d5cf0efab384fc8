"""Parsing of the SQL surface ``SELECT * FROM lapras.linear_regression(table, y, xs [, method [, eps
[, delta]]])`` into a :class:`RegressionCall`, for the proxy's router.

Only the bare form is accepted: ``SELECT *`` (or a list of the result columns) from exactly that one table
function, no WHERE / JOIN / GROUP BY. Anything else naming the function is refused with a clear error.
"""

from __future__ import annotations

from dataclasses import dataclass

import sqlglot
from sqlglot import exp

from lapras.regression.methods import METHODS
from pgcore.identifiers import split_list, split_qualified
from pgcore.sqlstate import SqlError

FUNCTION = "linear_regression"
SCHEMA = "lapras"
RESULT_COLUMNS = ("term", "estimate", "epsilon", "delta")
_ALIASES = {"fastmix": "fast_ihm", "fast-ihm": "fast_ihm", "fastihm": "fast_ihm", "fast_ihm": "fast_ihm",
            "ihm": "ihm", "adassp": "adassp", "linmix": "linmix"}


class RegressionError(SqlError):
    """A refused regression call, with PostgreSQL error fields."""


@dataclass(frozen=True)
class RegressionCall:
    """A parsed call: names as SQL reads them (unquoted ones lower-cased), method canonicalised."""

    table: str
    y: str
    xs: tuple[str, ...]
    method: str = "ihm"
    epsilon: float | None = None
    delta: float | None = None
    schema: str | None = None
    # The result columns the SELECT lists, in its order; () for ``SELECT *`` (all of RESULT_COLUMNS).
    select: tuple[str, ...] = ()


def _find_call(tree: exp.Expression) -> exp.Anonymous | None:
    for node in tree.find_all(exp.Anonymous):
        if isinstance(node.this, str) and node.this.lower() == FUNCTION:
            parent = node.parent
            if isinstance(parent, exp.Table):
                db = parent.args.get("db")
                if db is not None and db.name.lower() == SCHEMA:
                    return node
            if isinstance(parent, exp.Dot) and parent.this.name.lower() == SCHEMA:  # pragma: no cover
                return node
    return None


def _no_parameter(arg: exp.Expression, what: str) -> None:
    # A bound parameter ($1, as psycopg 3 and JDBC send values) is not substituted into the call: say so,
    # rather than "must be a string literal" about a value the client did pass.
    if isinstance(arg, exp.Parameter | exp.Placeholder):
        raise RegressionError("0A000", f"linear_regression: {what} cannot be a bound parameter",
                              hint="write the arguments into the statement as literals (psycopg: sql.Literal, "
                                   "or a ClientCursor)")


def _string(arg: exp.Expression, what: str) -> str:
    _no_parameter(arg, what)
    if isinstance(arg, exp.Literal) and arg.is_string:
        return str(arg.this)
    raise RegressionError("22023", f"linear_regression: {what} must be a string literal")


def _number(arg: exp.Expression, what: str) -> float | None:
    _no_parameter(arg, what)
    if isinstance(arg, exp.Null):
        return None
    if isinstance(arg, exp.Neg) and isinstance(arg.this, exp.Literal):
        raise RegressionError("22023", f"linear_regression: {what} must be positive")
    if isinstance(arg, exp.Literal):
        try:
            return float(arg.this)
        except ValueError:
            pass
    raise RegressionError("22023", f"linear_regression: {what} must be a numeric literal")


def parse_regression_call(sql: str) -> RegressionCall | None:
    """The regression call in ``sql``, or None when the statement does not call lapras.linear_regression.

    Raises RegressionError (42601 syntax, 0A000 unsupported shape, 22023 bad argument) for malformed calls.
    """
    if FUNCTION not in sql.lower():
        return None
    try:
        trees = sqlglot.parse(sql, read="postgres")
    except sqlglot.errors.ParseError as e:
        raise RegressionError("42601", "syntax error in linear_regression call", detail=str(e)) from None
    exprs: list[exp.Expression] = [t for t in trees if isinstance(t, exp.Expression)]
    calls = [(t, c) for t in exprs if (c := _find_call(t)) is not None]
    if not calls:
        return None
    if len(exprs) != 1:
        raise RegressionError("0A000", "linear_regression must be the only statement")
    tree, call = calls[0]
    sel = tree
    if not isinstance(sel, exp.Select):
        raise RegressionError("0A000", "linear_regression is only supported as SELECT * FROM lapras.linear_regression(...)")
    from_ = sel.args.get("from_") or sel.args.get("from")
    # ORDER BY, LIMIT, OFFSET and DISTINCT are refused too: they were silently ignored before.
    if (from_ is None or from_.this is not call.parent or any(
            sel.args.get(k) for k in ("joins", "where", "group", "having", "order", "limit", "offset", "distinct"))):
        raise RegressionError("0A000", "linear_regression is only supported as SELECT * FROM lapras.linear_regression(...)",
                              hint="select from the function alone; no joins, WHERE, GROUP BY, ORDER BY or LIMIT "
                                   "(filter or sort the result in the client)")
    select: list[str] = []
    for col in sel.expressions:
        if isinstance(col, exp.Star):
            select.extend(RESULT_COLUMNS)
        elif isinstance(col, exp.Column) and not isinstance(col.this, exp.Star) and col.name.lower() in RESULT_COLUMNS:
            select.append(col.name.lower())
        elif isinstance(col, exp.Column) and isinstance(col.this, exp.Star):
            select.extend(RESULT_COLUMNS)  # r.*
        else:
            raise RegressionError("0A000", "only * or the result columns term, estimate, epsilon, delta "
                                  "may be selected from linear_regression")
    args = list(call.expressions)
    if not 3 <= len(args) <= 6:
        raise RegressionError("22023", "linear_regression takes (table, y, xs [, method [, epsilon [, delta]]])",
                              hint="e.g. SELECT * FROM lapras.linear_regression('adult', 'hours_per_week', "
                                   "'age, education_num', 'ihm', 0.5)")
    # Names are written as in SQL (as PostgreSQL reads a regclass text): unquoted ones fold to lower case,
    # quoted ones are kept as written: 'public."Sales 3"', '"Number of Records", age'.
    table_text = _string(args[0], "table")
    parts = split_qualified(table_text)
    if parts is None or len(parts) > 2:
        raise RegressionError("42602", f"invalid name syntax: {table_text!r}",
                              hint='write the table as in SQL: adult, public.adult or "My Schema"."My Table"')
    schema, table_arg = (None, parts[0]) if len(parts) == 1 else parts
    y_text = _string(args[1], "y")
    ys = split_list(y_text)
    if ys is None or len(ys) != 1:
        raise RegressionError("42602", f"invalid name syntax: {y_text!r}", hint="name one column, as in SQL")
    y = ys[0]
    xs_text = _string(args[2], "xs")
    xs = split_list(xs_text) if xs_text.strip() else ()
    if xs is None:
        raise RegressionError("42602", f"invalid name syntax: {xs_text!r}",
                              hint='list columns as in SQL: \'age, "Number of Records"\'')
    if not xs:
        raise RegressionError("22023", "linear_regression: xs lists no column")
    if len(set(xs)) != len(xs) or y in xs:
        raise RegressionError("22023", "linear_regression: columns must be distinct and exclude y")
    method = "ihm"
    if len(args) >= 4 and not isinstance(args[3], exp.Null):
        raw = _string(args[3], "method").strip().lower()
        if raw not in _ALIASES:
            raise RegressionError("22023", f"unknown regression method {raw!r}",
                                  hint="one of " + ", ".join(METHODS))
        method = _ALIASES[raw]
    eps = _number(args[4], "epsilon") if len(args) >= 5 else None
    delta = _number(args[5], "delta") if len(args) >= 6 else None
    if eps is not None and not eps > 0:
        raise RegressionError("22023", "linear_regression: epsilon must be positive")
    if delta is not None and not 0 < delta < 1:
        raise RegressionError("22023", "linear_regression: delta must be in (0, 1)")
    return RegressionCall(table_arg, y, xs, method, eps, delta, schema,
                          () if tuple(select) == RESULT_COLUMNS else tuple(select))
