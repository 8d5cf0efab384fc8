"""plan_query and describe: statement -> checked Template (LRU-cached by SQL text) -> bound QueryPlan."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from threading import Lock
from typing import Any

from sqlglot import exp

from . import errors as E
from .analyze import Analyzer, Template
from .bind import bind
from .errors import Refusal
from .plan import Column, QueryPlan
from .schema import Catalog
from .syntax import parse_statements, position_of

DEFAULT_MAX_GROUPS = 10_000


class _LRU:
    """A small thread-safe LRU map (the proxy plans from worker threads), bounded in entries and in total
    weight (a plan weighs its number of linear queries, so a few huge GROUP BYs cannot hog memory)."""

    def __init__(self, size: int, max_weight: int | None = None) -> None:
        self.size = size
        self.max_weight = max_weight
        self.weight = 0
        self.data: OrderedDict[Hashable, tuple[Any, int]] = OrderedDict()
        self.lock = Lock()

    def get(self, key: Hashable) -> Any:
        with self.lock:
            v = self.data.get(key)
            if v is None:
                return None
            self.data.move_to_end(key)
            return v[0]

    def put(self, key: Hashable, value: Any, weight: int = 1) -> None:
        with self.lock:
            old = self.data.pop(key, None)
            if old is not None:
                self.weight -= old[1]
            self.data[key] = (value, weight)
            self.weight += weight
            while len(self.data) > self.size or (
                    self.max_weight is not None and self.weight > self.max_weight and len(self.data) > 1):
                _, (_, w) = self.data.popitem(last=False)
                self.weight -= w

    def clear(self) -> None:
        with self.lock:
            self.data.clear()
            self.weight = 0


_templates = _LRU(4096)
_plans = _LRU(4096, max_weight=500_000)

_WRITES = (exp.Insert, exp.Update, exp.Delete, exp.Create, exp.Drop, exp.Alter, exp.Merge, exp.TruncateTable)


def clear_caches() -> None:
    _templates.clear()
    _plans.clear()


def _statement(sql: str) -> exp.Expr:
    trees = parse_statements(sql)
    if not trees:
        raise Refusal(E.SYNTAX_ERROR, "empty statement")
    if len(trees) > 1:
        raise Refusal(E.FEATURE_NOT_SUPPORTED, "several statements in one query over a protected table are not "
                      "supported", hint="Send one statement at a time.")
    return trees[0]


def _check_shape(tree: exp.Expr) -> exp.Select:
    """Refuse every statement shape other than one flat SELECT, naming the construct."""
    while isinstance(tree, exp.Subquery) and not tree.args.get("alias"):
        tree = tree.this
    if isinstance(tree, _WRITES):
        verb = type(tree).__name__.upper().replace("TRUNCATETABLE", "TRUNCATE")
        raise Refusal(E.READ_ONLY, f"cannot execute {verb} in a read-only transaction",
                      hint="The proxy serves read-only aggregate queries.")
    if isinstance(tree, exp.SetOperation):
        op = type(tree).__name__.upper()
        raise Refusal(E.FEATURE_NOT_SUPPORTED, f"{op} is not supported on protected tables",
                      hint="Send each SELECT separately. " + E.SUPPORTED_HINT, position=position_of(tree.right))
    if not isinstance(tree, exp.Select):
        raise Refusal(E.FEATURE_NOT_SUPPORTED, f"{type(tree).__name__.upper()} statements are not supported on "
                      "protected tables", hint=E.SUPPORTED_HINT)
    if tree.args.get("with_") is not None or tree.args.get("with") is not None:
        w = tree.args.get("with_") or tree.args.get("with")
        raise Refusal(E.FEATURE_NOT_SUPPORTED, "WITH (common table expressions) is not supported on protected "
                      "tables", hint=E.SUPPORTED_HINT, position=position_of(w))
    for node in tree.walk():
        if node is tree:
            continue
        if isinstance(node, exp.Select | exp.Subquery | exp.SetOperation):
            where = "in FROM" if isinstance(node.parent, exp.From | exp.Join) else ""
            raise Refusal(E.FEATURE_NOT_SUPPORTED, f"subquery {where} is not supported on protected tables".replace(
                "  ", " "), hint=E.SUPPORTED_HINT, position=position_of(node))
    return tree


def template(sql: str, catalog: Catalog, max_groups: int = DEFAULT_MAX_GROUPS) -> Template:
    """The checked, parameter-free form of ``sql`` (cached by text; refusals are cached too)."""
    key = (id(catalog), sql, max_groups)
    hit = _templates.get(key)
    if hit is not None and hit[0] is catalog:
        if isinstance(hit[1], Refusal):
            r = hit[1]
            raise Refusal(r.sqlstate, r.message, detail=r.detail, hint=r.hint, position=r.position)
        return hit[1]  # type: ignore[no-any-return]
    try:
        t: Template | Refusal = Analyzer(_check_shape(_statement(sql)), catalog, max_groups).run()
    except Refusal as r:
        t = r
    except RecursionError:
        t = Refusal(E.STATEMENT_TOO_COMPLEX, "statement too complex", hint="Simplify the WHERE clause.")
    _templates.put(key, (catalog, t))
    if isinstance(t, Refusal):
        raise t
    return t


def plan_query(sql: str, catalog: Catalog, params: Sequence[object] | None = None, *,
               max_groups: int = DEFAULT_MAX_GROUPS) -> QueryPlan:
    """Turn an aggregate SELECT over a protected table into linear queries, or raise Refusal."""
    ptuple = tuple(params) if params is not None else ()
    try:
        key: Hashable | None = (id(catalog), sql, ptuple, max_groups)
        hash(key)
    except TypeError:
        key = None  # unhashable parameter values: plan without the cache
    if key is not None:
        hit = _plans.get(key)
        if hit is not None and hit[0] is catalog:
            return hit[1]  # type: ignore[no-any-return]
    plan = bind(template(sql, catalog, max_groups), ptuple)
    if key is not None:
        _plans.put(key, (catalog, plan), weight=len(plan.queries) + 1)
    return plan


@dataclass(frozen=True)
class Description:
    """What Describe needs, with no parameter bound and no budget spent."""

    param_types: tuple[int, ...]
    columns: tuple[Column, ...]


def describe(sql: str, catalog: Catalog, *, max_groups: int = DEFAULT_MAX_GROUPS) -> Description:
    """Parameter type oids ($1.. in order; 25 text when unconstrained) and result columns of ``sql``."""
    t = template(sql, catalog, max_groups)
    n = max(t.param_types, default=0)
    return Description(tuple(t.param_types.get(i, 25) for i in range(1, n + 1)),
                       tuple(Column(e.name, e.oid) for e in t.outputs))


def parse_params_shape(sql: str, catalog: Catalog) -> tuple[tuple[int, ...], tuple[Column, ...]]:
    """``describe`` as a tuple: (parameter type oids, result columns)."""
    d = describe(sql, catalog)
    return d.param_types, d.columns
