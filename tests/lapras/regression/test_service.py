"""run_regression: budget charged before any row is read, never beyond the part; end to end on PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import psycopg
import pytest

from lapras.regression import COLUMNS, Cost, RegressionError, parse_regression_call, run_regression
from lapras.regression.service import run_regression_call
from parser.model.schema import Attribute, Catalog, IntType, TableSchema, TextType

TABLE = TableSchema("toy", (Attribute("y", IntType(0, 100)), Attribute("a", IntType(0, 10)),
                            Attribute("b", IntType(-5, 5)), Attribute("c", TextType(values=("u", "v")))))


class PartExhausted(Exception):
    sqlstate = "53400"


class Part:
    """A regression budget part under basic composition, as the ledger keeps it."""

    def __init__(self, eps: float, delta: float) -> None:
        self.eps, self.delta = eps, delta
        self.spent: list[Cost] = []

    def charge(self, cost: Cost) -> None:
        e = sum(c.eps for c in self.spent) + cost.eps
        d = sum(c.delta for c in self.spent) + cost.delta
        if e > self.eps * (1 + 1e-12) or d > self.delta * (1 + 1e-12):
            raise PartExhausted("regression budget exhausted")
        self.spent.append(cost)


class FakeCursor:
    def __init__(self, rows: np.ndarray) -> None:
        self.rows, self.pos, self.itersize = rows, 0, 100

    def __enter__(self) -> FakeCursor:
        return self

    def __exit__(self, *a: object) -> None:
        pass

    def execute(self, query: Any) -> None:
        self.pos = 0

    def fetchmany(self, size: int) -> list[tuple[float, ...]]:
        out = self.rows[self.pos:self.pos + size]
        self.pos += size
        return [tuple(r) for r in out]


class FakeConn:
    opened = 0

    def __init__(self, rows: np.ndarray) -> None:
        self.rows = rows
        self.read_only = False
        self.isolation_level = None
        FakeConn.opened += 1

    def __enter__(self) -> FakeConn:
        return self

    def __exit__(self, *a: object) -> None:
        pass

    @contextmanager
    def transaction(self) -> Iterator[None]:
        yield

    def cursor(self, name: str) -> FakeCursor:
        assert name  # server-side (named) cursors only
        return FakeCursor(self.rows)


def _rows(n: int = 3000, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 11, n)
    b = rng.integers(-5, 6, n)
    y = np.clip(20 + 5 * a - 2 * b + rng.normal(0, 3, n), 0, 100)
    return np.column_stack([y, a, b]).astype(float)


def test_never_exceeds_part_and_refuses_before_reading() -> None:
    rows = _rows()
    part = Part(1.0, 1e-6)
    FakeConn.opened = 0
    answered = 0
    for _ in range(10):
        try:
            run_regression(lambda: FakeConn(rows), TABLE, "y", ["a", "b"], "adassp", 0.3, 2e-7, admit=part.charge)
            answered += 1
        except PartExhausted:
            pass
    assert answered == 3 and FakeConn.opened == 3  # refused calls never opened a connection
    assert sum(c.eps for c in part.spent) <= part.eps and sum(c.delta for c in part.spent) <= part.delta


@pytest.mark.parametrize("method", ["adassp", "linmix", "ihm", "fast_ihm"])
def test_result_shape_and_accuracy(method: str) -> None:
    rows = _rows(20000)
    part = Part(1e4, 1e-3)
    res = run_regression(lambda: FakeConn(rows), TABLE, "y", ["a", "b"], method, 1e3, 1e-6, admit=part.charge)
    assert res.columns == COLUMNS and [r[0] for r in res.rows] == ["intercept", "a", "b"]
    assert all(r[2:] == (1e3, 1e-6) for r in res.rows) and res.cost == Cost(eps=1e3, delta=1e-6)
    est = dict((r[0], r[1]) for r in res.rows)
    assert est["a"] == pytest.approx(5, abs=0.5) and est["b"] == pytest.approx(-2, abs=0.5)


@pytest.mark.parametrize("y,xs,method,eps,state", [
    ("y", ["zz"], "ihm", 1.0, "42703"), ("y", ["c"], "ihm", 1.0, "22023"),
    ("y", ["a"], "nope", 1.0, "22023"), ("y", ["a"], "ihm", 0.0, "22023"),
    ("y", ["a"], "adassp", 1e-5, "22023")])  # noise too wide for the lattice release to keep its privacy
def test_refusals_spend_nothing(y: str, xs: list[str], method: str, eps: float, state: str) -> None:
    part = Part(1.0, 1e-6)
    with pytest.raises(RegressionError) as ei:
        run_regression(lambda: FakeConn(_rows(10)), TABLE, y, xs, method, eps, 1e-7, admit=part.charge)
    assert ei.value.sqlstate == state and not part.spent


def test_unknown_table() -> None:
    call = parse_regression_call("SELECT * FROM lapras.linear_regression('nope', 'y', 'a')")
    assert call is not None
    with pytest.raises(RegressionError) as ei:
        run_regression_call(call, Catalog((TABLE,)), lambda: FakeConn(_rows(10)), admit=Part(1, 1e-6).charge,
                            default_epsilon=0.1, default_delta=1e-8)
    assert ei.value.sqlstate == "42P01"


def test_end_to_end_on_postgres(adult_db: str, default_config: Any) -> None:
    """Real PostgreSQL, server-side cursors, Adult (or the demo rows): estimates near the exact OLS."""
    xs = ["age", "education_num", "sex"]
    with psycopg.connect(adult_db) as conn:
        data = np.array(conn.execute("SELECT hours_per_week, age, education_num, sex FROM public.adult "
                                     "WHERE hours_per_week IS NOT NULL AND age IS NOT NULL AND "
                                     "education_num IS NOT NULL AND sex IS NOT NULL").fetchall(), dtype=float)
    X = np.column_stack([np.ones(len(data)), data[:, 1:]])
    ols = np.linalg.lstsq(X, data[:, 0], rcond=None)[0]
    part = Part(1e6, 1e-3)
    call = parse_regression_call("SELECT * FROM lapras.linear_regression('adult', 'hours_per_week', "
                                 "'age, education_num, sex', 'ihm', 1e5)")
    assert call is not None
    res = run_regression_call(call, default_config.catalog, lambda: psycopg.connect(adult_db),
                              admit=part.charge, default_epsilon=1.0, default_delta=1e-7)
    est = np.array([r[1] for r in res.rows])
    assert [r[0] for r in res.rows] == ["intercept", *xs]
    assert part.spent == [Cost(eps=1e5, delta=1e-7)]
    pred = lambda t: X @ t  # noqa: E731
    mse = lambda t: float(np.mean((data[:, 0] - pred(t)) ** 2))  # noqa: E731
    assert mse(est) <= mse(ols) * 1.05
