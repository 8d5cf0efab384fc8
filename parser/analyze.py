"""Check a parsed SELECT over one protected table and lower it to a parameter-free Template.

The Template is what the parse cache stores: everything about the statement that does not depend on bound
parameter values (the WHERE as a small IR, the aggregates per group, GROUP BY attributes, the typed
post-processing expressions, LIMIT/OFFSET). ``bind`` turns it into linear queries once values are known.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from sqlglot import exp

from . import errors as E
from . import postprocess as pp
from .buckets import GroupDim, bucket_dim, plain_dim
from .errors import Refusal
from .schema import Attribute, Catalog, TableSchema
from .syntax import literal_value, position_of

# WHERE IR: tuples, cheap to build and to walk.
#   ("and", (ir, ...)) ("or", (ir, ...))  -- tuples throughout: filters are hashable cache keys ("not", ir) ("const", True|False|None)
#   ("cmp", attr, op, operand)  ("in", attr, [operand...])  ("isnull", attr)
# operand: ("lit", value) | ("param", n); value is int | Decimal | str | bool | None.
WhereIR = tuple[Any, ...]

_CMP_OPS: dict[type[exp.Expr], str] = {
    exp.EQ: "=",
    exp.NEQ: "<>",
    exp.LT: "<",
    exp.LTE: "<=",
    exp.GT: ">",
    exp.GTE: ">=",
}
_FLIP = {"=": "=", "<>": "<>", "<": ">", "<=": ">=", ">": "<", ">=": "<="}
_ARITH: dict[type[exp.Expr], str] = {exp.Add: "+", exp.Sub: "-", exp.Mul: "*", exp.Div: "/", exp.Mod: "%"}
_INT_TYPES = {exp.DataType.Type.INT, exp.DataType.Type.BIGINT, exp.DataType.Type.SMALLINT}
_FLOAT_TYPES = {
    exp.DataType.Type.DOUBLE,
    exp.DataType.Type.FLOAT,
    exp.DataType.Type.DECIMAL,
    exp.DataType.Type.BIGDECIMAL,
}
_TEXT_TYPES = {exp.DataType.Type.TEXT, exp.DataType.Type.VARCHAR, exp.DataType.Type.CHAR}

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


@dataclass(frozen=True)
class AggSpec:
    """One aggregate computed per group: COUNT over cells (non-NULL ``attr`` if given) or SUM of ``attr``."""

    kind: str  # "count" | "sum"
    attr: str | None
    filter: WhereIR | None = None


@dataclass
class Template:
    """A checked statement, independent of bound parameter values."""

    table: TableSchema
    where: WhereIR | None
    groups: tuple[GroupDim, ...]
    aggs: list[AggSpec]
    outputs: list[pp.Expr]
    having: pp.Expr | None
    order: list[tuple[pp.Expr, bool, bool]]  # (expr, descending, nulls_first)
    limit: tuple[str, Any] | None
    offset: tuple[str, Any] | None
    param_types: dict[int, int] = field(default_factory=dict)

    @property
    def group_attrs(self) -> tuple[str, ...]:
        return tuple(d.attr for d in self.groups)

    @property
    def n_groups(self) -> int:
        n = 1
        for d in self.groups:
            n *= len(d.keys)
        return n


def _unsupported(what: str, node: exp.Expr | None, hint: str = E.SUPPORTED_HINT) -> Refusal:
    return Refusal(E.FEATURE_NOT_SUPPORTED, f"{what} is not supported on protected tables", hint=hint,
                   position=position_of(node))


def _sql_of(node: exp.Expr) -> str:
    try:
        return node.sql(dialect="postgres")
    except Exception:  # noqa: BLE001 - only used for messages
        return type(node).__name__


class Analyzer:
    """One pass over one SELECT: resolves names, checks every construct, builds the Template."""

    def __init__(self, select: exp.Select, catalog: Catalog, max_groups: int) -> None:
        self.select = select
        self.catalog = catalog
        self.max_groups = max_groups
        self.param_types: dict[int, int] = {}
        self.aggs: list[AggSpec] = []
        self.agg_index: dict[AggSpec, int] = {}

    # -- FROM ---------------------------------------------------------------------------------------

    def resolve_table(self) -> TableSchema:
        sel = self.select
        if sel.args.get("joins"):
            raise _unsupported("JOIN", sel.args["joins"][0],
                               hint="Query one protected table at a time; " + E.SUPPORTED_HINT)
        frm = sel.args.get("from_") or sel.args.get("from")
        if frm is None:
            raise Refusal(E.FEATURE_NOT_SUPPORTED, "statement does not read a protected table")
        src = frm.this
        if not isinstance(src, exp.Table) or not isinstance(src.this, exp.Identifier):
            raise _unsupported(f"FROM {type(src).__name__.lower()}", src)
        if src.args.get("sample") is not None:
            raise _unsupported("TABLESAMPLE", src.args["sample"])
        name = _ident(src.this)
        schema = _ident(src.args["db"]) if src.args.get("db") else None
        table = self.catalog.table(name, schema) if name == name.lower() and (
            schema is None or schema == schema.lower()) else None
        if table is None:
            full = f"{schema}.{name}" if schema else name
            raise Refusal(E.UNDEFINED_TABLE, f'relation "{full}" does not exist', position=position_of(src))
        self.table = table
        alias = src.args.get("alias")
        self.alias = _ident(alias.this) if alias is not None and alias.this is not None else None
        return table

    # -- names --------------------------------------------------------------------------------------

    def column(self, col: exp.Column) -> Attribute:
        """Resolve a column reference (any case unless quoted; qualified by table, schema or alias)."""
        if isinstance(col.this, exp.Star):
            raise Refusal(E.INSUFFICIENT_PRIVILEGE, f"permission denied: SELECT * on protected table {self.table.name}",
                          hint="Only aggregates (COUNT, SUM, AVG) may be read from a protected table.",
                          position=position_of(col))
        qual = [p for p in (col.args.get("catalog"), col.args.get("db"), col.args.get("table")) if p is not None]
        if qual:
            names = [_ident(p) for p in qual]
            want = self.alias if self.alias is not None else self.table.name
            ok = names[-1] == want and (len(names) < 2 or (self.alias is None and names[-2] == self.table.schema))
            if not ok:
                raise Refusal(E.UNDEFINED_TABLE, f'missing FROM-clause entry for table "{names[-1]}"',
                              position=position_of(col))
        name = _ident(col.this)
        attr = self.table.attribute(name) if name == name.lower() else None
        if attr is None:
            shown = ".".join([_ident(p) for p in qual] + [name])
            raise Refusal(E.UNDEFINED_COLUMN, f'column "{shown}" does not exist', position=position_of(col),
                          hint=f"Protected table {self.table.name} exposes its declared attributes: "
                          + ", ".join(a.name for a in self.table.attributes) + ".")
        return attr

    # -- WHERE --------------------------------------------------------------------------------------

    def operand(self, node: exp.Expr, attr: Attribute | None) -> tuple[str, Any]:
        """A literal or a parameter compared with ``attr`` (None: a literal-only comparison)."""
        node = _strip_paren(node)
        while isinstance(node, exp.Cast) and isinstance(_strip_paren(node.this), exp.Parameter | exp.Placeholder):
            node = _strip_paren(node.this)  # $1::int4: the value is coerced to the attribute's type anyway
        if isinstance(node, exp.Parameter | exp.Placeholder):
            n = _param_index(node)
            self.param_types[n] = pp.TEXT if attr is not None and attr.domain.kind != "int" else pp.INT4
            return ("param", n)
        value = self.literal(node)
        if value is _NOT_LITERAL:
            if isinstance(node, exp.Column):
                raise _unsupported("comparing two columns", node,
                                   hint="Compare an attribute with a literal or a parameter.")
            if node.find(exp.AggFunc):
                raise Refusal(E.GROUPING_ERROR, "aggregate functions are not allowed in WHERE",
                              position=position_of(node))
            if node.find(exp.Select):
                raise _unsupported("subquery", node)
            raise _unsupported(f"expression {_sql_of(node)!r} in WHERE", node,
                               hint="Compare an attribute with a literal or a parameter.")
        if attr is not None:
            _check_literal_type(attr, value, node)
        return ("lit", value)

    def literal(self, node: exp.Expr) -> Any:
        node = _strip_paren(node)
        if isinstance(node, exp.Null):
            return None
        if isinstance(node, exp.Boolean):
            return bool(node.this)
        if isinstance(node, exp.Literal):
            return literal_value(node)
        if isinstance(node, exp.Neg):
            inner = self.literal(node.this)
            if isinstance(inner, int | Decimal) and not isinstance(inner, bool):
                return -inner
        if isinstance(node, exp.Cast):
            inner = self.literal(node.this)
            if inner is _NOT_LITERAL or inner is None:
                return inner
            to = node.args["to"].this
            try:
                if to in _INT_TYPES:
                    d = Decimal(str(inner))
                    if isinstance(inner, str) and d != d.to_integral_value():
                        raise ValueError
                    return int(d.to_integral_value(rounding=ROUND_HALF_UP))  # numeric -> int: half away from 0
                if to in _FLOAT_TYPES:
                    return Decimal(str(inner))
                if to in _TEXT_TYPES:
                    return str(inner)
            except (ValueError, ArithmeticError):
                raise Refusal(E.INVALID_TEXT_REPRESENTATION, f'invalid input syntax for type {to.value.lower()}: '
                              f'"{inner}"', position=position_of(node)) from None
        return _NOT_LITERAL

    def subject(self, node: exp.Expr) -> exp.Expr:
        """The compared side with identity casts removed (``age::int``, ``city::text``)."""
        node = _strip_paren(node)
        while isinstance(node, exp.Cast) and isinstance(_strip_paren(node.this), exp.Column):
            attr = self.column(_strip_paren(node.this))
            to = node.args["to"].this
            numeric = attr.domain.kind == "int" and to in (_INT_TYPES | _FLOAT_TYPES)
            if not (numeric or (attr.domain.kind != "int" and to in _TEXT_TYPES)):
                break
            node = _strip_paren(node.this)
        return node

    def where(self, node: exp.Expr) -> WhereIR:
        node = _strip_paren(node)
        if isinstance(node, exp.And | exp.Or):
            tag = "and" if isinstance(node, exp.And) else "or"
            return (tag, tuple(self.where(x) for x in _flatten(node, type(node))))
        if isinstance(node, exp.Not):
            return ("not", self.where(node.this))
        if isinstance(node, exp.Boolean):
            return ("const", bool(node.this))
        if isinstance(node, exp.Null):
            return ("const", None)
        if type(node) in _CMP_OPS:
            op = _CMP_OPS[type(node)]
            left, right = self.subject(node.this), self.subject(node.expression)
            quantified = _quantified(right)
            if quantified is not None and isinstance(left, exp.Column):
                # x op ANY/ALL(ARRAY[...]) is how JDBC-style tools write IN lists: OR / AND of comparisons.
                combine, items = quantified
                attr = self.column(left)
                return (combine, tuple(("cmp", attr.name, op, self.operand(x, attr)) for x in items))
            if isinstance(right, exp.Any):
                raise _unsupported(f"{_sql_of(right)}", right)
            if isinstance(left, exp.Column):
                attr = self.column(left)
                return ("cmp", attr.name, op, self.operand(right, attr))
            if isinstance(right, exp.Column):
                attr = self.column(right)
                return ("cmp", attr.name, _FLIP[op], self.operand(left, attr))
            a, b = self.operand(left, None), self.operand(right, None)
            if a[0] == "param" or b[0] == "param":
                raise _unsupported("a parameter compared with a literal", node)
            return ("const", _const_compare(op, a[1], b[1], node))
        if isinstance(node, exp.NullSafeEQ | exp.NullSafeNEQ):
            left, right = self.subject(node.this), self.subject(node.expression)
            if not isinstance(left, exp.Column):
                left, right = right, left
            if not isinstance(left, exp.Column):
                raise _unsupported(f"predicate {_sql_of(node)!r}", node)
            attr = self.column(left)
            ir_d: WhereIR = ("notdistinct", attr.name, self.operand(right, attr))
            return ir_d if isinstance(node, exp.NullSafeEQ) else ("not", ir_d)
        if isinstance(node, exp.Between):
            subject = self.subject(node.this)
            if not isinstance(subject, exp.Column):
                raise _unsupported(f"expression {_sql_of(subject)!r} in WHERE", subject)
            attr = self.column(subject)
            lo, hi = self.operand(node.args["low"], attr), self.operand(node.args["high"], attr)
            if node.args.get("symmetric"):
                # BETWEEN SYMMETRIC: either order of the bounds.
                a = ("and", (("cmp", attr.name, ">=", lo), ("cmp", attr.name, "<=", hi)))
                b = ("and", (("cmp", attr.name, ">=", hi), ("cmp", attr.name, "<=", lo)))
                return ("or", (a, b))
            return ("and", (("cmp", attr.name, ">=", lo), ("cmp", attr.name, "<=", hi)))
        if isinstance(node, exp.In):
            subject = self.subject(node.this)
            if node.args.get("query") is not None:
                raise _unsupported("subquery", node.args["query"])
            if not isinstance(subject, exp.Column):
                raise _unsupported(f"expression {_sql_of(subject)!r} in WHERE", subject)
            attr = self.column(subject)
            return ("in", attr.name, tuple(self.operand(x, attr) for x in node.expressions))
        if isinstance(node, exp.Is):
            subject = self.subject(node.this)
            target = node.expression
            if not isinstance(target, exp.Null):
                raise _unsupported(f"IS {_sql_of(target)}", node)
            if not isinstance(subject, exp.Column):
                raise _unsupported(f"expression {_sql_of(subject)!r} in WHERE", subject)
            attr = self.column(subject)
            ir: WhereIR = ("isnull", attr.name)
            return ("not", ir) if node.args.get("negate") else ir
        if isinstance(node, exp.Column):
            raise Refusal(E.DATATYPE_MISMATCH, "argument of WHERE must be type boolean, not type integer",
                          position=position_of(node))
        if node.find(exp.Select):
            raise _unsupported("subquery", node.find(exp.Select))
        if node.find(exp.AggFunc):
            raise Refusal(E.GROUPING_ERROR, "aggregate functions are not allowed in WHERE",
                          position=position_of(node.find(exp.AggFunc)))
        raise _unsupported(f"predicate {_sql_of(node)!r}", node,
                           hint="WHERE supports =, <>, <, <=, >, >=, BETWEEN, IN, IS [NOT] NULL on attributes "
                           "compared with literals or parameters, combined with AND, OR, NOT.")

    # -- aggregates and output expressions ----------------------------------------------------------

    def slot(self, spec: AggSpec) -> int:
        if spec not in self.agg_index:
            self.agg_index[spec] = len(self.aggs)
            self.aggs.append(spec)
        return self.agg_index[spec]

    def aggregate(self, node: exp.AggFunc, filt: WhereIR | None, name: str) -> pp.Expr:
        kind = type(node).__name__.lower()
        if kind not in ("count", "sum", "avg"):
            label = UNSUPPORTED_AGGREGATES.get(kind, kind.upper())
            raise _unsupported(f"aggregate {label}", node,
                               hint="Only COUNT, SUM and AVG have bounded sensitivity here; " + E.SUPPORTED_HINT)
        arg = node.this
        if isinstance(arg, exp.Distinct):
            raise _unsupported(f"{kind.upper()}(DISTINCT ...)", node)
        if len(node.expressions) > 0 and not isinstance(node, exp.Count):
            raise _unsupported(f"{kind.upper()} with several arguments", node)
        arg = _strip_paren(arg) if arg is not None else None
        if arg is not None and arg.find(exp.AggFunc):
            raise Refusal(E.GROUPING_ERROR, "aggregate function calls cannot be nested",
                          position=position_of(arg.find(exp.AggFunc)))
        if arg is not None and arg.find(exp.Window):
            raise Refusal(E.GROUPING_ERROR, "aggregate function calls cannot contain window function calls",
                          position=position_of(arg.find(exp.Window)))
        arg = _strip_numeric_casts(arg)
        if isinstance(arg, exp.Case):
            return self.case_aggregate(kind, arg, filt, name)
        if kind == "count":
            if arg is None or isinstance(arg, exp.Star):
                return pp.Agg(self.slot(AggSpec("count", None, filt)), True, name)
            if isinstance(arg, exp.Column):
                attr = self.column(arg)
                col = attr.name if attr.domain.nullable else None
                return pp.Agg(self.slot(AggSpec("count", col, filt)), True, name)
            lit = self.literal(arg)
            if lit is _NOT_LITERAL:
                raise _unsupported(f"expression inside COUNT ({_sql_of(arg)})", arg,
                                   hint="Use COUNT(*), COUNT(col) or COUNT(1); WHERE restricts rows.")
            if lit is None:
                return pp.Const(0, pp.INT8)  # COUNT(NULL) counts nothing, whatever the data
            return pp.Agg(self.slot(AggSpec("count", None, filt)), True, name)
        if isinstance(arg, exp.Column):
            attr = self.column(arg)
            if attr.domain.kind != "int":
                raise Refusal(E.UNDEFINED_FUNCTION, f"function {kind}(text) does not exist",
                              position=position_of(node),
                              hint="SUM and AVG need an integer attribute.")
            s = self.slot(AggSpec("sum", attr.name, filt))
            if kind == "sum":
                return pp.Agg(s, False, name)
            c = self.slot(AggSpec("count", attr.name if attr.domain.nullable else None, filt))
            return pp.Avg(s, c, float(attr.domain.lo), float(attr.domain.hi), name)
        lit = self.literal(arg) if arg is not None else _NOT_LITERAL
        if isinstance(lit, int | Decimal) and not isinstance(lit, bool):
            c = self.slot(AggSpec("count", None, filt))
            if kind == "sum":
                factor: int | float = lit if isinstance(lit, int) else float(lit)
                return pp.Scaled(c, factor, name)
            return pp.Avg(None, c, float(lit), float(lit), name, const=float(lit))
        raise _unsupported(f"expression inside {kind.upper()} ({_sql_of(arg) if arg is not None else ''})",
                           arg if arg is not None else node,
                           hint=f"{kind.upper()} takes one attribute; WHERE restricts rows.")

    def case_aggregate(self, kind: str, case: exp.Case, filt: WhereIR | None, name: str) -> pp.Expr:
        """``SUM/COUNT/AVG(CASE WHEN p THEN x ... ELSE y END)``: one filtered aggregate per branch.

        BI tools write conditional counts and sums this way (Metabase's count-where and sum-where,
        ``SUM(CASE WHEN p THEN 1 ELSE 0 END)``). Branch k takes the rows where its condition is TRUE and no
        earlier one is; each branch value must be an attribute, a numeric literal or NULL.
        """
        subject = case.this
        attr_subject = None
        if subject is not None:
            subject = self.subject(subject)
            if not isinstance(subject, exp.Column):
                raise _unsupported(f"CASE {_sql_of(subject)} inside {kind.upper()}", subject)
            attr_subject = self.column(subject)
        prior: list[WhereIR] = []
        branches: list[tuple[WhereIR, exp.Expr | None]] = []
        for branch in case.args.get("ifs") or []:
            if attr_subject is not None:
                cond: WhereIR = ("cmp", attr_subject.name, "=", self.operand(branch.this, attr_subject))
            else:
                cond = self.where(branch.this)
            branches.append((("and", (("istrue", cond), *(("not", ("istrue", c)) for c in prior))),
                             branch.args.get("true")))
            prior.append(cond)
        rest: WhereIR = ("and", tuple(("not", ("istrue", c)) for c in prior)) if prior else ("const", True)
        branches.append((rest, case.args.get("default")))
        total: list[tuple[int, float]] = []  # (slot, factor): SUM of the branch values
        counted: list[tuple[int, float]] = []  # rows whose value is not NULL (COUNT, AVG's denominator)
        integer = True
        lo, hi = float("inf"), float("-inf")
        for bfilter, value in branches:
            f = bfilter if filt is None else ("and", (filt, bfilter))
            value = _strip_numeric_casts(_strip_paren(value)) if value is not None else None
            if value is None or isinstance(value, exp.Null):
                continue
            if isinstance(value, exp.Column):
                attr = self.column(value)
                if kind != "count" and attr.domain.kind != "int":
                    raise Refusal(E.UNDEFINED_FUNCTION, f"function {kind}(text) does not exist",
                                  position=position_of(value))
                counted.append((self.slot(AggSpec("count", attr.name if attr.domain.nullable else None, f)), 1.0))
                if kind != "count":
                    total.append((self.slot(AggSpec("sum", attr.name, f)), 1.0))
                    lo, hi = min(lo, attr.domain.lo), max(hi, attr.domain.hi)
                continue
            lit = self.literal(value)
            if isinstance(lit, bool) or not isinstance(lit, int | Decimal):
                if kind == "count" and lit is not _NOT_LITERAL:
                    counted.append((self.slot(AggSpec("count", None, f)), 1.0))
                    continue
                raise _unsupported(f"CASE branch {_sql_of(value)} inside {kind.upper()}", value,
                                   hint="Each CASE branch may be an attribute, a numeric literal or NULL.")
            integer = integer and isinstance(lit, int)
            c = self.slot(AggSpec("count", None, f))
            counted.append((c, 1.0))
            if lit != 0 and kind != "count":
                total.append((c, float(lit)))
            lo, hi = min(lo, float(lit)), max(hi, float(lit))
        if kind == "count":
            return pp.Lin(counted, True, name)
        if kind == "sum":
            return pp.Lin(total, integer, name)
        return pp.Ratio(total, counted, lo, hi, name)

    def expr(self, node: exp.Expr, where: str) -> pp.Expr:
        """Lower an output / HAVING / ORDER BY expression over aggregates and group keys."""
        name = _figure_name(node)
        node = _strip_paren(node)
        if isinstance(node, exp.Window):
            raise _unsupported("window function", node)
        if isinstance(node, exp.Filter):
            agg = node.this
            cond = node.expression.this if isinstance(node.expression, exp.Where) else node.expression
            if not isinstance(agg, exp.AggFunc):
                raise _unsupported("FILTER on a non-aggregate", node)
            return self.aggregate(agg, self.where(cond), name)
        if isinstance(node, exp.AggFunc):
            return self.aggregate(node, None, name)
        for i, dim in enumerate(self.groups):
            if dim.node is not None and node == dim.node:
                return pp.Key(i, dim.oid, name)
        if isinstance(node, exp.Column):
            if isinstance(node.this, exp.Star):
                self.column(node)
            attr = self.column(node)
            plain = [i for i, d in enumerate(self.groups) if d.node is None and d.attr == attr.name]
            if not plain:
                raise Refusal(E.GROUPING_ERROR,
                              f'column "{self.table.name}.{attr.name}" must appear in the GROUP BY clause or be '
                              "used in an aggregate function", position=position_of(node))
            return pp.Key(plain[0], self.groups[plain[0]].oid, attr.name)
        if isinstance(node, exp.Parameter | exp.Placeholder):
            n = _param_index(node)
            self.param_types.setdefault(n, pp.FLOAT8)
            return pp.Param(n, self.param_types[n])
        lit = self.literal(node)
        if lit is not _NOT_LITERAL:
            if lit is None:
                return pp.Const(None, pp.TEXT)
            if isinstance(lit, bool):
                return pp.Const(lit, pp.BOOL)
            if isinstance(lit, int):
                return pp.Const(lit, pp.INT4 if -(2**31) <= lit < 2**31 else pp.INT8)
            if isinstance(lit, Decimal):
                return pp.Const(float(lit), pp.FLOAT8)
            return pp.Const(lit, pp.TEXT)
        if type(node) in _ARITH:
            a, b = self.expr(node.this, where), self.expr(node.expression, where)
            return _named(pp.Bin(_ARITH[type(node)], a, b), name)
        if isinstance(node, exp.Neg):
            return pp.Neg(self.expr(node.this, where))
        if isinstance(node, exp.Cast):
            to = node.args["to"].this
            inner = self.expr(node.this, where)
            if to in _INT_TYPES:
                return _named(pp.Cast(inner, pp.INT8 if to != exp.DataType.Type.INT else pp.INT4), name)
            if to in _FLOAT_TYPES:
                return _named(pp.Cast(inner, pp.FLOAT8), name)
            if to in _TEXT_TYPES:
                return _named(pp.Cast(inner, pp.TEXT), name)
            raise _unsupported(f"CAST to {to.value}", node)
        if type(node) in _CMP_OPS:
            a, b = self.expr(node.this, where), self.expr(node.expression, where)
            _type_params(a, b)
            return pp.Cmp(_CMP_OPS[type(node)], a, b)
        if isinstance(node, exp.And | exp.Or):
            return pp.Logic("and" if isinstance(node, exp.And) else "or",
                            [self.expr(node.this, where), self.expr(node.expression, where)])
        if isinstance(node, exp.Not):
            return pp.Logic("not", [self.expr(node.this, where)])
        if isinstance(node, exp.Is) and isinstance(node.expression, exp.Null):
            return pp.IsNull(self.expr(node.this, where), bool(node.args.get("negate")))
        if isinstance(node, exp.Between):
            x = self.expr(node.this, where)
            lo, hi = self.expr(node.args["low"], where), self.expr(node.args["high"], where)
            _type_params(x, lo)
            _type_params(x, hi)
            return pp.Logic("and", [pp.Cmp(">=", x, lo), pp.Cmp("<=", x, hi)])
        if isinstance(node, exp.In) and node.args.get("query") is None:
            x = self.expr(node.this, where)
            items = [self.expr(i, where) for i in node.expressions]
            for it in items:
                _type_params(x, it)
            return pp.Logic("or", [pp.Cmp("=", x, it) for it in items])
        func = _function(self, node, where, name)
        if func is not None:
            return func
        if node.find(exp.Select):
            raise _unsupported("subquery", node.find(exp.Select))
        raise _unsupported(f"expression {_sql_of(node)!r} in {where}", node)

    # -- the statement ------------------------------------------------------------------------------

    def run(self) -> Template:
        sel = self.select
        table = self.resolve_table()
        if sel.args.get("distinct") is not None and not _has_agg(sel):
            raise _non_aggregate(table, sel)
        if any(isinstance(e, exp.Star) or (isinstance(e, exp.Column) and isinstance(e.this, exp.Star))
               for e in sel.expressions):
            star = next(e for e in sel.expressions if isinstance(e, exp.Star | exp.Column))
            raise Refusal(E.INSUFFICIENT_PRIVILEGE, f"permission denied: SELECT * on protected table {table.name}",
                          hint="Only aggregates (COUNT, SUM, AVG) may be read from a protected table.",
                          position=position_of(star))
        # PostgreSQL resolves the target list before WHERE and GROUP BY: report its unknown columns first.
        cols = [c for item in sel.expressions for c in item.find_all(exp.Column) if not isinstance(c.this, exp.Star)]
        for c in sorted(cols, key=lambda c: position_of(c) or 0):
            self.column(c)
        win = sel.find(exp.Window)
        if win is not None:
            raise _unsupported("window function", win)
        if sel.args.get("distinct") is not None:
            raise _unsupported("SELECT DISTINCT", sel)
        if not _has_agg(sel):
            raise _non_aggregate(table, sel)
        for key in ("qualify", "connect", "laterals", "pivots", "locks", "into", "sample"):
            if sel.args.get(key):
                raise _unsupported(key.upper(), sel.args[key] if isinstance(sel.args[key], exp.Expr) else sel)
        where_ir = self.where(sel.args["where"].this) if sel.args.get("where") is not None else None
        self.groups = self.group_by()
        outputs: list[pp.Expr] = []
        self.output_nodes: list[exp.Expr] = []
        for item in sel.expressions:
            node = item.this if isinstance(item, exp.Alias) else item
            e = self.expr(node, "SELECT")
            e.name = _ident(item.args["alias"]) if isinstance(item, exp.Alias) else _figure_name(node)
            outputs.append(e)
            self.output_nodes.append(node)
        having = self.expr(sel.args["having"].this, "HAVING") if sel.args.get("having") is not None else None
        order = self.order_by(outputs)
        limit, offset = self.limit_offset()
        t = Template(table, where_ir, self.groups, self.aggs, outputs, having, order, limit, offset,
                     self.param_types)
        if t.n_groups > self.max_groups:
            raise Refusal(E.PROGRAM_LIMIT_EXCEEDED,
                          f"GROUP BY {', '.join(t.group_attrs)} has {t.n_groups} groups in the public domain, "
                          f"more than the limit of {self.max_groups}",
                          hint="Group by fewer or coarser attributes, or filter with WHERE and group by less.",
                          position=position_of(sel.args.get("group")))
        return t

    def group_by(self) -> tuple[GroupDim, ...]:
        grp = self.select.args.get("group")
        if grp is None:
            return ()
        for key in ("grouping_sets", "cube", "rollup"):
            if grp.args.get(key):
                raise _unsupported(key.replace("_", " ").upper(), grp)
        dims: list[GroupDim] = []
        for item in grp.expressions:
            node = _strip_paren(item)
            if isinstance(node, exp.Literal) and not node.is_string:
                pos = int(str(node.this))
                items = self.select.expressions
                if not 1 <= pos <= len(items):
                    raise Refusal(E.INVALID_COLUMN_REFERENCE,
                                  f"GROUP BY position {pos} is not in select list", position=position_of(node))
                target = items[pos - 1]
                node = _strip_paren(target.this if isinstance(target, exp.Alias) else target)
                if isinstance(node, exp.AggFunc) or node.find(exp.AggFunc):
                    raise Refusal(E.GROUPING_ERROR, "aggregate functions are not allowed in GROUP BY",
                                  position=position_of(item))
            elif isinstance(node, exp.Column) and not node.args.get("table"):
                name = _ident(node.this)
                if self.table.attribute(name) is None or name != name.lower():
                    # PostgreSQL falls back to an output column name when no input column matches.
                    for target in self.select.expressions:
                        if isinstance(target, exp.Alias) and _ident(target.args["alias"]) == name:
                            node = _strip_paren(target.this)
                            break
            if isinstance(node, exp.AggFunc) or node.find(exp.AggFunc):
                raise Refusal(E.GROUPING_ERROR, "aggregate functions are not allowed in GROUP BY",
                              position=position_of(node))
            if isinstance(node, exp.Column):
                dim = plain_dim(self.column(node))
            else:
                dim = self.bucket(node)
            if all(not (d.attr == dim.attr and d.node == dim.node) for d in dims):
                dims.append(dim)
        return tuple(dims)

    def bucket(self, node: exp.Expr) -> GroupDim:
        """A GROUP BY expression over exactly one attribute, evaluated on its public domain."""
        if node.find(exp.Window) is not None or node.find(exp.Select) is not None:
            raise _unsupported(f"GROUP BY expression {_sql_of(node)!r}", node)
        cols = list(node.find_all(exp.Column))
        attrs = {self.column(c).name for c in cols}
        if len(attrs) != 1:
            raise _unsupported(f"GROUP BY expression {_sql_of(node)!r}", node,
                               hint="GROUP BY takes attributes, or an expression over exactly one attribute.")
        attr = self.table.attribute(attrs.pop())
        assert attr is not None
        return bucket_dim(attr, node, self.column)

    def order_by(self, outputs: list[pp.Expr]) -> list[tuple[pp.Expr, bool, bool]]:
        order = self.select.args.get("order")
        if order is None:
            return []
        out = []
        names = [o.name for o in outputs]
        for ordered in order.expressions:
            node = _strip_paren(ordered.this)
            desc = bool(ordered.args.get("desc"))
            # sqlglot fills in PostgreSQL's default (NULLs sort as larger than any value).
            nulls_first = bool(ordered.args.get("nulls_first"))
            if isinstance(node, exp.Literal) and not node.is_string:
                pos = int(str(node.this))
                if not 1 <= pos <= len(outputs):
                    raise Refusal(E.INVALID_COLUMN_REFERENCE, f"ORDER BY position {pos} is not in select list",
                                  position=position_of(node))
                out.append((outputs[pos - 1], desc, nulls_first))
                continue
            if isinstance(node, exp.Column) and not node.args.get("table") and _ident(node.this) in names:
                name = _ident(node.this)
                if names.count(name) > 1:
                    raise Refusal(E.AMBIGUOUS_COLUMN, f'ORDER BY "{name}" is ambiguous', position=position_of(node))
                out.append((outputs[names.index(name)], desc, nulls_first))
                continue
            out.append((self.expr(node, "ORDER BY"), desc, nulls_first))
        return out

    def limit_offset(self) -> tuple[tuple[str, Any] | None, tuple[str, Any] | None]:
        res: list[tuple[str, Any] | None] = []
        for key in ("limit", "offset"):
            node = self.select.args.get(key)
            if node is None:
                res.append(None)
                continue
            value = node.args.get("count") if isinstance(node, exp.Fetch) else node.expression
            if isinstance(node, exp.Fetch) and node.args.get("limit_options") is not None:
                opts = node.args["limit_options"]
                if opts.args.get("percent") or opts.args.get("with_ties"):
                    raise _unsupported("FETCH ... PERCENT / WITH TIES", node)
            value = _strip_paren(value) if value is not None else None
            if value is None or (isinstance(value, exp.Var) and str(value.this).upper() == "ALL"):
                res.append(None)
                continue
            if isinstance(value, exp.Parameter | exp.Placeholder):
                n = _param_index(value)
                self.param_types[n] = pp.INT8
                res.append(("param", n))
                continue
            lit = self.literal(value)
            if lit is None:
                res.append(None)
                continue
            if not isinstance(lit, int) or isinstance(lit, bool):
                raise _unsupported(f"{key.upper()} {_sql_of(value)}", value)
            if lit < 0:
                raise Refusal(E.INVALID_ROW_COUNT if key == "limit" else E.INVALID_OFFSET_COUNT,
                              f"{key.upper()} must not be negative", position=position_of(value))
            res.append(("lit", lit))
        return res[0], res[1]


_NOT_LITERAL: Any = object()


def _quantified(node: exp.Expr) -> tuple[str, list[exp.Expr]] | None:
    """``ANY(ARRAY[...])`` -> ("or", items); ``ALL(ARRAY[...])`` -> ("and", items); else None."""
    if isinstance(node, exp.Any):
        arr = _strip_paren(node.this)
        return ("or", list(arr.expressions)) if isinstance(arr, exp.Array) else None
    if isinstance(node, exp.Anonymous) and str(node.this).upper() == "ALL" and len(node.expressions) == 1:
        arr = _strip_paren(node.expressions[0])
        return ("and", list(arr.expressions)) if isinstance(arr, exp.Array) else None
    return None


def _strip_numeric_casts(node: Any) -> Any:
    """Casts to a numeric type do not change an integer attribute's value (Tableau wraps columns so)."""
    node = _strip_paren(node)
    while isinstance(node, exp.Cast) and node.args["to"].this in (_INT_TYPES | _FLOAT_TYPES):
        node = _strip_paren(node.this)
    return node


