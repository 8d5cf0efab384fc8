"""The one scalar evaluator: typed SQL expressions evaluated on a vector of rows, with PostgreSQL semantics.

An expression is compiled once (``parser.analysis.scalars``) and evaluated on an ``Env`` of ``n`` rows.
A row is a cell of the public domain (``cells`` binds each attribute to the cells' values: GROUP BY
buckets, constant folding, and later any per-row expression over declared columns), or a result group
(``keys`` and noisy aggregate values ``aggs``: output columns, HAVING, ORDER BY). Operators and their
three-valued logic live here; the semantics of each type (integer division, exact numeric rounding,
float casts, functions) in ``parser.values``, and nowhere else.

Over public values (``strict``) errors are raised as PostgreSQL raises them (22012, 22P02); over noisy
values division by zero yields NULL, so a noisy value never fails a result after its release.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import errors as E
from .errors import Refusal
from .values import (
    BOOL,
    DATE,
    FLOAT8,
    FUNCTIONS,
    INT4,
    INT8,
    INTEGER_OIDS,
    INTERVAL,
    NUMBER_OIDS,
    NUMERIC,
    TEMPORAL_OIDS,
    TEXT,
    TIMESTAMP,
    TIMESTAMPTZ,
    UNKNOWN,
    arith_type,
    call_type,
    cast_value,
    coerce_param,
    common_type,
    compare,
    conform,
    dec,
    int_div,
    round_count,
    temporal_arith,
)

__all__ = ["BOOL", "DATE", "INTERVAL", "TEMPORAL_OIDS", "TIMESTAMP", "TIMESTAMPTZ", "FLOAT8", "INT4", "INT8", "INTEGER_OIDS", "NUMBER_OIDS", "NUMERIC", "TEXT", "UNKNOWN",
           "Arith", "Call", "Case", "Cast", "Cell", "Cmp", "Const", "Env", "Expr", "IsNull", "Key", "Logic",
           "Neg", "Param", "Vector", "call_type", "cast_value", "coerce_param", "compare", "constant",
           "round_count"]

Vector = list[Any]


@dataclass
class Env:
    """The rows an expression is evaluated on; every bound column has ``n`` values."""

    n: int
    cells: Mapping[str, Sequence[object]] = field(default_factory=dict)
    keys: Sequence[Sequence[object]] = ()
    aggs: np.ndarray | None = None  # (n, aggregate slots): noisy values
    params: Sequence[object] = ()
    strict: bool = True
    errs: np.ndarray | None = None  # (n, aggregate slots): standard errors of aggs (order statistics read them)

    def take(self, rows: Sequence[int]) -> Env:
        """The sub-environment of the given rows (CASE evaluates each branch on the rows reaching it)."""
        return Env(len(rows), {a: [v[i] for i in rows] for a, v in self.cells.items()},
                   [[k[i] for i in rows] for k in self.keys],
                   None if self.aggs is None else self.aggs[list(rows)], self.params, self.strict,
                   None if self.errs is None else self.errs[list(rows)])


class Expr:
    """A typed scalar expression: ``ev`` gives one value per row (None is NULL)."""

    oid: int = UNKNOWN
    name: str = "?column?"
    args: tuple[Expr, ...] = ()

    def ev(self, env: Env) -> Vector:
        raise NotImplementedError

    def walk(self) -> list[Expr]:
        """This expression and all its sub-expressions."""
        out, stack = [], [self]
        while stack:
            e = stack.pop()
            out.append(e)
            stack.extend(e.args)
        return out


# -- leaves --------------------------------------------------------------------------------------------


class Const(Expr):
    def __init__(self, value: object, oid: int, name: str = "?column?") -> None:
        self.value, self.oid, self.name = value, oid, name

    def ev(self, env: Env) -> Vector:
        return [self.value] * env.n


class Param(Expr):
    """``$index``; its type is the type of what it is compared with (set by the compiler)."""

    def __init__(self, index: int, oid: int = FLOAT8) -> None:
        self.index, self.oid = index, oid

    def ev(self, env: Env) -> Vector:
        return [coerce_param(env.params[self.index - 1], self.oid)] * env.n


class Cell(Expr):
    """The value of attribute ``attr`` in each row's cell."""

    def __init__(self, attr: str, oid: int) -> None:
        self.attr, self.oid, self.name = attr, oid, attr

    def ev(self, env: Env) -> Vector:
        return list(env.cells[self.attr])


class Key(Expr):
    """The group's value of its ``index``-th GROUP BY dimension (public)."""

    def __init__(self, index: int, oid: int, name: str) -> None:
        self.index, self.oid, self.name = index, oid, name

    def ev(self, env: Env) -> Vector:
        return list(env.keys[self.index])


# -- operators -----------------------------------------------------------------------------------------


_OPS: dict[str, Callable[[Any, Any], Any]] = {
    "+": lambda x, y: x + y, "-": lambda x, y: x - y, "*": lambda x, y: x * y, "/": lambda x, y: x / y,
}


