"""Planner: statement text (or its parsed trees) -> checked Template (cached) -> bound QueryPlan (cached),
under work limits.

A Planner serves one catalog and owns its caches, keyed by digests of the text (and parameter values)
and bounded in bytes, so neither long texts nor many distinct probes make them grow without bound.
Planning runs under a ``Budget``: the statement's size, IN lists, nesting and decision-diagram work are
bounded (54000 / 54001) and a deadline (the session's statement timeout) is checked inside every pass
(57014). Refusals that do not depend on time are cached like templates. ``prepare`` returns the next step
of a plan: the plan itself, a DP partition selection the caller runs first (``Selection``, then
``complete``), or Superset's series limit (``SeriesStep``). The caller plans under the session's TimeZone
(``semantics.session_zone.using_zone``): it is part of every cache key, as it is of the statement's meaning.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TypeAlias

from sqlglot import exp

from pgcore import errors as E
from pgcore.errors import Refusal
from pgcore.pgtypes import TEXT

from .analysis import analyze
from .analysis.group_params import describe_values, group_params, values_of, with_values
from .analysis.param_exprs import declared_types
from .analysis.template import Template
from .bind.binder import bind
from .bind.partition import NeedsPartition, PartitionRequest
from .model.limits import DEFAULT_MAX_GROUPS, Budget, Limits, too_complex
from .model.schema import Catalog
from .plan.queryplan import Column, QueryPlan
from .plan.series import SeriesLimit, series_limit
from .semantics import session_zone
from .semantics.collation import using
from .syntax.cache import DigestLRU, approx_size, digest
from .syntax.parse import parse_statements

DEFAULT_CACHE_BYTES = 64 << 20
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class _ByValue:
    """Cached for a text whose GROUP BY reads parameters: their indexes (one template per their values)."""

    indexes: tuple[int, ...]


@dataclass(frozen=True)
class Description:
    """What Describe needs, with no parameter bound and no budget spent."""

    param_types: tuple[int, ...]
    columns: tuple[Column, ...]


@dataclass(frozen=True)
class Selection:
    """A step of the plan: the statement's groups come from a DP partition selection, which the caller runs
    (or replays) before ``Planner.complete`` binds the template over the released keys. ``refusal`` is what
    the analyst sees where no selection can run (no partition budget)."""

    request: PartitionRequest
    refusal: NeedsPartition
    template: Template
    params: tuple[object, ...]


@dataclass(frozen=True)
class SeriesStep:
    """A step of the plan: a series-limited statement (``parser.plan.series``), answered as two DP statements;
    ``refusal`` is what planning the statement as written met."""

    split: SeriesLimit
    refusal: Refusal


PlanStep: TypeAlias = QueryPlan | Selection | SeriesStep


def _statement(sql: str, limits: Limits, trees: Sequence[exp.Expr] | None = None) -> exp.Expr:
    size = len(sql.encode("utf-8", "surrogatepass"))
    if size > limits.max_sql_bytes:
        raise too_complex(f"{size} bytes of SQL over a protected table, more than {limits.max_sql_bytes}",
                          "Send a shorter statement: split long IN lists, or filter on ranges.")
    if trees is None:
        trees = parse_statements(sql)
    if not trees:
        raise Refusal(E.SYNTAX_ERROR, "empty statement")
    if len(trees) > 1:
        raise Refusal(E.FEATURE_NOT_SUPPORTED, "several statements in one query over a protected table are not "
                      "supported", hint="Send one statement at a time.")
    return trees[0]


def _too_complex() -> Refusal:
    return Refusal(E.STATEMENT_TOO_COMPLEX, "statement too complex", hint="Simplify the WHERE clause.")


def _tree(sql: str, limits: Limits, trees: Sequence[exp.Expr] | None) -> exp.Expr | Refusal:
    """The one statement of ``sql`` (``_statement``), or its refusal (a timeout is raised, never kept)."""
    try:
        return _statement(sql, limits, trees)
    except Refusal as r:
        if r.sqlstate == E.QUERY_CANCELED:
            raise
        return _copy(r)
    except RecursionError:
        return _too_complex()
    except Exception as e:  # noqa: BLE001 - see _unexpected
        raise _unexpected(e, "analysing") from None


def _copy(r: Refusal) -> Refusal:
    return Refusal(r.sqlstate, r.message, detail=r.detail, hint=r.hint, position=r.position)


def _unexpected(e: Exception, stage: str) -> Refusal:
    """An exception no pass anticipated (a bug in the planner): logged with its traceback, and the statement
    refused with 0A000 naming the failure (nothing was read or spent), never a bare internal error."""
    log.exception("planner failed while %s a statement", stage)
    return Refusal(E.FEATURE_NOT_SUPPORTED, f"this statement could not be planned over protected tables: "
                   f"{type(e).__name__} while {stage} it", hint="Nothing was read or spent. This is a defect of the "
                   "proxy's planner (its log has the details); rewriting the expression it fails on may help.")


def _params_key(params: tuple[object, ...]) -> str:
    """Parameter values as text that tells types apart (``1``, ``'1'``, ``1.0`` and ``True`` differ)."""
    return repr(tuple((type(p).__qualname__, p) for p in params))


def _declared(oids: Sequence[int]) -> tuple[dict[int, int], str]:
    """The client's declared parameter types the analysis uses, and their cache key ("" when none)."""
    types = declared_types(oids)
    return types, ",".join(f"{k}:{v}" for k, v in sorted(types.items()))


