"""Canonical form of a statement and its template (the statement with literals abstracted).

``analyse(sql)`` parses one statement with sqlglot (PostgreSQL dialect) and normalises what does not
change the answer: identifier case, ``COUNT(1)`` vs ``COUNT(*)``, output aliases, a lone table's alias and
qualifiers, ``30 <= age`` vs ``age >= 30``, redundant parentheses, duplicate and reordered ``AND``
conjuncts, ``IN`` list order. The result is a :class:`Shape`: the canonical SQL (``key``), the template
(literals replaced by ``$1..$n`` in a canonical slot order), the literal values with their kinds and the
column each literal is compared with (for domains and progressions).

Conjuncts are sorted by their template text first and by their literal text second, so a template's slot
order does not depend on the literal values. The same SQL always gives the same Shape (pure function,
cached); ``render(template, values)`` is its inverse up to canonicalisation.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from functools import lru_cache

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.optimizer.normalize_identifiers import normalize_identifiers

from parser.coltypes import ColumnType, DateType, FloatType, IntType, TextType, TimestampType

Value = int | float | str | date | datetime
Kind = type[ColumnType]  # what a literal's spelling reads as: IntType, FloatType, TextType, DateType, TimestampType

_SYSTEM_SCHEMAS = {"pg_catalog", "information_schema"}
_DATE_RE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
# A UTC offset may follow ('2025-11-04 00:00:00+00' is how psycopg and BI tools write a timestamptz).
_TS_RE = re.compile(r"^\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}(:?\d{2})?)?$")
_PREDICATES = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.Between, exp.In, exp.Like, exp.ILike)
_FLIP: dict[type[exp.Expr], type[exp.Expr]] = {
    exp.GT: exp.LT,
    exp.LT: exp.GT,
    exp.GTE: exp.LTE,
    exp.LTE: exp.GTE,
    exp.EQ: exp.EQ,
    exp.NEQ: exp.NEQ,
}


@dataclass(frozen=True)
class Shape:
    """One statement in canonical form.

    ``is_query`` is true for a SELECT reading a user table with an aggregate: the statements the engine
    answers and the predictor predicts (metadata, SET, transaction control and so on are not).
    ``kinds`` per slot: the column-type class a literal of that spelling reads as (``IntType``,
    ``FloatType``, ``TextType``, ``DateType`` or ``TimestampType``).
    """

    key: str
    template: str
    values: tuple[Value, ...]
    kinds: tuple[Kind, ...]
    columns: tuple[str | None, ...]
    tables: tuple[str, ...]
    is_query: bool
    concrete: bool = True  # False when the text still has $n placeholders (pg_stat_statements)


def _typed(lit: exp.Literal, negative: bool) -> tuple[Value, Kind]:
    text = str(lit.this)
    if lit.is_string:
        if _DATE_RE.match(text):
            try:
                return date.fromisoformat(text), DateType
            except ValueError:
                return text, TextType
        if _TS_RE.match(text):
            try:
                return datetime.fromisoformat(text.replace(" ", "T")), TimestampType
            except ValueError:
                return text, TextType
        return text, TextType
    try:
        iv = int(text)
        return (-iv if negative else iv), IntType
    except ValueError:
        fv = float(text)
        return (-fv if negative else fv), FloatType


def literal_sql(value: Value, kind: Kind) -> exp.Expr:
    """The literal node for a slot value (the inverse of reading it)."""
    if kind is DateType and isinstance(value, date):
        return exp.Literal.string(value.isoformat())
    if kind is TimestampType and isinstance(value, datetime):
        return exp.Literal.string(value.isoformat(sep=" "))
    if isinstance(value, str):
        return exp.Literal.string(value)
    if isinstance(value, bool):
        return exp.Literal.number(int(value))
    if isinstance(value, float) and value.is_integer() and kind is IntType:
        value = int(value)
    if isinstance(value, (int, float)) and value < 0:
        return exp.Neg(this=exp.Literal.number(-value))
    return exp.Literal.number(value)


def _strip_parens(e: exp.Expr) -> exp.Expr:
    while isinstance(e, exp.Paren):
        e = e.this
    return e


def _canon_conjunct(c: exp.Expr) -> exp.Expr:
    c = _strip_parens(c)
    # literal <op> column  ->  column <flipped op> literal
    if type(c) in _FLIP and not isinstance(c.this, exp.Column) and isinstance(c.expression, exp.Column):
        c = _FLIP[type(c)](this=c.expression, expression=c.this)
    if isinstance(c, exp.In) and c.expressions:
        seen: dict[str, exp.Expr] = {}
        for item in c.expressions:
            seen.setdefault(item.sql("postgres"), item)
        c.set("expressions", [seen[k] for k in sorted(seen, key=_sort_text)])
    return c


def _sort_text(text: str) -> tuple[int, float, str]:
    """Numbers sort numerically (so IN lists and tie-breaks do not depend on digit count)."""
    try:
        return (0, float(text), text)
    except ValueError:
        return (1, 0.0, text)


_LITERAL_TEXT = re.compile(r"'(?:[^']|'')*'|(?<![\w.$])-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")


def _template_text(node: exp.Expr) -> str:
    """The conjunct's text with its literals blanked (a sort key that ignores the values; no AST copy)."""
    return _LITERAL_TEXT.sub("?", node.sql("postgres"))


