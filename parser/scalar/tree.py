"""The expression tree of the scalar evaluator: the rows it runs on (``Env``), the node base class
(``Expr``), the leaves (constants, parameters, cell values, group keys) and the vector helpers the
operators share (object vectors, NULL masks, the numpy fast path's native arrays)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pgcore.pgtypes import FLOAT8, UNKNOWN

from ..semantics.values import INTEGER_OIDS, coerce_param

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
    clamp: bool = True  # SUMs of non-negative measures clamped at 0 (off while an error is propagated)
    root: Env | None = None  # the environment a sub-environment was taken from (a window reads all its rows)
    at: Sequence[int] | None = None  # this sub-environment's rows in ``root``
    # Rows of this (root) environment each post-filter keeps, in order (a window of stage s sees stages[s-1])
    stages: list[list[int]] = field(default_factory=list)

    def take(self, rows: Sequence[int]) -> Env:
        """The sub-environment of the given rows (CASE evaluates each branch on the rows reaching it)."""
        return Env(len(rows), {a: [v[i] for i in rows] for a, v in self.cells.items()},
                   [[k[i] for i in rows] for k in self.keys],
                   None if self.aggs is None else self.aggs[list(rows)], self.params, self.strict,
                   None if self.errs is None else self.errs[list(rows)], self.clamp,
                   self.root or self, list(rows) if self.at is None else [self.at[i] for i in rows])


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


# -- vectors ---------------------------------------------------------------------------------------------

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


def constant(e: Expr) -> object:
    """The value of an expression that reads no row (strict: a literal 1/0 raises as PostgreSQL does)."""
    return e.ev(Env(1))[0]
