"""Helpers over sqlglot trees shared by the analysis passes: names as PostgreSQL folds them, parentheses,
parameters, operator tables, and the refusals that name a construct."""

from __future__ import annotations

import re
from typing import Any

from sqlglot import exp

from pgcore import errors as E
from pgcore.errors import Refusal
from pgcore.identifiers import display_ident, fold

from .. import scalar as S
from ..model.limits import Budget
from ..model.schema import TableSchema
from ..syntax.parse import DATE_PART, position_of

CMP_OPS: dict[type[exp.Expr], str] = {
    exp.EQ: "=", exp.NEQ: "<>", exp.LT: "<", exp.LTE: "<=", exp.GT: ">", exp.GTE: ">=",
}
FLIP = {"=": "=", "<>": "<>", "<": ">", "<=": ">=", ">": "<", ">=": "<="}
ARITH: dict[type[exp.Expr], str] = {exp.Add: "+", exp.Sub: "-", exp.Mul: "*", exp.Div: "/", exp.Mod: "%"}
INT_TYPES = {exp.DataType.Type.INT, exp.DataType.Type.BIGINT, exp.DataType.Type.SMALLINT}
FLOAT_TYPES = {exp.DataType.Type.DOUBLE, exp.DataType.Type.FLOAT, exp.DataType.Type.DECIMAL,
               exp.DataType.Type.BIGDECIMAL}
TEXT_TYPES = {exp.DataType.Type.TEXT, exp.DataType.Type.VARCHAR, exp.DataType.Type.CHAR}


class NotScalar(Exception):
    """``node`` has no scalar form in this context."""

    def __init__(self, node: exp.Expr) -> None:
        super().__init__(type(node).__name__)
        self.node = node


class CompilerPart:
    """What a part of the scalar compiler (``scalar_time``, ``scalar_calls``) uses of the whole: the
    statement's budget, exactness, and ``compile`` / ``typed`` (``parser.analysis.scalars``)."""

    budget: Budget
    exact: bool

    def compile(self, node: exp.Expr, depth: int = 0) -> S.Expr:
        raise NotImplementedError

    def typed(self, e: S.Expr) -> S.Expr:
        raise NotImplementedError


def unsupported(what: str, node: exp.Expr | None, hint: str = E.SUPPORTED_HINT) -> Refusal:
    return Refusal(E.FEATURE_NOT_SUPPORTED, f"{what} is not supported on protected tables", hint=hint,
                   position=position_of(node))


def sql_of(node: exp.Expr) -> str:
    try:
        return node.sql(dialect="postgres")
    except Exception:  # noqa: BLE001 - only used for messages
        return type(node).__name__


ident = fold
"""Identifier text as PostgreSQL folds it (``pgcore.identifiers.fold``)."""


def strip_paren(node: Any) -> Any:
    while isinstance(node, exp.Paren):
        node = node.this
    return node


def strip_numeric_casts(node: Any) -> Any:
    """Casts to a numeric type do not change an integer attribute's value (Tableau wraps columns so)."""
    node = strip_paren(node)
    while isinstance(node, exp.Cast) and node.args["to"].this in (INT_TYPES | FLOAT_TYPES):
        node = strip_paren(node.this)
    return node


def flatten(node: exp.Expr, cls: type[exp.Expr]) -> list[exp.Expr]:
    """Operands of a left-deep chain ``a OR b OR c ...`` without recursing once per operand."""
    out: list[exp.Expr] = []
    stack = [node]
    while stack:
        n = strip_paren(stack.pop())
        if type(n) is cls:
            stack.append(n.expression)
            stack.append(n.this)
        else:
            out.append(n)
    return out


def in_nested_select(node: exp.Expr, root: exp.Select) -> bool:
    """Whether ``node`` stands inside a subquery of ``root`` (a column of another scope, not one of root's)."""
    p = node.parent
    while p is not None and p is not root:
        if isinstance(p, exp.Select | exp.Subquery):
            return True
        p = p.parent
    return False


def param_index(node: exp.Expr) -> int:
    text = node.name if isinstance(node, exp.Placeholder) else str(node.this.this if isinstance(
        node.this, exp.Expr) else node.this)
    try:
        n = int(text)
    except ValueError:
        raise unsupported(f"parameter {sql_of(node)}", node) from None
    if n < 1:
        raise Refusal(E.UNDEFINED_PARAMETER, f"there is no parameter ${n}", position=position_of(node))
    return n


