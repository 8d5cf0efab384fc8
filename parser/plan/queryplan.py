"""QueryPlan: the linear queries a statement needs and how their noisy answers become result rows."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import TYPE_CHECKING, Any

import numpy as np

from pgcore.pgtypes import FLOAT8

from ..model.linear import LinearQuery
from ..model.schema import TableSchema
from ..scalar import Env, Expr
from ..semantics.collation import using
from . import postprocess as pp
from .quantile import Quantile
from .window import Window

if TYPE_CHECKING:
    from ..analysis.template import Template


@dataclass(frozen=True)
class Column:
    """One result column: its name and PostgreSQL type oid (int8 20, int4 23, float8 701, text 25, bool 16)."""

    name: str
    type_oid: int


@dataclass(frozen=True)
class QueryPlan:
    """What the engine must answer (``queries``) and how answers become rows (``rows``).

    ``queries`` are distinct; zero queries (``q.is_zero``) may appear and are answered 0 by ``rows``
    whatever value is passed for them. The shape (``columns``, number of groups) is known before any
    answer exists.
    """

    table: str
    queries: tuple[LinearQuery, ...]
    columns: tuple[Column, ...]
    template: Template = field(repr=False, compare=False)
    group_keys: tuple[tuple[object, ...], ...] = field(repr=False, compare=False, default=())
    slots: tuple[tuple[int, ...], ...] = field(repr=False, compare=False, default=())
    factors: tuple[tuple[float, ...], ...] = field(repr=False, compare=False, default=())
    params: tuple[object, ...] = field(repr=False, compare=False, default=())
    limit: int | None = None
    offset: int | None = None
    collation: Any = field(repr=False, compare=False, default=None)  # text order of ORDER BY (parser.semantics.collation)

    @property
    def n_groups(self) -> int:
        return len(self.group_keys)

    @property
    def schema(self) -> str:
        """PostgreSQL schema of ``table``."""
        return self.template.table.schema

    @property
    def table_schema(self) -> TableSchema:
        """The protected table's declared schema (what ``vector``/``factors`` and ``answers_sql`` take)."""
        return self.template.table

    def group_cells(self, values: Sequence[float] | np.ndarray) -> np.ndarray:
        """Every group's aggregate outputs, before HAVING, ORDER BY and LIMIT: one row per group of the
        public domain (domain order), one float column per output that reads an aggregate (NULL -> nan).

        For comparing two sets of answers group by group (the what-if replay's error against exact
        answers), where ``rows`` could keep different groups or order them differently."""
        vals = np.asarray(values, dtype=np.float64).reshape(-1).copy()
        for i, q in enumerate(self.queries):
            if q.is_zero:
                vals[i] = 0.0
        n_slots = len(self.template.aggs)
        slots = np.asarray(self.slots, dtype=np.int64).reshape(len(self.group_keys), n_slots)
        aggs = vals[slots] * np.asarray(self.factors, dtype=np.float64).reshape(slots.shape)
        n = len(self.group_keys)
        keys = [list(col) for col in zip(*self.group_keys, strict=True)] if self.group_keys and self.group_keys[0] else []
        env = Env(n, keys=keys, aggs=aggs, params=self.params, strict=False)
        readers = (pp.Agg, pp.Scaled, pp.Lin, pp.Ratio, pp.Avg, Quantile)
        cols = [e.ev(env) for e in self.template.outputs if any(isinstance(x, readers) for x in e.walk())]
        out = np.full((n, len(cols)), np.nan)
        for j, col in enumerate(cols):
            for i, v in enumerate(col):
                if isinstance(v, int | float | Decimal) and not isinstance(v, bool):
                    out[i, j] = float(v)
        return out

    def column_errors(self, stderrs: Sequence[float] | np.ndarray) -> list[tuple[str, str, float, float]]:
        """Per output column that reads aggregates: (name, what it is, smallest and largest standard error
        of the counts and sums it reads over the groups). ``stderrs`` are per query (public: the noise scale
        a release has or would have, never the data): for EXPLAIN, before anything is spent."""
        errs = np.asarray(stderrs, dtype=np.float64).reshape(-1)
        slots = np.asarray(self.slots, dtype=np.int64).reshape(len(self.group_keys), len(self.template.aggs))
        fac = np.abs(np.asarray(self.factors, dtype=np.float64).reshape(slots.shape))
        zero = np.array([q.is_zero for q in self.queries], dtype=bool)
        out = []
        for e in self.template.outputs:
            read = sorted({s for x in e.walk() for s in _slots_read(x)})
            if not read or not len(slots):
                continue
            what = ("a tree of counts (order statistic)" if isinstance(e, Quantile) else
                    "SUM / COUNT" if isinstance(e, pp.Avg | pp.Ratio) else
                    "count or sum" if isinstance(e, pp.Agg | pp.Scaled) else "an expression of counts and sums")
            scale = float(e.factor) if isinstance(e, pp.Scaled) else 1.0
            live = ~zero[slots[:, read]]
            vals = (errs[slots[:, read]] * fac[:, read] * abs(scale))[live]
            out.append((e.name, what, float(vals.min()) if vals.size else 0.0, float(vals.max()) if vals.size else 0.0))
        return out

    def stderr_columns(self) -> tuple[Column, ...]:
        """Columns ``rows(..., with_stderr=True)`` appends: one float8 ``<name>_stderr`` per output column."""
        return tuple(Column(f"{c.name}_stderr", FLOAT8) for c in self.columns)

    def rows(
        self, values: Sequence[float] | np.ndarray, stderrs: Sequence[float] | np.ndarray | None = None,
        with_stderr: bool = False,
    ) -> list[tuple[Any, ...]]:
        """Post-process noisy answers (aligned with ``queries``) into result rows.

        One row per group of the public GROUP BY domain (in domain order), then HAVING, ORDER BY,
        OFFSET/LIMIT. With ``with_stderr`` each row also carries, per output column, the standard error of
        that column when it is a single COUNT or SUM (``stderrs`` aligned with ``queries``), else NULL.
        """
        vals = np.asarray(values, dtype=np.float64).reshape(-1)
        if len(vals) != len(self.queries):
            raise ValueError(f"expected {len(self.queries)} values, got {len(vals)}")
        vals = vals.copy()
        for i, q in enumerate(self.queries):
            if q.is_zero:
                vals[i] = 0.0  # exactly zero whatever the data: no noise needed, none shown
        n_slots = len(self.template.aggs)
        slots = np.asarray(self.slots, dtype=np.int64).reshape(len(self.group_keys), n_slots)
        fac = np.asarray(self.factors, dtype=np.float64).reshape(slots.shape)
        aggs = vals[slots] * fac
        errs = None if stderrs is None else np.asarray(stderrs, dtype=np.float64).reshape(-1)
        slot_errs = None if errs is None else errs[slots] * np.abs(fac)
        with using(self.collation):
            rows, groups = pp.result_rows(self.template, self.group_keys, aggs, self.params, self.limit, self.offset,
                                          slot_errs)
        if not with_stderr:
            return rows
        outputs = self.template.outputs
        q_err = {i: e.stderr(aggs[groups], None if slot_errs is None else slot_errs[groups])
                 for i, e in enumerate(outputs) if isinstance(e, Quantile)}
        return [row + tuple(q_err[i][r] if i in q_err else _stderr(e, self.slots[g], self.factors[g], errs,
                                                                     self.queries)
                            for i, e in enumerate(outputs))
                for r, (row, g) in enumerate(zip(rows, groups, strict=True))]

    def interval_notes(self) -> list[str]:
        """What each MIN/MAX output is (a quantile near 0 or 1), one line each, for show_stderr."""
        return [m for e in self.template.outputs if isinstance(e, Quantile) and (m := e.meaning()) is not None]

    def output_stderrs(self, values: Sequence[float] | np.ndarray,
                       stderrs: Sequence[float] | np.ndarray) -> list[tuple[str, list[float | None]]]:
        """Per output column that reads an aggregate (in column order): its name and the standard error of
        its value in each result row (rows in result order, after HAVING, ORDER BY and LIMIT).

        A COUNT or SUM, scaled or not, states its query's standard error times its scale; a sum of scaled
        slots (``SUM(amount * 1000)``, conditional sums) the root of the sum of the squared scaled errors;
        an order statistic half its 95% interval over 1.96; any other output (AVG, ratios, arithmetic) the
        first-order (delta-method) propagation, each slot moved by its standard error. The linear queries'
        errors are treated as independent. Post-processing of released values and their public errors."""
        vals = np.asarray(values, dtype=np.float64).reshape(-1).copy()
        for i, q in enumerate(self.queries):
            if q.is_zero:
                vals[i] = 0.0
        errs = np.asarray(stderrs, dtype=np.float64).reshape(-1)
        slots = np.asarray(self.slots, dtype=np.int64).reshape(len(self.group_keys), len(self.template.aggs))
        fac = np.asarray(self.factors, dtype=np.float64).reshape(slots.shape)
        aggs, slot_errs = vals[slots] * fac, errs[slots] * np.abs(fac)
        zero = np.asarray([q.is_zero for q in self.queries], dtype=bool)
        if zero.any():
            slot_errs = np.where(zero[slots], 0.0, slot_errs)
        _, groups = pp.result_rows(self.template, self.group_keys, aggs, self.params, self.limit, self.offset,
                                   slot_errs)
        keys = [[self.group_keys[g][k] for g in groups] for k in range(len(self.group_keys[0]))] \
            if self.group_keys and self.group_keys[0] else []
        env = Env(len(groups), keys=keys, aggs=aggs[groups], params=self.params, strict=False,
                  errs=slot_errs[groups])
        readers = (pp.Agg, pp.Scaled, pp.Lin, pp.Ratio, pp.Avg, Quantile)
        out: list[tuple[str, list[float | None]]] = []
        for e in self.template.outputs:
            col: list[float | None]
            if not any(isinstance(x, readers) for x in e.walk()):
                continue  # a group key or a constant: no error
            if any(isinstance(x, Window) for x in e.walk()):
                # A window reads other groups (some cut by LIMIT): no first-order figure per row is stated.
                col = [None] * len(groups)
            elif isinstance(e, Quantile):
                col = e.stderr(env.aggs, env.errs)  # type: ignore[arg-type]
            elif isinstance(e, pp.Agg | pp.Scaled):
                col = [_stderr(e, self.slots[g], self.factors[g], errs, self.queries) for g in groups]
            elif isinstance(e, pp.Lin):
                var = np.zeros(len(groups))
                for s, f in e.terms:
                    var += (f * slot_errs[groups, s]) ** 2
                col = [float(x) for x in np.sqrt(var)]
            else:
                col = _propagated(e, env)
            out.append((e.name, col))
        return out

    def intervals(self, values: Sequence[float] | np.ndarray,
                  stderrs: Sequence[float] | np.ndarray) -> list[tuple[str, tuple[object, ...], object, object, object]]:
        """For each order-statistic or AVG output (of a column or a CASE) and group (in domain order): (column name, group key,
        estimate, 95% low, 95% high). Post-processing of the released values and their standard errors.
        (A COUNT's or SUM's interval is its value +- 1.96 standard errors, stated per query.)"""
        return self.intervals_of_releases(np.asarray(values, dtype=np.float64).reshape(1, -1), stderrs)[0]

    def intervals_of_releases(self, values: np.ndarray, stderrs: Sequence[float] | np.ndarray,
                              ) -> list[list[tuple[str, tuple[object, ...], object, object, object]]]:
        """:meth:`intervals` of many releases at once (``values``: releases x queries, one set of standard
        errors): each release's groups are read together, in one matrix product per output (simulations)."""
        shown = [e for e in self.template.outputs if isinstance(e, Quantile | pp.Avg | pp.Ratio)]
        n_rel = values.shape[0]
        if not shown or not self.group_keys:
            return [[] for _ in range(n_rel)]
        vals = np.array(values, dtype=np.float64).reshape(n_rel, -1)
        errs = np.asarray(stderrs, dtype=np.float64).reshape(-1).copy()
        zero = np.array([q.is_zero for q in self.queries], dtype=bool)
        vals[:, zero], errs[zero] = 0.0, 0.0
        n_groups = len(self.group_keys)
        slots = np.asarray(self.slots, dtype=np.int64).reshape(n_groups, len(self.template.aggs))
        fac = np.asarray(self.factors, dtype=np.float64).reshape(slots.shape)
        aggs = (vals[:, slots] * fac).reshape(n_rel * n_groups, slots.shape[1])
        slot_errs = np.tile(errs[slots] * np.abs(fac), (n_rel, 1))
        out: list[list[tuple[str, tuple[object, ...], object, object, object]]] = [[] for _ in range(n_rel)]
        for e in shown:
            got = e.intervals(aggs, slot_errs)
            for r in range(n_rel):
                for key, (est, lo, hi) in zip(self.group_keys, got[r * n_groups:(r + 1) * n_groups], strict=True):
                    out[r].append((e.name, key, est, lo, hi))
        return out


