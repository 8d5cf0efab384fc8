"""The one scalar evaluator: typed SQL expressions evaluated on a vector of rows, with PostgreSQL semantics.

An expression is compiled once (``parser.analysis.scalars``) and evaluated on an ``Env`` of ``n`` rows.
A row is a cell of the public domain (``cells`` binds each attribute to the cells' values: GROUP BY
buckets, constant folding, and later any per-row expression over declared columns), or a result group
(``keys`` and noisy aggregate values ``aggs``: output columns, HAVING, ORDER BY). Operators and their
three-valued logic live here; the semantics of each type (integer division, exact numeric rounding,
float casts, functions) in ``parser.semantics.values``, and nowhere else.

Over public values (``strict``) errors are raised as PostgreSQL raises them (22012, 22P02); over noisy
values division by zero yields NULL, so a noisy value never fails a result after its release.

Evaluation is per operator over whole vectors, never per row per operator: integer and float arithmetic
and comparisons run in numpy, an IN list is one hash lookup a row whatever its length, so an expression
over a column of thousands of cells plans in milliseconds.

Modules: ``tree`` (``Env``, ``Expr``, leaves, vector helpers), ``arith`` (arithmetic, casts, calls),
``logic`` (comparisons and three-valued logic, CASE), ``zone`` (AT TIME ZONE).
"""

from __future__ import annotations

from ..semantics.functions import FUNCTIONS, call_type
from ..semantics.values import cast_value, coerce_param, compare, round_count
from .arith import Arith, Call, Cast, Neg
from .logic import Case, Cmp, InList, IsNull, IsTruth, Logic
from .tree import Cell, Const, Env, Expr, Key, Param, Vector, constant, nulls, objects
from .zone import AtZone, zone_of

# The evaluator's own node types (other packages subclass Expr for aggregates and order statistics).
NODES: frozenset[type[Expr]] = frozenset({Const, Param, Cell, Key, Arith, Neg, Cast, Call, Cmp, InList, Logic,
                                          IsNull, IsTruth, Case, AtZone})

__all__ = ["Arith", "AtZone", "Call", "Case", "Cast", "Cell", "Cmp", "Const", "Env", "Expr", "InList", "IsNull", "IsTruth", "Key", "Logic",
           "Neg", "Param", "Vector", "call_type", "cast_value", "coerce_param", "compare", "constant",
           "round_count", "FUNCTIONS", "NODES", "nulls", "objects", "zone_of"]

