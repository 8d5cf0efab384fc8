"""sqlglot expression -> scalar.Expr: the one compiler every pass uses for scalar SQL.

A pass supplies ``leaf``, which claims the nodes whose meaning depends on where the expression stands:
columns (a cell value in a GROUP BY bucket, a group key in the target list), aggregates, parameters. The
structure (literals, arithmetic, casts, comparisons, logic, CASE, functions) compiles the same everywhere.
``exact`` keeps decimal literals exact (numeric), as over public cells; without it they are float8, as
over noisy values. A node with no scalar form here raises ``NotScalar`` and the pass phrases the refusal.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from sqlglot import exp

from .. import errors as E
from .. import scalar as S
from .. import temporal as TM
from ..errors import Refusal
from ..limits import Budget
from ..pgtypes import type_name
from ..schema import Attribute
from ..syntax import literal_value, position_of
from ..values import temporal_arith_type, temporal_common
from .nodes import ARITH, CMP_OPS, FLOAT_TYPES, INT_TYPES, TEXT_TYPES, flatten, sql_of, strip_paren

Leaf = Callable[[exp.Expr], "S.Expr | None"]
NOT_CONSTANT: Any = object()


class NotScalar(Exception):
    """``node`` has no scalar form in this context."""

    def __init__(self, node: exp.Expr) -> None:
        super().__init__(type(node).__name__)
        self.node = node


_CLOCK = (exp.CurrentTimestamp, exp.CurrentDate, exp.Localtimestamp, exp.CurrentDatetime)
_TEMPORAL_TYPES = {exp.DataType.Type.DATE: S.DATE, exp.DataType.Type.TIMESTAMP: S.TIMESTAMP,
                   exp.DataType.Type.TIMESTAMPTZ: S.TIMESTAMPTZ, exp.DataType.Type.TIMESTAMPLTZ: S.TIMESTAMPTZ}

_FUNCTIONS: dict[type[exp.Expr], str] = {
    exp.Round: "round", exp.Floor: "floor", exp.Ceil: "ceil", exp.Abs: "abs", exp.Coalesce: "coalesce",
    exp.Nullif: "nullif", exp.Greatest: "greatest", exp.Least: "least", exp.Sign: "sign", exp.Sqrt: "sqrt",
    exp.Pow: "power", exp.Ln: "ln", exp.Exp: "exp", exp.Trunc: "trunc",
}
# Text functions: sqlglot node -> (function name, argument keys in order; a key ending in ? is optional).
_TEXT_FUNCTIONS: dict[type[exp.Expr], tuple[str, tuple[str, ...]]] = {
    exp.Lower: ("lower", ("this",)), exp.Upper: ("upper", ("this",)), exp.Length: ("length", ("this",)),
    exp.StrPosition: ("strpos", ("this", "substr")), exp.Substring: ("substring", ("this", "start", "length?")),
    exp.Left: ("left", ("this", "expression")), exp.Right: ("right", ("this", "expression")),
    exp.Replace: ("replace", ("this", "expression", "replacement")),
    exp.StartsWith: ("starts_with", ("this", "expression")),
    exp.SplitPart: ("split_part", ("this", "delimiter", "part_index")), exp.Reverse: ("reverse", ("this",)),
    exp.DPipe: ("textcat", ("this", "expression")),
}
# Argument types of the text functions beyond the first (the first is text): int4 positions and counts.
_INT_ARGS = {"substring", "left", "right", "split_part"}
# Functions whose value is not a function of the row: a per-row expression must be computable from cells.
_NONDETERMINISTIC = (exp.Rand, exp.Uuid)
_NONDETERMINISTIC_NAMES = frozenset({
    "random", "random_normal", "setseed", "clock_timestamp", "timeofday", "statement_timestamp",
    "transaction_timestamp", "gen_random_uuid", "uuid_generate_v4", "nextval", "currval", "lastval",
    "txid_current", "pg_backend_pid", "inet_client_addr", "pg_sleep",
})


def _type_params(a: S.Expr, b: S.Expr) -> None:
    """A parameter takes the type of what it is compared with (as PostgreSQL infers it)."""
    if isinstance(a, S.Param) and not isinstance(b, S.Param):
        a.oid = b.oid
    if isinstance(b, S.Param) and not isinstance(a, S.Param):
        b.oid = a.oid


class _Compiler:
    def __init__(self, leaf: Leaf, exact: bool, budget: Budget) -> None:
        self.leaf, self.exact, self.budget = leaf, exact, budget

    def typed(self, e: S.Expr) -> S.Expr:
        if not self.exact and e.oid == S.NUMERIC:
            e.oid = S.FLOAT8  # numbers computed from noisy values are float8 (see parser.postprocess)
        return e

    def compile(self, node: exp.Expr, depth: int = 0) -> S.Expr:
        node = strip_paren(node)
        self.budget.depth(depth)
        self.budget.tick()
        hit = self.leaf(node)
        if hit is not None:
            return hit
        d = depth + 1
        if isinstance(node, exp.Null):
            return S.Const(None, S.UNKNOWN)
        if isinstance(node, exp.Boolean):
            return S.Const(bool(node.this), S.BOOL)
        if isinstance(node, exp.Literal):
            return self.literal(node)
        if isinstance(node, exp.Neg):
            a = self.compile(node.this, d)
            if a.oid not in S.NUMBER_OIDS and a.oid != S.UNKNOWN:
                raise NotScalar(node)
            return S.Neg(a)
        if type(node) in ARITH:
            a, b = self.compile(node.this, d), self.compile(node.expression, d)
            op = ARITH[type(node)]
            if {a.oid, b.oid} & (S.TEMPORAL_OIDS | {S.INTERVAL}):
                return self.temporal_arith(op, a, b, node)
            if S.TEXT in (a.oid, b.oid) or S.BOOL in (a.oid, b.oid):
                raise NotScalar(node)
            return self.typed(S.Arith(op, a, b, position_of(node)))
        if isinstance(node, _CLOCK):
            return self.clock(node)
        if isinstance(node, exp.Interval):
            return self.interval(node)
        if isinstance(node, exp.TimestampTrunc | exp.DateTrunc):
            unit = node.args.get("unit")
            text = unit.name if isinstance(unit, exp.Var | exp.Literal) else None
            if text is None or not TM.truncatable(text):
                raise NotScalar(node)
            x = self.compile(node.this, d)
            if x.oid not in S.TEMPORAL_OIDS:
                raise NotScalar(node)
            args = [S.Const(text.lower(), S.TEXT), x]
            return S.Call("date_trunc", args, S.call_type("date_trunc", [S.TEXT, x.oid]))
        if isinstance(node, exp.Extract):
            field = node.this.name if isinstance(node.this, exp.Var | exp.Literal) else None
            x = self.compile(node.expression, d)
            if field is None or x.oid not in S.TEMPORAL_OIDS:
                raise NotScalar(node)
            return self.typed(S.Call("extract", [S.Const(field.lower(), S.TEXT), x], S.NUMERIC))
        if isinstance(node, exp.StrToDate | exp.StrToTime):
            source, fmt = self.compile(node.this, d), node.args.get("format")
            oid = S.DATE if isinstance(node, exp.StrToDate) else S.TIMESTAMPTZ
            if not isinstance(source, S.Const) or not isinstance(fmt, exp.Literal) or not isinstance(source.value, str):
                raise NotScalar(node)
            return S.Const(TM.strptime(source.value, str(fmt.this), oid), oid)
        if isinstance(node, exp.UnixToTime):
            if node.args.get("scale") is not None:
                raise NotScalar(node)
            x = self.compile(node.this, d)
            if x.oid not in S.NUMBER_OIDS:
                raise NotScalar(node)
            return S.Call("to_timestamp", [x], S.TIMESTAMPTZ)
        if isinstance(node, exp.Cast):
            return self.cast(node, d)
        if type(node) in CMP_OPS:
            return self.compare(CMP_OPS[type(node)], node.this, node.expression, d, node)
        if isinstance(node, exp.And | exp.Or):
            parts = [self.compile(x, d) for x in flatten(node, type(node))]
            return S.Logic("and" if isinstance(node, exp.And) else "or", parts)
        if isinstance(node, exp.Not):
            return S.Logic("not", [self.compile(node.this, d)])
        if isinstance(node, exp.Is) and isinstance(node.expression, exp.Null):
            return S.IsNull(self.compile(node.this, d), bool(node.args.get("negate")))
        if isinstance(node, exp.Between):
            x, lo, hi = (self.compile(node.args[k], d) for k in ("this", "low", "high"))
            inside = S.Logic("and", [self.compared(">=", x, lo, node), self.compared("<=", x, hi, node)])
            if not node.args.get("symmetric"):
                return inside
            swapped = S.Logic("and", [self.compared(">=", x, hi, node), self.compared("<=", x, lo, node)])
            return S.Logic("or", [inside, swapped])
        if isinstance(node, exp.In) and node.args.get("query") is None and not node.args.get("unnest"):
            return self.in_list(node, d)
        if isinstance(node, exp.Is) and isinstance(node.expression, exp.Boolean):
            return S.IsTruth(self.compile(node.this, d), bool(node.expression.this), bool(node.args.get("negate")))
        if isinstance(node, exp.Case):
            return self.case(node, d)
        if type(node) in _FUNCTIONS:
            return self.function(_FUNCTIONS[type(node)], node, d)
        if type(node) in _TEXT_FUNCTIONS:
            return self.text_function(node, d)
        if isinstance(node, exp.Like | exp.ILike | exp.Escape):
            return self.like(node, d)
        if isinstance(node, exp.Trim):
            return self.trim(node, d)
        if isinstance(node, exp.Date) and not node.expressions:  # date(x): the cast, as PostgreSQL defines it
            x = self.compile(node.this, d)
            if x.oid not in S.TEMPORAL_OIDS | {S.TEXT, S.UNKNOWN}:
                raise self.no_function("date", node, [x])
            return S.Cast(x, S.DATE, "date", position_of(node))
        if isinstance(node, exp.TimeToStr):
            return self.to_char(node, d)
        if isinstance(node, exp.Concat):
            return S.Call("concat", [self.compile(a, d) for a in node.expressions], S.TEXT)
        if isinstance(node, _NONDETERMINISTIC) or (isinstance(node, exp.Anonymous)
                                                   and str(node.this).lower() in _NONDETERMINISTIC_NAMES):
            name = str(node.this).lower() if isinstance(node, exp.Anonymous) else sql_of(node).split("(")[0].lower()
            raise Refusal(E.FEATURE_NOT_SUPPORTED, f"{name}() is not deterministic: a per-row value must be a "
                          "function of the row's declared columns", position=position_of(node),
                          hint="now(), current_date and current_timestamp are read once per statement; other "
                          "volatile functions have no place in an aggregate over protected rows.")
        if isinstance(node, exp.Anonymous):
            args = [self.compile(a, d) for a in node.expressions]
            raise Refusal(E.UNDEFINED_FUNCTION, f"function {str(node.this).lower()}("
                          f"{', '.join(type_name(a.oid) for a in args)}) does not exist", position=position_of(node),
                          hint="Per-row expressions take arithmetic, CAST, CASE, COALESCE, date_trunc / extract, "
                          "and the text functions lower, upper, length, strpos, substring, left, right, trim, "
                          "replace, concat, ||, LIKE, ILIKE.")
        raise NotScalar(node)

    def in_list(self, node: exp.In, d: int) -> S.Expr:
        """``x IN (...)``: one hash lookup a row when every item is a constant, else OR of equalities."""
        self.budget.in_list(len(node.expressions))
        x = self.compile(node.this, d)
        tests = [self.compared("=", x, self.compile(i, d), node) for i in node.expressions]
        lhs = {t.args[0].oid for t in tests}
        if tests and len(lhs) == 1 and all(isinstance(t.args[1], S.Const) for t in tests):
            first = tests[0].args[0]
            return S.InList(first, [t.args[1].value for t in tests])  # type: ignore[attr-defined]
        return S.Logic("or", tests)

    def text_args(self, fn: str, node: exp.Expr, parts: list[exp.Expr], d: int) -> list[S.Expr]:
        """Compiled arguments of a text function: the first text, positions integers (else 42883)."""
        args = [self.compile(p, d) for p in parts]
        want = [S.TEXT] + [S.INT4 if fn in _INT_ARGS and i > 0 and not (fn == "split_part" and i == 1) else S.TEXT
                           for i in range(1, len(args))]
        if fn == "textcat":  # anynonarray || text: the other side is read as text
            if S.TEXT not in (args[0].oid, args[1].oid) and S.UNKNOWN not in (args[0].oid, args[1].oid):
                raise self.no_function(fn, node, args)
            return [a if a.oid in (S.TEXT, S.UNKNOWN) else S.Cast(a, S.TEXT, "text", position_of(node)) for a in args]
        for a, w in zip(args, want, strict=True):
            ok = a.oid in (w, S.UNKNOWN) or (w == S.INT4 and a.oid in S.INTEGER_OIDS)
            if not ok:
                raise self.no_function(fn, node, args)
        return args

    def no_function(self, fn: str, node: exp.Expr, args: list[S.Expr]) -> Refusal:
        return Refusal(E.UNDEFINED_FUNCTION, f"function {fn}({', '.join(type_name(a.oid) for a in args)}) does not exist",
                       position=position_of(node), hint="Cast the column to text first, e.g. CAST(col AS TEXT)."
                       if args and args[0].oid != S.TEXT else None)

    def text_function(self, node: exp.Expr, d: int) -> S.Expr:
        fn, keys = _TEXT_FUNCTIONS[type(node)]
        if isinstance(node, exp.StrPosition) and node.args.get("position") is not None:
            raise NotScalar(node)
        parts = []
        for k in keys:
            v = node.args.get(k.rstrip("?"))
            if v is None:
                if not k.endswith("?"):
                    raise NotScalar(node)
                continue
            parts.append(v)
        args = self.text_args(fn, node, parts, d)
        return S.Call(fn, args, S.call_type(fn, [a.oid for a in args]))

    def like(self, node: exp.Expr, d: int) -> S.Expr:
        escape = None
        if isinstance(node, exp.Escape):
            escape, node = node.expression, node.this
            if not isinstance(node, exp.Like | exp.ILike):
                raise NotScalar(node)
        fn = "ilike" if isinstance(node, exp.ILike) else "like"
        parts = [node.this, node.expression] + ([escape] if escape is not None else [])
        if any(isinstance(strip_paren(p), exp.Any | exp.All) for p in parts):
            raise NotScalar(node)
        args = self.text_args(fn, node, parts, d)
        out: S.Expr = S.Call(fn, args, S.BOOL)
        return S.Logic("not", [out]) if node.args.get("negate") else out

    def to_char(self, node: exp.TimeToStr, d: int) -> S.Expr:
        """to_char(date or timestamp, format) for numeric date fields (YYYY, MM, DD, HH24, MI, SS, IW...)."""
        x = self.compile(node.this, d)
        fmt = node.args.get("format")
        if x.oid not in S.TEMPORAL_OIDS:
            raise self.no_function("to_char", node, [x, S.Const(None, S.TEXT)])
        if not isinstance(fmt, exp.Literal) or not TO_CHAR_FORMAT.fullmatch(str(fmt.this)):
            raise Refusal(E.FEATURE_NOT_SUPPORTED, f"to_char format {sql_of(node)!r} is not supported on protected "
                          "tables", position=position_of(node),
                          hint="to_char takes numeric date fields (YYYY, YY, MM, DD, DDD, HH24, HH12, MI, SS, IW, "
                          "IYYY, FM forms) separated by punctuation; date_trunc or extract give other buckets.")
        return S.Call("to_char", [x, S.Const(str(fmt.this), S.TEXT)], S.TEXT)

    def trim(self, node: exp.Trim, d: int) -> S.Expr:
        fn = {"LEADING": "ltrim", "TRAILING": "rtrim"}.get(str(node.args.get("position") or "").upper(), "btrim")
        parts = [node.this] + ([node.expression] if node.expression is not None else [])
        if node.args.get("collation") is not None:
            raise NotScalar(node)
        args = self.text_args(fn, node, parts, d)
        return S.Call(fn, args, S.TEXT)

    def literal(self, node: exp.Literal) -> S.Expr:
        v = literal_value(node)
        if isinstance(v, str):
            return S.Const(v, S.TEXT)
        if isinstance(v, int):
            return S.Const(v, S.INT4 if -(2**31) <= v < 2**31 else S.INT8)
        return S.Const(v, S.NUMERIC) if self.exact else S.Const(float(v), S.FLOAT8)

    def cast(self, node: exp.Cast, d: int) -> S.Expr:
        a = self.compile(node.this, d)
        to = node.args["to"].this
        if to in INT_TYPES:
            oid = S.INT4 if to == exp.DataType.Type.INT else S.INT8
        elif to in FLOAT_TYPES:
            oid = S.NUMERIC
        elif to in TEXT_TYPES:
            oid = S.TEXT
        elif to in _TEMPORAL_TYPES:
            oid = _TEMPORAL_TYPES[to]
            if a.oid not in S.TEMPORAL_OIDS | {S.TEXT, S.UNKNOWN}:
                raise NotScalar(node)
        elif to == exp.DataType.Type.BOOLEAN:
            oid = S.BOOL
            if a.oid not in (S.BOOL, S.INT4, S.TEXT, S.UNKNOWN):
                raise Refusal(E.CANNOT_COERCE, f"cannot cast type {type_name(a.oid)} to boolean",
                              position=position_of(node))
        elif to == exp.DataType.Type.INTERVAL:
            if a.oid not in (S.TEXT, S.UNKNOWN) or not _constant_expr(a):
                raise NotScalar(node)
            value = a.value if isinstance(a, S.Const) else S.constant(a)  # (-1 || ' year')::interval (Looker)
            return S.Const(None if value is None else TM.parse_interval(str(value)), S.INTERVAL)
        else:
            raise NotScalar(node)
        if a.oid == S.BOOL and oid not in (S.BOOL, S.INT4, S.TEXT):
            raise Refusal(E.CANNOT_COERCE, f"cannot cast type boolean to {type_name(oid)}", position=position_of(node),
                          hint="boolean casts to integer (int4): CAST(flag AS INT).")
        if not self.exact and a.oid == S.TEXT and oid != S.TEXT and not isinstance(a, S.Const):
            raise NotScalar(node)  # a text key read as a number could fail after the release
        return self.typed(S.Cast(a, oid, to.value.lower(), position_of(node)))

    def clock(self, node: exp.Expr) -> S.Expr:
        """now(), current_date, current_timestamp, localtimestamp: the statement's one instant (UTC)."""
        now = self.budget.statement_time()
        if isinstance(node, exp.CurrentDate):
            return S.Const(now.date(), S.DATE)
        if isinstance(node, exp.Localtimestamp):
            return S.Const(now.replace(tzinfo=None), S.TIMESTAMP)
        return S.Const(now, S.TIMESTAMPTZ)

    def interval(self, node: exp.Interval) -> S.Expr:
        """INTERVAL '7 days', INTERVAL '7' DAY."""
        text = node.this
        unit = node.args.get("unit")
        if not isinstance(text, exp.Literal):
            raise NotScalar(node)
        return S.Const(TM.parse_interval(str(text.this), unit.name if unit is not None else None), S.INTERVAL)

    def temporal_arith(self, op: str, a: S.Expr, b: S.Expr, node: exp.Expr) -> S.Expr:
        """date +/- integer, date - date, date/timestamp(tz) +/- interval (a quoted literal takes the
        other side's type first, as PostgreSQL resolves unknown literals)."""
        a, b = self.as_temporal(a, b), self.as_temporal(b, a)
        oid = temporal_arith_type(op, a.oid, b.oid)
        if oid is None:
            raise Refusal(E.UNDEFINED_FUNCTION, f"operator does not exist: {type_name(a.oid)} {op} {type_name(b.oid)}",
                          position=position_of(node),
                          hint="Dates take + or - an integer of days or an INTERVAL; an integer column takes "
                          "no interval." if S.INTERVAL in (a.oid, b.oid) else None)
        return S.Arith(op, a, b, position_of(node), temporal=oid)

    def as_temporal(self, e: S.Expr, other: S.Expr) -> S.Expr:
        if isinstance(e, S.Const) and e.oid in (S.TEXT, S.UNKNOWN) and e.value is not None:
            if other.oid in S.TEMPORAL_OIDS:
                return S.Const(S.cast_value(e.value, S.TEXT, S.INTERVAL, "interval"), S.INTERVAL)
            if other.oid == S.INTERVAL:
                return S.Const(S.cast_value(e.value, S.TEXT, S.TIMESTAMP, "timestamp"), S.TIMESTAMP)
        return e

    def compare(self, op: str, left: exp.Expr, right: exp.Expr, d: int, node: exp.Expr) -> S.Expr:
        return self.compared(op, self.compile(left, d), self.compile(right, d), node)

    def compared(self, op: str, a: S.Expr, b: S.Expr, node: exp.Expr) -> S.Expr:
        _type_params(a, b)
        a, b = self.coerce(a, b), self.coerce(b, a)
        if a.oid in S.TEMPORAL_OIDS or b.oid in S.TEMPORAL_OIDS:
            a, b = self.temporal_operands(a, b, node)
        elif (a.oid == S.TEXT) != (b.oid == S.TEXT) and S.UNKNOWN not in (a.oid, b.oid):
            raise NotScalar(node)  # text against a number: PostgreSQL has no such operator
        return S.Cmp(op, a, b)

    def temporal_operands(self, a: S.Expr, b: S.Expr, node: exp.Expr) -> tuple[S.Expr, S.Expr]:
        """Both sides of a comparison as one temporal type (a quoted literal reads as the other side's)."""
        kinds = [e.oid for e in (a, b) if e.oid in S.TEMPORAL_OIDS]
        for e in (a, b):
            if e.oid not in S.TEMPORAL_OIDS and not (isinstance(e, S.Const) and e.oid in (S.TEXT, S.UNKNOWN)):
                raise Refusal(E.UNDEFINED_FUNCTION, f"operator does not exist: {type_name(a.oid)} = {type_name(b.oid)}",
                              position=position_of(node))
        to = temporal_common(*kinds)

        def conv(e: S.Expr) -> S.Expr:
            if e.oid == to:
                return e
            if isinstance(e, S.Const):
                v = None if e.value is None else S.cast_value(e.value, e.oid, to, type_name(to))
                return S.Const(v, to)
            return S.Cast(e, to, type_name(to), position_of(node))

        return conv(a), conv(b)

    def coerce(self, e: S.Expr, other: S.Expr) -> S.Expr:
        """A quoted literal compared with a number reads as a number (PostgreSQL's unknown-type literal)."""
        if isinstance(e, S.Const) and e.oid == S.TEXT and other.oid in S.NUMBER_OIDS:
            value = S.cast_value(e.value, S.TEXT, S.NUMERIC, "numeric")
            return S.Const(value, S.NUMERIC) if self.exact else S.Const(float(value), S.FLOAT8)
        return e

    def case(self, node: exp.Case, d: int) -> S.Expr:
        subject = self.compile(node.this, d) if node.this is not None else None
        whens = []
        for branch in node.args.get("ifs") or []:
            test = self.compile(branch.this, d)
            if subject is not None:
                _type_params(test, subject)
            whens.append((test, self.compile(branch.args["true"], d)))
        default = node.args.get("default")
        return self.typed(S.Case(subject, whens, self.compile(default, d) if default is not None else None))

    def function(self, fn: str, node: exp.Expr, d: int) -> S.Expr:
        if fn == "round":
            parts = [node.this] + ([node.args["decimals"]] if node.args.get("decimals") is not None else [])
        elif fn == "nullif":
            parts = [node.this, node.expression]
        else:
            parts = [node.this, *node.expressions]
        if fn in ("floor", "ceil") and node.args.get("decimals") is not None:
            raise NotScalar(node)
        args = [self.compile(p, d) for p in parts]
        if fn in ("round", "floor", "ceil", "abs") and args[0].oid not in S.NUMBER_OIDS | {S.UNKNOWN}:
            raise NotScalar(node)
        return self.typed(S.Call(fn, args, S.call_type(fn, [a.oid for a in args])))