def _slots_read(e: Expr) -> list[int]:
    """The aggregate slots one reader expression reads (none for keys, constants and operators)."""
    if isinstance(e, pp.Agg | pp.Scaled):
        return [e.slot]
    if isinstance(e, pp.Avg):
        return [e.count_slot] + ([e.sum_slot] if e.sum_slot is not None else [])
    if isinstance(e, pp.Lin):
        return [s for s, _ in e.terms]
    if isinstance(e, pp.Ratio):
        return [s for s, _ in e.num + e.den]
    if isinstance(e, Quantile):
        return list(e.slots)
    return []


def _stderr(e: Expr, slot: tuple[int, ...], fac: tuple[float, ...], errs: np.ndarray | None,
            queries: Sequence[LinearQuery]) -> Any:
    """Standard error of an output that is one (scaled) linear query; NULL for derived outputs."""
    if errs is None or not isinstance(e, pp.Agg | pp.Scaled):
        return None
    qi = slot[e.slot]
    if queries[qi].is_zero:
        return 0.0
    scale = abs(fac[e.slot]) * (abs(float(e.factor)) if isinstance(e, pp.Scaled) else 1.0)
    return scale * float(errs[qi])


def _number(v: object) -> float | None:
    if v is None or isinstance(v, bool):
        return None
    return float(v) if isinstance(v, int | float | Decimal) else None


