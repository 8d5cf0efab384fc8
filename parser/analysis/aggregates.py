"""Pass: lower one aggregate call (COUNT, SUM, AVG, with FILTER or over CASE branches) to aggregate slots
and the post-processing expression that reads them.

Only the slots a result needs are allocated: each slot becomes a linear query the engine measures and
charges, so a slot no output reads would release (and pay for) a count nobody asked for.
"""

from __future__ import annotations

from decimal import Decimal

from sqlglot import exp

from pgcore import errors as E
from pgcore import pgtypes as T
from pgcore.errors import Refusal

from .. import scalar as S
from ..plan import postprocess as pp
from ..semantics.values import INTEGER_OIDS
from ..syntax.parse import position_of
from . import condition as C
from .context import Context
from .nodes import INT_TYPES, NotScalar, sql_of, strip_numeric_casts, strip_paren, unsupported
from .quantiles import ORDER_STATISTICS, lower_order_statistic
from .rowvalues import bounds as value_bounds
from .rowvalues import non_null, row_value, weights
from .scalars import NOT_CONSTANT, compile_scalar, fold
from .template import AggSpec
from .where import lower_where, operand
from .where import subject as strip_identity_casts

UNSUPPORTED_AGGREGATES = {
    "min": "MIN", "max": "MAX", "median": "MEDIAN", "percentilecont": "percentile_cont",
    "percentiledisc": "percentile_disc", "stddev": "STDDEV", "stddevpop": "STDDEV_POP",
    "stddevsamp": "STDDEV_SAMP", "variance": "VARIANCE", "variancepop": "VAR_POP", "arrayagg": "ARRAY_AGG",
    "groupconcat": "STRING_AGG", "stringagg": "STRING_AGG", "logicaland": "BOOL_AND", "logicalor": "BOOL_OR",
    "approxdistinct": "APPROX_COUNT_DISTINCT", "anyvalue": "ANY_VALUE", "mode": "MODE", "corr": "CORR",
    "covarpop": "COVAR_POP", "covarsamp": "COVAR_SAMP", "first": "FIRST", "last": "LAST",
    "quantile": "QUANTILE", "countif": "COUNT_IF", "jsonagg": "JSON_AGG", "jsonbagg": "JSONB_AGG",
    "bitwiseandagg": "BIT_AND", "bitwiseoragg": "BIT_OR", "regrslope": "REGR_SLOPE", "regrcount": "REGR_COUNT",
}


def lower_aggregate(node: exp.Expr, filt: C.Cond | None, name: str, ctx: Context) -> S.Expr:
    """The expression computing ``node`` per group, restricted by a FILTER condition ``filt``."""
    if isinstance(node, ORDER_STATISTICS):
        return lower_order_statistic(node, filt, name, ctx)
    kind = type(node).__name__.lower()
    if kind not in ("count", "sum", "avg"):
        label = UNSUPPORTED_AGGREGATES.get(kind, kind.upper())
        raise unsupported(f"aggregate {label}", node,
                          hint="COUNT, SUM, AVG, MIN, MAX, MEDIAN and percentiles are answered; " + E.SUPPORTED_HINT)
    arg = node.this
    if isinstance(arg, exp.Distinct):
        if kind != "count":
            raise unsupported(f"{kind.upper()}(DISTINCT ...)", node,
                              hint="COUNT(DISTINCT col) is answered; SUM and AVG take every row's value.")
        return _count_distinct(arg, filt, name, ctx)
    if len(node.expressions) > 0 and not isinstance(node, exp.Count):
        raise unsupported(f"{kind.upper()} with several arguments", node)
    arg = strip_paren(arg) if arg is not None else None
    if arg is not None and arg.find(exp.AggFunc):
        raise Refusal(E.GROUPING_ERROR, "aggregate function calls cannot be nested",
                      position=position_of(arg.find(exp.AggFunc)))
    if arg is not None and arg.find(exp.Window):
        raise Refusal(E.GROUPING_ERROR, "aggregate function calls cannot contain window function calls",
                      position=position_of(arg.find(exp.Window)))
    if kind == "sum" and arg is not None:
        return _sum_typed(_lower_value(node, kind, _strip_casts(arg, ctx), filt, name, ctx), arg, ctx)
    e = _lower_value(node, kind, _strip_casts(arg, ctx), filt, name, ctx)
    if kind == "avg" and isinstance(e, pp.Avg) and arg is not None and _value_type(arg, ctx) == T.FLOAT8:
        e.oid = T.FLOAT8  # avg(double precision) is double precision (Power BI's avg(cast(x as float8)))
    return e