def _canonical_where(cond: exp.Expr) -> exp.Expr:
    cond = _strip_parens(cond)
    if not isinstance(cond, exp.And):
        return _canon_conjunct(cond)
    parts = [_canon_conjunct(p) for p in cond.flatten()]
    unique: dict[str, exp.Expr] = {}
    for p in parts:
        unique.setdefault(p.sql("postgres"), p)
    ordered = sorted(unique.items(), key=lambda kv: (_template_text(kv[1]), _literal_order(kv[1]), kv[0]))
    out = ordered[0][1]
    for _, p in ordered[1:]:
        out = exp.And(this=out, expression=p)
    return out


def _literal_order(node: exp.Expr) -> tuple[tuple[int, float, str], ...]:
    return tuple(_sort_text(str(lit.this)) for lit in node.find_all(exp.Literal))


def _canonicalise(tree: exp.Expr) -> exp.Expr:
    tree = normalize_identifiers(tree, dialect="postgres")
    for count in list(tree.find_all(exp.Count)):
        arg = count.this
        if isinstance(arg, exp.Literal) or (isinstance(arg, exp.Star)):
            count.set("this", exp.Star())
    if isinstance(tree, exp.Select):
        tree.set("expressions", [_strip_alias(e) for e in tree.expressions])
        tables = list(tree.find_all(exp.Table))
        if len(tables) == 1 and tables[0].alias:
            alias = tables[0].alias
            tables[0].set("alias", None)
            for col in tree.find_all(exp.Column):
                if col.table == alias:
                    col.set("table", None)
        if len(tables) == 1:
            for col in tree.find_all(exp.Column):
                if col.table == tables[0].name:
                    col.set("table", None)
        where = tree.args.get("where")
        if where is not None:
            where.set("this", _canonical_where(where.this))
    return tree


def _strip_alias(e: exp.Expr) -> exp.Expr:
    return e.this if isinstance(e, exp.Alias) else e


def _column_of(lit: exp.Expr) -> str | None:
    node: exp.Expr | None = lit.parent
    while node is not None and not isinstance(node, _PREDICATES):
        if isinstance(node, (exp.Select, exp.Where, exp.And, exp.Or)):
            return None
        node = node.parent
    if node is None:
        return None
    target = _strip_parens(node.this)
    return target.name if isinstance(target, exp.Column) else None


