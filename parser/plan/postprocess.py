"""Noisy aggregates -> result rows: the aggregate readers of the scalar evaluator, and HAVING, ORDER BY,
OFFSET/LIMIT over the groups.

Everything here is post-processing of released values (and public group keys), so it costs no privacy.
Typing follows PostgreSQL where it matters to clients: COUNT and SUM of an integer attribute are int8
(noisy values rounded), integer arithmetic stays integer (``/`` truncates); AVG of an integer column and
arithmetic with a decimal literal are float8 (PostgreSQL says numeric; float8 avoids implying precision noise
does not have), while a numeric the statement asks for (``count(*)::numeric / 3``, ``round(x, 2)``,
``numeric(10,2)``, a numeric column's SUM and AVG) is numeric, as PostgreSQL types it.
Deviation, chosen so a noisy value never raises mid-result: division by zero yields NULL (PostgreSQL
raises 22012). Noisy counts are clamped at 0 (never shown negative), so are SUMs of a measure whose declared
domain is non-negative, and AVG divides that clamped SUM by the clamped, rounded count.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from decimal import Decimal
from typing import TYPE_CHECKING, Any

import numpy as np

from pgcore.pgtypes import FLOAT8, INT8, NUMERIC

from ..scalar import Env, Expr, Vector, round_count
from ..semantics import collation
from ..semantics.values import clamp_count

if TYPE_CHECKING:
    from ..analysis.template import Template


def _typed(x: float, oid: int) -> Any:
    """A noisy number as its column's type: int8 rounded, numeric as a Decimal, float8 as is."""
    if oid == INT8:
        return round_count(x)
    return Decimal(repr(x)) if oid == NUMERIC else x


def _as_oid(v: Any, oid: int) -> Any:
    """A post-processed number as its column's type (SUM's type is PostgreSQL's for its argument)."""
    if v is None or isinstance(v, bool):
        return v
    if oid == NUMERIC and not isinstance(v, Decimal):
        return Decimal(repr(v)) if isinstance(v, float) else Decimal(v)
    if oid == FLOAT8 and not isinstance(v, float):
        return float(v)
    return v


def _weighted(aggs: np.ndarray, terms: Sequence[tuple[int, float]]) -> np.ndarray:
    total = np.zeros(aggs.shape[0])
    for slot, factor in terms:  # in order, as the scalar sum it replaces
        total = total + factor * aggs[:, slot]
    return total


class Agg(Expr):
    """A COUNT or SUM slot of the group, rounded to an integer and typed int8.

    PostgreSQL types count(*) and sum(integer) as bigint, so integer arithmetic on them (``SUM(a) /
    COUNT(*)`` truncates) behaves here as it would upstream; rounding a noisy value is post-processing.
    ``nonneg``: a SUM of a measure whose declared domain has no negative value is clamped at 0, as counts
    are (post-processing: the true sum cannot be negative, so clamping only moves the answer towards it).
    """

    oid = INT8

    def __init__(self, slot: int, is_count: bool, name: str, oid: int = INT8, nonneg: bool = False) -> None:
        self.slot, self.is_count, self.name, self.oid, self.nonneg = slot, is_count, name, oid, nonneg

    def ev(self, env: Env) -> Vector:
        assert env.aggs is not None
        if self.is_count:
            return [clamp_count(x) for x in env.aggs[:, self.slot].tolist()]
        if self.nonneg and env.clamp:
            return [_typed(max(x, 0.0), self.oid) for x in env.aggs[:, self.slot].tolist()]
        return [_typed(x, self.oid) for x in env.aggs[:, self.slot].tolist()]


class Scaled(Expr):
    """``c * COUNT(*)``: SUM of a constant (Tableau writes ``SUM(1)``)."""

    def __init__(self, slot: int, factor: float | int, name: str, oid: int | None = None) -> None:
        self.slot, self.factor, self.name = slot, factor, name
        self.oid = oid if oid is not None else INT8 if isinstance(factor, int) else FLOAT8

    def ev(self, env: Env) -> Vector:
        assert env.aggs is not None
        if self.oid == NUMERIC:
            f = Decimal(repr(self.factor)) if isinstance(self.factor, float) else Decimal(self.factor)
            return [clamp_count(x) * f for x in env.aggs[:, self.slot].tolist()]
        return [_as_oid(clamp_count(x) * self.factor, self.oid) for x in env.aggs[:, self.slot].tolist()]


