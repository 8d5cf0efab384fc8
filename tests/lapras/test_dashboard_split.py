"""A perfectly predicted dashboard on `events` (k = 10 rows per unit) buys accuracy: the `auto` split funds
P's release, the predicted panels are served from it, and their errors beat independent Gaussian noise.

The in-process engine on the embedded PostgreSQL (generated `events`), the shipped config at (1, 1e-3),
S = 20 statements (the panels, two ad hoc statements and refreshes), P = exactly the panels' linear
queries, no overlap estimate (the engine assumes 0.5). Before the split compared P's release in the
same units as a fresh answer (``expected_relative_variance``), it gave P nothing here: the release's
absolute variance carries k^2 = 100, which the split compared with a sensitivity-1 count.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

import parser as sqlparser
from lapras.engine import Engine, Prediction
from lapras.exact import PostgresExactSource
from lapras.ledger.memory import MemoryLedger
from proxy.dp.engine_factory import engine_settings

PANELS = [
    "SELECT date_trunc('day', ts) AS day, category, count(*) FROM events "
    "WHERE ts >= '2026-11-01' AND ts < '2026-12-01' GROUP BY 1, 2 ORDER BY 1",
    "SELECT country, count(*) FROM events WHERE ts >= '2026-11-01' AND ts < '2026-12-01' GROUP BY country",
    "SELECT date_trunc('hour', ts) AS hour, count(*) FROM events WHERE ts >= '2026-11-28' "
    "AND ts < '2026-11-29' GROUP BY 1 ORDER BY 1",
]
AD_HOC = [
    "SELECT category, count(*) FROM events WHERE ts >= '2026-11-16' AND ts < '2026-11-23' GROUP BY 1",
    "SELECT count(*) FROM events WHERE ts >= '2026-11-01' AND ts < '2026-12-01' AND amount >= 100",
]
S = 20


def _run(catalog, settings, dsn: str, stream: list[str], prediction: Prediction):  # type: ignore[no-untyped-def]
    exact = PostgresExactSource(dsn)
    engine = Engine(catalog, MemoryLedger(), exact, settings)
    try:
        engine.new_epoch(prediction)
        split = dict(engine._epoch.spec.split)  # type: ignore[union-attr]
        planner = sqlparser.Planner(catalog)
        out = {}
        for sql in stream:
            plan = planner.plan(sql)
            ans = engine.answer(plan, "dashboard")
            if sql not in out:
                truth = exact.answers(catalog.table(plan.table), plan.queries)
                out[sql] = (ans.outcome, np.abs(ans.values - truth), ans.stderrs)
        return split, out
    finally:
        engine.close()


def test_predicted_dashboard_is_served_from_p_and_beats_independent_noise(adult_db: str, default_config) -> None:
    catalog = default_config.catalog
    settings = replace(engine_settings(default_config, progress=False), epsilon=1.0, delta=1e-3,
                       epoch="manual", epoch_seconds=None, mm_time_limit=10.0)
    planner = sqlparser.Planner(catalog)
    qs = {q.key: q for sql in PANELS for q in planner.plan(sql).queries if not q.is_zero}
    rng = np.random.default_rng(3)
    stream = PANELS + AD_HOC + [PANELS[i] for i in rng.integers(0, len(PANELS), S - len(PANELS) - len(AD_HOC))]
    stream = [stream[i] for i in rng.permutation(len(stream))]
    split_p, with_p = _run(catalog, settings, adult_db, stream, Prediction(tuple(qs.values()), S, None))
    split_0, without = _run(catalog, settings, adult_db, stream, Prediction((), S, None))

    assert split_0["mm"] == 0.0
    # About a third of the stream budget for P (w_mm = sqrt(G v) against B = 10 with v ~ 2.2; 0 on main).
    assert split_p["mm"] > 0.2
    assert [with_p[sql][0] for sql in PANELS] == ["good"] * len(PANELS)  # served from P's release
    assert all(without[sql][0] == "bad" for sql in PANELS)
    # Stated errors: every panel's below its independent twin's (deterministic given the split).
    for sql in PANELS:
        assert with_p[sql][2].mean() < without[sql][2].mean()
    # Empirical errors over the panels' 284 cells: the stated standard errors differ by a factor of about
    # 1.9 on the 240 daily cells (which dominate the mean); a mean absolute error within 0.8 of the
    # independent one holds with a margin of many standard errors of the two means (each over >= 284
    # half-normal draws: relative standard error about 4.5%).
    err_p = np.concatenate([with_p[sql][1] for sql in PANELS])
    err_0 = np.concatenate([without[sql][1] for sql in PANELS])
    assert err_p.mean() < 0.8 * err_0.mean(), (err_p.mean(), err_0.mean())
    # The ad hoc statements are not starved: their grants come from a pool sized for the other half.
    for sql in AD_HOC:
        assert with_p[sql][0] == "bad"
        assert with_p[sql][2].mean() < 1.5 * without[sql][2].mean()