# sqlglot rewrites PostgreSQL's to_char patterns to strftime codes; those with a PostgreSQL meaning that
# strftime computes the same way, between characters that are not pattern letters, are supported.
TO_CHAR_FORMAT = re.compile(r"(?:%-?[YymdjHIMSVG]|[^A-Za-z%\"])*")


def _constant_expr(e: S.Expr) -> bool:
    """``e`` reads no row, group, aggregate or parameter (its value is one constant)."""
    return all(type(x).__module__ == S.__name__ and not isinstance(x, S.Cell | S.Key | S.Param) for x in e.walk())


def compile_scalar(node: exp.Expr, leaf: Leaf, budget: Budget, *, exact: bool) -> S.Expr:
    """The scalar form of ``node``; ``leaf`` claims context-dependent nodes (None: not claimed)."""
    return _Compiler(leaf, exact, budget).compile(node)


def _constants_only(node: exp.Expr) -> S.Expr | None:
    if isinstance(node, exp.Column | exp.AggFunc | exp.Parameter | exp.Placeholder | exp.Select | exp.Window):
        raise NotScalar(node)
    return None


def fold(node: exp.Expr, budget: Budget) -> Any:
    """The value of a constant expression (``30``, ``-1.5``, ``'7'::int``, ``2 * 10``), or NOT_CONSTANT.

    Values are int, Decimal, str, bool or None; a cast or division PostgreSQL would refuse raises.
    """
    try:
        e = compile_scalar(node, _constants_only, budget, exact=True)
    except NotScalar:
        return NOT_CONSTANT
    return S.constant(e)


