"""Typed expression trees evaluated on noisy aggregates: output columns, HAVING, ORDER BY keys.

Everything here is post-processing of released values (and public group keys), so it costs no privacy.
Typing follows PostgreSQL where it matters to clients: COUNT and SUM of an integer attribute are int8
(noisy values rounded), integer arithmetic stays integer (``/`` truncates); AVG and anything involving a
decimal literal is float8 (PostgreSQL says numeric; float8 avoids implying precision noise does not have). Deviations, chosen so a
noisy value never raises mid-result: division by zero yields NULL (PostgreSQL raises 22012).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

INT4, INT8, FLOAT8, NUMERIC, TEXT, BOOL, UNKNOWN = 23, 20, 701, 1700, 25, 16, 705
INTEGER_OIDS = frozenset({INT4, INT8})
NUMBER_OIDS = frozenset({INT4, INT8, FLOAT8, NUMERIC})


@dataclass
class Ctx:
    """One output group: its public key values, its noisy aggregate slots and the bound parameters."""

    key: tuple[object, ...]
    aggs: Sequence[float]
    params: Sequence[object]


class Expr:
    """A typed post-processing expression."""

    oid: int = FLOAT8
    name: str = "?column?"

    def ev(self, ctx: Ctx) -> object:
        raise NotImplementedError


def round_half_even(x: float) -> int:
    return int(round(x))


def round_count(x: float) -> int:
    """Noisy count -> integer (post-processing; may be negative: clamping would bias sums of counts)."""
    return int(math.floor(x + 0.5))


class Agg(Expr):
    """A COUNT or SUM slot of the group, rounded to an integer and typed int8.

    PostgreSQL types count(*) and sum(integer) as bigint, so integer arithmetic on them (``SUM(a) /
    COUNT(*)`` truncates) behaves here as it would upstream; rounding a noisy value is post-processing.
    """

    oid = INT8

    def __init__(self, slot: int, is_count: bool, name: str) -> None:
        self.slot, self.is_count, self.name = slot, is_count, name

    def ev(self, ctx: Ctx) -> object:
        return round_count(float(ctx.aggs[self.slot]))


class Scaled(Expr):
    """``c * COUNT(*)``: SUM of a constant (Tableau writes ``SUM(1)``)."""

    def __init__(self, slot: int, factor: float | int, name: str) -> None:
        self.slot, self.factor, self.name = slot, factor, name
        self.oid = INT8 if isinstance(factor, int) else FLOAT8

    def ev(self, ctx: Ctx) -> object:
        n = round_count(float(ctx.aggs[self.slot]))
        return n * self.factor


class Lin(Expr):
    """A sum of scaled aggregate slots (a conditional SUM/COUNT over CASE branches), rounded if integer."""

    def __init__(self, terms: Sequence[tuple[int, float]], integer: bool, name: str) -> None:
        self.terms, self.integer, self.name = list(terms), integer, name
        self.oid = INT8 if integer else FLOAT8

    def ev(self, ctx: Ctx) -> object:
        v = sum(f * float(ctx.aggs[s]) for s, f in self.terms)
        return round_count(v) if self.integer else float(v)


class Ratio(Expr):
    """AVG over CASE branches: noisy sum / noisy count; NULL when the count is <= 0; clamped to [lo, hi]."""

    oid = FLOAT8

    def __init__(self, num: Sequence[tuple[int, float]], den: Sequence[tuple[int, float]], lo: float, hi: float,
                 name: str) -> None:
        self.num, self.den, self.lo, self.hi, self.name = list(num), list(den), lo, hi, name

    def ev(self, ctx: Ctx) -> object:
        c = sum(f * float(ctx.aggs[s]) for s, f in self.den)
        if c <= 0:
            return None
        v = sum(f * float(ctx.aggs[s]) for s, f in self.num) / c
        return min(max(v, self.lo), self.hi) if self.lo <= self.hi else v


class Avg(Expr):
    """SUM/COUNT of noisy values: NULL when the noisy count is <= 0; clamped into the declared domain."""

    oid = FLOAT8

    def __init__(self, sum_slot: int | None, count_slot: int, lo: float, hi: float, name: str,
                 const: float | None = None) -> None:
        self.sum_slot, self.count_slot, self.lo, self.hi, self.name = sum_slot, count_slot, lo, hi, name
        self.const = const

    def ev(self, ctx: Ctx) -> object:
        c = float(ctx.aggs[self.count_slot])
        if c <= 0:
            return None
        if self.const is not None:
            return float(self.const)
        assert self.sum_slot is not None
        return min(max(float(ctx.aggs[self.sum_slot]) / c, self.lo), self.hi)


class Key(Expr):
    """The group's value of a GROUP BY attribute (public)."""

    def __init__(self, index: int, oid: int, name: str) -> None:
        self.index, self.oid, self.name = index, oid, name

    def ev(self, ctx: Ctx) -> object:
        return ctx.key[self.index]