def _lower_value(node: exp.Expr, kind: str, arg: exp.Expr | None, filt: C.Cond | None, name: str,
                 ctx: Context) -> S.Expr:
    """COUNT / SUM / AVG of ``arg`` (parentheses and value-keeping casts stripped)."""
    if isinstance(arg, exp.Case):
        tests = [arg.this] if arg.this is not None else [b.this for b in arg.args.get("ifs") or []]
        if any(ctx.column(c).domain.measure for t in tests for c in t.find_all(exp.Column)):
            return _expression_aggregate(kind, arg, filt, name, ctx)  # conditions on a measure: one bounded value
        return _case_aggregate(kind, arg, filt, name, ctx)
    if kind == "count":
        return _count(arg, filt, name, ctx)
    if isinstance(arg, exp.Column):
        attr = ctx.column(arg)
        if not attr.domain.summable:
            raise Refusal(E.UNDEFINED_FUNCTION, f"function {kind}({attr.domain.sql_type}) does not exist",
                          position=position_of(node), hint="SUM and AVG need a numeric attribute.")
        s = ctx.slot(AggSpec("sum", attr.name, filt))
        if kind == "sum":
            return pp.Agg(s, False, name, oid=attr.domain.sum_oid, nonneg=attr.domain.sum_bounds[0] >= 0)
        c = ctx.slot(AggSpec("count", attr.name if attr.domain.nullable else None, filt))
        return pp.Avg(s, c, *attr.domain.sum_bounds, name, oid=attr.domain.avg_oid)
    lit = fold(arg, ctx.budget) if arg is not None else NOT_CONSTANT
    if isinstance(lit, int | Decimal) and not isinstance(lit, bool):
        c = ctx.slot(AggSpec("count", None, filt))
        if kind == "sum":
            return pp.Scaled(c, lit if isinstance(lit, int) else float(lit), name)
        return pp.Avg(None, c, float(lit), float(lit), name, const=float(lit))
    if arg is None:
        raise unsupported(f"{kind.upper()}()", node, hint=f"{kind.upper()} takes one value.")
    return _expression_aggregate(kind, arg, filt, name, ctx)


# PostgreSQL's sum(): of smallint and integer bigint, of bigint and numeric numeric, of double precision
# double precision.
_SUM_TYPES = {T.INT2: T.INT8, T.INT4: T.INT8, T.INT8: T.NUMERIC, T.NUMERIC: T.NUMERIC, T.FLOAT8: T.FLOAT8}


def _sum_typed(e: S.Expr, arg: exp.Expr, ctx: Context) -> S.Expr:
    """``e`` (a SUM's post-processing) typed as PostgreSQL types ``sum(arg)`` (``SUM(amount * 2)``,
    ``SUM(CAST(n AS float8))``, CASE branches: the argument's type, not its stripped form's)."""
    oid = _SUM_TYPES.get(_value_type(arg, ctx) or 0)
    if oid is None or oid == e.oid or not isinstance(e, pp.Agg | pp.Lin | pp.Scaled):
        return e
    e.oid = oid
    return e


def _value_type(node: exp.Expr, ctx: Context) -> int | None:
    """PostgreSQL's type of a per-row expression over declared columns; None when it has no scalar form."""
    try:
        return compile_scalar(node, ctx.cell_leaf, ctx.budget, exact=True).oid
    except (NotScalar, Refusal):
        return None


def _strip_casts(node: exp.Expr | None, ctx: Context) -> exp.Expr | None:
    """Numeric casts of a summable attribute keep its values (Tableau's ``SUM(CAST(x AS BIGINT))``); a cast
    that changes a value's type (``CAST(flag AS INT)``) stays, a per-row expression."""
    inner = strip_numeric_casts(node)
    if inner is not strip_paren(node) and isinstance(inner, exp.Column):
        d = ctx.column(inner).domain
        to_int = any(c.args["to"].this in INT_TYPES for c in strip_paren(node).find_all(exp.Cast))
        if not d.summable or (to_int and d.oid not in INTEGER_OIDS):
            return strip_paren(node)  # CAST(flag AS INT), CAST(amount AS INT) (rounds): per-row values
    return inner


