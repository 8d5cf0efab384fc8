"""sqlglot expression -> scalar.Expr: the one compiler every pass uses for scalar SQL.

A pass supplies ``leaf``, which claims the nodes whose meaning depends on where the expression stands:
columns (a cell value in a GROUP BY bucket, a group key in the target list), aggregates, parameters. The
structure (literals, arithmetic, casts, comparisons, logic, CASE, functions) compiles the same everywhere:
here the core, temporal nodes in ``scalar_time``, function calls in ``scalar_calls``; values over a
column's cells in ``cells``.
``exact`` keeps decimal literals exact (numeric), as over public cells; without it they are float8, as
over noisy values. A node with no scalar form here raises ``NotScalar`` and the pass phrases the refusal.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import date
from typing import Any

from sqlglot import exp

from pgcore import errors as E
from pgcore import pgtypes as T
from pgcore.errors import Refusal

from .. import scalar as S
from ..coltypes.timeofday import time_of_day
from ..model.limits import Budget
from ..semantics import datetimes as TM
from ..semantics.values import NUMBER_OIDS
from ..syntax.parse import folded_items, literal_value, position_of
from .nodes import ARITH, CMP_OPS, FLOAT_TYPES, INT_TYPES, TEXT_TYPES, NotScalar, flatten, strip_paren
from .scalar_calls import CallCompiler
from .scalar_time import TEMPORAL_TYPES, TemporalCompiler
from .zoned import zoned_cast

Leaf = Callable[[exp.Expr], "S.Expr | None"]
NOT_CONSTANT: Any = object()


def _type_params(a: S.Expr, b: S.Expr) -> None:
    """A parameter takes the type of what it is compared with (as PostgreSQL infers it)."""
    if isinstance(a, S.Param) and not isinstance(b, S.Param):
        a.oid = b.oid
    if isinstance(b, S.Param) and not isinstance(a, S.Param):
        b.oid = a.oid


def _untyped_param_takes(op: str, a: S.Expr, b: S.Expr, node: exp.Expr) -> None:
    """An untyped parameter next to an operator takes the other operand's type (``$1 * 2``: integer,
    ``$1 - interval '7 days'``: interval), as PostgreSQL resolves an unknown operand; timestamp + unknown has
    no timestamp + timestamp, so its one candidate, interval; date + unknown has several (42725)."""
    for x, y in ((a, b), (b, a)):
        if isinstance(x, S.Param) and x.oid == T.UNKNOWN and y.oid != T.UNKNOWN:
            if op == "+" and y.oid == T.DATE:
                raise Refusal(E.AMBIGUOUS_FUNCTION, "operator is not unique: date + unknown", position=position_of(node),
                              hint="Cast the parameter: $1::integer (days) or $1::interval.")
            x.oid = T.INTERVAL if op == "+" and y.oid in (T.TIMESTAMP, T.TIMESTAMPTZ) else y.oid


class _Compiler(TemporalCompiler, CallCompiler):
    def __init__(self, leaf: Leaf, exact: bool, budget: Budget) -> None:
        self.leaf, self.exact, self.budget = leaf, exact, budget

    def typed(self, e: S.Expr) -> S.Expr:
        return e  # numeric stays numeric, as PostgreSQL types it (``count(*)::numeric / 3``, ``round(avg, 2)``)

    def compile(self, node: exp.Expr, depth: int = 0) -> S.Expr:
        node = strip_paren(node)
        self.budget.depth(depth)
        self.budget.tick()
        hit = self.leaf(node)
        if hit is not None:
            return hit
        d = depth + 1
        if isinstance(node, exp.Null):
            return S.Const(None, T.UNKNOWN)
        if isinstance(node, exp.Boolean):
            return S.Const(bool(node.this), T.BOOL)
        if isinstance(node, exp.Literal):
            return self.literal(node)
        if isinstance(node, exp.Neg):
            a = self.compile(node.this, d)
            if a.oid not in NUMBER_OIDS and a.oid != T.UNKNOWN:
                raise NotScalar(node)
            return S.Neg(a)
        if type(node) in ARITH:
            a, b = self.compile(node.this, d), self.compile(node.expression, d)
            op = ARITH[type(node)]
            _untyped_param_takes(op, a, b, node)
            if {a.oid, b.oid} & (T.TEMPORAL_OIDS | {T.INTERVAL}):
                return self.temporal_arith(op, a, b, node)
            if T.TEXT in (a.oid, b.oid) or T.BOOL in (a.oid, b.oid):
                raise NotScalar(node)
            return self.typed(S.Arith(op, a, b, position_of(node)))
        hit = self.temporal(node, d)
        if hit is not None:
            return hit
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
            return self.in_list(node, d)
        if isinstance(node, exp.Is) and isinstance(node.expression, exp.Boolean):
            return S.IsTruth(self.compile(node.this, d), bool(node.expression.this), bool(node.args.get("negate")))
        if isinstance(node, exp.Case):
            return self.case(node, d)
        hit = self.call(node, d)
        if hit is not None:
            return hit
        raise NotScalar(node)

    def in_list(self, node: exp.In, d: int) -> S.Expr:
        """``x IN (...)``: one hash lookup a row when every item is a constant, else OR of equalities."""
        folded = folded_items(node)
        if folded is not None:  # the parser's scanner read a long list of plain literals: as nodes again
            node = exp.In(this=node.this, expressions=[
                exp.Literal.string(v) if isinstance(v, str) else exp.Literal.number(str(v)) for v, _ in folded])
        self.budget.in_list(len(node.expressions))
        x = self.compile(node.this, d)
        tests = [self.compared("=", x, self.compile(i, d), node) for i in node.expressions]
        lhs = {t.args[0].oid for t in tests}
        if tests and len(lhs) == 1 and all(isinstance(t.args[1], S.Const) for t in tests):
            first = tests[0].args[0]
            return S.InList(first, [t.args[1].value for t in tests])  # type: ignore[attr-defined]
        return S.Logic("or", tests)

    def literal(self, node: exp.Literal) -> S.Expr:
        v = literal_value(node)
        if isinstance(v, str):
            return S.Const(v, T.TEXT)
        if isinstance(v, int):
            return S.Const(v, T.INT4 if -(2**31) <= v < 2**31 else T.INT8)
        return S.Const(v, T.NUMERIC) if self.exact else S.Const(float(v), T.FLOAT8)

    def cast(self, node: exp.Cast, d: int) -> S.Expr:
        a = self.compile(node.this, d)
        to = node.args["to"].this
        if isinstance(a, S.Param) and a.oid == T.UNKNOWN and to == exp.DataType.Type.INTERVAL:
            a.oid = T.INTERVAL  # $1::interval: a parameter of that type
            return a
        if to in INT_TYPES:
            oid = T.INT4 if to == exp.DataType.Type.INT else T.INT8
        elif to in FLOAT_TYPES:
            oid = T.NUMERIC if to in (exp.DataType.Type.DECIMAL, exp.DataType.Type.BIGDECIMAL) else T.FLOAT8
        elif to in TEXT_TYPES:
            oid = T.TEXT
        elif to in TEMPORAL_TYPES:
            oid = TEMPORAL_TYPES[to]
            if a.oid not in T.TEMPORAL_OIDS | {T.TEXT, T.UNKNOWN}:
                raise NotScalar(node)
        elif to == exp.DataType.Type.BOOLEAN:
            oid = T.BOOL
            if a.oid not in (T.BOOL, T.INT4, T.TEXT, T.UNKNOWN):
                raise Refusal(E.CANNOT_COERCE, f"cannot cast type {T.type_name(a.oid)} to boolean",
                              position=position_of(node))
        elif to == exp.DataType.Type.TIME:  # TIME '10:30': a constant time of day (time columns' literals)
            if a.oid not in (T.TEXT, T.UNKNOWN) or not _constant_expr(a):
                raise NotScalar(node)
            text = a.value if isinstance(a, S.Const) else S.constant(a)
            if text is None:
                return S.Const(None, T.TIME)
            ts = time_of_day(str(text))
            if ts.date() != date(2000, 1, 1):
                raise NotScalar(node)  # 24:00 has no Python time: compared as text by the column's type
            return S.Const(ts.time(), T.TIME)
        elif to == exp.DataType.Type.INTERVAL:
            if a.oid not in (T.TEXT, T.UNKNOWN) or not _constant_expr(a):
                raise NotScalar(node)
            value = a.value if isinstance(a, S.Const) else S.constant(a)  # (-1 || ' year')::interval (Looker)
            return S.Const(None if value is None else TM.parse_interval(str(value)), T.INTERVAL)
        else:
            raise NotScalar(node)
        if isinstance(a, S.Param) and a.oid == T.UNKNOWN:
            a.oid = oid  # $1::timestamp: the parameter is of that type (PostgreSQL types it so at Parse)
            return a
        if a.oid == T.BOOL and oid not in (T.BOOL, T.INT4, T.TEXT):
            raise Refusal(E.CANNOT_COERCE, f"cannot cast type boolean to {T.type_name(oid)}", position=position_of(node),
                          hint="boolean casts to integer (int4): CAST(flag AS INT).")
        if not self.exact and a.oid == T.TEXT and oid != T.TEXT and not isinstance(a, S.Const):
            raise NotScalar(node)  # a text key read as a number could fail after the release
        cast = self.typed(zoned_cast(a, oid, to.value.lower(), position_of(node)))
        mods = node.args["to"].expressions
        if oid == T.NUMERIC and mods:  # numeric(p, s) rounds to s places (half away from zero), as PostgreSQL's typmod
            scale = mods[1] if len(mods) > 1 else None
            digits = int(scale.this.this) if isinstance(scale, exp.DataTypeParam) and scale.this.is_int else 0
            return S.Call("round", [cast, S.Const(digits, T.INT4)], T.NUMERIC)
        return cast

    def compare(self, op: str, left: exp.Expr, right: exp.Expr, d: int, node: exp.Expr) -> S.Expr:
        return self.compared(op, self.compile(left, d), self.compile(right, d), node)

    def compared(self, op: str, a: S.Expr, b: S.Expr, node: exp.Expr) -> S.Expr:
        _type_params(a, b)
        a, b = self.coerce(a, b), self.coerce(b, a)
        if a.oid in T.TEMPORAL_OIDS or b.oid in T.TEMPORAL_OIDS:
            a, b = self.temporal_operands(a, b, node)
        elif (a.oid == T.TEXT) != (b.oid == T.TEXT) and T.UNKNOWN not in (a.oid, b.oid):
            raise NotScalar(node)  # text against a number: PostgreSQL has no such operator
        return S.Cmp(op, a, b)

    def coerce(self, e: S.Expr, other: S.Expr) -> S.Expr:
        """A quoted literal compared with a number reads as a number (PostgreSQL's unknown-type literal)."""
        if isinstance(e, S.Const) and e.oid == T.TEXT and other.oid in NUMBER_OIDS:
            value = S.cast_value(e.value, T.TEXT, T.NUMERIC, "numeric")
            return S.Const(value, T.NUMERIC) if self.exact else S.Const(float(value), T.FLOAT8)
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


def _constant_expr(e: S.Expr) -> bool:
    """``e`` reads no row, group, aggregate or parameter (its value is one constant)."""
    return all(type(x) in S.NODES and not isinstance(x, S.Cell | S.Key | S.Param) for x in e.walk())


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