def on_cells(e: S.Expr, attr: Attribute, budget: Budget, node: exp.Expr, what: str) -> list[Any]:
    """``e`` (over ``attr`` only) on every cell of the attribute's public domain, one value a cell.

    Where a cell holds many values (a timestamp's hour), ``e`` must be constant over every cell, else the
    cell would be cut: refused with a hint naming the resolution, never rounded. It is when every step
    from the column up to the first sub-expression equal at both ends of every cell is monotone
    (date_trunc, extract, casts, arithmetic with constants, floor, ordering comparisons with constants).
    """
    d = attr.domain
    # Long expressions (IN lists of hundreds of values) are cheap to evaluate and costly to key by their text.
    cacheable = budget.now is None and sum(len(x.values) if isinstance(x, S.InList) else 1 for x in e.walk()) <= 64
    key = (d, attr.name, what, sql_of(node)) if cacheable else None
    hit = _CELLS.get(key) if key is not None else None
    if hit is not None and key is not None:
        _CELLS.move_to_end(key)
        return hit
    values = d.cell_values
    budget.tick(len(values))
    try:
        results = e.ev(S.Env(len(values), {attr.name: values}, strict=True))
        lasts = d.last_values()
        if lasts is not None:
            starts, ends = S.Env(len(values), {attr.name: values}), S.Env(len(lasts), {attr.name: lasts})
            if not _constant_per_cell(e, starts, ends, budget):
                raise Refusal(E.FEATURE_NOT_SUPPORTED,
                              f"{what} {sql_of(node)!r} cuts the cells of column {attr.name} "
                              f"(cells of {d.coarseness()})", position=position_of(node),
                              hint=f"{attr.name} is declared with cells of {d.coarseness()}: group or filter on "
                              f"whole cells (date_trunc or extract of a unit of at least {d.coarseness()}, ::date, "
                              ">= and < with cell boundaries).")
    except Refusal as r:
        r.position = r.position or position_of(node)
        raise
    if key is not None:  # an expression reading now() differs from one statement to the next
        _CELLS[key] = results
        while len(_CELLS) > _CELLS_MAX:
            _CELLS.popitem(last=False)
    return results


