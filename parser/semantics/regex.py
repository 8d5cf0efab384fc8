"""PostgreSQL regular-expression matches (``~``, ``~*``, ``!~``, ``!~*``, ``regexp_like``, ``SIMILAR TO``)
evaluated over declared text values, on the subset of PostgreSQL's ARE syntax where Python's ``re`` decides
the same match.

Whether a string matches is a property of the language a pattern denotes, not of how an engine searches
(greediness changes which substring matches, never whether one does), so a pattern built from constructs
both engines read alike gives PostgreSQL's answer: literal characters and escaped punctuation, ``.``,
``^`` / ``$`` (whole-string anchors: ``$`` becomes ``\\Z``, ``.`` matches a newline, as in PostgreSQL's
default mode), bracket expressions with ranges and negation, groups ``( )`` / ``(?: )``, alternation,
quantifiers ``* + ? {m} {m,} {m,n}`` and their non-greedy forms, ``\\d \\s \\w \\D \\S \\W \\t \\n \\r``.
Anything else is refused naming the part (``Unsupported``): POSIX classes ``[[:alpha:]]``, collating
elements, back references, lookaround, word-boundary escapes (PostgreSQL's ``\\b`` is a backspace),
embedded options. Case folding (``~*``, flag ``i``) and the class escapes follow ASCII rules in Python;
PostgreSQL's follow the database locale, so on a value with non-ASCII letters they are refused too.
Functions whose result is the matched text (``substring(x from re)``, ``regexp_replace``) depend on which
substring matches (PostgreSQL's leftmost-longest rules differ from Python's backtracking): not evaluated.
Tested against PostgreSQL with random patterns of this grammar (tests/parser/test_regex.py).
"""

from __future__ import annotations

import re
from functools import lru_cache

_META = set(".^$*+?{}()[]|\\")
_CLASS_ESCAPES = set("dswDSW")
_ENTRY_ESCAPES = {"t": "\\t", "n": "\\n", "r": "\\r"}
_BOUND = re.compile(r"\{(\d+)(,(\d*))?\}")


class Unsupported(ValueError):
    """A pattern (or a value) the proxy does not evaluate with PostgreSQL's semantics; says which part."""


@lru_cache(maxsize=256)
def translate(pattern: str) -> tuple[str, bool]:
    """The Python pattern of a PostgreSQL ARE in the supported subset, and whether it uses class escapes
    (whose meaning on non-ASCII letters is the locale's)."""
    out: list[str] = []
    classes = False
    i, n = 0, len(pattern)
    depth = 0
    can_repeat = False  # the last item is an atom a quantifier may follow
    while i < n:
        c = pattern[i]
        if c == "\\":
            if i + 1 >= n:
                raise Unsupported("a pattern ending in \\")
            e = pattern[i + 1]
            if e.isalnum():
                if e in _CLASS_ESCAPES:
                    out.append("\\" + e)
                    classes = True
                elif e in _ENTRY_ESCAPES:
                    out.append(_ENTRY_ESCAPES[e])
                else:
                    raise Unsupported(f"the escape \\{e}")
            else:
                out.append(re.escape(e))
            i, can_repeat = i + 2, True
        elif c == "[":
            text, i, used = _bracket(pattern, i)
            out.append(text)
            classes, can_repeat = classes or used, True
        elif c == "(":
            if pattern.startswith("(?:", i):
                out.append("(?:")
                i += 3
            elif pattern.startswith("(?", i):
                raise Unsupported(f"the group {pattern[i:i + 3]}...")
            else:
                out.append("(")
                i += 1
            depth, can_repeat = depth + 1, False
        elif c == ")":
            if depth == 0:
                raise Unsupported("an unbalanced )")
            out.append(")")
            i, depth, can_repeat = i + 1, depth - 1, True
        elif c == "|":
            out.append("|")
            i, can_repeat = i + 1, False
        elif c in "*+?{":
            m = _BOUND.match(pattern, i) if c == "{" else None
            if c == "{" and m is None:
                raise Unsupported("a { that is not a bound {m,n}")
            if not can_repeat:
                raise Unsupported(f"the quantifier {c} here")
            q = m.group(0) if m is not None else c
            if m is not None and m.group(3) and int(m.group(3)) < int(m.group(1)):
                raise Unsupported(f"the bound {q}")
            i += len(q)
            if i < n and pattern[i] == "?":  # non-greedy: the same language
                q, i = q + "?", i + 1
            out.append(q)
            can_repeat = False
        elif c == "^":
            out.append("^")
            i, can_repeat = i + 1, False
        elif c == "$":
            out.append(r"\Z")
            i, can_repeat = i + 1, False
        elif c == ".":
            out.append(".")
            i, can_repeat = i + 1, True
        elif c == "}" or c == "]":
            out.append(re.escape(c))  # a lone closing brace / bracket is an ordinary character in both
            i, can_repeat = i + 1, True
        else:
            out.append(re.escape(c))
            i, can_repeat = i + 1, True
    if depth:
        raise Unsupported("an unbalanced (")
    return "".join(out), classes


