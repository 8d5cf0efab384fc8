"""Pass helper: a window function that is a whole output of an aggregate statement (``SUM(COUNT(*)) OVER
(ORDER BY k ROWS UNBOUNDED PRECEDING)``, ``RANK() OVER (ORDER BY SUM(x) DESC)``) lowered to a
``parser.plan.window.Window`` over the statement's groups; its argument, PARTITION BY and ORDER BY are
output expressions (aggregates and group keys). What is not computed exactly is refused (0A000)."""

from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp

from pgcore import errors as E
from pgcore import pgtypes as T
from pgcore.errors import Refusal

from .. import scalar as S
from ..plan.window import AGGREGATES, OFFSETS, Window, result_type
from ..semantics.values import NUMBER_OIDS, cast_value, common_type
from ..syntax.parse import position_of
from .inline import STAGE
from .nodes import strip_paren, unsupported

_FUNCS: dict[type[exp.Expr], str] = {exp.Sum: "sum", exp.Count: "count", exp.Avg: "avg", exp.Min: "min",
                                     exp.Max: "max", exp.RowNumber: "row_number", exp.Rank: "rank",
                                     exp.DenseRank: "dense_rank", exp.Lag: "lag", exp.Lead: "lead"}
HINT = ("Window functions are answered in the target list of an aggregate statement, over its groups: SUM, "
        "COUNT, AVG, MIN, MAX, ROW_NUMBER, RANK, DENSE_RANK, LAG, LEAD with PARTITION BY / ORDER BY and a frame "
        "from UNBOUNDED PRECEDING to the current row or the partition's end.")


def lower_window(node: exp.Window, name: str, compile_output: Callable[[exp.Expr], S.Expr]) -> S.Expr:
    """The Window computing ``node`` over the groups; ``compile_output`` lowers an output expression."""
    fn = node.this
    func = _FUNCS.get(type(fn))
    if func is None or node.args.get("alias") is not None:
        raise unsupported(f"window function {type(fn).__name__.upper()}", node, hint=HINT)
    arg: S.Expr | None = None
    if func in AGGREGATES:
        inner = fn.this
        if isinstance(inner, exp.Distinct) or fn.expressions:
            raise unsupported(f"{func.upper()}(DISTINCT ...) OVER", node, hint=HINT)
        if not (func == "count" and (inner is None or isinstance(inner, exp.Star))):
            arg = compile_output(inner)
            if func in ("sum", "avg") and arg.oid not in NUMBER_OIDS | {T.UNKNOWN}:
                raise Refusal(E.UNDEFINED_FUNCTION, f"function {func}({T.type_name(arg.oid)}) does not exist",
                              position=position_of(fn), hint="SUM and AVG OVER (...) take a number.")
    offset, default = 1, None
    if func in OFFSETS:  # Metabase's Offset(): LAG(x [, n [, default]]) over the ordered groups
        arg = compile_output(fn.this)
        n = strip_paren(fn.args["offset"]) if fn.args.get("offset") is not None else None
        if n is not None and not (isinstance(n, exp.Literal) and not n.is_string and str(n.this).isdigit()):
            raise unsupported(f"window function {func.upper()} with an offset other than a constant", n, hint=HINT)
        offset = int(str(n.this)) if n is not None else 1
        if fn.args.get("default") is not None:
            default = _default(compile_output(fn.args["default"]), arg, fn.args["default"])
    partition = [compile_output(p) for p in node.args.get("partition_by") or []]
    order_node = node.args.get("order")
    order = [(compile_output(strip_paren(o.this)), bool(o.args.get("desc")), bool(o.args.get("nulls_first")))
             for o in (order_node.expressions if order_node is not None else [])]
    oid = default.oid if default is not None else result_type(func, None if arg is None else arg.oid)
    return Window(func, arg, partition, order, _frame(node, bool(order)), oid, name, offset, default,
                  stage=int(node.meta.get(STAGE, 0)))


def _default(d: S.Expr, arg: S.Expr, node: exp.Expr) -> S.Expr:
    """LAG / LEAD's default, a constant of the type it shares with the value (PostgreSQL's anycompatible: a
    quoted literal takes the value's type, 22P02 when it does not read as one; numbers widen)."""
    if not isinstance(d, S.Const):
        raise unsupported("window function LAG/LEAD with a default other than a constant", node, hint=HINT)
    if isinstance(d.value, str) or d.oid == T.UNKNOWN:
        oid = arg.oid
    else:
        oid = common_type([arg.oid, d.oid], "LAG")
    value = None if d.value is None else cast_value(d.value, d.oid if d.oid != T.UNKNOWN else T.TEXT, oid,
                                                     T.type_name(oid))
    return S.Const(value, oid)


def _frame(node: exp.Window, ordered: bool) -> str:
    spec = node.args.get("spec")
    if spec is None:
        return "peers" if ordered else "all"
    kind = str(spec.args.get("kind") or "").upper()
    start = (str(spec.args.get("start") or ""), str(spec.args.get("start_side") or ""))
    end = (str(spec.args.get("end") or "CURRENT ROW"), str(spec.args.get("end_side") or ""))
    if kind not in ("ROWS", "RANGE") or start != ("UNBOUNDED", "PRECEDING") or spec.args.get("exclude"):
        raise unsupported(f"window frame {spec.sql(dialect='postgres')}", spec, hint=HINT)
    if end == ("UNBOUNDED", "FOLLOWING"):
        return "all"
    if end[0].upper() == "CURRENT ROW":
        return ("rows" if kind == "ROWS" else "peers") if ordered else "all"
    raise unsupported(f"window frame {spec.sql(dialect='postgres')}", spec, hint=HINT)