def _flatten(node: exp.Expr, cls: type[exp.Expr]) -> list[exp.Expr]:
    """Operands of a left-deep chain ``a OR b OR c ...`` without recursing once per operand."""
    out: list[exp.Expr] = []
    stack = [node]
    while stack:
        n = _strip_paren(stack.pop())
        if type(n) is cls:
            stack.append(n.expression)
            stack.append(n.this)
        else:
            out.append(n)
    return out


def _named(e: pp.Expr, name: str) -> pp.Expr:
    e.name = name
    return e


def _type_params(a: pp.Expr, b: pp.Expr) -> None:
    """A HAVING parameter takes the type of what it is compared with (as PostgreSQL infers it)."""
    if isinstance(a, pp.Param) and not isinstance(b, pp.Param):
        a.oid = b.oid
    if isinstance(b, pp.Param) and not isinstance(a, pp.Param):
        b.oid = a.oid


def _function(an: Analyzer, node: exp.Expr, where: str, name: str) -> pp.Expr | None:
    """Scalar functions over aggregates: round, abs, ceil, floor, coalesce, nullif, greatest, least."""
    import math

    def num(v: object) -> float:
        return float(v)  # type: ignore[arg-type]

    if isinstance(node, exp.Round):
        args = [an.expr(node.this, where)] + ([an.expr(node.args["decimals"], where)] if node.args.get("decimals") else [])

        oid = args[0].oid if args[0].oid in pp.INTEGER_OIDS and len(args) == 1 else pp.FLOAT8

        def rnd(vs: list[object], integer: bool = oid in pp.INTEGER_OIDS) -> object:
            if any(v is None for v in vs):
                return None
            digits = int(num(vs[1])) if len(vs) > 1 else 0
            q = 10.0 ** digits
            x = num(vs[0]) * q
            r = math.floor(abs(x) + 0.5) * (1 if x >= 0 else -1)  # half away from zero, as numeric round
            return int(r) if integer else r / q

        return pp.Func("round", args, rnd, oid)
    simple: dict[type[exp.Expr], tuple[str, Any]] = {
        exp.Abs: ("abs", abs), exp.Ceil: ("ceil", math.ceil), exp.Floor: ("floor", math.floor),
    }
    for cls, (fname, fn) in simple.items():
        if isinstance(node, cls):
            arg = an.expr(node.this, where)

            def f(vs: list[object], fn: Any = fn, keep: bool = arg.oid in pp.INTEGER_OIDS or fname == "abs") -> object:
                if vs[0] is None:
                    return None
                r = fn(vs[0])
                return r if keep else float(r)

            return pp.Func(fname, [arg], f, arg.oid)
    if isinstance(node, exp.Coalesce):
        args = [an.expr(node.this, where)] + [an.expr(x, where) for x in node.expressions]
        return pp.Func("coalesce", args, lambda vs: next((v for v in vs if v is not None), None), _unify(args))
    if isinstance(node, exp.Nullif):
        args = [an.expr(node.this, where), an.expr(node.expression, where)]
        return pp.Func("nullif", args, lambda vs: None if vs[0] == vs[1] else vs[0], args[0].oid)
    if isinstance(node, exp.Greatest | exp.Least):
        args = [an.expr(node.this, where)] + [an.expr(x, where) for x in node.expressions]
        pick = max if isinstance(node, exp.Greatest) else min

        def gl(vs: list[object], pick: Any = pick) -> object:
            vals = [v for v in vs if v is not None]
            return pick(vals) if vals else None

        return pp.Func("greatest" if pick is max else "least", args, gl, _unify(args))
    return None