class Arith(Expr):
    """``a op b`` for + - * / %: integers stay integers (``/`` truncates), numeric is exact, float is float."""

    def __init__(self, op: str, a: Expr, b: Expr, position: int | None = None, temporal: int | None = None) -> None:
        self.op, self.args, self.position = op, (a, b), position
        self.temporal = temporal is not None  # dates, timestamps and intervals (parser.values.temporal_arith)
        self.oid = temporal if temporal is not None else arith_type(a.oid, b.oid)

    def _apply(self, x: Any, y: Any) -> Any:
        op, oid = self.op, self.oid
        if self.temporal:
            return temporal_arith(op, x, y)
        if oid in INTEGER_OIDS:
            return int_div(op, x, y) if op in "/%" else _OPS[op](x, y)
        if oid == NUMERIC:
            a, b = dec(x), dec(y)
            return a % b if op == "%" else _OPS[op](a, b)
        f, g = float(x), float(y)
        return math.fmod(f, g) if op == "%" else _OPS[op](f, g)

    def ev(self, env: Env) -> Vector:
        xs, ys = self.args[0].ev(env), self.args[1].ev(env)
        divides = self.op in "/%"
        out: Vector = []
        for x, y in zip(xs, ys, strict=True):
            if x is None or y is None:
                out.append(None)
            elif divides and y == 0:
                if env.strict:
                    raise Refusal(E.DIVISION_BY_ZERO, "division by zero", position=self.position)
                out.append(None)  # a noisy divisor of 0: NULL rather than an error after the release
            else:
                out.append(self._apply(x, y))
        return out


class Neg(Expr):
    def __init__(self, a: Expr) -> None:
        self.args, self.oid, self.name = (a,), a.oid, a.name

    def ev(self, env: Env) -> Vector:
        return [None if v is None else -v for v in self.args[0].ev(env)]


class Cast(Expr):
    def __init__(self, a: Expr, oid: int, type_name: str, position: int | None = None) -> None:
        self.args, self.oid, self.type_name, self.position, self.name = (a,), oid, type_name, position, a.name

    def ev(self, env: Env) -> Vector:
        src = self.args[0].oid
        try:
            return [None if v is None else cast_value(v, src, self.oid, self.type_name) for v in self.args[0].ev(env)]
        except Refusal as r:
            r.position = r.position or self.position
            raise


class Cmp(Expr):
    oid = BOOL

    def __init__(self, op: str, a: Expr, b: Expr) -> None:
        self.op, self.args = op, (a, b)

    def ev(self, env: Env) -> Vector:
        op = self.op
        return [compare(op, x, y) for x, y in zip(self.args[0].ev(env), self.args[1].ev(env), strict=True)]


class Logic(Expr):
    """AND / OR / NOT with SQL three-valued logic."""

    oid = BOOL

    def __init__(self, op: str, args: Sequence[Expr]) -> None:
        self.op, self.args = op, tuple(args)

    def ev(self, env: Env) -> Vector:
        cols = [a.ev(env) for a in self.args]
        if self.op == "not":
            return [None if v is None else not v for v in cols[0]]
        out: Vector = []
        decisive = self.op == "or"  # the value that settles the result: TRUE for OR, FALSE for AND
        for vals in zip(*cols, strict=True):
            if any(v is decisive for v in vals):
                out.append(decisive)
            else:
                out.append(None if any(v is None for v in vals) else not decisive)
        return out


class IsNull(Expr):
    oid = BOOL

    def __init__(self, a: Expr, negate: bool) -> None:
        self.args, self.negate = (a,), negate

    def ev(self, env: Env) -> Vector:
        return [(v is None) != self.negate for v in self.args[0].ev(env)]


class Case(Expr):
    """CASE [subject] WHEN ... THEN ... ELSE ... END; each branch is evaluated only on the rows it takes."""

    def __init__(self, subject: Expr | None, whens: Sequence[tuple[Expr, Expr]], default: Expr | None) -> None:
        self.subject, self.whens, self.default = subject, list(whens), default
        values = [v for _, v in self.whens] + ([default] if default is not None else [])
        self.oid = common_type([v.oid for v in values], "CASE")
        parts = [subject] if subject is not None else []
        parts += [x for w in self.whens for x in w] + ([default] if default is not None else [])
        self.args = tuple(parts)

    def ev(self, env: Env) -> Vector:
        out: Vector = [None] * env.n
        rows = list(range(env.n))
        subject = self.subject.ev(env) if self.subject is not None else None
        for test, value in self.whens:
            if not rows:
                break
            sub = env if len(rows) == env.n else env.take(rows)
            tested = test.ev(sub)
            if subject is not None:
                tested = [compare("=", subject[i], t) for i, t in zip(rows, tested, strict=True)]
            hit = [i for i, t in zip(rows, tested, strict=True) if t is True]
            if hit:
                for i, v in zip(hit, value.ev(env.take(hit)), strict=True):
                    out[i] = conform(v, self.oid)
            rows = [i for i, t in zip(rows, tested, strict=True) if t is not True]
        if rows and self.default is not None:
            for i, v in zip(rows, self.default.ev(env.take(rows)), strict=True):
                out[i] = conform(v, self.oid)
        return out


class Call(Expr):
    """round, floor, ceil, abs, coalesce, nullif, greatest, least."""

    def __init__(self, fn: str, args: Sequence[Expr], oid: int) -> None:
        self.fn, self.args, self.oid, self.name = fn, tuple(args), oid, fn
        self._impl = FUNCTIONS[fn]

    def ev(self, env: Env) -> Vector:
        impl, oid = self._impl, self.oid
        return [impl(list(vs), oid) for vs in zip(*(a.ev(env) for a in self.args), strict=True)]


def constant(e: Expr) -> object:
    """The value of an expression that reads no row (strict: a literal 1/0 raises as PostgreSQL does)."""
    return e.ev(Env(1))[0]
