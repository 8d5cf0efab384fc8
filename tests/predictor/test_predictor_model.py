"""Model details: catalog domains, hedged wraps, hourly epochs, snapshots, declared templates, the cut-off."""

from __future__ import annotations

import random
from datetime import datetime, timedelta

from parser.model.schema import Attribute, Catalog, IntType, TableSchema
from predictor.logs import LogStatement
from predictor.predict import bucket, train
from predictor.recurrence import fit_prior
from predictor.utility import CostModel, choose_cut

T0 = datetime(2026, 5, 4)  # a Monday


def _st(day: float, sql: str) -> LogStatement:
    return LogStatement(T0 + timedelta(days=day), "u", "db", sql, 1)


def _cycle_log(days: int) -> list[LogStatement]:
    """A report whose grade goes 0..4 and wraps, next to other statements that use grades 0..4."""
    out = [
        _st(d + 0.5, f"SELECT COUNT(*) FROM exams WHERE grade = {d % 5} AND term = 7") for d in range(days)
    ]
    out += [_st(d + 0.3, "SELECT COUNT(*) FROM exams WHERE term = 7") for d in range(days)]
    out += [_st(0.1, f"SELECT AVG(score) FROM exams WHERE grade = {g}") for g in range(5)]
    return out


def _sqls(days: int, **kw: object) -> list[str]:
    epochs, undated, _ = bucket(_cycle_log(days))
    return [q.sql for q in train(epochs, **kw).queries]  # type: ignore[arg-type]


def test_wrap_is_hedged_without_a_catalog_and_settled_with_one() -> None:
    # Trained on 4 days (grades 0..3): day 5 continues to 4, well inside the values the log has used.
    assert "SELECT COUNT(*) FROM exams WHERE grade = 4 AND term = 7" in _sqls(4)
    # Trained on days with grades 0..4 and no wrap seen yet: 5 was never used by anyone, wrapping to 0 wins.
    got = _sqls(5)
    assert "SELECT COUNT(*) FROM exams WHERE grade = 0 AND term = 7" in got
    assert "SELECT COUNT(*) FROM exams WHERE grade = 5 AND term = 7" not in got
    # A declared domain 0..9 says 5 is valid: continue.
    catalog = Catalog(
        (
            TableSchema(
                "exams", (Attribute("grade", IntType(0, 9)), Attribute("term", IntType(0, 9)))
            ),
        )
    )
    epochs, _, _ = bucket(_cycle_log(5))
    with_catalog = [q.sql for q in train(epochs, catalog=catalog).queries]
    assert "SELECT COUNT(*) FROM exams WHERE grade = 5 AND term = 7" in with_catalog
    # After one wrap was seen, the cycle is learnt: 0 1 2 3 4 0 1 -> 2.
    assert "SELECT COUNT(*) FROM exams WHERE grade = 2 AND term = 7" in _sqls(7)


def test_hourly_epochs_follow_the_daily_cycle() -> None:
    rng = random.Random(5)
    log = [
        LogStatement(
            T0 + timedelta(hours=h),
            None,
            None,
            "SELECT COUNT(*) FROM jobs WHERE state = 1"
            if h % 24 == 9
            else f"SELECT COUNT(*) FROM jobs WHERE id = {rng.randrange(10**6)}",
            1,
        )
        for h in range(24 * 6)
    ]
    epochs, _, _ = bucket(log, epoch_hours=1.0)
    at_nine = train(epochs, target=24 * 6 + 9)
    at_ten = train(epochs, target=24 * 6 + 10)
    assert [q.sql for q in at_nine.queries] == ["SELECT COUNT(*) FROM jobs WHERE state = 1"]
    assert at_ten.queries == []
    assert at_nine.epoch_start == T0 + timedelta(hours=24 * 6 + 9)


def test_snapshot_and_declared_candidates() -> None:
    log = [
        LogStatement(None, None, None, "SELECT COUNT(*) FROM t WHERE a = $1", 1, calls=500),
        LogStatement(None, None, None, "SELECT COUNT(*) FROM t WHERE b = 2", 1, calls=30),
        LogStatement(None, None, None, "SELECT COUNT(*) FROM t WHERE c = 3", 1, calls=0),
    ]
    epochs, undated, counts = bucket(log)
    assert counts["used"] == 3 and len(undated) == 3
    pset = train(
        epochs,
        undated=undated,
        declared=[{"sql": "SELECT SUM(x) FROM t WHERE d = :d", "params": {"d": {"values": [1, 2]}}}],
    )
    assert [(q.sql, q.source) for q in pset.queries] == [
        ("SELECT SUM(x) FROM t WHERE d = 1", "declared"),
        ("SELECT SUM(x) FROM t WHERE d = 2", "declared"),
        ("SELECT COUNT(*) FROM t WHERE b = 2", "snapshot"),
    ]


def test_cut_off_rule() -> None:
    # auto split: threshold = pi / (1 + pi) with pi the expected precision of P.
    n, thr = choose_cut([0.95] * 10 + [0.45] * 3 + [0.05] * 50, 30.0, CostModel())
    assert n == 10 and abs(thr - 0.95 / 1.95) < 1e-9
    # Nothing likely: nothing predicted.
    assert choose_cut([0.2, 0.1], 30.0, CostModel())[0] == 0
    # A preset with a large online share makes misses dear: more goes in.
    assert choose_cut([0.95] * 10 + [0.45] * 3, 30.0, CostModel.for_split("query_heavy"))[0] == 13
    assert choose_cut([0.9, 0.6, 0.2], 5.0, CostModel(), fixed_threshold=0.5) == (2, 0.5)


def test_prior_is_u_shaped_for_a_u_shaped_population() -> None:
    prior = fit_prior([(10, 10)] * 20 + [(0, 10)] * 200)
    assert prior.a + prior.b < 1.0 and 0.05 < prior.mean < 0.2