def _unify(args: list[pp.Expr]) -> int:
    oids = {a.oid for a in args if not (isinstance(a, pp.Const) and a.value is None)}
    if oids and oids <= pp.INTEGER_OIDS:
        return pp.INT8 if pp.INT8 in oids else pp.INT4
    if oids == {pp.TEXT}:
        return pp.TEXT
    return pp.FLOAT8


def _has_agg(sel: exp.Select) -> bool:
    for part in [*sel.expressions, sel.args.get("having"), sel.args.get("order")]:
        if part is not None and part.find(exp.AggFunc) is not None:
            return True
    return False


def _non_aggregate(table: TableSchema, sel: exp.Select) -> Refusal:
    return Refusal(E.INSUFFICIENT_PRIVILEGE,
                   f"permission denied: non-aggregate read of protected table {table.name}",
                   hint="Only aggregates (COUNT, SUM, AVG) may be read from a protected table, e.g. "
                   f"SELECT count(*) FROM {table.name} WHERE ...",
                   position=position_of(sel.expressions[0]) if sel.expressions else None)


def _ident(node: Any) -> str:
    """Identifier text as PostgreSQL folds it: unquoted names are lower-cased."""
    if isinstance(node, exp.Identifier):
        return str(node.this) if node.quoted else str(node.this).lower()
    if isinstance(node, exp.Expr):
        return _ident(node.this) if node.this is not None else node.name
    return str(node).lower()


