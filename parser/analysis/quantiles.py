"""Pass: lower an order statistic (MIN, MAX, MEDIAN, ``percentile_cont`` / ``percentile_disc`` WITHIN GROUP
(ORDER BY col)) over an ordered attribute to one COUNT slot per node of its public tree (parser.plan.quantile)
and the post-processing expression that reads the quantile from them."""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal

from sqlglot import exp

from pgcore import errors as E
from pgcore.errors import Refusal
from pgcore.pgtypes import FLOAT8, TEXT

from .. import scalar as S
from ..coltypes.temporal import TemporalType
from ..coltypes.text import TextType
from ..model.predicate import Ranges, merge_ranges
from ..plan.quantile import Quantile, Tree, build_tree
from ..semantics import collation
from ..syntax.parse import position_of
from . import condition as C
from .context import Context
from .nodes import sql_of, strip_numeric_casts, strip_paren, unsupported
from .scalars import fold
from .template import AggSpec

ORDER_STATISTICS = (exp.Min, exp.Max, exp.Median, exp.WithinGroup)
_HINT = ("MIN, MAX, MEDIAN and percentile_cont/percentile_disc(fraction) WITHIN GROUP (ORDER BY col) take one "
         "numeric attribute (date and timestamp: MIN, MAX, percentile_disc) and a constant fraction in [0, 1].")


def lower_order_statistic(node: exp.Expr, filt: C.Cond | None, name: str, ctx: Context) -> S.Expr:
    """The per-group expression computing ``node`` (restricted by a FILTER condition ``filt``)."""
    if isinstance(node, exp.WithinGroup):
        fn, order = node.this, node.expression
        if not isinstance(fn, exp.PercentileCont | exp.PercentileDisc):
            raise unsupported(f"{sql_of(fn)} WITHIN GROUP", node, hint=_HINT)
        kind = "cont" if isinstance(fn, exp.PercentileCont) else "disc"
        fraction = _fraction(fn.this, ctx)
        items = order.expressions if isinstance(order, exp.Order) else []
        if len(items) != 1:
            raise unsupported("WITHIN GROUP with several ORDER BY items", order, hint=_HINT)
        item = items[0]
        if item.args.get("desc"):
            fraction = 1.0 - fraction  # the p-th value in descending order is the (1-p)-th ascending
        col = item.this
        label = "percentile_cont" if kind == "cont" else "percentile_disc"
    else:
        kinds: dict[type[exp.Expr], str] = {exp.Min: "min", exp.Max: "max", exp.Median: "cont"}
        kind = kinds[type(node)]
        fraction = 0.5 if isinstance(node, exp.Median) else (0.0 if kind == "min" else 1.0)
        col = node.this
        label = kind.upper() if kind != "cont" else "MEDIAN"
        if isinstance(col, exp.Distinct):
            col = col.expressions[0] if len(col.expressions) == 1 else col  # MIN(DISTINCT x) = MIN(x)
    col = strip_numeric_casts(strip_paren(col))
    if not isinstance(col, exp.Column):
        raise unsupported(f"{label} of {sql_of(col)}", col, hint=_HINT)
    attr = ctx.column(col)
    dom = attr.domain
    temporal = isinstance(dom, TemporalType)
    if isinstance(dom, TemporalType) and kind == "cont":
        raise _no_interpolation(dom, label, col)
    text = isinstance(dom, TextType) and dom.keys != "private"
    if text and kind == "cont":
        raise Refusal(E.UNDEFINED_FUNCTION, f"function {label.lower()}(text) does not exist" if label == "MEDIAN"
                      else "function percentile_cont(numeric, text) does not exist", position=position_of(col),
                      hint="Text has MIN, MAX and percentile_disc (in the database's collation).")
    if not (temporal or text or (attr.domain.summable and attr.domain.ordered_keys)):
        raise unsupported(f"{label} of {attr.domain.type_name} attribute {attr.name}", col, hint=_HINT)
    if isinstance(dom, TextType) and text:
        return _text_statistic(attr.name, list(dom.values), kind, fraction, filt, name, ctx)
    n = attr.domain.base_size

    def split(lo: int, hi: int) -> tuple[Ranges, Ranges]:  # cells in value order: a run is one range
        return ((lo, hi),), merge_ranges([r for r in ((0, lo - 1), (hi + 1, n - 1)) if r[0] <= r[1]])

    tree, slots = _count_slots(attr.name, n, split, filt, ctx)
    oid = FLOAT8 if kind == "cont" else attr.domain.oid
    # A range slider's MIN/MAX (no WHERE, FILTER or GROUP BY) may return the declared bound (parser.plan.quantile).
    bounded = kind in ("min", "max") and filt is None and not ctx.groups and ctx.select.args.get("where") is None
    if isinstance(dom, TemporalType):
        # Read over cell indices; the estimate is returned as its cell's start (the cell's value, as a group
        # key date_trunc'd to the resolution), a 95% interval's high end as its cell's last instant.
        cells = (list(dom.base_values()), [dom.cell_last(i) for i in range(n)])
        return Quantile(tree, slots, [float(i) for i in range(n)], kind, fraction, oid, name, cells=cells,
                        bounded=bounded)
    values = [float(v) for v in attr.domain.base_values()]
    edges = getattr(attr.domain, "edges", ())  # a binned numeric measure: cells are bins, not values
    uppers = [float(e) for e in edges[1:]] if edges else None
    return Quantile(tree, slots, values, kind, fraction, oid, name, uppers, bounded=bounded)


