"""Regular-expression matches in scalar SQL: ``x ~ re``, ``~*``, ``!~``, ``!~*``, ``regexp_like(x, re [,
flags])`` and ``x [NOT] SIMILAR TO p [ESCAPE e]`` over a text value, with a constant pattern, compile to
one boolean call evaluated per declared cell with PostgreSQL's semantics (parser.semantics.regex). Functions whose
value is the matched text are refused naming the function (0A000), as are patterns outside the subset the
proxy evaluates exactly (naming the part)."""

from __future__ import annotations

from typing import Any

from sqlglot import exp

from pgcore import errors as E
from pgcore.errors import Refusal
from pgcore.pgtypes import BOOL, TEXT, UNKNOWN

from .. import scalar as S
from ..semantics import regex as R
from ..syntax.parse import position_of
from .nodes import sql_of, strip_paren

MATCHES = (exp.RegexpLike, exp.RegexpILike, exp.SimilarTo)
EXTENTS = (exp.RegexpReplace, exp.RegexpExtract, exp.RegexpExtractAll, exp.RegexpSubstr, exp.RegexpCount,
           exp.RegexpInstr, exp.RegexpSplit)
_HINT = ("Regular expressions on protected tables take literals, ., [ ] classes, ( ), |, * + ? {m,n}, ^ $ and "
         "\\d \\s \\w; LIKE / ILIKE and strpos cover many filters.")


def is_match(node: exp.Expr) -> bool:
    return isinstance(node, MATCHES) or (isinstance(node, exp.Escape) and isinstance(node.this, exp.SimilarTo))


def is_extent(node: exp.Expr) -> bool:
    """A function whose value is the matched text (or its place): ``substring(x from re)`` too."""
    if isinstance(node, exp.Substring):
        start = strip_paren(node.args.get("start") or exp.Null())
        return isinstance(start, exp.Literal) and start.is_string
    return isinstance(node, EXTENTS) or (isinstance(node, exp.Anonymous) and str(node.this).lower() in (
        "regexp_match", "regexp_matches", "regexp_split_to_array", "regexp_split_to_table"))


def refuse_extent(node: exp.Expr) -> Refusal:
    name = "substring(... from pattern)" if isinstance(node, exp.Substring) else sql_of(node).split("(")[0].lower()
    return Refusal(E.FEATURE_NOT_SUPPORTED, f"{name} is not supported on protected tables: which text a regular "
                   "expression matches follows PostgreSQL's leftmost-longest rules, which the proxy does not "
                   "evaluate", position=position_of(node),
                   hint="Filter or group with a match (~, ~*, SIMILAR TO, regexp_like) or with LIKE, split_part, "
                   "substring(x, start, count).")


def compile_match(compiler: Any, node: exp.Expr, d: int) -> S.Expr:
    """The boolean call of a match; ``compiler`` is the scalar compiler (its ``compile`` and ``no_function``)."""
    escape: exp.Expr | None = None
    if isinstance(node, exp.Escape):
        node, escape = node.this, node.expression
    x = compiler.compile(node.this, d)
    pattern = strip_paren(node.expression)
    op = "SIMILAR TO" if isinstance(node, exp.SimilarTo) else ("~*" if isinstance(node, exp.RegexpILike) else "~")
    if x.oid not in (TEXT, UNKNOWN):
        raise compiler.no_function(op, node, [x, S.Const(None, TEXT)])
    if not (isinstance(pattern, exp.Literal) and pattern.is_string):
        raise Refusal(E.FEATURE_NOT_SUPPORTED, f"{op} with the pattern {sql_of(pattern)!r}: the proxy evaluates "
                      "constant patterns only", position=position_of(pattern), hint=_HINT)
    text = str(pattern.this)
    icase = isinstance(node, exp.RegexpILike)
    flag = node.args.get("flag")
    if flag is not None:
        flags = str(flag.this) if isinstance(flag, exp.Literal) and flag.is_string else None
        if flags is None or set(flags) - set("ci"):
            raise Refusal(E.FEATURE_NOT_SUPPORTED, f"regexp_like flags {sql_of(flag)}: only 'c' and 'i' are "
                          "evaluated", position=position_of(flag), hint=_HINT)
        icase = flags.rfind("i") > flags.rfind("c")
    try:
        if isinstance(node, exp.SimilarTo):
            esc = "\\"
            if escape is not None:
                lit = strip_paren(escape)
                if not (isinstance(lit, exp.Literal) and lit.is_string) or len(str(lit.this)) > 1:
                    raise R.Unsupported(f"the escape {sql_of(escape)}")
                esc = str(lit.this)
            text = R.similar_to_are(text, esc or None)
        R.translate(text)
    except R.Unsupported as u:
        raise Refusal(E.FEATURE_NOT_SUPPORTED, f"{op} pattern {str(pattern.this)!r} is not supported on protected "
                      f"tables: {u}", position=position_of(pattern), hint=_HINT) from None
    return S.Call("regex_match", [x, S.Const(text, TEXT), S.Const(icase, BOOL)], BOOL)
