"""Boolean nodes of the scalar evaluator, with SQL's three-valued logic: comparisons, ``IN`` lists,
``AND`` / ``OR`` / ``NOT``, ``IS [NOT] NULL``, ``IS [NOT] TRUE`` and ``CASE`` (which evaluates each branch
only on the rows reaching it)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from pgcore.pgtypes import BOOL, FLOAT8, INT8, NUMERIC, TEXT

from ..semantics.collation import compare_text
from ..semantics.values import INTEGER_OIDS, common_type, compare, conform
from .tree import Env, Expr, Vector, _native, nulls, objects

_CMP: dict[str, Callable[[Any, Any], Any]] = {
    "=": np.equal, "<>": np.not_equal, "<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal,
}


class Cmp(Expr):
    oid = BOOL

    def __init__(self, op: str, a: Expr, b: Expr) -> None:
        self.op, self.args = op, (a, b)

    def ev(self, env: Env) -> Vector:
        xs, ys = self.args[0].ev(env), self.args[1].ev(env)
        oids = {self.args[0].oid, self.args[1].oid}
        if TEXT in oids and self.op not in ("=", "<>"):
            return compare_text(self.op, xs, ys)  # the database's collation (parser.semantics.collation)
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