class Lin(Expr):
    """A sum of scaled aggregate slots (a conditional SUM/COUNT over CASE branches), rounded if integer;
    clamped at 0 (``nonneg``) when no row's value can be negative, as a SUM of such a measure is."""

    def __init__(self, terms: Sequence[tuple[int, float]], integer: bool, name: str, oid: int | None = None,
                 nonneg: bool = False) -> None:
        self.terms, self.integer, self.name, self.nonneg = list(terms), integer, name, nonneg
        self.oid = oid if oid is not None else INT8 if integer else FLOAT8

    def ev(self, env: Env) -> Vector:
        assert env.aggs is not None
        v = _weighted(env.aggs, self.terms).tolist()
        if self.nonneg and env.clamp:
            v = [max(x, 0.0) for x in v]
        out = [round_count(x) for x in v] if self.integer else v
        return out if self.oid in (INT8, FLOAT8) and self.integer == (self.oid == INT8) else \
            [_as_oid(x, self.oid) for x in out]


class Ratio(Expr):
    """AVG over CASE branches: noisy sum / noisy count; NULL when the count is <= 0; clamped to [lo, hi]."""

    oid = FLOAT8

    def __init__(self, num: Sequence[tuple[int, float]], den: Sequence[tuple[int, float]], lo: float, hi: float,
                 name: str) -> None:
        self.num, self.den, self.lo, self.hi, self.name = list(num), list(den), lo, hi, name

    def ev(self, env: Env) -> Vector:
        assert env.aggs is not None
        out: Vector = []
        for s, c in zip(_weighted(env.aggs, self.num).tolist(), _weighted(env.aggs, self.den).tolist(), strict=True):
            c = clamp_count(c)  # the count a client would see for the same groups
            v = s / c if c > 0 else None
            out.append(v if v is None or self.lo > self.hi else min(max(v, self.lo), self.hi))
        return out

    def intervals(self, aggs: np.ndarray, errs: np.ndarray | None) -> list[tuple[object, object, object]]:
        """Per group: (estimate, low, high) of the 95% interval (``ratio_interval``); each side's standard
        error is at most the sum of its terms' (whatever their correlation), which is used."""
        est = self.ev(Env(aggs=aggs, n=aggs.shape[0]))
        if errs is None:
            return [(v, v, v) for v in est]
        lo, hi = (self.lo, self.hi) if self.lo <= self.hi else (-np.inf, np.inf)
        s, c = _weighted(aggs, self.num), _weighted(aggs, self.den)
        s_err = _weighted(errs, [(k, abs(f)) for k, f in self.num])
        c_err = _weighted(errs, [(k, abs(f)) for k, f in self.den])
        return [(v, *ratio_interval(float(s[g]), float(c[g]), float(s_err[g]), float(c_err[g]), lo, hi))
                for g, v in enumerate(est)]


class Avg(Expr):
    """SUM/COUNT of noisy values: NULL when the noisy count is <= 0; clamped into the declared domain."""

    oid = FLOAT8

    def __init__(self, sum_slot: int | None, count_slot: int, lo: float, hi: float, name: str,
                 const: float | None = None, oid: int = FLOAT8) -> None:
        self.sum_slot, self.count_slot, self.lo, self.hi, self.name = sum_slot, count_slot, lo, hi, name
        self.const, self.oid = const, oid

    def ev(self, env: Env) -> Vector:
        assert env.aggs is not None
        # AVG divides by the post-processed count (rounded, clamped at 0): the one COUNT(*) would show.
        counts = [clamp_count(c) for c in env.aggs[:, self.count_slot].tolist()]
        if self.const is not None:
            return [float(self.const) if c > 0 else None for c in counts]
        assert self.sum_slot is not None
        sums = env.aggs[:, self.sum_slot].tolist()
        if self.lo >= 0:  # the figures SUM would show: clamped at 0 for a non-negative measure
            sums = [max(s, 0.0) for s in sums]
        return [_typed(min(max(s / c, self.lo), self.hi), self.oid) if c > 0 else None
                for s, c in zip(sums, counts, strict=True)]

    def intervals(self, aggs: np.ndarray, errs: np.ndarray | None) -> list[tuple[object, object, object]]:
        """Per group: (estimate, low, high) of the 95% interval of the average (``ratio_interval``)."""
        est = self.ev(Env(aggs=aggs, n=aggs.shape[0]))
        if errs is None or self.sum_slot is None:
            return [(v, v, v) for v in est]
        out: list[tuple[object, object, object]] = []
        for g, v in enumerate(est):
            lo, hi = ratio_interval(float(aggs[g, self.sum_slot]), float(aggs[g, self.count_slot]),
                                    float(errs[g, self.sum_slot]), float(errs[g, self.count_slot]), self.lo, self.hi)
            out.append((v, _typed(lo, self.oid), _typed(hi, self.oid)))
        return out


