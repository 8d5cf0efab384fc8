"""Tables with a privacy unit (many rows per person), on a real PostgreSQL: each unit's rows are bounded to
k in the pushed-down SQL, the choice is the same whatever the physical order, and the noise is calibrated
to k times the row-level sensitivity (checked statistically against the bounded truth)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from scipy.stats import chi2

import parser as sqlparser
from lapras import Engine, EngineSettings, MemoryLedger, Prediction
from lapras.exact import PostgresExactSource
from lapras.mechanisms.sensitivity import statement_sensitivity
from lapras.regression.service import RegressionError, row_level_budget, run_regression
from parser.model.schema import Attribute, Catalog, IntType, TableSchema
from tests.fixtures.visits_data import visits_fixture

K = 3
ROWLEVEL = TableSchema("visits", (Attribute("a", IntType(0, 9)), Attribute("c", IntType(0, 39))))
UNIT = replace(ROWLEVEL, privacy_unit="user_id", max_rows_per_unit=K)


def _rows(seed: int = 5) -> list[tuple[int, int, int]]:
    """2,000 light users with 1-3 rows and 20 heavy users with 300 rows each (100x the typical)."""
    rng = np.random.default_rng(seed)
    out = []
    for u in range(2000):
        out += [(u, int(rng.integers(0, 10)), int(rng.integers(0, 40))) for _ in range(int(rng.integers(1, 4)))]
    for u in range(2000, 2020):
        out += [(u, int(rng.integers(0, 3)), int(rng.integers(30, 40))) for _ in range(300)]
    return out


data = visits_fixture(_rows, "unit")


def _plan(sql: str, table: TableSchema = UNIT):  # type: ignore[no-untyped-def]
    return sqlparser.plan_query(sql, Catalog((table,)))


def test_each_unit_contributes_at_most_k_rows(data) -> None:  # type: ignore[no-untyped-def]
    rows, dsn, _ = data
    per_user: dict[int, list[int]] = {}
    for u, _, c in rows:
        per_user.setdefault(u, []).append(c)
    src = PostgresExactSource(dsn)
    count = _plan("SELECT count(*) FROM visits")
    assert src.answers(UNIT, count.queries)[0] == sum(min(len(v), K) for v in per_user.values())
    assert src.answers(ROWLEVEL, count.queries)[0] == len(rows)
    total = src.answers(UNIT, _plan("SELECT sum(c) FROM visits").queries)[0]
    low = sum(sum(sorted(v)[:K]) for v in per_user.values())
    high = sum(sum(sorted(v)[-K:]) for v in per_user.values())
    assert low <= total <= high
    groups = _plan("SELECT a, count(*) FROM visits GROUP BY a")
    by_a = src.answers(UNIT, groups.queries)
    assert by_a.sum() == sum(min(len(v), K) for v in per_user.values())
    assert (by_a <= src.answers(ROWLEVEL, groups.queries)).all()
    src.close()


def test_the_kept_rows_do_not_depend_on_physical_order(data) -> None:  # type: ignore[no-untyped-def]
    _, first, second = data
    plans = [_plan("SELECT a, sum(c) FROM visits GROUP BY a"), _plan("SELECT c, count(*) FROM visits GROUP BY c")]
    a, b = PostgresExactSource(first), PostgresExactSource(second)
    for p in plans:
        np.testing.assert_array_equal(a.answers(UNIT, p.queries), b.answers(UNIT, p.queries))
    np.testing.assert_array_equal(a.marginal(UNIT, ("a", "c")), b.marginal(UNIT, ("a", "c")))
    a.close()
    b.close()


def test_sensitivities_scale_by_k() -> None:
    p = _plan("SELECT a, count(*), sum(c) FROM visits GROUP BY a")
    assert statement_sensitivity(UNIT, p.queries) == pytest.approx(K * statement_sensitivity(ROWLEVEL, p.queries))
    # Group privacy for the regression: (eps/k, delta') per row is (eps, delta) per unit.
    e, d = row_level_budget(1.0, 1e-5, K)
    assert e == pytest.approx(1 / K)
    assert K * e == pytest.approx(1.0) and K * np.exp((K - 1) * e) * d == pytest.approx(1e-5)


def test_a_budget_too_large_for_group_privacy_is_refused_before_anything_runs() -> None:
    # exp((k - 1) eps / k) overflowed for a large epsilon (an XX000 'math range error'); now delta' is 0 and
    # the call is refused with 22023 before it is admitted or reads a row.
    e, d = row_level_budget(1e4, 1e-5, 10)
    assert e == pytest.approx(1e3) and d == 0.0
    admitted: list[object] = []

    def no_rows():  # type: ignore[no-untyped-def]
        raise AssertionError("no connection may be opened")

    big = replace(UNIT, max_rows_per_unit=10)
    with pytest.raises(RegressionError) as info:
        run_regression(no_rows, big, "c", ["a"], "adassp", 1e4, 1e-5, admit=admitted.append)
    assert info.value.sqlstate == "22023" and "too large" in info.value.message and not admitted


def _engine(table: TableSchema, dsn: str) -> Engine:
    return Engine(Catalog((table,)), MemoryLedger(), PostgresExactSource(dsn),
                  EngineSettings(split="equal", rho_estimate=0.5, joint_max_cells=0),
                  predictions=lambda _catalog: Prediction([], 12, 0.5))


@pytest.mark.slow
def test_noise_is_calibrated_to_k_and_centred_on_the_bounded_data(data) -> None:  # type: ignore[no-untyped-def]
    """Sum of (error / stated stderr)^2 over independent epochs is chi-square with as many degrees of freedom
    as answers (two-sided, false-failure rate 1e-4), with errors measured from the bounded exact values;
    and each stated stderr is k times that of the same statement on the row-level table."""
    _, dsn, _ = data
    sqls = [f"SELECT count(*) FROM visits WHERE c BETWEEN {lo} AND {lo + 9}" for lo in range(0, 30, 3)]
    truth_src = PostgresExactSource(dsn)
    stat, df = 0.0, 0
    for _ in range(12):
        unit, row = _engine(UNIT, dsn), _engine(ROWLEVEL, dsn)
        for s in sqls:
            p = _plan(s)
            a = unit.answer(p, "u")
            b = row.answer(_plan(s, ROWLEVEL), "u")
            assert a.stderrs[0] == pytest.approx(K * b.stderrs[0], rel=1e-9)
            truth = truth_src.answers(UNIT, p.queries)
            stat += float((((a.values - truth) / a.stderrs) ** 2).sum())
            df += len(truth)
    assert chi2.ppf(0.5e-4, df) < stat < chi2.ppf(1 - 0.5e-4, df)
