"""Run a DP regression over a protected table: SQL pushed down, rows streamed, budget checked first.

The caller charges the returned cost and stores the released rows in one ledger transaction
(``Ledger.commit_regression``) before they leave the proxy: a crash can neither charge a call whose
answer is lost nor lose an answer that was charged.

Flow of :func:`run_regression`: validate the columns against the public schema; calibrate the method's
noise (data-independent, so an infeasible budget is refused before anything is spent or read); call
``admit(cost)``, which must raise (e.g. BudgetExhausted, 53400) when the ledger's regression part cannot
cover the cost; only then read the rows, inside one REPEATABLE READ read-only transaction (every
pass sees the same snapshot), through psycopg server-side cursors fetched in blocks.

Each column is clamped to its public domain in SQL and standardised with public constants only:
``z = (v - mid) / half`` with mid and half the domain's midpoint and half-range, so every feature lies in
[-1, 1]; an intercept column of ones is appended. Default bounds: row norm sqrt(p + 1) and |y - mid_y| <=
half_y. The released coefficients are mapped back to the original units.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

import numpy as np
from psycopg import IsolationLevel
from psycopg import sql as psql

from lapras.calibration import agm_sigma
from lapras.mechanisms.gaussian import lattice_feasible
from lapras.regression import rdp
from lapras.regression.methods import METHODS, Block, Cost, fit
from lapras.regression.sqlcall import RegressionCall, RegressionError
from parser.model.schema import Attribute, Catalog, TableSchema
from parser.pushdown.sql import table_ref
from pgcore.pgtypes import FLOAT8, TEXT

COLUMNS: tuple[tuple[str, int], ...] = (("term", TEXT), ("estimate", FLOAT8), ("epsilon", FLOAT8),
                                        ("delta", FLOAT8))
INTERCEPT = "intercept"
_cursor_ids = itertools.count()


@dataclass(frozen=True)
class RegressionResult:
    """Result set: ``columns`` as (name, type oid); ``rows`` as (term, estimate, epsilon, delta)."""

    columns: tuple[tuple[str, int], ...]
    rows: list[tuple[str, float, float, float]]
    cost: Cost
    method: str


def check_feasible(method: str, d: int, eps: float, delta: float, params: dict[str, Any] | None = None) -> None:
    """Raise rdp.InfeasibleBudget when no noise level of ``method`` meets (eps, delta) for d features."""
    p = params or {}
    if not (eps > 0 and math.isfinite(eps)) or not 0 < delta < 1:
        raise rdp.InfeasibleBudget(f"need epsilon > 0 and 0 < delta < 1, got ({eps}, {delta})")
    # The Gaussian steps, each (sigma, L2 sensitivity, rows): they must leave room for the lattice margin.
    steps: list[tuple[float, float, int]]
    if method == "linmix":
        cal = rdp.calibrate_linmix(eps, delta, p.get("k") or max(24 * d, 128))
        steps = [(cal.sigma_eig, cal.eig_sensitivity, 1)]
    elif method in ("ihm", "fast_ihm"):
        calibrate = rdp.calibrate_ihm if method == "ihm" else rdp.calibrate_fast_ihm
        cal = calibrate(eps, delta, p.get("k") or max((8 if method == "ihm" else 6) * d, 64 if method == "ihm" else 48),
                        p.get("T", 5))
        steps = [(cal.sigma_eig, cal.eig_sensitivity, 1), (cal.sigma_grad, 1.0, d)]
    else:
        sigma = agm_sigma(eps / 3.0, delta / 3.0, 1.0)
        steps = [(sigma, 1.0, 1), (sigma, 1.0, d * (d + 1) // 2), (sigma, 1.0, d)]
    if not all(lattice_feasible(*st) for st in steps):
        raise rdp.InfeasibleBudget(f"epsilon={eps:g} is too small for a lattice Gaussian release of {method}",
                                   hint="raise epsilon")


def row_level_budget(eps: float, delta: float, k: int) -> tuple[float, float]:
    """The row-level (eps', delta') whose group privacy over k rows is (eps, delta).

    An (e, d)-DP mechanism is (k e, k exp((k - 1) e) d)-DP for inputs differing in k rows; a table with a
    privacy unit keeps at most k rows per unit, so a regression run at e = eps / k and
    d = delta / (k exp((k - 1) eps / k)) costs (eps, delta) per unit. k = 1 leaves the budget as it is.
    """
    if k <= 1:
        return eps, delta
    e = eps / k
    # exp(-x), not 1 / exp(x): a large budget makes the row-level delta underflow to 0 instead of overflowing.
    return e, delta * math.exp(-(k - 1) * e) / k


def _attr(table: TableSchema, name: str) -> Attribute:
    a = table.attribute(name)
    if a is None:
        raise RegressionError("42703", f'column "{name}" does not exist in table "{table.name}"')
    if not a.domain.summable:
        raise RegressionError("22023", f'column "{name}" has a {a.domain.type_name} domain',
                              hint="linear_regression needs numeric columns")
    return a


def check_columns(table: TableSchema, y: str, xs: Sequence[str]) -> None:
    """Raise the call's own error (42703 unknown column, 22023 non-numeric) for y and xs."""
    for name in (y, *xs):
        _attr(table, name)