Z_BOX = 2.241402727604947
"""Two-sided 97.5% normal quantile: SUM and COUNT each inside +-Z_BOX standard errors with probability
97.5%, so both at once (union bound) with probability >= 95%, whatever their correlation."""


def ratio_interval(s: float, c: float, s_err: float, c_err: float, lo: float, hi: float) -> tuple[float, float]:
    """95% interval of S / C from noisy S, C with standard errors: the range of S / C over the box where
    both lie with probability >= 95% (every ratio there, the true one included), within [lo, hi]; the whole
    [lo, hi] when the box reaches a count <= 0 (the ratio is then unbounded). Conservative: no delta method,
    which misses often when the count's noise is not small against the count."""
    c1, c2 = c - Z_BOX * c_err, c + Z_BOX * c_err
    s1, s2 = s - Z_BOX * s_err, s + Z_BOX * s_err
    if c1 <= 0:
        return lo, hi
    a, b = min(s1 / c1, s1 / c2), max(s2 / c1, s2 / c2)
    return min(max(a, lo), hi), max(min(b, hi), lo)


def _sort_key(col: Vector, null_rank: int) -> Callable[[int], tuple[int, Any]]:
    texts = {v for v in col if isinstance(v, str)}
    if texts and not collation.current().code_point:  # text keys in the database's collation
        rank = collation.current().sort_key(texts)
        return lambda i: (null_rank, 0) if col[i] is None else (1, rank(col[i]) if isinstance(col[i], str) else col[i])
    return lambda i: (null_rank, 0) if col[i] is None else (1, col[i])


def result_rows(t: Template, group_keys: Sequence[tuple[object, ...]], aggs: np.ndarray, params: Sequence[object],
                limit: int | None, offset: int | None,
                errs: np.ndarray | None = None) -> tuple[list[tuple[Any, ...]], list[int]]:
    """Rows of the result (HAVING, ORDER BY, OFFSET/LIMIT applied) and, per row, the index of its group.

    ``aggs`` holds one row per group of the public domain (in domain order) and one column per aggregate
    slot: the noisy values, already scaled.
    """
    n = len(group_keys)
    # With no group (every one excluded by WHERE), each key column is still there, empty.
    keys = [list(col) for col in zip(*group_keys, strict=True)] if n else [[] for _ in t.groups]
    env = Env(n, keys=keys, aggs=aggs, params=params, strict=False, errs=errs)
    keep = list(range(n))
    if t.having is not None:
        keep = [i for i, v in enumerate(t.having.ev(env)) if v is True]
        env = replace(env.take(keep), root=None, at=None)  # the groups HAVING keeps are all a window sees
    if t.post_filters:  # levels over window outputs: each filter sees the rows the previous ones kept
        rows_in = list(range(len(keep)))
        for f in t.post_filters:
            level = env.take(rows_in) if len(rows_in) < env.n else env
            rows_in = [rows_in[j] for j, v in enumerate(f.ev(level)) if v is True]
            env.stages.append(rows_in)
        keep = [keep[i] for i in rows_in]
        env = env.take(rows_in)
    columns = [e.ev(env) for e in t.outputs]
    rows = list(zip(*columns, strict=True)) if columns else [() for _ in keep]
    order = list(range(len(keep)))
    sort_cols = [e.ev(env) for e, _, _ in t.order]
    # Stable multi-key sort, last key first.
    for (_, desc, nulls_first), col in reversed(list(zip(t.order, sort_cols, strict=True))):
        # Rank so NULLs land first or last after the (possibly reversed) sort.
        null_rank = (2 if nulls_first else 0) if desc else (0 if nulls_first else 2)
        order.sort(key=_sort_key(col, null_rank), reverse=desc)
    start = offset or 0
    end = None if limit is None else start + limit
    chosen = order[start:end]
    return [rows[i] for i in chosen], [keep[i] for i in chosen]
