"""sqlglot expression -> scalar.Expr: the one compiler every pass uses for scalar SQL.

A pass supplies ``leaf``, which claims the nodes whose meaning depends on where the expression stands:
columns (a cell value in a GROUP BY bucket, a group key in the target list), aggregates, parameters. The
structure (literals, arithmetic, casts, comparisons, logic, CASE, functions) compiles the same everywhere.
``exact`` keeps decimal literals exact (numeric), as over public cells; without it they are float8, as
over noisy values. A node with no scalar form here raises ``NotScalar`` and the pass phrases the refusal.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlglot import exp

from .. import scalar as S
from ..limits import Budget
from ..syntax import literal_value, position_of
from .nodes import ARITH, CMP_OPS, FLOAT_TYPES, INT_TYPES, TEXT_TYPES, flatten, strip_paren

Leaf = Callable[[exp.Expr], "S.Expr | None"]
NOT_CONSTANT: Any = object()


class NotScalar(Exception):
    """``node`` has no scalar form in this context."""

    def __init__(self, node: exp.Expr) -> None:
        super().__init__(type(node).__name__)
        self.node = node


_FUNCTIONS: dict[type[exp.Expr], str] = {
    exp.Round: "round", exp.Floor: "floor", exp.Ceil: "ceil", exp.Abs: "abs", exp.Coalesce: "coalesce",
    exp.Nullif: "nullif", exp.Greatest: "greatest", exp.Least: "least",
}


def _type_params(a: S.Expr, b: S.Expr) -> None:
    """A parameter takes the type of what it is compared with (as PostgreSQL infers it)."""
    if isinstance(a, S.Param) and not isinstance(b, S.Param):
        a.oid = b.oid
    if isinstance(b, S.Param) and not isinstance(a, S.Param):
        b.oid = a.oid


class _Compiler:
    def __init__(self, leaf: Leaf, exact: bool, budget: Budget) -> None:
        self.leaf, self.exact, self.budget = leaf, exact, budget

    def typed(self, e: S.Expr) -> S.Expr:
        if not self.exact and e.oid == S.NUMERIC:
            e.oid = S.FLOAT8  # numbers computed from noisy values are float8 (see parser.postprocess)
        return e

    def compile(self, node: exp.Expr, depth: int = 0) -> S.Expr:
        node = strip_paren(node)
        self.budget.depth(depth)
        self.budget.tick()
        hit = self.leaf(node)
        if hit is not None:
            return hit
        d = depth + 1
        if isinstance(node, exp.Null):
            return S.Const(None, S.UNKNOWN)
        if isinstance(node, exp.Boolean):
            return S.Const(bool(node.this), S.BOOL)
        if isinstance(node, exp.Literal):
            return self.literal(node)
        if isinstance(node, exp.Neg):
            a = self.compile(node.this, d)
            if a.oid not in S.NUMBER_OIDS and a.oid != S.UNKNOWN:
                raise NotScalar(node)
            return S.Neg(a)
        if type(node) in ARITH:
            a, b = self.compile(node.this, d), self.compile(node.expression, d)
            if S.TEXT in (a.oid, b.oid) or S.BOOL in (a.oid, b.oid):
                raise NotScalar(node)
            return self.typed(S.Arith(ARITH[type(node)], a, b, position_of(node)))
        if isinstance(node, exp.Cast):
            return self.cast(node, d)
        if type(node) in CMP_OPS:
            return self.compare(CMP_OPS[type(node)], node.this, node.expression, d, node)
        if isinstance(node, exp.And | exp.Or):
            parts = [self.compile(x, d) for x in flatten(node, type(node))]
            return S.Logic("and" if isinstance(node, exp.And) else "or", parts)
        if isinstance(node, exp.Not):
            return S.Logic("not", [self.compile(node.this, d)])
        if isinstance(node, exp.Is) and isinstance(node.expression, exp.Null):
            return S.IsNull(self.compile(node.this, d), bool(node.args.get("negate")))
        if isinstance(node, exp.Between):
            x, lo, hi = (self.compile(node.args[k], d) for k in ("this", "low", "high"))
            inside = S.Logic("and", [self.compared(">=", x, lo, node), self.compared("<=", x, hi, node)])
            if not node.args.get("symmetric"):
                return inside
            swapped = S.Logic("and", [self.compared(">=", x, hi, node), self.compared("<=", x, lo, node)])
            return S.Logic("or", [inside, swapped])
        if isinstance(node, exp.In) and node.args.get("query") is None and not node.args.get("unnest"):
            self.budget.in_list(len(node.expressions))
            x = self.compile(node.this, d)
            return S.Logic("or", [self.compared("=", x, self.compile(i, d), node) for i in node.expressions])
        if isinstance(node, exp.Case):
            return self.case(node, d)
        if type(node) in _FUNCTIONS:
            return self.function(_FUNCTIONS[type(node)], node, d)
        raise NotScalar(node)

    def literal(self, node: exp.Literal) -> S.Expr:
        v = literal_value(node)
        if isinstance(v, str):
            return S.Const(v, S.TEXT)
        if isinstance(v, int):
            return S.Const(v, S.INT4 if -(2**31) <= v < 2**31 else S.INT8)
        return S.Const(v, S.NUMERIC) if self.exact else S.Const(float(v), S.FLOAT8)

    def cast(self, node: exp.Cast, d: int) -> S.Expr:
        a = self.compile(node.this, d)
        to = node.args["to"].this
        if to in INT_TYPES:
            oid = S.INT4 if to == exp.DataType.Type.INT else S.INT8
        elif to in FLOAT_TYPES:
            oid = S.NUMERIC
        elif to in TEXT_TYPES:
            oid = S.TEXT
        else:
            raise NotScalar(node)
        if not self.exact and a.oid == S.TEXT and oid != S.TEXT and not isinstance(a, S.Const):
            raise NotScalar(node)  # a text key read as a number could fail after the release
        return self.typed(S.Cast(a, oid, to.value.lower(), position_of(node)))

    def compare(self, op: str, left: exp.Expr, right: exp.Expr, d: int, node: exp.Expr) -> S.Expr:
        return self.compared(op, self.compile(left, d), self.compile(right, d), node)

    def compared(self, op: str, a: S.Expr, b: S.Expr, node: exp.Expr) -> S.Expr:
        _type_params(a, b)
        a, b = self.coerce(a, b), self.coerce(b, a)
        if (a.oid == S.TEXT) != (b.oid == S.TEXT) and S.UNKNOWN not in (a.oid, b.oid):
            raise NotScalar(node)  # text against a number: PostgreSQL has no such operator
        return S.Cmp(op, a, b)

    def coerce(self, e: S.Expr, other: S.Expr) -> S.Expr:
        """A quoted literal compared with a number reads as a number (PostgreSQL's unknown-type literal)."""
        if isinstance(e, S.Const) and e.oid == S.TEXT and other.oid in S.NUMBER_OIDS:
            value = S.cast_value(e.value, S.TEXT, S.NUMERIC, "numeric")
            return S.Const(value, S.NUMERIC) if self.exact else S.Const(float(value), S.FLOAT8)
        return e

    def case(self, node: exp.Case, d: int) -> S.Expr:
        subject = self.compile(node.this, d) if node.this is not None else None
        whens = []
        for branch in node.args.get("ifs") or []:
            test = self.compile(branch.this, d)
            if subject is not None:
                _type_params(test, subject)
            whens.append((test, self.compile(branch.args["true"], d)))
        default = node.args.get("default")
        return self.typed(S.Case(subject, whens, self.compile(default, d) if default is not None else None))

    def function(self, fn: str, node: exp.Expr, d: int) -> S.Expr:
        if fn == "round":
            parts = [node.this] + ([node.args["decimals"]] if node.args.get("decimals") is not None else [])
        elif fn == "nullif":
            parts = [node.this, node.expression]
        else:
            parts = [node.this, *node.expressions]
        if fn in ("floor", "ceil") and node.args.get("decimals") is not None:
            raise NotScalar(node)
        args = [self.compile(p, d) for p in parts]
        if fn in ("round", "floor", "ceil", "abs") and args[0].oid not in S.NUMBER_OIDS | {S.UNKNOWN}:
            raise NotScalar(node)
        return self.typed(S.Call(fn, args, S.call_type(fn, [a.oid for a in args])))


def compile_scalar(node: exp.Expr, leaf: Leaf, budget: Budget, *, exact: bool) -> S.Expr:
    """The scalar form of ``node``; ``leaf`` claims context-dependent nodes (None: not claimed)."""
    return _Compiler(leaf, exact, budget).compile(node)


def _constants_only(node: exp.Expr) -> S.Expr | None:
    if isinstance(node, exp.Column | exp.AggFunc | exp.Parameter | exp.Placeholder | exp.Select | exp.Window):
        raise NotScalar(node)
    return None


def fold(node: exp.Expr, budget: Budget) -> Any:
    """The value of a constant expression (``30``, ``-1.5``, ``'7'::int``, ``2 * 10``), or NOT_CONSTANT.

    Values are int, Decimal, str, bool or None; a cast or division PostgreSQL would refuse raises.
    """
    try:
        e = compile_scalar(node, _constants_only, budget, exact=True)
    except NotScalar:
        return NOT_CONSTANT
    return S.constant(e)