def _select_sql(table: TableSchema, attrs: Sequence[Attribute]) -> psql.Composed:
    cols = [psql.SQL("LEAST(GREATEST({c}::float8, {lo}), {hi})").format(
        c=psql.Identifier(a.name), lo=psql.Literal(a.domain.sum_bounds[0]), hi=psql.Literal(a.domain.sum_bounds[1]))
        for a in attrs]
    nn = [psql.SQL("{c} IS NOT NULL").format(c=psql.Identifier(a.name)) for a in attrs]
    # table_ref: with a privacy unit, each unit's rows bounded to k (as for every exact answer; from the
    # epoch's materialisation when the caller's rows_of gave one).
    return psql.SQL("SELECT {cols} FROM {t} WHERE {nn}").format(
        cols=psql.SQL(", ").join(cols), t=psql.SQL(table_ref(table)),
        nn=psql.SQL(" AND ").join(nn))


def _mid_half(a: Attribute) -> tuple[float, float]:
    lo, hi = a.domain.sum_bounds
    return (lo + hi) / 2.0, max((hi - lo) / 2.0, 1.0)


def run_regression(conn_factory: Callable[[], AbstractContextManager[Any]], table: TableSchema, y: str,
                   xs: Sequence[str], method: str, eps: float, delta: float,
                   bounds: tuple[float, float] | None = None, *,
                   admit: Callable[[Cost], None], block_rows: int = 8192,
                   params: dict[str, Any] | None = None,
                   rows_of: Callable[[TableSchema], TableSchema] | None = None) -> RegressionResult:
    """DP linear regression of ``y`` on ``xs`` (+ intercept) over ``table``; see the module docstring.

    ``conn_factory()`` returns a psycopg (3) connection usable as a context manager. ``bounds`` =
    (row-norm bound on the standardised design row incl. intercept, bound on |y - mid_y|); default from
    the public domains. ``admit(cost)`` is called once, before any row is read; its exception propagates
    and nothing is computed. ``rows_of`` (after ``admit``): the table as the epoch's exact answers read it
    (its materialised bounded rows).
    """
    if method not in METHODS:
        raise RegressionError("22023", f"unknown regression method {method!r}", hint="one of " + ", ".join(METHODS))
    ya = _attr(table, y)
    xa = [_attr(table, x) for x in xs]
    if not xa:
        raise RegressionError("22023", "linear_regression needs at least one explanatory column")
    d = len(xa) + 1
    my, hy = _mid_half(ya)
    mh = np.array([_mid_half(a) for a in xa])
    if bounds is None:
        c_x, c_y = math.sqrt(d), hy
    else:
        c_x, c_y = float(bounds[0]), float(bounds[1])
        if not (c_x > 0 and c_y > 0 and math.isfinite(c_x) and math.isfinite(c_y)):
            raise RegressionError("22023", "regression bounds must be positive and finite")
    row_eps, row_delta = row_level_budget(eps, delta, table.unit_rows)
    if eps > 0 and 0 < delta and row_delta <= 0:
        raise RegressionError("22023", f"epsilon = {eps:g} is too large for a regression over {table.unit_rows} "
                              "rows per privacy unit: its row-level delta underflows to 0",
                              hint="ask for a smaller epsilon; group privacy over k rows costs exp((k - 1) eps / k) in delta")
    try:
        check_feasible(method, d, row_eps, row_delta, params)
    except rdp.InfeasibleBudget as e:
        raise RegressionError("22023", e.message, hint=e.hint) from None
    cost = Cost(eps=float(eps), delta=float(delta))
    admit(cost)  # an exhausted budget is refused before any data is touched

    query = _select_sql(rows_of(table) if rows_of is not None else table, [ya, *xa])
    with conn_factory() as conn:
        # One snapshot for all passes (IHM reads the rows T + 1 times); the proxy never writes.
        conn.read_only = True
        conn.isolation_level = IsolationLevel.REPEATABLE_READ

        def source() -> Iterator[Block]:
            with conn.cursor(name=f"lapras_regression_{next(_cursor_ids)}") as cur:
                cur.itersize = block_rows
                cur.execute(query)
                while True:
                    rows = cur.fetchmany(block_rows)
                    if not rows:
                        break
                    a = np.asarray(rows, dtype=np.float64)
                    Z = (a[:, 1:] - mh[:, 0]) / mh[:, 1]
                    yield np.column_stack([Z, np.ones(len(a))]), a[:, 0] - my

        with conn.transaction():
            theta, _ = fit(method, source, c_x, c_y, row_eps, row_delta, **(params or {}))
    coef = theta[:-1] / mh[:, 1]
    intercept = float(my + theta[-1] - np.sum(coef * mh[:, 0]))
    r_eps, r_delta = float(eps), float(delta)
    rows = [(INTERCEPT, intercept, r_eps, r_delta)]
    rows += [(a.name, float(c), r_eps, r_delta) for a, c in zip(xa, coef, strict=True)]
    return RegressionResult(COLUMNS, rows, cost, method)