class Const(Expr):
    def __init__(self, value: object, oid: int) -> None:
        self.value, self.oid = value, oid

    def ev(self, ctx: Ctx) -> object:
        return self.value


class Param(Expr):
    """A bound parameter ($n) used in HAVING; coerced to the type of what it is compared with."""

    def __init__(self, index: int, oid: int = FLOAT8) -> None:
        self.index, self.oid = index, oid

    def ev(self, ctx: Ctx) -> object:
        v = ctx.params[self.index - 1]
        if v is None or self.oid == TEXT:
            return v
        return coerce_number(v, self.oid)


def coerce_number(v: object, oid: int) -> object:
    if isinstance(v, bytes):
        v = v.decode()
    if isinstance(v, str):
        v = float(v.strip()) if any(ch in v for ch in ".eE") else int(v.strip())
    if oid in INTEGER_OIDS and isinstance(v, float) and v.is_integer():
        return int(v)
    return v


def _arith(op: str, a: object, b: object, integer: bool) -> object:
    if a is None or b is None:
        return None
    x, y = a, b
    assert isinstance(x, int | float) and isinstance(y, int | float)
    if op == "+":
        return x + y
    if op == "-":
        return x - y
    if op == "*":
        return x * y
    if op in ("/", "%"):
        if y == 0:
            return None
        if integer:
            q = abs(int(x)) // abs(int(y))
            q = q if (x >= 0) == (y >= 0) else -q
            return q if op == "/" else int(x) - q * int(y)
        return x / y if op == "/" else math.fmod(x, y)
    raise AssertionError(op)


class Bin(Expr):
    def __init__(self, op: str, a: Expr, b: Expr) -> None:
        self.op, self.a, self.b = op, a, b
        if a.oid in INTEGER_OIDS and b.oid in INTEGER_OIDS:
            self.oid = INT4 if a.oid == b.oid == INT4 else INT8
        else:
            self.oid = FLOAT8

    def ev(self, ctx: Ctx) -> object:
        a, b = self.a.ev(ctx), self.b.ev(ctx)
        return _arith(self.op, a, b, self.oid in INTEGER_OIDS)


class Neg(Expr):
    def __init__(self, a: Expr) -> None:
        self.a, self.oid, self.name = a, a.oid, a.name

    def ev(self, ctx: Ctx) -> object:
        v = self.a.ev(ctx)
        return None if v is None else -v  # type: ignore[operator]


class Cast(Expr):
    def __init__(self, a: Expr, oid: int) -> None:
        self.a, self.oid, self.name = a, oid, a.name

    def ev(self, ctx: Ctx) -> object:
        v = self.a.ev(ctx)
        if v is None:
            return None
        if self.oid == TEXT:
            return str(v)
        if self.oid in INTEGER_OIDS:
            return round_half_even(float(v))  # type: ignore[arg-type]
        if self.oid == BOOL:
            return bool(v)
        return float(v)  # type: ignore[arg-type]


class Func(Expr):
    """round, abs, ceil, floor, coalesce, nullif, greatest, least over numbers."""

    def __init__(self, name: str, args: Sequence[Expr], fn: Callable[[list[object]], object], oid: int) -> None:
        self.name, self.args, self.fn, self.oid = name, list(args), fn, oid

    def ev(self, ctx: Ctx) -> object:
        return self.fn([a.ev(ctx) for a in self.args])


class Cmp(Expr):
    oid = BOOL

    def __init__(self, op: str, a: Expr, b: Expr) -> None:
        self.op, self.a, self.b = op, a, b

    def ev(self, ctx: Ctx) -> object:
        return compare(self.op, self.a.ev(ctx), self.b.ev(ctx))


def compare(op: str, a: object, b: object) -> bool | None:
    if a is None or b is None:
        return None
    x, y = a, b
    if op == "=":
        return bool(x == y)
    if op == "<>":
        return bool(x != y)
    if op == "<":
        return bool(x < y)  # type: ignore[operator]
    if op == "<=":
        return bool(x <= y)  # type: ignore[operator]
    if op == ">":
        return bool(x > y)  # type: ignore[operator]
    if op == ">=":
        return bool(x >= y)  # type: ignore[operator]
    raise AssertionError(op)


class Logic(Expr):
    """AND / OR / NOT with SQL three-valued logic."""

    oid = BOOL

    def __init__(self, op: str, args: Sequence[Expr]) -> None:
        self.op, self.args = op, list(args)

    def ev(self, ctx: Ctx) -> object:
        vals = [a.ev(ctx) for a in self.args]
        if self.op == "not":
            return None if vals[0] is None else not vals[0]
        if self.op == "and":
            if any(v is False for v in vals):
                return False
            return None if any(v is None for v in vals) else True
        if any(v is True for v in vals):
            return True
        return None if any(v is None for v in vals) else False


class IsNull(Expr):
    oid = BOOL

    def __init__(self, a: Expr, negate: bool) -> None:
        self.a, self.negate = a, negate

    def ev(self, ctx: Ctx) -> object:
        return (self.a.ev(ctx) is None) != self.negate