def _bracket(pattern: str, i: int) -> tuple[str, int, bool]:
    """A bracket expression starting at ``pattern[i] == '['``: its Python class, the index after it, and
    whether it holds class escapes."""
    j, n = i + 1, len(pattern)
    parts = ["["]
    if j < n and pattern[j] == "^":
        parts.append("^")
        j += 1
    items: list[str] = []
    used = False
    first = True
    while j < n and (pattern[j] != "]" or first):
        c = pattern[j]
        if c == "[" and j + 1 < n and pattern[j + 1] in ":.=":
            raise Unsupported(f"the bracket element [{pattern[j + 1]}")
        if c == "\\":
            if j + 1 >= n:
                raise Unsupported("a pattern ending in \\")
            e = pattern[j + 1]
            if e in "dsw":
                items.append("\\" + e)
                used = True
            elif e.isalnum():
                raise Unsupported(f"the escape \\{e} in a bracket expression")
            else:
                items.append("\\" + e)  # escaped: never a range's end
            j += 2
        else:
            items.append(c)
            j += 1
        first = False
    if j >= n:
        raise Unsupported("an unterminated [")
    k = 0
    while k < len(items):  # ranges a-b between two plain characters
        a = items[k]
        if k + 2 < len(items) and items[k + 1] == "-" and len(a) == 1 and len(items[k + 2]) == 1:
            b = items[k + 2]
            if not (a.isascii() and b.isascii() and a <= b):
                raise Unsupported(f"the range {a}-{b}")
            parts.append(f"{re.escape(a)}-{re.escape(b)}")
            k += 3
        else:
            parts.append(a if len(a) == 2 else re.escape(a))
            k += 1
    parts.append("]")
    return "".join(parts), j + 1, used


@lru_cache(maxsize=256)
def compiled(pattern: str, icase: bool) -> tuple[re.Pattern[str], bool]:
    """The Python regex of an ARE (``icase``: ``~*``), and whether its meaning on a non-ASCII value is the
    locale's (case folding or class escapes)."""
    text, classes = translate(pattern)
    flags = re.DOTALL | re.ASCII | (re.IGNORECASE if icase else 0)
    return re.compile(text, flags), icase or classes


def matches(value: str, pattern: str, icase: bool) -> bool:
    """``value ~ pattern`` (``~*`` when ``icase``) as PostgreSQL decides it."""
    rx, locale = compiled(pattern, icase)
    if locale and not value.isascii():
        raise Unsupported(f"the value {value!r}: its letters' case and classes follow the database locale")
    return rx.search(value) is not None


def similar_to_are(pattern: str, escape: str | None = "\\") -> str:
    """The ARE of ``SIMILAR TO pattern [ESCAPE escape]`` (PostgreSQL's similar_to_escape): anchored at both
    ends, ``%`` any string, ``_`` any character, other regex syntax kept, ``.`` ``^`` ``$`` literal.

    An escaped character goes to the ARE as a backslash and that character, whatever it is, as PostgreSQL
    writes it: ``\\%`` is a literal percent sign, and ``\\S`` the ARE's class escape (any non-space), not
    a literal S. ``translate`` then reads it (or refuses an escape it does not evaluate)."""
    out = ["^(?:"]
    i, n = 0, len(pattern)
    bracket = False
    while i < n:
        c = pattern[i]
        if escape and c == escape:
            if i + 1 >= n:
                raise Unsupported("a SIMILAR TO pattern ending in its escape character")
            e = pattern[i + 1]
            if e == '"' and not bracket:
                raise Unsupported('the escaped double quote (a substring marker) in SIMILAR TO')
            out.append("\\" + e)
            i += 2
            continue
        if bracket:
            out.append("\\\\" if c == "\\" else c)  # a backslash that is not the escape: a literal one
            bracket = c != "]"
        elif c == "[":
            out.append(c)
            bracket = True
            if pattern.startswith("^", i + 1):
                out.append("^")
                i += 1
            if pattern.startswith("]", i + 1):
                out.append("]")
                i += 1
        elif c == "%":
            out.append(".*")
        elif c == "_":
            out.append(".")
        elif c in ".^$\\":
            out.append("\\" + c)
        else:
            out.append(c)
        i += 1
    out.append(")$")
    return "".join(out)