def _strip_paren(node: Any) -> Any:
    while isinstance(node, exp.Paren):
        node = node.this
    return node


def _param_index(node: exp.Expr) -> int:
    text = node.name if isinstance(node, exp.Placeholder) else str(node.this.this if isinstance(
        node.this, exp.Expr) else node.this)
    try:
        n = int(text)
    except ValueError:
        raise _unsupported(f"parameter {_sql_of(node)}", node) from None
    if n < 1:
        raise Refusal(E.UNDEFINED_PARAMETER, f"there is no parameter ${n}", position=position_of(node))
    return n


def _figure_name(node: exp.Expr) -> str:
    """The output column name PostgreSQL gives an unaliased expression (FigureColname)."""
    node = _strip_paren(node)
    if isinstance(node, exp.Column):
        return _ident(node.this)
    if isinstance(node, exp.Cast):
        inner = _figure_name(node.this)
        if inner != "?column?":
            return inner
        to = node.args["to"].this
        return {exp.DataType.Type.BIGINT: "int8", exp.DataType.Type.INT: "int4",
                exp.DataType.Type.DOUBLE: "float8", exp.DataType.Type.DECIMAL: "numeric",
                exp.DataType.Type.TEXT: "text"}.get(to, "?column?")
    if isinstance(node, exp.Filter):
        return _figure_name(node.this)
    if isinstance(node, exp.AggFunc):
        return type(node).__name__.lower()
    if isinstance(node, exp.Func) and not isinstance(node, exp.Binary):
        names = {exp.Coalesce: "coalesce", exp.Nullif: "nullif", exp.Round: "round", exp.Abs: "abs",
                 exp.Ceil: "ceil", exp.Floor: "floor", exp.Greatest: "greatest", exp.Least: "least"}
        return names.get(type(node), "?column?")
    return "?column?"


