"""Function calls in the scalar compiler: the numeric functions (round, floor, coalesce, greatest...),
the text ones (lower, substring, trim, ``||``, LIKE / ILIKE, to_char), date(x), and the refusals of
functions PostgreSQL has but a per-row value cannot use (volatile ones) or that do not exist. A mixin of
``parser.analysis.scalars``' compiler; the functions' semantics are ``parser.semantics.functions``'."""

from __future__ import annotations

from sqlglot import exp

from pgcore import errors as E
from pgcore import pgtypes as T
from pgcore.errors import Refusal

from .. import scalar as S
from ..semantics.tochar import Unsupported, pg_pattern
from ..semantics.tochar import parse as tochar_parse
from ..semantics.values import INTEGER_OIDS, NUMBER_OIDS
from ..syntax.parse import position_of
from . import regexes
from .nodes import CompilerPart, NotScalar, sql_of, strip_paren
from .zoned import local, zoned_cast

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
    exp.Translate: ("translate", ("this", "from_", "to")), exp.Repeat: ("repeat", ("this", "times")),
    exp.Initcap: ("initcap", ("this",)), exp.MD5: ("md5", ("this",)), exp.Ascii: ("ascii", ("this",)),
    exp.BitLength: ("bit_length", ("this",)),
}
# Text functions sqlglot reads as anonymous calls: name -> number of arguments.
_ANONYMOUS_TEXT = {"octet_length": 1}
# PostgreSQL's other string functions: refused by name (0A000), not reported as unknown (42883).
_TEXT_REFUSED = frozenset({
    "quote_ident", "quote_literal", "quote_nullable", "format", "to_hex", "encode", "decode", "convert",
    "convert_from", "convert_to", "overlay", "regexp_count", "regexp_instr", "regexp_match", "regexp_matches",
    "regexp_replace", "regexp_split_to_array", "regexp_split_to_table", "regexp_substr", "sha224", "sha256",
    "sha384", "sha512", "string_to_array", "string_to_table", "to_ascii", "unistr", "normalize",
    "is_normalized", "parse_ident", "pg_client_encoding", "to_number", "soundex", "difference", "levenshtein",
    "similarity", "unaccent", "casefold",
})
# Argument types of the text functions beyond the first (the first is text): int4 positions and counts.
_INT_ARGS = {"substring": (1, 2), "left": (1,), "right": (1,), "split_part": (2,), "repeat": (1,), "lpad": (1,),
             "rpad": (1,)}
# Functions whose value is not a function of the row: a per-row expression must be computable from cells.
_NONDETERMINISTIC = (exp.Rand, exp.Uuid)
_NONDETERMINISTIC_NAMES = frozenset({
    "random", "random_normal", "setseed", "clock_timestamp", "timeofday", "statement_timestamp",
    "transaction_timestamp", "gen_random_uuid", "uuid_generate_v4", "nextval", "currval", "lastval",
    "txid_current", "pg_backend_pid", "inet_client_addr", "pg_sleep",
})

_TEXT_HINT = ("Per-row expressions take arithmetic, CAST, CASE, COALESCE, date_trunc / extract, and the text "
              "functions lower, upper, initcap, length, octet_length, strpos, position, substring, left, right, "
              "trim / btrim / ltrim / rtrim, replace, translate, lpad, rpad, repeat, reverse, split_part, md5, "
              "ascii, chr, concat, concat_ws, ||, starts_with, LIKE, ILIKE.")