def _expression_aggregate(kind: str, arg: exp.Expr, filt: C.Cond | None, name: str, ctx: Context) -> S.Expr:
    """SUM / AVG / COUNT of a per-row expression (``SUM(s * s)``, ``SUM(amount * 2)``, ``COUNT(lower(city))``)."""
    total, counted, lo, hi, integer, oid = _value_terms(kind, arg, filt, ctx)
    if kind == "count":
        return pp.Lin(counted, True, name)
    if kind == "sum":
        if len(total) == 1 and total[0][1] == 1.0:
            return pp.Agg(total[0][0], False, name, oid=T.INT8 if integer else (oid if oid in (T.NUMERIC, T.FLOAT8)
                                                                               else T.FLOAT8), nonneg=lo >= 0)
        return pp.Lin(total, integer, name, nonneg=lo >= 0)
    return pp.Ratio(total, counted, lo, hi, name)


Terms = list[tuple[int, float]]


def _value_terms(kind: str, value: exp.Expr, f: C.Cond | None,
                 ctx: Context) -> tuple[Terms, Terms, float, float, bool, int]:
    """Slots measuring a per-row expression on the rows ``f`` keeps: (SUM terms, COUNT terms of its non-NULL
    rows, smallest and largest value, whether the sum is an integer, its type). Each term is (slot, factor)."""
    v = row_value(value, kind.upper(), ctx)
    total: Terms = []
    counted: Terms = []
    counts = kind != "sum"

    def within(c: C.Cond) -> C.Cond:
        return c if f is None else C.And((f, c))

    if v.affine is not None:
        x, a, b, null = v.affine.attr, v.affine.a, v.affine.b, v.affine.null
        dom = ctx.table.attribute(x).domain  # type: ignore[union-attr]
        present = ctx.slot(AggSpec("count", x if dom.nullable else None, f))
        absent = ctx.slot(AggSpec("count", None, within(C.IsNull(x)))) if dom.nullable and null is not None else None
        if counts:
            counted.append((present, 1.0))
            if absent is not None:
                counted.append((absent, 1.0))
        if kind != "count":
            if a != 0:
                total.append((ctx.slot(AggSpec("sum", x, f)), a))
            if b != 0:
                total.append((present, b))
            if absent is not None and null:
                total.append((absent, null))
        ends = [a * dom.sum_bounds[0] + b, a * dom.sum_bounds[1] + b]
        if absent is not None and null is not None:
            ends.append(null)
        return total, counted, min(ends), max(ends), False, v.oid
    if v.expr is not None:
        m = v.expr
        if counts:
            if m.null:  # rows where the expression is not NULL, each adding 1
                ones = tuple(1.0 for _ in m.bounds)
                counted.append((ctx.slot(AggSpec("sum", m.carrier, f, ones,
                                                 f"CASE WHEN ({m.sql}) IS NULL THEN 0 ELSE 1 END")), 1.0))
            else:
                counted.append((ctx.slot(AggSpec("count", None, f)), 1.0))
        if kind != "count" and any(m.bounds):
            total.append((ctx.slot(AggSpec("sum", m.carrier, f, m.bounds, m.sql)), 1.0))
        return total, counted, m.lo, m.hi, v.oid in INTEGER_OIDS, v.oid
    lo, hi = float("inf"), float("-inf")
    integer = v.oid in INTEGER_OIDS
    for part in v.parts:
        live = non_null(part)
        if counts:
            counted.append((ctx.slot(AggSpec("count", None, within(live))), 1.0))
        if kind != "count":
            w = weights(part.values)
            if any(w):
                total.append((ctx.slot(AggSpec("sum", part.attr, within(part.where) if part.where is not None else f,
                                               w)), 1.0))
            if kind == "sum" and w:  # (NULL weighs 0): a SUM of values never negative is clamped at 0
                lo, hi = min(lo, min(w)), max(hi, max(w))
        if kind == "avg":
            p_lo, p_hi = value_bounds(part.values)
            lo, hi = min(lo, p_lo), max(hi, p_hi)
    return total, counted, lo, hi, integer, v.oid


