"""Engine on the in-memory ledger: repeats, zero queries, free estimates, refusals, stated errors."""

from __future__ import annotations

import time
from types import SimpleNamespace

import numpy as np
import pytest
from scipy.stats import chi2

from lapras import BudgetExhausted, Engine, EngineSettings, MemoryLedger, Prediction
from lapras.errors import UnknownTable
from lapras.report import budget_report
from tests.fixtures.engine_helpers import CATALOG, plan, range_sqls


def _engine(exact, **kw) -> Engine:  # type: ignore[no-untyped-def]
    pred_sqls = kw.pop("pred", [])
    preds = [q for s in pred_sqls for q in plan(s).queries]
    s = kw.pop("s", 20)
    return Engine(CATALOG, MemoryLedger(), exact, EngineSettings(**kw),
                  predictions=lambda _catalog: Prediction(preds, s, kw.get("rho_estimate")))


def test_repeat_is_free_and_fast(exact) -> None:  # type: ignore[no-untyped-def]
    eng = _engine(exact, split="equal")
    first = eng.answer(plan("SELECT count(*) FROM t WHERE c BETWEEN 3 AND 17"), "u")
    assert first.outcome == "bad" and first.cost is not None
    spent = eng.ledger.current_epoch().spent_units  # type: ignore[union-attr]
    p2 = plan("SELECT count(*) FROM t WHERE c >= 3 AND c <= 17")  # same canonical query
    again = eng.answer(p2, "v")
    assert again.outcome == "repeat" and again.values[0] == first.values[0]
    assert eng.ledger.current_epoch().spent_units == spent  # type: ignore[union-attr]
    t0 = time.perf_counter()
    for _ in range(1000):
        eng.lookup(p2)
    assert (time.perf_counter() - t0) / 1000 < 1e-3


def test_zero_queries_are_exact_and_free(exact) -> None:  # type: ignore[no-untyped-def]
    eng = _engine(exact)
    a = eng.answer(plan("SELECT count(*) FROM t WHERE c > 1000"), "u")
    assert a.values[0] == 0 and a.stderrs[0] == 0 and a.cost is None


def test_group_by_is_one_release_with_matrix_sensitivity(exact) -> None:  # type: ignore[no-untyped-def]
    eng = _engine(exact, split="query_heavy")
    a = eng.answer(plan("SELECT b, count(*) FROM t GROUP BY b"), "u")
    assert a.outcome == "bad" and len(a.values) == 3
    rel = [r for r in eng.ledger.releases(eng.ledger.current_epoch().id) if r.kind == "fresh"]  # type: ignore[union-attr]
    assert len(rel) == 1 and rel[0].sensitivity == pytest.approx(1.0)  # disjoint groups: one column norm 1
    a2 = eng.answer(plan("SELECT count(*), sum(c) FROM t WHERE a = 3"), "u")
    rel = [r for r in eng.ledger.releases(eng.ledger.current_epoch().id) if r.kind == "fresh"]  # type: ignore[union-attr]
    # Rows are released divided by their own sensitivity (1 and 39): the normalised matrix has column
    # norm sqrt(1 + (c/39)^2) <= sqrt(2), and each row's noise is scaled back by its sensitivity.
    assert rel[-1].sensitivity == pytest.approx(np.sqrt(2))
    assert len(a2.values) == 2
    assert a2.stderrs[1] == pytest.approx(39 * a2.stderrs[0])
    assert rel[-1].mechanism == "gaussian" and a2.stderrs[0] == pytest.approx(rel[-1].params["sigma"])


def test_a_plan_over_no_protected_table_is_refused_before_any_charge(exact) -> None:  # type: ignore[no-untyped-def]
    """answer and preview refuse a plan naming a table the catalog does not hold (UnknownTable, 42P01),
    before any exact work or charge (false-failure rate 0)."""
    eng = _engine(exact)
    gone = SimpleNamespace(table="gone", queries=plan("SELECT count(*) FROM t WHERE a = 2").queries)
    with pytest.raises(UnknownTable, match='relation "gone" is not a protected table') as refused:
        eng.answer(gone, "u")  # type: ignore[arg-type]
    assert refused.value.sqlstate == "42P01"
    with pytest.raises(UnknownTable, match='relation "gone"'):
        eng.preview(gone)  # type: ignore[arg-type]
    assert eng.ledger.current_epoch().spent_units == 0  # type: ignore[union-attr]


def test_predicted_queries_come_from_the_mm_release(exact) -> None:  # type: ignore[no-untyped-def]
    sqls = range_sqls(10, seed=1)
    eng = _engine(exact, pred=sqls, split="matrix_heavy", rho_estimate=1.0, joint_max_cells=0)
    for s in sqls:
        a = eng.answer(plan(s), "u")
        assert a.outcome == "good" and a.cost is None and np.isfinite(a.stderrs).all()
    assert eng.ledger.current_epoch().state.b == 0  # type: ignore[union-attr]