class CallCompiler(CompilerPart):
    """Compiles function calls; ``call`` returns None for a node that is not one."""

    def call(self, node: exp.Expr, d: int) -> S.Expr | None:
        if regexes.is_match(node):
            return regexes.compile_match(self, node, d)
        if regexes.is_extent(node):
            raise regexes.refuse_extent(node)
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
            if x.oid not in T.TEMPORAL_OIDS | {T.TEXT, T.UNKNOWN}:
                raise self.no_function("date", node, [x])
            return zoned_cast(x, T.DATE, "date", position_of(node))
        if isinstance(node, exp.TimeToStr):
            return self.to_char(node, d)
        if isinstance(node, exp.ConcatWs):  # before Concat, its base class
            args = [self.compile(a, d) for a in node.expressions]
            if not args or args[0].oid not in (T.TEXT, T.UNKNOWN):
                raise self.no_function("concat_ws", node, args)
            return S.Call("concat_ws", args, T.TEXT)
        if isinstance(node, exp.Concat):
            return S.Call("concat", [self.compile(a, d) for a in node.expressions], T.TEXT)
        if isinstance(node, exp.Pad):
            fn = "lpad" if node.args.get("is_left") else "rpad"
            parts = [node.this, node.expression] + ([node.args["fill_pattern"]]
                                                    if node.args.get("fill_pattern") is not None else [])
            return S.Call(fn, self.text_args(fn, node, parts, d), T.TEXT)
        if isinstance(node, exp.Chr):
            if len(node.expressions) != 1 or node.args.get("charset"):
                raise NotScalar(node)
            n = self.compile(node.expressions[0], d)
            if n.oid not in INTEGER_OIDS | {T.UNKNOWN}:
                raise self.no_function("chr", node, [n])
            return S.Call("chr", [n], T.TEXT)
        if isinstance(node, exp.Anonymous) and str(node.this).lower() in _ANONYMOUS_TEXT:
            fn = str(node.this).lower()
            if len(node.expressions) != _ANONYMOUS_TEXT[fn]:
                raise self.no_function(fn, node, [self.compile(a, d) for a in node.expressions])
            args = self.text_args(fn, node, list(node.expressions), d)
            return S.Call(fn, args, S.call_type(fn, [a.oid for a in args]))
        if isinstance(node, exp.Anonymous) and str(node.this).lower() in _TEXT_REFUSED:
            name = str(node.this).lower()
            raise Refusal(E.FEATURE_NOT_SUPPORTED, f"function {name}() is not supported over protected tables",
                          position=position_of(node), hint=_TEXT_HINT)
        if isinstance(node, _NONDETERMINISTIC) or (isinstance(node, exp.Anonymous)
                                                   and str(node.this).lower() in _NONDETERMINISTIC_NAMES):
            name = str(node.this).lower() if isinstance(node, exp.Anonymous) else sql_of(node).split("(")[0].lower()
            raise Refusal(E.FEATURE_NOT_SUPPORTED, f"{name}() is not deterministic: a per-row value must be a "
                          "function of the row's declared columns", position=position_of(node),
                          hint="now(), current_date and current_timestamp are read once per statement; other "
                          "volatile functions have no place in an aggregate over protected rows.")
        if isinstance(node, exp.Anonymous) and str(node.this).lower() == "to_char":
            return self.to_char(node, d)
        if isinstance(node, exp.Anonymous):
            args = [self.compile(a, d) for a in node.expressions]
            raise Refusal(E.UNDEFINED_FUNCTION, f"function {str(node.this).lower()}("
                          f"{', '.join(T.type_name(a.oid) for a in args)}) does not exist", position=position_of(node),
                          hint=_TEXT_HINT)
        return None

    def function(self, fn: str, node: exp.Expr, d: int) -> S.Expr:
        if fn == "round":
            parts = [node.this] + ([node.args["decimals"]] if node.args.get("decimals") is not None else [])
        elif fn in ("nullif", "power"):
            parts = [node.this, node.expression]
        else:
            parts = [node.this, *node.expressions]
        if fn in ("floor", "ceil") and node.args.get("decimals") is not None:
            raise NotScalar(node)
        args = [self.compile(p, d) for p in parts]
        if fn in ("round", "floor", "ceil", "abs") and args[0].oid not in NUMBER_OIDS | {T.UNKNOWN}:
            raise NotScalar(node)
        return self.typed(S.Call(fn, args, S.call_type(fn, [a.oid for a in args])))

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

    def text_args(self, fn: str, node: exp.Expr, parts: list[exp.Expr], d: int) -> list[S.Expr]:
        """Compiled arguments of a text function: the first text, positions integers (else 42883)."""
        args = [self.compile(p, d) for p in parts]
        want = [T.INT4 if i in _INT_ARGS.get(fn, ()) else T.TEXT for i in range(len(args))]
        if fn == "textcat":  # anynonarray || text: the other side is read as text
            if T.TEXT not in (args[0].oid, args[1].oid) and T.UNKNOWN not in (args[0].oid, args[1].oid):
                raise self.no_function(fn, node, args)
            return [a if a.oid in (T.TEXT, T.UNKNOWN) else S.Cast(a, T.TEXT, "text", position_of(node)) for a in args]
        for a, w in zip(args, want, strict=True):
            ok = a.oid in (w, T.UNKNOWN) or (w == T.INT4 and a.oid in INTEGER_OIDS)
            if not ok:
                raise self.no_function(fn, node, args)
        return args

    def no_function(self, fn: str, node: exp.Expr, args: list[S.Expr]) -> Refusal:
        return Refusal(E.UNDEFINED_FUNCTION, f"function {fn}({', '.join(T.type_name(a.oid) for a in args)}) does not exist",
                       position=position_of(node), hint="Cast the column to text first, e.g. CAST(col AS TEXT)."
                       if args and args[0].oid != T.TEXT else None)

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
        out: S.Expr = S.Call(fn, args, T.BOOL)
        return S.Logic("not", [out]) if node.args.get("negate") else out

    def to_char(self, node: exp.TimeToStr | exp.Anonymous, d: int) -> S.Expr:
        """to_char(date or timestamp, pattern) with PostgreSQL's patterns (parser.semantics.tochar)."""
        args = [node.this, node.args.get("format")] if isinstance(node, exp.TimeToStr) else list(node.expressions)
        x = self.compile(args[0], d)
        fmt = args[1] if len(args) == 2 else None
        if x.oid not in T.TEMPORAL_OIDS or fmt is None:
            raise self.no_function("to_char", node, [x, S.Const(None, T.TEXT)])
        raw = str(fmt.this) if isinstance(fmt, exp.Literal) and fmt.is_string else None
        if raw is not None and isinstance(node, exp.TimeToStr):
            raw = pg_pattern(raw)  # a tree sqlglot's own dialect read: its strftime codes, read back
        try:
            tochar_parse(raw if raw is not None else "TZ")
        except Unsupported as u:
            raise Refusal(E.FEATURE_NOT_SUPPORTED, f"to_char {sql_of(node)!r} is not supported on protected tables"
                          + ("" if raw is None else f": {u}"), position=position_of(node),
                          hint="to_char takes a constant pattern of PostgreSQL's date and time fields (Month, Mon, "
                          "Day, YYYY, MM, DD, Q, IW, HH24...); times are in the session's TimeZone.") from None
        return S.Call("to_char", [local(x), S.Const(raw, T.TEXT)], T.TEXT)  # the wall time in the session's zone

    def trim(self, node: exp.Trim, d: int) -> S.Expr:
        fn = {"LEADING": "ltrim", "TRAILING": "rtrim"}.get(str(node.args.get("position") or "").upper(), "btrim")
        parts = [node.this] + ([node.expression] if node.expression is not None else [])
        if node.args.get("collation") is not None:
            raise NotScalar(node)
        args = self.text_args(fn, node, parts, d)
        return S.Call(fn, args, T.TEXT)