def _is_query(tree: exp.Expr) -> tuple[bool, tuple[str, ...]]:
    if not isinstance(tree, exp.Select):
        return False, ()
    tables = tuple(
        sorted({t.name for t in tree.find_all(exp.Table) if t.db not in _SYSTEM_SCHEMAS and t.name})
    )
    if not tables or any(t.startswith("pg_") for t in tables):
        return False, tables
    has_agg = any(True for _ in tree.find_all(exp.AggFunc))
    return has_agg, tables


@lru_cache(maxsize=200_000)
def analyse(sql: str) -> Shape | None:
    """Canonical shape of one SQL statement, or None when it does not parse as exactly one statement."""
    try:
        trees = [t for t in sqlglot.parse(sql, read="postgres") if t is not None]
    except (SqlglotError, ValueError, RecursionError):
        return None
    if len(trees) != 1:
        return None
    try:
        tree = _canonicalise(trees[0])
    except (SqlglotError, ValueError, AttributeError):
        return None
    values: list[Value] = []
    kinds: list[Kind] = []
    columns: list[str | None] = []
    slots: list[exp.Expr] = []
    for lit in list(tree.find_all(exp.Literal, bfs=False)):
        if isinstance(lit.parent, exp.Parameter):
            continue
        node: exp.Expr = lit
        negative = False
        if isinstance(lit.parent, exp.Neg) and not lit.is_string:
            node, negative = lit.parent, True
        try:
            value, kind = _typed(lit, negative)
        except ValueError:
            continue
        values.append(value)
        kinds.append(kind)
        columns.append(_column_of(node))
        slots.append(node)
    key = tree.sql("postgres")
    is_query, tables = _is_query(tree)
    concrete = tree.find(exp.Parameter) is None
    # The tree is ours (parsed above): turn it into the template in place rather than copying it.
    for i, node in enumerate(slots, start=1):
        node.replace(exp.Parameter(this=exp.Literal.number(i)))
    return Shape(
        key,
        tree.sql("postgres"),
        tuple(values),
        tuple(kinds),
        tuple(columns),
        tables,
        is_query,
        concrete,
    )


@lru_cache(maxsize=20_000)
def _template_tree(template: str) -> exp.Expr:
    return sqlglot.parse_one(template, read="postgres")


def render(template: str, values: tuple[Value, ...], kinds: tuple[Kind, ...]) -> str:
    """SQL of a template with its ``$n`` slots filled (the engine re-parses this text)."""
    tree = _template_tree(template).copy()
    for param in list(tree.find_all(exp.Parameter)):
        idx = int(str(param.this.this)) if isinstance(param.this, exp.Literal) else 0
        if 1 <= idx <= len(values):
            param.replace(literal_sql(values[idx - 1], kinds[idx - 1]))
    return tree.sql("postgres")


def shift_value(value: Value, kind: Kind, amount: float) -> Value:
    """``value + amount`` in the slot's own unit (days for dates and timestamps)."""
    if kind is DateType and isinstance(value, date):
        return value + timedelta(days=round(amount))
    if kind is TimestampType and isinstance(value, datetime):
        return value + timedelta(days=amount)
    if kind is IntType and isinstance(value, int):
        return value + round(amount)
    if isinstance(value, (int, float)):
        return value + amount
    raise TypeError(f"cannot shift a {kind.type_name} literal")


def numeric(value: Value, kind: Kind) -> float | None:
    """A slot value on a number line (dates as day ordinals), or None for categorical text."""
    if kind is DateType and isinstance(value, date):
        return float(value.toordinal())
    if kind is TimestampType and isinstance(value, datetime):
        if value.tzinfo is not None:  # on UTC's line, so literals with different offsets compare
            value = value.astimezone(UTC).replace(tzinfo=None)
        return (
            value.toordinal()
            + (value - datetime.combine(value.date(), datetime.min.time())).total_seconds() / 86400
        )
    if kind in (IntType, FloatType) and isinstance(value, (int, float)):
        return float(value)
    return None