def is_param(node: exp.Expr) -> bool:
    return isinstance(node, exp.Parameter | exp.Placeholder)


def non_aggregate(table: TableSchema, sel: exp.Select) -> Refusal:
    return Refusal(E.INSUFFICIENT_PRIVILEGE,
                   f"permission denied: non-aggregate read of protected table {table.name}",
                   hint="Only aggregates (COUNT, SUM, AVG) may be read from a protected table, e.g. "
                   f"SELECT count(*) FROM {display_ident(table.name)} WHERE ...",
                   position=position_of(sel.expressions[0]) if sel.expressions else None)


def star_refusal(table: TableSchema, node: exp.Expr) -> Refusal:
    return Refusal(E.INSUFFICIENT_PRIVILEGE, f"permission denied: SELECT * on protected table {table.name}",
                   hint="Only aggregates (COUNT, SUM, AVG) may be read from a protected table.",
                   position=position_of(node))


_FUNCTION_NAMES: dict[type[exp.Expr], str] = {
    exp.Coalesce: "coalesce", exp.Nullif: "nullif", exp.Round: "round", exp.Abs: "abs", exp.Ceil: "ceil",
    exp.Floor: "floor", exp.Greatest: "greatest", exp.Least: "least", exp.TimestampTrunc: "date_trunc",
    exp.DateTrunc: "date_trunc", exp.UnixToTime: "to_timestamp", exp.AtTimeZone: "timezone",
    exp.CurrentDate: "current_date",
}
_CAST_NAMES = {exp.DataType.Type.BIGINT: "int8", exp.DataType.Type.INT: "int4", exp.DataType.Type.DOUBLE: "float8",
               exp.DataType.Type.DECIMAL: "numeric", exp.DataType.Type.TEXT: "text", exp.DataType.Type.DATE: "date",
               exp.DataType.Type.TIMESTAMP: "timestamp", exp.DataType.Type.TIMESTAMPTZ: "timestamptz"}


def figure_name(node: exp.Expr) -> str:
    """The output column name PostgreSQL gives an unaliased expression (FigureColname)."""
    node = strip_paren(node)
    if isinstance(node, exp.Column):
        return ident(node.this)
    if isinstance(node, exp.Cast):
        inner = figure_name(node.this)
        return inner if inner != "?column?" else _CAST_NAMES.get(node.args["to"].this, "?column?")
    if isinstance(node, exp.Filter):
        return figure_name(node.this)
    if isinstance(node, exp.WithinGroup):
        return {exp.PercentileCont: "percentile_cont", exp.PercentileDisc: "percentile_disc"}.get(
            type(node.this), "?column?")
    if isinstance(node, exp.AggFunc):
        return type(node).__name__.lower()
    if isinstance(node, exp.Case):
        return "case"
    if isinstance(node, exp.Anonymous) and node.name.lower() == "timezone":
        return "timezone"
    if isinstance(node, exp.Func | exp.AtTimeZone) and not isinstance(node, exp.Binary):
        return _FUNCTION_NAMES.get(type(node)) or _called_name(node)
    return "?column?"


def _called_name(node: exp.Expr) -> str:
    """A function call's name as PostgreSQL's FigureColname gives it (the function's, lower(x) -> lower):
    sqlglot's node types lose the spelling, so it is read back from the call as written for PostgreSQL."""
    if isinstance(node, exp.Anonymous):
        return node.name if isinstance(node.this, exp.Identifier) and node.this.quoted else node.name.lower()
    if isinstance(node, exp.Extract) and node.meta.get(DATE_PART):
        return "date_part"
    if isinstance(node, exp.Trim):  # trim(x) and btrim(x) call btrim; LEADING ltrim, TRAILING rtrim
        return {"LEADING": "ltrim", "TRAILING": "rtrim"}.get(str(node.args.get("position") or "").upper(), "btrim")
    m = _CALL.match(sql_of(node))
    return m.group(1).lower() if m else "?column?"


_CALL = re.compile(r"([A-Za-z_][A-Za-z_0-9]*)\(")