def test_stop_then_free_estimates_or_refusal(exact) -> None:  # type: ignore[no-untyped-def]
    preds = range_sqls(5, seed=2)
    eng = _engine(exact, pred=preds, split="custom", fractions={"mm": 0.5, "bad_init": 0.1, "reserve": 0.1,
                                                                 "rem_bad": 0.3},
                  allocation="static", s=4, warmup=2, min_fraction=0.02)
    refused = free_after = 0
    for i in range(40):
        try:
            a = eng.answer(plan(f"SELECT count(*) FROM t WHERE a = {i % 10} AND b = '{'xyz'[i // 10 % 3]}'"), "u")
        except BudgetExhausted as exc:
            assert exc.sqlstate == "53400"
            refused += 1
            continue
        assert a.outcome in ("bad", "repeat")
    # After the stop, a query on the released marginal (c) is still answered, from the MM release.
    a = eng.answer(plan("SELECT count(*) FROM t WHERE c BETWEEN 1 AND 2"), "u")
    free_after += a.outcome == "free_after_stop"
    assert refused > 0 and free_after == 1
    rep = budget_report(eng.ledger)
    assert rep["current"]["stopped"] and rep["current"]["spent"]["epsilon"] <= 1.0 + 1e-9


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["gdp", "basic"])
def test_stated_stderr_matches_empirical_error(exact, mode: str) -> None:  # type: ignore[no-untyped-def]
    """Sum over answers of (error / stated stderr)^2 is chi-square with as many degrees of freedom as answers
    (independent epochs); two-sided test at false-failure rate 1e-4."""
    from lapras.exact import HistogramExactSource  # noqa: F401 - the fixture's type

    stat, df = 0.0, 0
    sqls = range_sqls(12, seed=3)
    for _ in range(15):
        eng = _engine(exact, pred=sqls[:6], split="equal", accounting=mode, rho_estimate=0.5, s=12, joint_max_cells=0)
        for s in sqls:
            p = plan(s)
            a = eng.answer(p, "u")
            truth = exact.answers(CATALOG.tables[0], p.queries)
            stat += float(((a.values - truth) / a.stderrs) ** 2 @ np.ones(len(truth)))
            df += len(truth)
    assert chi2.ppf(0.5e-4, df) < stat < chi2.ppf(1 - 0.5e-4, df)


def test_new_epoch_and_cumulative_report(exact) -> None:  # type: ignore[no-untyped-def]
    clock = [1000.0]
    eng = Engine(CATALOG, MemoryLedger(), exact, EngineSettings(epoch_seconds=60, split="equal"),
                 clock=lambda: clock[0])
    eng.answer(plan("SELECT count(*) FROM t WHERE a = 1"), "u")
    first = eng._epoch.id  # type: ignore[union-attr]
    eng._epoch.started_at = 1000.0  # type: ignore[union-attr]
    clock[0] = 2000.0
    a = eng.answer(plan("SELECT count(*) FROM t WHERE a = 1"), "u")
    assert eng._epoch.id == first + 1 and a.outcome == "bad"  # type: ignore[union-attr]
    rep = budget_report(eng.ledger)
    assert rep["epochs"] == 2 and rep["cumulative"]["epsilon"] > rep["current"]["spent"]["epsilon"]


def test_a_read_that_ended_is_charged_and_stored_though_its_client_left(exact) -> None:  # type: ignore[no-untyped-def]
    """The client stopped waiting (its ReadGuard cancelled) but the exact answer was read (a histogram source
    reads without looking at the guard): the engine commits as always, charged and stored, so the statement
    asked again is a free repeat. False-failure rate 0."""
    import contextvars

    from lapras.read_guard import READ_GUARD, ReadGuard

    eng = _engine(exact, split="equal")
    p = plan("SELECT count(*) FROM t WHERE c BETWEEN 4 AND 9")
    guard = ReadGuard(None)
    guard.cancel()
    ctx = contextvars.copy_context()
    ctx.run(READ_GUARD.set, guard)
    assert ctx.run(eng.answer, p, "u").outcome == "bad"
    ep = eng.ledger.current_epoch()
    assert ep is not None and ep.spent_units > 0 and ep.state.n == 1
    assert eng.lookup(p) is not None  # stored: a retry repeats it free


def test_a_read_stopped_after_it_began_is_charged_and_not_stored(exact) -> None:  # type: ignore[no-untyped-def]
    """The statement's upstream read began and was stopped (57014): how long the read took decided the
    outcome, so the grant is charged with nothing released or stored, and a retry is charged again; a read
    stopped before it began is not charged. False-failure rate 0."""
    import contextvars

    from lapras.errors import StatementInterrupted
    from lapras.read_guard import READ_GUARD, ReadGuard, current_guard

    class Stopped:
        def __init__(self, inner, began: bool | None) -> None:  # type: ignore[no-untyped-def]
            self.inner, self.began = inner, began

        def __getattr__(self, name: str):  # type: ignore[no-untyped-def]
            return getattr(self.inner, name)

        def answers(self, table, queries):  # type: ignore[no-untyped-def]
            if self.began is None:  # the read works again
                return self.inner.answers(table, queries)
            guard = current_guard()
            assert guard is not None  # the answer read is armed
            guard.read_started = self.began
            raise guard.interrupted()

    p = plan("SELECT count(*) FROM t WHERE c BETWEEN 4 AND 9")
    for began in (False, True):
        source = Stopped(exact, began)
        eng = _engine(source, split="equal")
        ctx = contextvars.copy_context()
        ctx.run(READ_GUARD.set, ReadGuard(time.monotonic() + 60))
        with pytest.raises(StatementInterrupted) as info:
            ctx.run(eng.answer, p, "u")
        assert info.value.sqlstate == "57014"
        ep = eng.ledger.current_epoch()
        assert ep is not None and eng.lookup(p) is None
        assert (ep.spent_units > 0, ep.state.n) == ((True, 1) if began else (False, 0)), began
    source.began = None  # the read works again: answered fresh and charged a second time
    spent = ep.spent_units
    assert eng.answer(p, "u").outcome == "bad"
    assert eng.ledger.current_epoch().spent_units > spent  # type: ignore[union-attr]
