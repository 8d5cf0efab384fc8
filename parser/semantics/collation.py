"""Text order as the upstream database sorts it (its collation), for ``<``, ``<=``, ``>``, ``>=``, BETWEEN,
GREATEST / LEAST, MIN / MAX and ORDER BY over text.

Every string the planner orders is public (declared values, literals of the statement, values computed
from them), so asking the database to sort them reveals nothing about the rows. A ``Collation`` ranks a
set of strings: code point order for PostgreSQL's C, POSIX, ucs_basic and pg_c_utf8 collations (UTF-8
byte order is code point order), otherwise the ``sort`` callable the proxy supplies, which asks the
upstream (``ORDER BY`` under the database's collation) and whose answers are cached, so a list of
declared values is sent once. Deterministic collations only: distinct strings never tie (PostgreSQL
breaks ties of its deterministic collations by byte order).

The planner evaluates under the catalog's collation (``Catalog.collation``; ``using``); without one it
uses code point order.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar

from pgcore.errors import Refusal
from pgcore.sqlstate import FEATURE_NOT_SUPPORTED

from .values import compare

_CACHE_STRINGS = 2_000_000  # strings kept in the rank cache before it is cleared


class Collation:
    """Ranks strings in one collation's order. ``sort`` (None: code point order) returns its argument's
    strings sorted; it may raise, and is then reported as a refusal naming the collation."""

    def __init__(self, name: str, sort: Callable[[list[str]], list[str]] | None = None, *,
                 ascii_case: bool = False) -> None:
        self.name, self._sort = name, sort
        self.ascii_case = ascii_case  # lower / upper / initcap / ILIKE change ASCII letters only (LC_CTYPE C)
        self._ranks: dict[frozenset[str], dict[str, int]] = {}
        self._known: dict[str, int] = {}  # the latest ranking: its subsets are ranked without asking
        self._held = 0
        self._lock = threading.Lock()

    @property
    def code_point(self) -> bool:
        return self._sort is None

    def ranks(self, strings: Iterable[str]) -> dict[str, int]:
        """Each distinct string's 0-based place in the collation's order."""
        key = frozenset(strings)
        hit = self._ranks.get(key)
        if hit is not None:
            return hit
        known = self._known
        if len(key) <= len(known) and all(s in known for s in key):
            return {s: known[s] for s in key}
        if self._sort is None:
            ordered = sorted(key)
        else:
            try:
                ordered = self._sort(list(key))
            except Exception as e:  # noqa: BLE001 - the upstream is unreachable or refused: say so
                raise Refusal(FEATURE_NOT_SUPPORTED, f"text order under the database's collation {self.name!r} "
                              f"could not be read from the database ({type(e).__name__})",
                              hint="Ordering comparisons on text ask the database to sort the public values; "
                              "try again when it is reachable.") from None
            if sorted(ordered) != sorted(key):
                raise Refusal(FEATURE_NOT_SUPPORTED, f"the database's collation {self.name!r} sorted the values "
                              "into a different set (a non-deterministic collation?)")
        out = {s: i for i, s in enumerate(ordered)}
        with self._lock:
            if self._held + len(out) > _CACHE_STRINGS:
                self._ranks.clear()
                self._held = 0
            self._ranks[key] = out
            self._held += len(out)
            self._known = out
        return out

    def sort_key(self, strings: Iterable[str]) -> Callable[[str], int]:
        """A key function ordering ``strings`` (and only them) as the collation does."""
        r = self.ranks(strings)
        return r.__getitem__

    def __repr__(self) -> str:
        return f"Collation({self.name!r})"


CODE_POINT = Collation("C")
"""PostgreSQL's C collation (and POSIX, ucs_basic, pg_c_utf8): UTF-8 byte order, i.e. code point order;
case mapping by Unicode rules (as under a UTF-8 LC_CTYPE)."""

C_LOCALE = Collation("C", ascii_case=True)
"""A database whose LC_COLLATE and LC_CTYPE are C: code point order, and case mapping of ASCII letters only."""

_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
_ASCII_UPPER = str.maketrans("abcdefghijklmnopqrstuvwxyz", "ABCDEFGHIJKLMNOPQRSTUVWXYZ")


def lower(s: str) -> str:
    """lower() as the database computes it (its LC_CTYPE: ASCII only under C, else Unicode rules)."""
    return s.translate(_ASCII_LOWER) if current().ascii_case else s.lower()


def upper(s: str) -> str:
    return s.translate(_ASCII_UPPER) if current().ascii_case else s.upper()


def initcap(s: str) -> str:
    """The first letter of each word upper case, the others lower; words are runs of letters and digits
    (ASCII ones under a C LC_CTYPE, where other characters are neither letters nor change case)."""
    ascii_only = current().ascii_case
    out, prev = [], False
    for ch in s:
        out.append(lower(ch) if prev else upper(ch))
        prev = ch.isalnum() and (ch.isascii() or not ascii_only)
    return "".join(out)

CODE_POINT_NAMES = frozenset({"C", "POSIX", "ucs_basic", "pg_c_utf8", "C.UTF-8", "C.utf8"})

_CURRENT: ContextVar[Collation] = ContextVar("collation", default=CODE_POINT)


def current() -> Collation:
    """The collation text is ordered by while planning (the catalog's; code point order by default)."""
    return _CURRENT.get()


@contextmanager
def using(collation: Collation | None) -> Iterator[None]:
    token = _CURRENT.set(collation if collation is not None else CODE_POINT)
    try:
        yield
    finally:
        _CURRENT.reset(token)


def compare_text(op: str, a: Sequence[object], b: Sequence[object]) -> list[bool | None]:
    """``a[i] op b[i]`` for text vectors under the current collation (None where either is NULL)."""
    c = current()
    if c.code_point:
        return [compare(op, x, y) for x, y in zip(a, b, strict=True)]
    rank = c.ranks({str(v) for v in (*a, *b) if v is not None})
    out: list[bool | None] = []
    for x, y in zip(a, b, strict=True):
        if x is None or y is None:
            out.append(None)
            continue
        rx, ry = rank[str(x)], rank[str(y)]
        out.append(rx < ry if op == "<" else rx <= ry if op == "<=" else rx > ry if op == ">" else
                   rx >= ry if op == ">=" else (rx == ry) if op == "=" else rx != ry)
    return out