def run_regression_call(call: RegressionCall, catalog: Catalog,
                        conn_factory: Callable[[], AbstractContextManager[Any]], *,
                        admit: Callable[[Cost], None], default_epsilon: float,
                        default_delta: float,
                        rows_of: Callable[[TableSchema], TableSchema] | None = None) -> RegressionResult:
    """Resolve a parsed call against the catalog (42P01 for an unknown table) and run it.

    ``rows_of``: as for :func:`run_regression`."""
    canon = canonical_call(call, catalog, default_epsilon, default_delta)
    table = catalog.table(canon.table, canon.schema)
    assert table is not None and canon.epsilon is not None and canon.delta is not None
    return run_regression(conn_factory, table, canon.y, list(canon.xs), canon.method, canon.epsilon, canon.delta,
                          admit=admit, rows_of=rows_of)


def canonical_call(call: RegressionCall, catalog: Catalog, default_epsilon: float,
                   default_delta: float) -> RegressionCall:
    """The one form of a call that releases one quantity: schema resolved, default epsilon and delta
    written out, regressors sorted. Spellings with the same canonical form are one release, charged once
    (42P01 for an unknown table)."""
    table = catalog.table(call.table, call.schema)
    if table is None:
        raise RegressionError("42P01", f'relation "{call.table}" does not exist or is not protected')
    eps = call.epsilon if call.epsilon is not None else default_epsilon
    delta = call.delta if call.delta is not None else default_delta
    # 12 significant digits: a default written out by hand (0.1) equals the computed one (0.2 * 0.5).
    return RegressionCall(table.name, call.y, tuple(sorted(call.xs)), call.method, float(f"{eps:.12g}"),
                          float(f"{delta:.12g}"), table.schema)


def call_key(call: RegressionCall) -> str:
    """Ledger key of a canonical call."""
    return json.dumps([call.schema, call.table, call.y, list(call.xs), call.method, call.epsilon, call.delta],
                      separators=(",", ":"))
