"""GROUP BY expressions of one attribute (Metabase binning, CASE buckets): evaluated on the public domain.

``floor((age - 17.0) / 10.0) * 10.0 + 17.0`` or ``CASE WHEN age < 30 THEN 'young' ELSE 'older' END`` maps
every value of the attribute's declared domain to a group key; the groups are the distinct keys, each one
the set of domain cells that map to it. Only public information is used, so empty groups exist as with a
plain attribute. Arithmetic follows PostgreSQL: integer / integer truncates, a decimal literal makes the
computation numeric (exact decimals here; keys come out as float8), division by zero is refused.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import ROUND_CEILING, ROUND_FLOOR, ROUND_HALF_UP, Decimal
from typing import Any

from sqlglot import exp

from . import errors as E
from . import postprocess as pp
from .errors import Refusal
from .predicate import Ranges, merge_ranges
from .schema import Attribute
from .syntax import literal_value, position_of


@dataclass(frozen=True)
class GroupDim:
    """One GROUP BY dimension: its attribute, its group keys and, per key, the attribute's cell ranges."""

    attr: str
    keys: tuple[object, ...]
    cells: tuple[Ranges, ...]
    oid: int
    node: exp.Expr | None = None  # the grouping expression (None: the plain attribute)


def plain_dim(attr: Attribute) -> GroupDim:
    d = attr.domain
    return GroupDim(attr.name, tuple(d), tuple(((i, i),) for i in range(d.size)),
                    pp.INT4 if d.kind == "int" else pp.TEXT)


class _Unsupported(Exception):
    def __init__(self, node: exp.Expr) -> None:
        self.node = node


def bucket_dim(attr: Attribute, node: exp.Expr, column_of: Any) -> GroupDim:
    """Evaluate ``node`` (whose only column is ``attr``) on each domain value and group cells by result."""
    by_key: dict[object, list[tuple[int, int]]] = {}
    try:
        for i, v in enumerate(attr.domain):
            key = _ev(node, v, column_of)
            by_key.setdefault(_hashable(key), []).append((i, i))
    except _Unsupported as u:
        raise Refusal(E.FEATURE_NOT_SUPPORTED, f"GROUP BY expression part {u.node.sql(dialect='postgres')!r} is "
                      "not supported on protected tables", position=position_of(u.node),
                      hint="GROUP BY takes attributes, or arithmetic / floor / round / CASE over one attribute.") \
            from None
    except ZeroDivisionError:
        raise Refusal("22012", "division by zero", position=position_of(node)) from None
    keys = list(by_key)
    numeric = [k for k in keys if k is not None and not isinstance(k, str)]
    if any(isinstance(k, Decimal) for k in numeric):
        oid = pp.FLOAT8
    elif numeric:
        oid = pp.INT8
    else:
        oid = pp.TEXT
    if any(isinstance(k, str) for k in keys) and numeric:
        raise Refusal(E.DATATYPE_MISMATCH, "CASE types text and numeric cannot be matched",
                      position=position_of(node))

    def sort_key(k: object) -> tuple[int, Any]:
        return (1, 0) if k is None else (0, k)  # PostgreSQL sorts NULL last

    keys.sort(key=sort_key)
    out_keys = tuple(None if k is None else (float(k) if oid == pp.FLOAT8 else k) for k in keys)  # type: ignore
    return GroupDim(attr.name, out_keys, tuple(merge_ranges(by_key[k]) for k in keys), oid, node)


def _hashable(v: object) -> object:
    if isinstance(v, Decimal):
        return v.normalize() if v == v.to_integral_value() else v
    return v