def _text_statistic(attr: str, values: list[str], kind: str, fraction: float, filt: C.Cond | None, name: str,
                    ctx: Context) -> S.Expr:
    """MIN / MAX / percentile_disc of a text attribute: the tree is over the declared values in the
    database's collation (parser.semantics.collation; the values are public, so the database may sort them), each node
    the union of the cells of its run of ranks."""
    rank = collation.current().ranks(values)
    perm = sorted(range(len(values)), key=lambda i: rank[values[i]])
    n = len(values)

    def split(lo: int, hi: int) -> tuple[Ranges, Ranges]:
        inside = set(perm[lo:hi + 1])
        return (merge_ranges([(c, c) for c in sorted(inside)]),
                merge_ranges([(c, c) for c in range(n) if c not in inside]))

    tree, slots = _count_slots(attr, n, split, filt, ctx)
    ordered: list[object] = [values[c] for c in perm]
    return Quantile(tree, slots, [float(i) for i in range(n)], kind, fraction, TEXT, name, cells=(ordered, ordered))


def _count_slots(attr: str, n: int, split: Callable[[int, int], tuple[Ranges, Ranges]], filt: C.Cond | None,
                 ctx: Context) -> tuple[Tree, list[int]]:
    """The count tree over ``n`` ranks and its slots, one a node: the rows (within ``filt``) whose cell's
    rank is in the node's run ``lo..hi``; ``split(lo, hi)`` gives the cells inside the run and outside it."""
    tree = build_tree(n)
    ctx.budget.tick(len(tree.nodes))
    slots = []
    for i in range(len(tree.nodes)):
        cond: C.Cond = C.Cells(attr, *split(*tree.node_cells(i)))
        slots.append(ctx.slot(AggSpec("count", None, cond if filt is None else C.And((filt, cond)))))
    return tree, slots


def _no_interpolation(domain: TemporalType, label: str, col: exp.Expr) -> Refusal:
    """percentile_cont interpolates: PostgreSQL defines it over double precision and interval only."""
    pg = {"date": "date", "timestamp": "timestamp without time zone",
          "timestamptz": "timestamp with time zone"}[domain.sql_type]
    if label == "MEDIAN":
        msg = f"MEDIAN of a {domain.sql_type} column interpolates like percentile_cont(numeric, {pg}), which does not exist"
    else:
        msg = f"function percentile_cont(numeric, {pg}) does not exist"
    return Refusal(E.UNDEFINED_FUNCTION, msg, position=position_of(col),
                   hint="percentile_disc(fraction) WITHIN GROUP (ORDER BY col) returns a value of the column "
                   "(a cell of its declared resolution); MIN and MAX are answered too.")


def _fraction(node: exp.Expr, ctx: Context) -> float:
    if isinstance(strip_paren(node), exp.Array):
        raise unsupported("percentiles of an array of fractions", node, hint="Ask for each fraction separately.")
    value = fold(node, ctx.budget)
    if isinstance(value, bool) or not isinstance(value, int | Decimal | float):
        raise unsupported(f"percentile fraction {sql_of(node)}", node, hint=_HINT)
    p = float(value)
    if not 0.0 <= p <= 1.0:
        raise Refusal(E.NUMERIC_VALUE_OUT_OF_RANGE, f"percentile value {p:g} is not between 0 and 1",
                      position=position_of(node))
    return p