# Dashboards repeat the same buckets (date_trunc('day', ts)) in many statements: their per-cell values are
# kept for the domain, whatever the statement (a few hundred entries of one value a cell).
_CELLS: OrderedDict[tuple[Any, ...], list[Any]] = OrderedDict()
_CELLS_MAX = 256


def clear_cell_cache() -> None:
    """Forget the per-cell values of bucket expressions (benchmarks measure cold planning with it)."""
    _CELLS.clear()


_MONOTONE_CALLS = {"date_trunc", "extract", "floor", "ceil", "round", "to_timestamp"}


def _monotone(e: S.Expr) -> bool:
    """``e`` is monotone in its one non-constant argument within a cell (cells never cross midnight)."""
    if isinstance(e, S.Cast | S.Neg):
        return True
    if isinstance(e, S.Call):
        return e.fn in _MONOTONE_CALLS
    if isinstance(e, S.Arith):
        return e.op in "+-" or isinstance(e.args[1], S.Const) or (e.op == "*" and isinstance(e.args[0], S.Const))
    if isinstance(e, S.Cmp):
        return e.op in ("<", "<=", ">", ">=")
    return False


def _constant_per_cell(e: S.Expr, starts: S.Env, ends: S.Env, budget: Budget) -> bool:
    """True when ``e`` takes one value over every cell (see ``on_cells``); raises nothing."""
    if isinstance(e, S.Cell):
        return False
    if not any(isinstance(x, S.Cell) for x in e.walk()):
        return True
    inner = [_constant_per_cell(a, starts, ends, budget) for a in e.args]
    if not all(inner) and (not _monotone(e) or sum(not c for c in inner) > 1):
        return False
    budget.tick(2 * starts.n)
    return bool(e.ev(starts) == e.ev(ends))
