"""The one scalar evaluator: typed SQL expressions evaluated on a vector of rows, with PostgreSQL semantics.

An expression is compiled once (``parser.analysis.scalars``) and evaluated on an ``Env`` of ``n`` rows.
A row is a cell of the public domain (``cells`` binds each attribute to the cells' values: GROUP BY
buckets, constant folding, and later any per-row expression over declared columns), or a result group
(``keys`` and noisy aggregate values ``aggs``: output columns, HAVING, ORDER BY). Operators and their
three-valued logic live here; the semantics of each type (integer division, exact numeric rounding,
float casts, functions) in ``parser.values``, and nowhere else.

Over public values (``strict``) errors are raised as PostgreSQL raises them (22012, 22P02); over noisy
values division by zero yields NULL, so a noisy value never fails a result after its release.

Evaluation is per operator over whole vectors, never per row per operator: integer and float arithmetic
and comparisons run in numpy, an IN list is one hash lookup a row whatever its length, so an expression
over a column of thousands of cells plans in milliseconds.
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
           "Arith", "Call", "Case", "Cast", "Cell", "Cmp", "Const", "Env", "Expr", "InList", "IsNull", "IsTruth", "Key", "Logic",
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
_CMP: dict[str, Callable[[Any, Any], Any]] = {
    "=": np.equal, "<>": np.not_equal, "<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal,
}
_SMALL = 2**31  # integer operands below this cannot overflow int64 in + - * (PostgreSQL's int4 range)


def objects(v: Sequence[object]) -> np.ndarray:
    """A vector as a 1-d numpy object array (None stays None)."""
    out = np.empty(len(v), dtype=object)
    out[:] = list(v)
    return out


def nulls(a: np.ndarray) -> np.ndarray:
    """Where an object vector holds NULL (None), as a bool array."""
    return np.fromiter((v is None for v in a), dtype=bool, count=len(a))  # identity: no __eq__ per value


def _native(v: Vector, oid: int) -> np.ndarray | None:
    """The vector as int64 / float64 when it holds no NULL and fits (else None: the exact path)."""
    if None in v:
        return None
    if oid in INTEGER_OIDS:
        if any(isinstance(x, bool) for x in v[:1]):
            return None
        a = np.asarray(v)
        if a.dtype.kind != "i" or (len(a) and int(np.abs(a).max()) >= _SMALL):
            return None
        return a
    if oid == FLOAT8:
        try:
            return np.asarray(v, dtype=np.float64)
        except (TypeError, ValueError):
            return None
    return None


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

    def _vector(self, xs: Vector, ys: Vector, strict: bool) -> Vector | None:
        """``xs op ys`` in numpy when both are NULL-free int4-range integers or floats (None: exact path)."""
        oid = self.oid
        if self.temporal or oid not in INTEGER_OIDS | {FLOAT8}:
            return None
        a, b = _native(xs, self.args[0].oid if oid != FLOAT8 else FLOAT8), _native(ys, self.args[1].oid if oid != FLOAT8 else FLOAT8)
        if a is None or b is None:
            return None
        op = self.op
        if op in "/%":
            if not np.all(b):
                if strict:
                    raise Refusal(E.DIVISION_BY_ZERO, "division by zero", position=self.position)
                return None
            if oid == FLOAT8:
                out = np.fmod(a, b) if op == "%" else a / b
            else:
                q = np.abs(a) // np.abs(b) * np.sign(a) * np.sign(b)  # truncation toward zero, as in SQL
                out = q if op == "/" else a - q * b
        else:
            out = _OPS[op](a, b)
        return list(out.tolist())

    def ev(self, env: Env) -> Vector:
        xs, ys = self.args[0].ev(env), self.args[1].ev(env)
        fast = self._vector(xs, ys, env.strict)
        if fast is not None:
            return fast
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
        xs, ys = self.args[0].ev(env), self.args[1].ev(env)
        oids = {self.args[0].oid, self.args[1].oid}
        if oids <= INTEGER_OIDS | {FLOAT8}:
            kind = FLOAT8 if FLOAT8 in oids else INT8
            x, y = _native(xs, kind), _native(ys, kind)
            if x is not None and y is not None:  # NULL-free numbers: one numpy comparison
                return list(_CMP[self.op](x, y).tolist())
        try:
            a, b = objects(xs), objects(ys)
            null = nulls(a) | nulls(b)
            out = np.full(env.n, None, dtype=object)
            live = ~null
            out[live] = _CMP[self.op](a[live], b[live]).astype(bool)
            return list(out.tolist())
        except TypeError:  # values numpy cannot order: compared one by one, as PostgreSQL would refuse
            return [compare(self.op, x, y) for x, y in zip(xs, ys, strict=True)]


class InList(Expr):
    """``x [NOT] IN (constants...)``: one hash lookup a row whatever the list's length (SQL semantics: NULL
    when ``x`` is NULL, or when nothing matches and the list holds a NULL)."""

    oid = BOOL

    def __init__(self, a: Expr, values: Sequence[object], negate: bool = False) -> None:
        self.args, self.negate = (a,), negate
        self.values = frozenset(v for v in values if v is not None)  # 1, 1.0 and Decimal('1.0') hash equal
        self.has_null = any(v is None for v in values)

    def ev(self, env: Env) -> Vector:
        miss = None if self.has_null else self.negate
        hit, vals = not self.negate, self.values
        return [None if x is None else (hit if x in vals else miss) for x in self.args[0].ev(env)]


class Logic(Expr):
    """AND / OR / NOT with SQL three-valued logic."""

    oid = BOOL

    def __init__(self, op: str, args: Sequence[Expr]) -> None:
        self.op, self.args = op, tuple(args)

    def ev(self, env: Env) -> Vector:
        cols = [objects(a.ev(env)) for a in self.args]
        if self.op == "not":
            out = np.full(env.n, None, dtype=object)
            known = ~nulls(cols[0])
            out[known] = ~cols[0][known].astype(bool)
            return list(out.tolist())
        decisive = self.op == "or"  # the value that settles the result: TRUE for OR, FALSE for AND
        settled = np.zeros(env.n, dtype=bool)
        unknown = np.zeros(env.n, dtype=bool)
        for c in cols:
            null = nulls(c)
            settled |= np.equal(c, np.array(decisive, dtype=object)) & ~null
            unknown |= null
        out = np.full(env.n, not decisive, dtype=object)
        out[unknown] = None
        out[settled] = decisive
        return list(out.tolist())


class IsNull(Expr):
    oid = BOOL

    def __init__(self, a: Expr, negate: bool) -> None:
        self.args, self.negate = (a,), negate

    def ev(self, env: Env) -> Vector:
        return [(v is None) != self.negate for v in self.args[0].ev(env)]


class IsTruth(Expr):
    """``x IS [NOT] TRUE`` / ``x IS [NOT] FALSE``: never NULL."""

    oid = BOOL

    def __init__(self, a: Expr, value: bool, negate: bool) -> None:
        self.args, self.value, self.negate = (a,), value, negate

    def ev(self, env: Env) -> Vector:
        return [(v is self.value) != self.negate for v in self.args[0].ev(env)]


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
                same = value.oid == self.oid or self.oid not in (FLOAT8, NUMERIC)  # conform is a no-op then
                for i, v in zip(hit, value.ev(env.take(hit)), strict=True):
                    out[i] = v if same else conform(v, self.oid)
            rows = [i for i, t in zip(rows, tested, strict=True) if t is not True]
        if rows and self.default is not None:
            same = self.default.oid == self.oid or self.oid not in (FLOAT8, NUMERIC)
            for i, v in zip(rows, self.default.ev(env.take(rows)), strict=True):
                out[i] = v if same else conform(v, self.oid)
        return out


class Call(Expr):
    """A function of ``parser.values.FUNCTIONS`` (round, coalesce, lower, strpos, like...) applied per row."""

    def __init__(self, fn: str, args: Sequence[Expr], oid: int) -> None:
        self.fn, self.args, self.oid, self.name = fn, tuple(args), oid, fn
        self._impl = FUNCTIONS[fn]

    def ev(self, env: Env) -> Vector:
        impl, oid = self._impl, self.oid
        return [impl(list(vs), oid) for vs in zip(*(a.ev(env) for a in self.args), strict=True)]


def constant(e: Expr) -> object:
    """The value of an expression that reads no row (strict: a literal 1/0 raises as PostgreSQL does)."""
    return e.ev(Env(1))[0]