def _count(arg: exp.Expr | None, filt: C.Cond | None, name: str, ctx: Context) -> S.Expr:
    if arg is None or isinstance(arg, exp.Star):
        return pp.Agg(ctx.slot(AggSpec("count", None, filt)), True, name)
    if isinstance(arg, exp.Column):
        attr = ctx.column(arg)
        return pp.Agg(ctx.slot(AggSpec("count", attr.name if attr.domain.nullable else None, filt)), True, name)
    lit = fold(arg, ctx.budget)
    if lit is NOT_CONSTANT:
        return _expression_aggregate("count", arg, filt, name, ctx)
    if lit is None:
        return S.Const(0, T.INT8)  # COUNT(NULL) counts nothing, whatever the data
    return pp.Agg(ctx.slot(AggSpec("count", None, filt)), True, name)


def _count_distinct(arg: exp.Distinct, filt: C.Cond | None, name: str, ctx: Context) -> S.Expr:
    """``COUNT(DISTINCT unit)``: units present per group; ``COUNT(DISTINCT col)``: distinct values of a
    declared column per group. Both are cells of a derived histogram (``parser.bind.distinct``)."""
    cols = arg.expressions
    if len(cols) != 1:
        raise unsupported("COUNT(DISTINCT ...) of several expressions", arg,
                          hint="COUNT(DISTINCT col) takes one column.")
    raw = strip_paren(cols[0])
    if isinstance(raw, exp.Case):
        target, filt = _distinct_case(raw, filt, ctx)
        if target is None:
            return S.Const(0, T.INT8)  # every branch NULL: COUNT(DISTINCT NULL) counts nothing
        cols, raw = [target], target
    while isinstance(raw, exp.Cast):  # the unit's distinct values are those of its text or any cast of it
        raw = strip_paren(raw.this)
    if isinstance(raw, exp.Column) and ctx.scope.is_unit(raw):
        return pp.Agg(ctx.slot(AggSpec("distinct", None, filt)), True, name)
    col = strip_identity_casts(strip_paren(cols[0]), ctx)
    if not isinstance(col, exp.Column):
        raise unsupported(f"COUNT(DISTINCT {sql_of(col)})", col,
                          hint="COUNT(DISTINCT col) takes the privacy unit or one declared column.")
    attr = ctx.column(col)  # a declared column, of any type (its values as parser.pushdown.cellsql.counted_expr reads them)
    return pp.Agg(ctx.slot(AggSpec("distinct", attr.name, filt)), True, name)


def _distinct_case(case: exp.Case, filt: C.Cond | None, ctx: Context) -> tuple[exp.Expr | None, C.Cond | None]:
    """``COUNT(DISTINCT CASE WHEN p THEN x [ELSE NULL] END)`` (Looker's filtered count_distinct measures,
    Tableau's ``COUNTD(IF p THEN [x] END)``) is ``COUNT(DISTINCT x) FILTER (WHERE <a branch giving x is
    taken>)``: NULL branches add no value. Every other branch must give the same ``x``."""
    if case.this is not None:
        raise unsupported(f"COUNT(DISTINCT CASE {sql_of(case.this)} ...)", case,
                          hint="Write COUNT(DISTINCT col) FILTER (WHERE condition).")
    target: exp.Expr | None = None
    prior: list[C.Cond] = []
    taken: list[C.Cond] = []
    arms = [(b.this, b.args.get("true")) for b in case.args.get("ifs") or []] + [(None, case.args.get("default"))]
    for test, value in arms:
        cond = lower_where(test, ctx) if test is not None else None
        when = (C.IsTrue(cond),) if cond is not None else ()
        branch = C.And((*when, *(C.Not(C.IsTrue(c)) for c in prior)))
        if cond is not None:
            prior.append(cond)
        value = strip_paren(value) if value is not None else None
        if value is None or isinstance(value, exp.Null):
            continue
        if target is not None and sql_of(value) != sql_of(target):
            raise unsupported("COUNT(DISTINCT CASE ...) with different values", value,
                              hint="Its non-NULL branches must all give one column: COUNT(DISTINCT CASE WHEN "
                              "condition THEN col END), or COUNT(DISTINCT col) FILTER (WHERE condition).")
        target = value
        taken.append(branch)
    keep: C.Cond = taken[0] if len(taken) == 1 else C.Or(tuple(taken))
    return target, keep if filt is None else C.And((filt, keep))