def _ev(node: Any, v: Any, column_of: Any) -> Any:
    """Value of ``node`` when its column holds ``v`` (None is SQL NULL)."""
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.Column):
        column_of(node)
        return v
    if isinstance(node, exp.Null):
        return None
    if isinstance(node, exp.Literal):
        return literal_value(node)
    if isinstance(node, exp.Neg):
        x = _ev(node.this, v, column_of)
        return None if x is None else -x
    arith = {exp.Add: "+", exp.Sub: "-", exp.Mul: "*", exp.Div: "/", exp.Mod: "%"}
    if type(node) in arith:
        a, b = _ev(node.this, v, column_of), _ev(node.expression, v, column_of)
        if a is None or b is None:
            return None
        if isinstance(a, str) or isinstance(b, str):
            raise _Unsupported(node)
        op = arith[type(node)]
        if isinstance(a, int) and isinstance(b, int):
            if op in "/%":
                if b == 0:
                    raise ZeroDivisionError
                q = abs(a) // abs(b) * (1 if (a >= 0) == (b >= 0) else -1)
                return q if op == "/" else a - q * b
            return a + b if op == "+" else a - b if op == "-" else a * b
        x, y = Decimal(a), Decimal(b)
        if op in "/%" and y == 0:
            raise ZeroDivisionError
        if op == "+":
            return x + y
        if op == "-":
            return x - y
        if op == "*":
            return x * y
        return x / y if op == "/" else x % y
    if isinstance(node, exp.Floor | exp.Ceil):
        x = _ev(node.this, v, column_of)
        if x is None:
            return None
        mode = ROUND_FLOOR if isinstance(node, exp.Floor) else ROUND_CEILING
        return Decimal(x).to_integral_value(rounding=mode)
    if isinstance(node, exp.Round):
        x = _ev(node.this, v, column_of)
        digits = _ev(node.args["decimals"], v, column_of) if node.args.get("decimals") else 0
        if x is None or digits is None:
            return None
        r = Decimal(x).quantize(Decimal(1).scaleb(-int(digits)), rounding=ROUND_HALF_UP)
        return int(r) if isinstance(x, int) and not digits else r
    if isinstance(node, exp.Abs):
        x = _ev(node.this, v, column_of)
        return None if x is None else abs(x)
    if isinstance(node, exp.Cast):
        x = _ev(node.this, v, column_of)
        to = node.args["to"].this
        if x is None:
            return None
        if to in (exp.DataType.Type.INT, exp.DataType.Type.BIGINT, exp.DataType.Type.SMALLINT):
            return int(Decimal(x).to_integral_value(rounding=ROUND_HALF_UP))
        if to in (exp.DataType.Type.DECIMAL, exp.DataType.Type.DOUBLE, exp.DataType.Type.FLOAT):
            return Decimal(x)
        if to in (exp.DataType.Type.TEXT, exp.DataType.Type.VARCHAR):
            return str(x)
        raise _Unsupported(node)
    if isinstance(node, exp.Case):
        subject = node.this
        for branch in node.args.get("ifs") or []:
            if subject is not None:
                hit = pp.compare("=", _ev(subject, v, column_of), _ev(branch.this, v, column_of))
            else:
                hit = _cond(branch.this, v, column_of)
            if hit is True:
                return _ev(branch.args.get("true"), v, column_of)
        default = node.args.get("default")
        return None if default is None else _ev(default, v, column_of)
    raise _Unsupported(node)


_CMP = {exp.EQ: "=", exp.NEQ: "<>", exp.LT: "<", exp.LTE: "<=", exp.GT: ">", exp.GTE: ">="}


def _cond(node: Any, v: Any, column_of: Any) -> bool | None:
    """Three-valued truth of a CASE condition."""
    while isinstance(node, exp.Paren):
        node = node.this
    if type(node) in _CMP:
        a, b = _ev(node.this, v, column_of), _ev(node.expression, v, column_of)
        if isinstance(a, str) != isinstance(b, str) and a is not None and b is not None:
            raise _Unsupported(node)
        return pp.compare(_CMP[type(node)], a, b)
    if isinstance(node, exp.And | exp.Or):
        vals = [_cond(node.this, v, column_of), _cond(node.expression, v, column_of)]
        if isinstance(node, exp.And):
            return False if False in vals else (None if None in vals else True)
        return True if True in vals else (None if None in vals else False)
    if isinstance(node, exp.Not):
        x = _cond(node.this, v, column_of)
        return None if x is None else not x
    if isinstance(node, exp.Between):
        x = _ev(node.this, v, column_of)
        lo, hi = _ev(node.args["low"], v, column_of), _ev(node.args["high"], v, column_of)
        a, b = pp.compare(">=", x, lo), pp.compare("<=", x, hi)
        return False if False in (a, b) else (None if None in (a, b) else True)
    if isinstance(node, exp.In) and node.args.get("query") is None:
        x = _ev(node.this, v, column_of)
        vals = [pp.compare("=", x, _ev(i, v, column_of)) for i in node.expressions]
        return True if True in vals else (None if None in vals else False)
    if isinstance(node, exp.Is) and isinstance(node.expression, exp.Null):
        res = _ev(node.this, v, column_of) is None
        return not res if node.args.get("negate") else res
    raise _Unsupported(node)

