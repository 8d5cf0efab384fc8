"""The WHERE form: a condition over one table's attributes, as frozen (hashable) dataclasses.

The analyzer lowers a WHERE clause, a FILTER clause or a CASE branch condition to a ``Cond``; the binder
turns it, with parameter values, into the sets of cells where it is TRUE and where it is FALSE (SQL's
three-valued logic: the other cells are NULL). Being hashable, conditions serve as cache and slot keys.
Operands are literals, ``$n`` parameters or constant expressions over parameters (``Computed``); literal
values are int, Decimal, str, bool or None.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..scalar import Expr


@dataclass(frozen=True, slots=True)
class Lit:
    """A literal operand (None is NULL)."""

    value: object


@dataclass(frozen=True, slots=True)
class Param:
    """The ``$index`` parameter, bound at Bind time."""

    index: int


@dataclass(frozen=True, slots=True)
class Computed:
    """A constant expression over parameters (``$1::timestamp + interval '1 day'``, ``lower($1)``): no column
    read, so one value per execution, evaluated at Bind by the scalar evaluator. ``sql`` (its text) and
    ``oid`` (its SQL type) identify it; ``expr`` is its compiled form."""

    sql: str
    oid: int
    expr: Expr = field(compare=False, hash=False)


Operand = Lit | Param | Computed


class Cond:
    """Base of the WHERE form."""

    __slots__ = ()


@dataclass(frozen=True, slots=True)
class And(Cond):
    parts: tuple[Cond, ...]


@dataclass(frozen=True, slots=True)
class Or(Cond):
    parts: tuple[Cond, ...]


@dataclass(frozen=True, slots=True)
class Not(Cond):
    part: Cond


@dataclass(frozen=True, slots=True)
class Const(Cond):
    """TRUE, FALSE or NULL whatever the row (``WHERE 1 = 1``)."""

    value: bool | None


@dataclass(frozen=True, slots=True)
class IsTrue(Cond):
    """TRUE where ``part`` is TRUE, FALSE elsewhere (NULL included): how CASE WHEN takes a branch."""

    part: Cond


@dataclass(frozen=True, slots=True)
class Compare(Cond):
    """``attr op operand`` with op one of = <> < <= > >=."""

    attr: str
    op: str
    operand: Operand


@dataclass(frozen=True, slots=True)
class In(Cond):
    """``attr IN (operands...)``."""

    attr: str
    operands: tuple[Operand, ...]


@dataclass(frozen=True, slots=True)
class AnyOf(Cond):
    """``attr op ANY($n)`` with an array bound to ``$n`` (psycopg's way of sending an IN list): TRUE where
    some element compares TRUE, FALSE where all compare FALSE (an empty array: FALSE everywhere).
    ``every``: ``attr op ALL($n)``, TRUE where all compare TRUE, FALSE where some compares FALSE."""

    attr: str
    op: str
    operand: Param
    every: bool = False


@dataclass(frozen=True, slots=True)
class IsNull(Cond):
    """``attr IS NULL``: TRUE on the NULL cell, FALSE elsewhere; never NULL itself."""

    attr: str


@dataclass(frozen=True, slots=True)
class NotDistinct(Cond):
    """``attr IS NOT DISTINCT FROM operand``: equality where NULL equals NULL; never NULL itself."""

    attr: str
    operand: Operand


TRUE = Const(True)


@dataclass(frozen=True, slots=True)
class Cells(Cond):
    """A per-row predicate over one attribute, evaluated on its public domain: the cell index ranges where it
    is TRUE and where it is FALSE (elsewhere NULL). ``age * 2 >= 80``, ``CAST(age AS TEXT) = '40'``."""

    attr: str
    true: tuple[tuple[int, int], ...]
    false: tuple[tuple[int, int], ...]


@dataclass(frozen=True, slots=True)
class BoundCells(Cond):
    """A per-row predicate over one attribute that reads parameters (``strpos(city, $1) > 0``, ``age + $1 >
    50``): evaluated on every cell of the public domain at Bind, with the parameters' values (``Cells``
    once bound); refused there if, with those values, it cuts a cell. ``sql`` (its text) identifies it."""

    attr: str
    sql: str
    expr: Expr = field(compare=False, hash=False)


@dataclass(frozen=True, slots=True)
class Mapped(Cond):
    """``expr op operand`` where ``expr`` is a per-row expression over one attribute (``ts::date >= $1``,
    ``lower(city) = $1``, ``city LIKE $1`` with op "like" or "ilike"): its value on every cell of the public
    domain (None: NULL), of SQL type ``oid``;
    the operand, usually a parameter, is read as that type and compared at Bind time."""

    attr: str
    values: tuple[object, ...]
    oid: int
    op: str
    operand: Operand


@dataclass(frozen=True, slots=True)
class BoundTable(Cond):
    """A per-row predicate over several attributes that reads parameters (``age + $1 > hours_per_week``):
    evaluated on the product of their public domains at Bind, with the parameters' values (``Table`` once
    bound); refused there if, with those values, it cuts a cell. ``sql`` (its text) identifies it; ``node``
    is kept for the refusal's message and position."""

    attrs: tuple[str, ...]
    sql: str
    expr: Expr = field(compare=False, hash=False)
    node: object = field(compare=False, hash=False)


@dataclass(frozen=True, slots=True)
class Table(Cond):
    """A per-row predicate over several attributes (``n + k > 10``, ``a > b``), evaluated on the product of
    their public domains: ``attrs`` in the table's canonical (sorted) order, and the flat C-order indices
    of that product where it is TRUE and where it is FALSE, as inclusive runs (elsewhere NULL)."""

    attrs: tuple[str, ...]
    shape: tuple[int, ...]
    true: tuple[tuple[int, int], ...]
    false: tuple[tuple[int, int], ...]
