"""The stream length S on a log with a weekly pattern: weekday-only dashboards and analysts who mostly work
Monday to Friday. The last week of a 5-week log, each day predicted from the days before it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from predictor.backtest import backtest
from predictor.logs import read_log
from predictor.predict import bucket, train
from predictor.volume import LevelModel, forecast, level_models
from tests.fixtures import predictor_synth as synth
from tests.fixtures.predictor_synth import Recurring, business, const, daily, weekly


def _weekly_log(tmp_path: Path, seed: int) -> Path:
    items = (
        [Recurring(const(f"SELECT COUNT(*) FROM orders WHERE status = {i}"), business) for i in range(30)]
        + [Recurring(const(f"SELECT COUNT(*) FROM stock WHERE site = {i}"), daily) for i in range(5)]
        + [Recurring(const(f"SELECT SUM(amount) FROM sales WHERE region_id = {i}"), weekly(0))
           for i in range(10)]
    )
    rows = synth.generate(items, 35, seed=seed, adhoc_by_weekday=(25, 20, 20, 20, 15, 3, 2))
    log = tmp_path / f"weekly{seed}.log"
    log.write_text(synth.to_stderr(rows))
    return log


@pytest.mark.slow  # a backtest (7 retrainings) over two 35-day logs: a statistical run
def test_s_per_weekday_within_15_percent_over_the_last_week(tmp_path: Path) -> None:
    for seed in (0, 1):
        statements, _ = read_log(_weekly_log(tmp_path, seed))
        last = backtest(statements, min_train=28)  # the last week: days 29-35
        assert len(last) == 7
        err = sum(abs(r.s_estimate - r.s_true) / r.s_true for r in last) / len(last)
        assert err <= 0.15, (seed, [(r.day, r.s_estimate, r.s_true) for r in last])
        # Weekends are quiet and predicted so: S on Saturday well under S on Monday.
        by_day = {r.day: r.s_estimate for r in last}
        assert by_day["2026-04-04"] < 0.3 * by_day["2026-03-30"]


def test_calendar_model_chosen_only_when_the_log_has_a_pattern(tmp_path: Path) -> None:
    statements, _ = read_log(_weekly_log(tmp_path, 3))
    epochs, _, _ = bucket(statements)
    assert train(epochs).stats["residual_volume"]["model"] in ("weekday", "weekly")
    # The same number of one-offs every day of the week: no calendar pattern to find.
    flat = synth.generate([], 35, seed=4, adhoc_by_weekday=(15,) * 7)
    log = tmp_path / "flat.log"
    log.write_text(synth.to_stderr(flat))
    epochs, _, _ = bucket(read_log(log)[0])
    assert train(epochs).stats["residual_volume"]["model"] == "daily"


def test_forecast_follows_a_weekly_series_and_ignores_noise() -> None:
    weekday_of = lambda i: i % 7  # noqa: E731 - epoch 0 is a Monday
    models = level_models(weekday_of)
    series = [float([20, 20, 20, 20, 20, 2, 2][i % 7]) for i in range(28)]
    f = forecast(series, 33, models)  # a Saturday
    assert f.model in ("weekday", "weekly") and f.value == 2.0
    assert forecast(series, 35, models).value == 20.0  # a Monday
    # Poisson noise around one level: the flat model in nearly every draw (the margin guards chance).
    rng = np.random.default_rng(5)
    flat = [forecast(list(rng.poisson(15.0, 28).astype(float)), 28, models).model for _ in range(40)]
    assert flat.count("daily") >= 30
    # An hourly log: the hour-of-day cycle is one of the candidates.
    hourly = level_models(None, 1.0)
    assert [m.name for m in hourly] == ["daily", "hour-of-day", "hour-of-week"]
    assert isinstance(hourly[1], LevelModel) and hourly[1].classify(25) == 1
