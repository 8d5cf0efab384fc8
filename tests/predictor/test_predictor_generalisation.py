"""The predictor on synthetic logs it was not tuned on: other schedules, other literal patterns, noise.

Each scenario back-tests the last days of a generated log and checks that the recurring queries are in P
(recall on the recurring kinds) while the ad hoc one-offs stay out (precision).
"""

from __future__ import annotations

from datetime import date, timedelta
from pathlib import Path

import pytest

from predictor.backtest import backtest, load_truth
from predictor.logs import read_log
from predictor.predict import bucket, train
from tests.fixtures import predictor_synth as synth
from tests.fixtures.predictor_synth import Recurring, business, const, daily, every, weekly


def _run(
    tmp_path: Path,
    items: list[Recurring],
    days: int,
    adhoc: int = 10,
    seed: int = 0,
    last: int = 5,
    min_train: int = 7,
):
    rows = synth.generate(items, days, adhoc, seed)
    log = tmp_path / "server.log"
    log.write_text(synth.to_stderr(rows))
    truth = tmp_path / "truth.csv"
    truth.write_text(synth.to_truth(rows))
    statements, stats = read_log(log)
    assert stats.unreadable == 0
    results = backtest(statements, min_train=min_train, truth=load_truth(truth))
    return results[-last:]


def _panels(n: int, table: str = "orders") -> list[str]:
    return [f"SELECT COUNT(*) FROM {table} WHERE status = {i}" for i in range(n)]


def test_daily_panels_and_noise(tmp_path: Path) -> None:
    items = [Recurring(const(s), daily) for s in _panels(12)]
    for r in _run(tmp_path, items, days=14, adhoc=15):
        assert r.recurring_recall == 1.0
        assert r.precision == 1.0  # no one-off is ever predicted
        assert abs(r.s_estimate - r.s_true) <= 0.15 * r.s_true


@pytest.mark.slow
def test_weekly_business_and_every_other_day(tmp_path: Path) -> None:
    items = (
        [Recurring(const(s), weekly(0)) for s in _panels(4, "weekly_t")]  # Mondays only
        + [Recurring(const(s), business) for s in _panels(5, "biz_t")]  # Monday to Friday
        + [Recurring(const(s), every(2)) for s in _panels(4, "alt_t")]  # every other day
    )
    results = _run(tmp_path, items, days=35, adhoc=10, last=10, min_train=21)
    for r in results:
        assert r.recurring_recall is None or r.recurring_recall >= 0.95, r
        assert r.precision >= 0.85, r
    # Weekends: the business-day panels are not predicted, so P only holds what comes.
    assert min(r.p_size for r in results) < max(r.p_size for r in results)


def test_advancing_literals(tmp_path: Path) -> None:
    start = synth.START
    items = [
        # a counter advancing by one per day
        Recurring(
            lambda d: f"SELECT SUM(amount) FROM sales WHERE batch_id = {1000 + d}", daily, kind="report"
        ),
        # yesterday's date
        Recurring(
            lambda d: (
                f"SELECT COUNT(*) FROM visits WHERE day = '{(start + timedelta(days=d - 1)).isoformat()}'"
            ),
            daily,
            kind="report",
        ),
        # a sliding 10-unit window moving by 5 per day
        Recurring(
            lambda d: f"SELECT COUNT(*) FROM claims WHERE units BETWEEN {5 * d} AND {5 * d + 9}",
            daily,
            kind="report",
        ),
        # a weekly report whose week number advances
        Recurring(
            lambda d: f"SELECT SUM(units) FROM sales WHERE week = {10 + d // 7}", weekly(0), kind="report"
        ),
    ]
    items += [Recurring(const(s), daily) for s in _panels(5)]
    results = _run(tmp_path, items, days=28, adhoc=12, last=7, min_train=21)
    for r in results:
        assert r.recurring_recall == 1.0, r
        assert r.precision >= 0.85, r


def test_cyclic_category(tmp_path: Path) -> None:
    regions = ["north", "south", "east", "west"]
    items = [
        Recurring(
            lambda d: f"SELECT SUM(amount) FROM sales WHERE region = '{regions[d % 4]}'", daily, kind="report"
        ),
        Recurring(lambda d: f"SELECT COUNT(*) FROM claims WHERE grade = {d % 5}", daily, kind="report"),
    ] + [Recurring(const(s), daily) for s in _panels(4)]
    for r in _run(tmp_path, items, days=24, adhoc=12, last=6, min_train=14):
        assert r.recurring_recall == 1.0, r
        assert r.precision >= 0.85, r


def test_one_offs_only_give_an_empty_prediction(tmp_path: Path) -> None:
    for r in _run(tmp_path, [], days=12, adhoc=25, last=3):
        assert r.p_size <= 1
        assert r.s_true > 0 and abs(r.s_estimate - r.s_true) <= 0.3 * r.s_true


@pytest.mark.parametrize("q", [0.9])
def test_flaky_panels_still_predicted(tmp_path: Path, q: float) -> None:
    """Panels that are skipped on some days are still worth predicting (p ~ q)."""
    items = [Recurring(const(s), daily, q=q) for s in _panels(10)]
    for r in _run(tmp_path, items, days=16, adhoc=10, last=4):
        assert r.recurring_recall == 1.0
        assert r.p_size == 10


def test_start_date_is_monday() -> None:
    assert synth.START == date(2026, 3, 2) and synth.START.weekday() == 0


@pytest.mark.slow
def test_busy_ad_hoc_templates_make_no_chance_progressions(tmp_path: Path) -> None:
    """Dozens of ad hoc instances a day per template: some pairs and triples line up by chance; only
    the real counters may come out as progressions."""
    items = [Recurring(const(s), daily) for s in _panels(5)]
    items += [
        Recurring(
            lambda d, k=k: f"SELECT SUM(amount) FROM sales WHERE batch = {k * 1000 + d}", daily, kind="report"
        )
        for k in range(2)
    ]
    rows = synth.generate(items, 14, adhoc_per_day=80, seed=11)
    log = tmp_path / "busy.log"
    log.write_text(synth.to_stderr(rows))
    statements, _ = read_log(log)
    epochs, _, _ = bucket(statements)
    sqls = sorted(q.sql for q in train(epochs).queries)
    assert sqls == sorted(
        _panels(5) + [f"SELECT SUM(amount) FROM sales WHERE batch = {k * 1000 + 14}" for k in range(2)]
    )