def _plan_key(sql: str, params: Sequence[object] | None,
              declared: Sequence[int] = ()) -> tuple[tuple[object, ...], str, bytes]:
    """The parameters as a tuple, their cache key, and the plan cache's key for ``sql`` with them (and the
    parameter types the client declared, which can change the statement's meaning: ``$1 - interval``)."""
    ptuple = tuple(params) if params is not None else ()
    pkey = _params_key(ptuple)
    dkey = _declared(declared)[1]
    return ptuple, pkey, digest(sql, pkey + ("|declared:" + dkey if dkey else "") + session_zone.cache_tag())


class Planner:
    """Plans statements over one catalog; owns the template and plan caches."""

    def __init__(self, catalog: Catalog, *, limits: Limits | None = None,
                 cache_bytes: int = DEFAULT_CACHE_BYTES) -> None:
        self.catalog = catalog
        self.limits = limits if limits is not None else Limits()
        self.templates = DigestLRU(4096, cache_bytes // 2)
        self.plans = DigestLRU(4096, cache_bytes // 2)

    def template(self, sql: str, *, deadline: float | None = None, trees: Sequence[exp.Expr] | None = None,
                 declared: Sequence[int] = (), params: Sequence[object] | None = None) -> Template:
        """The checked, parameter-free form of ``sql`` (cached, refusals too, unless they were timeouts).

        ``trees``: ``parse_statements(sql)``, parsed by the caller (the proxy's router); the analysis
        rewrites them, so they are the planner's from then on. Used only when the template is not cached.
        ``declared``: the parameter type oids of the client's Parse message (0: unspecified); one template
        per text and declared types. ``params``: read only for parameters that shape the groups
        (``date_trunc($1, ts)`` in GROUP BY, ``analysis/group_params.py``): one template per their values."""
        types, dkey = _declared(declared)
        salt = ("declared:" + dkey if dkey else "") + session_zone.cache_tag()  # planned in the session's zone
        key = digest(sql, salt) if salt else digest(sql)
        hit = self.templates.get(key)
        if isinstance(hit, _ByValue):
            return self._by_value(sql, hit.indexes, params, deadline, types, key)
        if hit is not None:
            if isinstance(hit, Refusal):
                raise _copy(hit)
            return hit
        tree = _tree(sql, self.limits, trees)
        if not isinstance(tree, Refusal) and (indexes := group_params(tree)):
            self.templates.put(key, _ByValue(indexes), 256)
            return self._by_value(sql, indexes, params, deadline, types, key)
        return self._analysed(key, sql, tree, deadline, types)

    def _analysed(self, key: bytes, sql: str, tree: exp.Expr | Refusal, deadline: float | None,
                  types: dict[int, int]) -> Template:
        budget = Budget(self.limits, deadline)
        try:
            if isinstance(tree, Refusal):
                raise tree
            with using(self.catalog.collation):
                t: Template | Refusal = analyze(tree, self.catalog, budget, types)
        except Refusal as r:
            if r.sqlstate == E.QUERY_CANCELED:
                raise
            t = _copy(r)  # without its traceback, whose frames hold the statement's text
        except RecursionError:
            t = _too_complex()
        except Exception as e:  # noqa: BLE001 - a planner bug: a clear refusal, not an internal error
            raise _unexpected(e, "analysing") from None
        if isinstance(t, Template) and t.volatile:
            return t  # now() was resolved to this instant: the next statement resolves it again
        # A template holds the lowered WHERE form and the groups: roughly proportional to the text.
        self.templates.put(key, t, 512 if isinstance(t, Refusal) else
                         8 * len(sql) + 64 * min(t.n_groups, self.limits.max_groups))
        if isinstance(t, Refusal):
            raise _copy(t)
        return t

    def _by_value(self, sql: str, indexes: tuple[int, ...], params: Sequence[object] | None,
                  deadline: float | None, types: dict[int, int], key: bytes) -> Template:
        """The template of ``sql`` with the group-shaping parameters ``indexes`` written as their bound values
        (Describe's placeholder when unbound), cached per value; they stay text parameters of the statement."""
        bound = values_of(indexes, params)
        tree = _tree(sql, self.limits, None) if bound is None else None
        values = bound or (describe_values(tree, indexes) if isinstance(tree, exp.Expr) else ("",) * len(indexes))
        vkey = digest(key.hex(), _params_key(values))
        hit = self.templates.get(vkey)
        if hit is None:
            tree = tree if tree is not None else _tree(sql, self.limits, None)
            if not isinstance(tree, Refusal):
                tree = with_values(tree, indexes, values)
            hit = self._analysed(vkey, sql, tree, deadline, {k: v for k, v in types.items() if k not in indexes})
        elif isinstance(hit, Refusal):
            raise _copy(hit)
        return replace(hit, param_types={**hit.param_types, **dict.fromkeys(indexes, TEXT)})

    def cached_plan(self, sql: str, params: Sequence[object] | None = None,
                    declared: Sequence[int] = ()) -> QueryPlan | None:
        """The plan of ``sql`` with ``params`` if it is cached (no work otherwise)."""
        return self.plans.get(_plan_key(sql, params, declared)[2])

    def plan(self, sql: str, params: Sequence[object] | None = None, *,
             deadline: float | None = None, trees: Sequence[exp.Expr] | None = None,
             declared: Sequence[int] = ()) -> QueryPlan:
        """Turn an aggregate SELECT over a protected table into linear queries, or raise Refusal."""
        ptuple, pkey, key = _plan_key(sql, params, declared)
        hit = self.plans.get(key)
        if hit is not None:
            return hit
        return self._bind(self.template(sql, deadline=deadline, trees=trees, declared=declared, params=ptuple),
                          ptuple, key, pkey, deadline)

    def prepare(self, sql: str, params: Sequence[object] | None = None, *, deadline: float | None = None,
                trees: Sequence[exp.Expr] | None = None, series: bool = True,
                declared: Sequence[int] = ()) -> PlanStep:
        """The next step of ``sql``'s plan: the ``QueryPlan``, a ``Selection`` to run before ``complete``, or
        (with ``series`` and no parameter) the ``SeriesStep`` of a series-limited statement; otherwise the
        statement's Refusal is raised. ``declared``: the client's parameter type oids (``template``)."""
        ptuple, pkey, key = _plan_key(sql, params, declared)
        hit = self.plans.get(key)
        if hit is not None:
            return hit
        try:
            t = self.template(sql, deadline=deadline, trees=trees, declared=declared, params=ptuple)
        except Refusal as r:
            return self._series_step(sql, r, series and not ptuple)
        try:
            return self._bind(t, ptuple, key, pkey, deadline)
        except NeedsPartition as need:
            return Selection(need.request, need.with_traceback(None), t, ptuple)
        except Refusal as r:
            return self._series_step(sql, r, series and not ptuple)

    def _series_step(self, sql: str, refusal: Refusal, series: bool) -> SeriesStep:
        """A statement planning refused: its series-limit split if it has one, else the refusal raised."""
        split = self.series_split(sql) if series else None
        if split is None:
            raise refusal
        return SeriesStep(split, refusal.with_traceback(None))

    def complete(self, step: Selection, selected: frozenset[tuple[int, ...]], *,
                 deadline: float | None = None) -> QueryPlan:
        """The plan of ``step``'s value list over the groups covering the ``selected`` cells its selection
        released, bound from the step's template (nothing parsed or analysed again; not cached)."""
        with using(self.catalog.collation):
            plan = bind(step.template, step.params, Budget(self.limits, deadline), selected=selected)
        return replace(plan, collation=self.catalog.collation)

    def series_split(self, sql: str) -> SeriesLimit | None:
        """``parser.plan.series.series_limit`` of ``sql`` over this catalog, cached with the templates."""
        if len(sql.encode("utf-8", "surrogatepass")) > self.limits.max_sql_bytes:
            return None  # refused for its size: never handed whole to sqlglot (seconds a megabyte)
        key = digest(sql, "series-limit" + session_zone.cache_tag())
        hit = self.templates.get(key)
        if hit is not None:
            return hit if isinstance(hit, SeriesLimit) else None
        split = series_limit(sql, self.catalog)
        self.templates.put(key, split if split is not None else False, 256 + (16 * len(sql) if split else 0))
        return split

    def _bind(self, t: Template, ptuple: tuple[object, ...], key: bytes, pkey: str,
              deadline: float | None) -> QueryPlan:
        try:
            with using(self.catalog.collation):
                plan = replace(bind(t, ptuple, Budget(self.limits, deadline)), collation=self.catalog.collation)
        except (Refusal, RecursionError):
            raise
        except Exception as e:  # noqa: BLE001 - see _unexpected
            raise _unexpected(e, "binding") from None
        if t.volatile:
            return plan
        size = sum(len(q.key) + 96 * len(q.boxes) + 200 for q in plan.queries) + 64 * len(plan.group_keys)
        self.plans.put(key, plan, size + approx_size(ptuple) + len(pkey))
        return plan

    def plan_selected(self, sql: str, params: Sequence[object] | None, selected: frozenset[tuple[int, ...]], *,
                      deadline: float | None = None) -> QueryPlan:
        """The plan of a value list listing only the groups covering ``selected`` cells (what a partition
        selection released for its filter); not cached (a value list binds in microseconds)."""
        t = self.template(sql, deadline=deadline, params=params)
        with using(self.catalog.collation):
            plan = bind(t, tuple(params) if params is not None else (), Budget(self.limits, deadline),
                        selected=selected)
        return replace(plan, collation=self.catalog.collation)

    def describe(self, sql: str, *, deadline: float | None = None,
                 trees: Sequence[exp.Expr] | None = None, declared: Sequence[int] = ()) -> Description:
        """Parameter type oids ($1.. in order; 25 text when unconstrained) and result columns of ``sql``."""
        t = self.template(sql, deadline=deadline, trees=trees, declared=declared)
        n = max(t.param_types, default=0)
        return Description(tuple(t.param_types.get(i, 25) for i in range(1, n + 1)),
                           tuple(Column(e.name, e.oid) for e in t.outputs))

    def clear(self) -> None:
        self.templates.clear()
        self.plans.clear()


def plan_query(sql: str, catalog: Catalog, params: Sequence[object] | None = None, *,
               max_groups: int = DEFAULT_MAX_GROUPS, deadline: float | None = None) -> QueryPlan:
    """Plan one statement with a fresh Planner (no cache shared between calls: long-lived callers, such
    as the proxy, keep their own Planner)."""
    return Planner(catalog, limits=Limits(max_groups=max_groups), cache_bytes=0).plan(sql, params, deadline=deadline)


def describe(sql: str, catalog: Catalog, *, max_groups: int = DEFAULT_MAX_GROUPS) -> Description:
    """``Planner.describe`` with a fresh Planner."""
    return Planner(catalog, limits=Limits(max_groups=max_groups), cache_bytes=0).describe(sql)


def parse_params_shape(sql: str, catalog: Catalog) -> tuple[tuple[int, ...], tuple[Column, ...]]:
    """``describe`` as a tuple: (parameter type oids, result columns)."""
    d = describe(sql, catalog)
    return d.param_types, d.columns
