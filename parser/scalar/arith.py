"""Arithmetic nodes of the scalar evaluator: ``+ - * / %``, negation, casts and function calls.

Integers stay integers (``/`` truncates), numeric is exact, float is float; NULL-free int4-range integers
and floats run in numpy, the rest per value through ``parser.semantics.values`` (the types' semantics live there).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from pgcore import errors as E
from pgcore.errors import Refusal
from pgcore.pgtypes import FLOAT8, NUMERIC, TEXT

from ..semantics import collation
from ..semantics.functions import FUNCTIONS
from ..semantics.values import INTEGER_OIDS, arith_type, cast_value, dec, int_div, numeric_div, temporal_arith
from .tree import Env, Expr, Vector, _native

_OPS: dict[str, Callable[[Any, Any], Any]] = {
    "+": lambda x, y: x + y, "-": lambda x, y: x - y, "*": lambda x, y: x * y, "/": lambda x, y: x / y,
}


class Arith(Expr):
    """``a op b`` for + - * / %: integers stay integers (``/`` truncates), numeric is exact, float is float."""

    def __init__(self, op: str, a: Expr, b: Expr, position: int | None = None, temporal: int | None = None) -> None:
        self.op, self.args, self.position = op, (a, b), position
        self.temporal = temporal is not None  # dates, timestamps and intervals (parser.semantics.values.temporal_arith)
        self.oid = temporal if temporal is not None else arith_type(a.oid, b.oid)

    def _apply(self, x: Any, y: Any) -> Any:
        op, oid = self.op, self.oid
        if self.temporal:
            return temporal_arith(op, x, y)
        if oid in INTEGER_OIDS:
            return int_div(op, x, y) if op in "/%" else _OPS[op](x, y)
        if oid == NUMERIC:
            a, b = dec(x), dec(y)
            return a % b if op == "%" else numeric_div(a, b) if op == "/" else _OPS[op](a, b)
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


class Call(Expr):
    """A function of ``parser.semantics.functions.FUNCTIONS`` (round, coalesce, lower, strpos, like...) applied per row."""

    def __init__(self, fn: str, args: Sequence[Expr], oid: int) -> None:
        self.fn, self.args, self.oid, self.name = fn, tuple(args), oid, fn
        self._impl = FUNCTIONS[fn]

    def ev(self, env: Env) -> Vector:
        impl, oid = self._impl, self.oid
        vectors = [a.ev(env) for a in self.args]
        if oid == TEXT and self.fn in ("greatest", "least") and not collation.current().code_point:
            collation.current().ranks({v for vec in vectors for v in vec if v is not None})  # one sort for all rows
        return [impl(list(vs), oid) for vs in zip(*vectors, strict=True)]
