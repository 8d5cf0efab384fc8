"""Window functions over the groups of an aggregate statement: running totals and ranks of released values
(Metabase's cumulative count and sum, ``SUM(COUNT(*)) OVER (ORDER BY month ROWS UNBOUNDED PRECEDING)``;
``RANK() OVER (ORDER BY SUM(amount) DESC)``).

They are computed over the result's groups after HAVING (as PostgreSQL computes them over the grouped rows),
from the noisy values and the public keys only: post-processing, at no privacy cost. The groups are those
the proxy returns (the public domain's, empty ones included), so a running total also adds the noise of
groups PostgreSQL would not list.
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal
from typing import Any

from pgcore.pgtypes import FLOAT8, INT8, NUMERIC

from ..scalar import Env, Expr, Vector
from ..semantics import collation
from .postprocess import _sort_key

RANKS = ("row_number", "rank", "dense_rank")
OFFSETS = ("lag", "lead")
AGGREGATES = ("sum", "count", "avg", "min", "max")
FRAMES = ("rows", "peers", "all")
"""Frame ends: ``rows`` up to the current row (ROWS ... CURRENT ROW), ``peers`` up to its last peer (RANGE
... CURRENT ROW, the default with ORDER BY), ``all`` the whole partition (no ORDER BY, or UNBOUNDED FOLLOWING);
every frame starts at UNBOUNDED PRECEDING."""


class Window(Expr):
    """``func(arg) OVER (PARTITION BY ... ORDER BY ... frame)`` over the groups (one value per group)."""

    def __init__(self, func: str, arg: Expr | None, partition: Sequence[Expr],
                 order: Sequence[tuple[Expr, bool, bool]], frame: str, oid: int, name: str,
                 offset: int = 1, default: Expr | None = None, stage: int = 0) -> None:
        assert func in RANKS + AGGREGATES + OFFSETS and frame in FRAMES
        self.func, self.arg, self.partition, self.order, self.frame = func, arg, tuple(partition), tuple(order), frame
        self.oid, self.name, self.offset, self.default, self.stage = oid, name, offset, default, stage
        self.args = ((arg,) if arg is not None else ()) + self.partition + tuple(e for e, _, _ in self.order) + (
            (default,) if default is not None else ())

    def ev(self, env: Env) -> Vector:
        root = env.root if env.root is not None and env.at is not None else env
        if self.stage:  # over the groups the first ``stage`` post-filters keep (a level over filtered ranks)
            rows = root.stages[self.stage - 1]
            full = self._over(root.take(rows))
            pos = {r: j for j, r in enumerate(rows)}
            return [full[pos[i]] for i in (env.at if root is not env else range(env.n))]  # type: ignore[union-attr]
        if root is not env:  # a CASE branch's or a filtered level's rows: computed over all, then picked
            full = self.ev(root)
            return [full[i] for i in env.at]  # type: ignore[union-attr]
        return self._over(env)

    def _over(self, env: Env) -> Vector:
        """The window over all rows of ``env`` (lower windows in its arguments read their own rows)."""
        vals = self.arg.ev(env) if self.arg is not None else [1] * env.n
        parts = [p.ev(env) for p in self.partition]
        cols = [e.ev(env) for e, _, _ in self.order]
        partitions: dict[tuple[Any, ...], list[int]] = {}
        for i in range(env.n):
            partitions.setdefault(tuple(repr(p[i]) for p in parts), []).append(i)
        out: Vector = [None] * env.n
        fallback = self.default.ev(env) if self.default is not None else [None] * env.n
        for rows in partitions.values():
            for (_, desc, nulls_first), col in reversed(list(zip(self.order, cols, strict=True))):
                null_rank = (2 if nulls_first else 0) if desc else (0 if nulls_first else 2)
                rows.sort(key=_sort_key(col, null_rank), reverse=desc)  # stable: last key first
            if self.func in OFFSETS:  # LAG / LEAD: the value ``offset`` rows before / after in the partition
                step = -self.offset if self.func == "lag" else self.offset
                for r, i in enumerate(rows):
                    j = r + step
                    out[i] = self._widened(vals[rows[j]]) if 0 <= j < len(rows) else fallback[i]
                continue
            self._fill(rows, vals, cols, out)
        return out

    def _fill(self, rows: list[int], vals: Vector, cols: list[Vector], out: Vector) -> None:
        def peers(a: int, b: int) -> bool:
            return all(c[a] == c[b] for c in cols)

        if self.func in RANKS:
            rank = dense = 0
            for r, i in enumerate(rows):
                if r == 0 or not peers(rows[r - 1], i):
                    rank, dense = r + 1, dense + 1
                out[i] = {"row_number": r + 1, "rank": rank, "dense_rank": dense}[self.func]
            return
        # Each row's frame is a prefix of the sorted partition: up to itself, its last peer, or all.
        ends = list(range(1, len(rows) + 1))
        if self.frame == "all":
            ends = [len(rows)] * len(rows)
        elif self.frame == "peers":
            for r in range(len(rows) - 2, -1, -1):
                if peers(rows[r], rows[r + 1]):
                    ends[r] = ends[r + 1]
        prefix: list[Any] = []
        total: Any = None
        count = 0
        texts = {v for v in vals if isinstance(v, str)}
        # MIN / MAX of text in the upstream database's collation, as ORDER BY sorts it
        text_rank = collation.current().sort_key(texts) if texts and not collation.current().code_point else None
        for i in rows:  # running aggregate over the sorted partition
            v = vals[i]
            if v is not None:
                count += 1
                if total is None:
                    total = v
                elif self.func in ("min", "max"):
                    lower = text_rank(v) < text_rank(total) if text_rank is not None else v < total
                    total = v if lower == (self.func == "min") and v != total else total
                else:
                    total = total + v
            prefix.append(self._typed(total, count))
        for r, i in enumerate(rows):
            out[i] = prefix[ends[r] - 1]

    def _widened(self, v: Any) -> Any:
        """A LAG / LEAD value in the type it shares with its default (an int8 count next to 0.5 is numeric)."""
        if v is None or isinstance(v, bool):
            return v
        if self.oid == NUMERIC and isinstance(v, int | float):
            return _decimal(v)
        return float(v) if self.oid == FLOAT8 and isinstance(v, int | Decimal) else v

    def _typed(self, total: Any, count: int) -> Any:
        f = self.func
        if f == "count":
            return count
        if total is None or f in ("min", "max"):
            return total
        if f == "avg":
            total = float(total) / count if self.oid == FLOAT8 else _decimal(total) / count
        if self.oid == NUMERIC:
            return _decimal(total)
        return float(total) if self.oid == FLOAT8 else total


def _decimal(x: Any) -> Decimal:
    return x if isinstance(x, Decimal) else Decimal(x) if isinstance(x, int) else Decimal(repr(float(x)))


def result_type(func: str, arg_oid: int | None) -> int:
    """PostgreSQL's type of ``func(arg) OVER (...)``: sum of int8 and avg of integers are numeric."""
    if func in RANKS or func == "count":
        return INT8
    assert arg_oid is not None
    if func in ("min", "max") or func in OFFSETS:
        return arg_oid
    if arg_oid == FLOAT8:
        return FLOAT8
    if func == "sum" and arg_oid in (21, 23):  # int2, int4
        return INT8
    return NUMERIC