def _case_aggregate(kind: str, case: exp.Case, filt: C.Cond | None, name: str, ctx: Context) -> S.Expr:
    """``SUM/COUNT/AVG(CASE WHEN p THEN x ... ELSE y END)``: one filtered aggregate per branch.

    BI tools write conditional counts and sums this way (Metabase's count-where and sum-where,
    ``SUM(CASE WHEN p THEN 1 ELSE 0 END)``). Branch k takes the rows where its condition is TRUE and no
    earlier one is; each branch value must be an attribute, a numeric literal or NULL. A SUM reads no
    count, and no branch whose value is 0: ``SUM(CASE WHEN p THEN 1 ELSE 0 END)`` measures p's rows only.
    """
    subject = case.this
    attr_subject = None
    if subject is not None:
        subject = strip_identity_casts(subject, ctx)
        if not isinstance(subject, exp.Column):
            raise unsupported(f"CASE {sql_of(subject)} inside {kind.upper()}", subject)
        attr_subject = ctx.column(subject)
    prior: list[C.Cond] = []
    branches: list[tuple[C.Cond, exp.Expr | None]] = []
    for branch in case.args.get("ifs") or []:
        if attr_subject is not None:
            cond: C.Cond = C.Compare(attr_subject.name, "=", operand(branch.this, attr_subject, ctx))
        else:
            cond = lower_where(branch.this, ctx)
        taken = (C.IsTrue(cond), *(C.Not(C.IsTrue(c)) for c in prior))
        branches.append((C.And(taken), branch.args.get("true")))
        prior.append(cond)
    rest: C.Cond = C.And(tuple(C.Not(C.IsTrue(c)) for c in prior)) if prior else C.Const(True)
    branches.append((rest, case.args.get("default")))
    total: list[tuple[int, float]] = []  # (slot, factor): SUM of the branch values
    counted: list[tuple[int, float]] = []  # rows whose value is not NULL (COUNT, AVG's denominator)
    counts = kind != "sum"
    integer = True
    lo, hi = float("inf"), float("-inf")
    for bfilter, value in branches:
        f = bfilter if filt is None else C.And((filt, bfilter))
        value = _strip_casts(strip_paren(value), ctx) if value is not None else None
        if value is None or isinstance(value, exp.Null):
            continue
        if isinstance(value, exp.Column):
            attr = ctx.column(value)
            if kind != "count" and not attr.domain.summable:
                raise Refusal(E.UNDEFINED_FUNCTION, f"function {kind}({attr.domain.sql_type}) does not exist",
                              position=position_of(value))
            if counts:
                counted.append((ctx.slot(AggSpec("count", attr.name if attr.domain.nullable else None, f)), 1.0))
            if kind != "count":
                integer = integer and attr.domain.sum_oid == T.INT8  # a numeric measure's sum stays numeric
                total.append((ctx.slot(AggSpec("sum", attr.name, f)), 1.0))
                a_lo, a_hi = attr.domain.sum_bounds
                lo, hi = min(lo, a_lo), max(hi, a_hi)
            continue
        lit = fold(value, ctx.budget)
        if lit is NOT_CONSTANT:
            b_total, b_counted, b_lo, b_hi, b_int, _ = _value_terms(kind, value, f, ctx)
            total += b_total
            counted += b_counted
            integer = integer and b_int
            lo, hi = min(lo, b_lo), max(hi, b_hi)
            continue
        if isinstance(lit, bool) or not isinstance(lit, int | Decimal):
            if kind == "count":
                counted.append((ctx.slot(AggSpec("count", None, f)), 1.0))
                continue
            if isinstance(lit, str):  # a quoted literal takes the numeric branches' type, as in PostgreSQL
                raise Refusal(E.INVALID_TEXT_REPRESENTATION, f'invalid input syntax for type integer: "{lit}"',
                              position=position_of(value))
            raise Refusal(E.DATATYPE_MISMATCH, "CASE types boolean and integer cannot be matched",
                          position=position_of(value), hint="Each CASE branch inside SUM or AVG must be a number.")
        integer = integer and isinstance(lit, int)
        if counts:
            counted.append((ctx.slot(AggSpec("count", None, f)), 1.0))
        if lit != 0 and kind != "count":
            c = ctx.slot(AggSpec("count", None, f))
            total.append((c, float(lit)))
        lo, hi = min(lo, float(lit)), max(hi, float(lit))
    if kind == "count":
        return pp.Lin(counted, True, name)
    if kind == "sum":
        return pp.Lin(total, integer, name, nonneg=lo >= 0)
    return pp.Ratio(total, counted, lo, hi, name)
