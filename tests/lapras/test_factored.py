"""Factored sensitivities and exact answers against dense brute force; the per-statement work limit."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lapras import Engine, EngineSettings, HistogramExactSource, MemoryLedger, Prediction
from lapras.errors import StatementTooComplex
from lapras.factored import answers_from_marginal
from lapras.mechanisms.sensitivity import statement_sensitivity
from tests.fixtures.engine_helpers import CATALOG, TABLE, plan


def dense_sensitivity(queries) -> float:  # type: ignore[no-untyped-def]
    """The definition: largest column norm of the dense matrix with rows divided by their sensitivity."""
    queries = [q for q in queries if not q.is_zero]
    attrs = tuple(sorted({a for q in queries for a in q.marginal}))
    shape = TABLE.shape(attrs)
    acc = np.zeros(shape)
    for q in queries:
        v = (q.vector(TABLE) / q.sensitivity) ** 2
        order = [a for a in attrs if a in q.marginal]
        v = np.transpose(v, [list(q.marginal).index(a) for a in order])
        acc += v.reshape([shape[k] if a in q.marginal else 1 for k, a in enumerate(attrs)])
    return float(math.sqrt(acc.max())) if queries else 0.0


PREDS = ["a < {x}", "a BETWEEN {x} AND {y}", "c IN ({x}, {y}, 3, 31)", "b = 'y'", "b IN ('x', 'z')",
         "c > {y}", "(a = {x} OR c < {y})", "NOT (c BETWEEN {x} AND {y})"]
AGGS = ["count(*)", "sum(c)", "sum(a)", "avg(c)", "count(*) FILTER (WHERE a > {x})",
        "sum(c) FILTER (WHERE b = 'z')"]
GROUPS = ["", "b", "a", "a, b", "c"]


@st.composite
def statements(draw: st.DrawFn) -> str:
    x, y = draw(st.integers(0, 9)), draw(st.integers(0, 39))
    aggs = draw(st.lists(st.sampled_from(AGGS), min_size=1, max_size=3, unique=True))
    where = draw(st.lists(st.sampled_from(PREDS), max_size=2, unique=True))
    group = draw(st.sampled_from(GROUPS))
    sql = "SELECT " + (group + ", " if group else "") + ", ".join(aggs).format(x=x, y=y) + " FROM t"
    if where:
        sql += " WHERE " + " AND ".join(where).format(x=x, y=y)
    return sql + (f" GROUP BY {group}" if group else "")


@settings(max_examples=150, deadline=None)
@given(statements())
def test_factored_sensitivity_equals_the_dense_definition(sql: str) -> None:
    queries = [q for q in plan(sql).queries if not q.is_zero]
    assert statement_sensitivity(TABLE, queries) == pytest.approx(dense_sensitivity(queries), rel=1e-12)


@settings(max_examples=100, deadline=None)
@given(statements(), st.integers(0, 2**31))
def test_factored_answers_equal_the_dense_answers(sql: str, seed: int) -> None:
    queries = [q for q in plan(sql).queries if not q.is_zero]
    if not queries:
        return
    hist = np.random.default_rng(seed).integers(0, 50, size=(10, 3, 40)).astype(float)
    attrs = tuple(a.name for a in TABLE.attributes if any(a.name in q.marginal for q in queries))
    drop = tuple(i for i, a in enumerate(("a", "b", "c")) if a not in attrs)
    marginal = hist.sum(axis=drop) if drop else hist
    want = [q.answer(TABLE, HistogramExactSource({"t": (("a", "b", "c"), hist)}).marginal(TABLE, q.marginal))
            for q in queries]
    assert answers_from_marginal(TABLE, queries, marginal) == pytest.approx(want, rel=1e-12, abs=1e-9)


def test_disjoint_groups_have_the_sensitivity_of_one_group() -> None:
    queries = plan("SELECT a, b, c, count(*) FROM t GROUP BY a, b, c").queries
    assert len(queries) == 1200 and statement_sensitivity(TABLE, queries) == pytest.approx(1.0)
    both = plan("SELECT a, b, count(*), sum(c) FROM t GROUP BY a, b").queries
    assert statement_sensitivity(TABLE, both) == pytest.approx(math.sqrt(2))


class CountingSource(HistogramExactSource):
    """The real histogram source, counting how often it is asked for exact answers."""

    calls = 0

    def answers(self, table, queries):  # type: ignore[no-untyped-def]
        CountingSource.calls += 1
        return super().answers(table, queries)


def test_work_limit_refuses_before_anything_is_read_or_charged(hist: np.ndarray) -> None:
    source = CountingSource({"t": (("a", "b", "c"), hist)})
    eng = Engine(CATALOG, MemoryLedger(), source, EngineSettings(split="equal", max_statement_work=5_000),
                 predictions=lambda _catalog: Prediction((), 20, None))
    before = eng.ledger.current_epoch()
    CountingSource.calls = 0
    with pytest.raises(StatementTooComplex) as info:
        # (a GROUP BY whose groups pin every column is bounded pointwise without the grid: these filters,
        # unions over two columns inside each group, are not)
        aggs = ", ".join(f"count(*) FILTER (WHERE a < {i} OR b = '{'xyz'[i % 3]}')" for i in range(1, 10))
        eng.answer(plan(f"SELECT c, {aggs} FROM t GROUP BY c"), "u")
    assert info.value.sqlstate == "54000" and info.value.hint
    after = eng.ledger.current_epoch()
    assert CountingSource.calls == 0 and after is not None and before is not None
    assert after.spent_units == before.spent_units and after.state == before.state
    # Within the limit the same engine answers (one release for all groups).
    a = eng.answer(plan("SELECT b, count(*), sum(c) FROM t GROUP BY b"), "u")
    assert a.outcome == "bad" and CountingSource.calls == 1


def test_group_by_pinning_every_column_is_bounded_pointwise_past_the_work_limit(hist: np.ndarray) -> None:
    """A GROUP BY over many columns (each group one point of them) needs more grid work than the limit; its
    sensitivity is bounded without the grid (a row reaches one point's queries only): answered, and the bound
    equals the exact one computed without a limit."""
    from lapras.mechanisms.sensitivity import statement_sensitivity

    source = CountingSource({"t": (("a", "b", "c"), hist)})
    eng = Engine(CATALOG, MemoryLedger(), source, EngineSettings(split="equal", max_statement_work=5_000),
                 predictions=lambda _catalog: Prediction((), 20, None))
    p = plan("SELECT a, b, c, count(*), sum(c) FROM t GROUP BY a, b, c")
    queries = [q for q in p.queries if not q.is_zero]
    assert statement_sensitivity(TABLE, queries, 5_000) == statement_sensitivity(TABLE, queries, None) == 1.0
    assert eng.answer(p, "u").values is not None