def _check_literal_type(attr: Attribute, value: Any, node: exp.Expr) -> None:
    """Reject literals PostgreSQL would not compare with the attribute's type."""
    if value is None:
        return
    pos = position_of(node)
    if attr.domain.kind == "int":
        if isinstance(value, bool):
            raise Refusal(E.UNDEFINED_FUNCTION, "operator does not exist: integer = boolean", position=pos,
                          hint="No operator matches the given name and argument types.")
        if isinstance(value, str):
            try:
                int(value.strip())
            except ValueError:
                raise Refusal(E.INVALID_TEXT_REPRESENTATION, f'invalid input syntax for type integer: "{value}"',
                              position=pos) from None
    else:
        if not isinstance(value, str):
            kind = "boolean" if isinstance(value, bool) else ("integer" if isinstance(value, int) else "numeric")
            raise Refusal(E.UNDEFINED_FUNCTION, f"operator does not exist: text = {kind}", position=pos,
                          hint="Compare a text attribute with a quoted string.")


def _const_compare(op: str, a: Any, b: Any, node: exp.Expr) -> bool | None:
    """Literal-to-literal comparisons (``WHERE 1 = 1`` from BI tools) fold to constants."""
    if a is None or b is None:
        return None
    if isinstance(a, str) != isinstance(b, str):
        try:
            a, b = (Decimal(a) if isinstance(a, str) else a), (Decimal(b) if isinstance(b, str) else b)
        except ArithmeticError:
            raise Refusal(E.INVALID_TEXT_REPRESENTATION, "invalid input syntax for a literal comparison",
                          position=position_of(node)) from None
    return pp.compare(op, a, b)
