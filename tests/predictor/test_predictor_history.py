"""Learning P and S from the proxy's own statement history (predictor/history.py): one bucket per ledger
epoch, repeats left out of S, a first epoch's re-asked statements as P, a sliding-window dashboard's next
panels predicted, and S of an epoch still running taken from the completed ones."""

from __future__ import annotations

import datetime as dt

import pytest

from lapras.ledger.base import EpochSpan, HistoryRow
from predictor.canonical import canonical_key
from predictor.history import inline_params, learn
from proxy.config import load_config

CATALOG = load_config("config.toml").catalog


def panels(day: int, suffix: str = "") -> list[str]:
    """The dashboard on ``day``; ``suffix`` after each bound's date (a time and offset, as BI tools send)."""
    lo = f"{dt.date(2026, 10, 1) + dt.timedelta(days=day)}{suffix}"
    hi = f"{dt.date(2026, 10, 1) + dt.timedelta(days=day + 28)}{suffix}"
    return [f"SELECT country, count(*) FROM events WHERE ts >= '{lo}' AND ts < '{hi}' GROUP BY country",
            f"SELECT category, sum(amount) FROM events WHERE ts >= '{lo}' AND ts < '{hi}' GROUP BY category",
            f"SELECT count(*) FROM events WHERE ts >= '{lo}' AND ts < '{hi}' AND country = 'DE'"]


def _keys(sqls: list[str]) -> set[str | None]:
    return {canonical_key(s, CATALOG) for s in sqls}


def test_inline_params_leaves_quoted_text_alone() -> None:
    sql = "SELECT count(*) FROM adult WHERE age >= $1 AND note = '$2' AND sex = $2 AND x = $10"
    out = inline_params(sql, [30, "it's", None, None, None, None, None, None, None, True])
    assert out == "SELECT count(*) FROM adult WHERE age >= 30 AND note = '$2' AND sex = 'it''s' AND x = TRUE"


def test_first_epoch_predicts_what_was_asked_again_and_counts_items() -> None:
    again = ["SELECT count(*) FROM adult WHERE age BETWEEN 30 AND 39", "SELECT sex, count(*) FROM adult GROUP BY sex"]
    once = "SELECT count(*) FROM adult WHERE hours_per_week >= 40"
    rows = [HistoryRow(1, 1, s, None, "bad") for s in again] + [HistoryRow(1, 2, once, None, "bad")]
    rows += [HistoryRow(1, 3, s, None, "repeat") for s in again]
    ps = learn([EpochSpan(1, 0.0, 100.0)], rows, CATALOG, epoch_seconds=None, now=200.0)
    assert ps is not None
    assert ps.s_estimate == 3  # repeats are no stream items
    assert {q.canonical_key for q in ps.queries} == _keys(again)
    assert abs(ps.rho_estimate - 2 / 3) < 1e-3


@pytest.mark.parametrize("suffix", ["", " 00:00:00", " 00:00:00+00", "T00:00:00Z", " 00:00:00+02:00"])
def test_sliding_window_dashboard_is_predicted_one_step_ahead(suffix: str) -> None:
    """Date and timestamp bounds, with or without a UTC offset (a timestamptz literal as psycopg or a BI
    tool writes it: '2025-11-04 00:00:00+00'; it was read as text, so no progression was learnt)."""
    spans, rows = [], []
    for day in range(5):
        spans.append(EpochSpan(day + 1, day * 300.0, day * 300.0 + 300))
        rows += [HistoryRow(day + 1, day * 300 + 1, s, None, "bad") for s in panels(day, suffix)]
        rows += [HistoryRow(day + 1, day * 300 + 2, s, None, "repeat") for s in panels(day, suffix)]
    ps = learn(spans, rows, CATALOG, epoch_seconds=None, now=1600.0)
    assert ps is not None
    assert _keys(panels(5, suffix)) <= {q.canonical_key for q in ps.queries}
    assert ps.s_estimate == 3


def test_s_of_a_running_epoch_comes_from_the_completed_ones() -> None:
    spans = [EpochSpan(i + 1, i * 3600.0, (i + 1) * 3600.0) for i in range(4)] + [EpochSpan(5, 4 * 3600.0, None)]
    rows = [HistoryRow(i + 1, i * 3600 + k, f"SELECT count(*) FROM adult WHERE age BETWEEN {20 + k} AND 60", None, "bad")
            for i in range(4) for k in range(10)]
    rows += [HistoryRow(5, 4 * 3600 + k, f"SELECT count(*) FROM adult WHERE age BETWEEN {20 + k} AND 60", None, "bad") for k in range(3)]
    ps = learn(spans, rows, CATALOG, epoch_seconds=3600.0, now=4 * 3600 + 3300.0)  # prepared ahead: 92% of the epoch gone
    assert ps is not None and ps.s_estimate == 10


def test_a_zoned_sliding_window_is_predicted_in_its_zone() -> None:
    """Statements recorded with the session's TimeZone (Europe/Berlin, across its March 2026 change) are
    learnt and predicted in it: P's texts, planned as the engine plans P, give the next epoch's Berlin day
    cells, none of UTC's (false-failure rate 0)."""
    from lapras.engine.prediction import prediction_from_sql
    from parser import plan_query
    from parser.semantics.session_zone import using_zone
    from parser.semantics.zones import session_setting

    def zoned(day: int) -> list[str]:
        lo = dt.date(2026, 3, 1) + dt.timedelta(days=day)
        hi = lo + dt.timedelta(days=7)
        return [f"SELECT date_trunc('day', ts) AS d, count(*) FROM events WHERE ts >= '{lo}' AND ts < '{hi}' "
                "GROUP BY 1", f"SELECT count(*) FROM events WHERE ts >= '{lo}' AND ts < '{hi}'"]

    spans = [EpochSpan(d + 1, d * 300.0, d * 300.0 + 300) for d in range(5)]
    rows = [HistoryRow(d + 1, d * 300 + 1, s, None, "bad", "Europe/Berlin") for d in range(5) for s in zoned(d)]
    ps = learn(spans, rows, CATALOG, epoch_seconds=None, now=1600.0)
    assert ps is not None
    got = {q.key for q in prediction_from_sql([q.sql for q in ps.queries], 2, None, CATALOG).queries}
    with using_zone(session_setting("Europe/Berlin")):
        berlin = {q.key for s in zoned(5) for q in plan_query(s, CATALOG).queries}
    utc = {q.key for s in zoned(5) for q in plan_query(s, CATALOG).queries}
    assert berlin <= got and not utc & got