def _propagated(e: Expr, env: Env) -> list[float | None]:
    """First-order error of a derived output, row by row: each aggregate slot moved by its standard error
    either way, the output's half-differences added in quadrature (exact for linear outputs)."""
    assert env.aggs is not None and env.errs is not None
    # The clamp at 0 of non-negative SUMs is post-processing of the value, not of its error: propagated
    # through it, a clamped sum would state a smaller error the closer the noise took it below 0.
    env = replace(env, clamp=False)
    values, errs = env.aggs, env.errs
    assert values is not None and errs is not None
    base = [_number(v) for v in e.ev(env)]
    total = np.zeros(env.n)
    for s in range(values.shape[1]):
        step = errs[:, s]
        if not np.any(step > 0):
            continue
        moved = []
        for sign in (1.0, -1.0):
            aggs = values.copy()
            aggs[:, s] += sign * step
            moved.append([_number(v) for v in e.ev(Env(env.n, env.cells, env.keys, aggs, env.params, False,
                                                       env.errs, clamp=False))])
        for r, (hi, lo) in enumerate(zip(*moved, strict=True)):
            if hi is not None and lo is not None:
                total[r] += ((hi - lo) / 2.0) ** 2
    return [None if b is None else float(np.sqrt(t)) for b, t in zip(base, total, strict=True)]
