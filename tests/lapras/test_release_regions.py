"""P's release under ``bounding = "statement"`` on the real embedded PostgreSQL: a marginal's predicted
queries are split into one group per region (the cells one predicted statement reads), each bounding a
unit's k rows among its own cells, so a windowed query answered from P carries the fresh statement's bias
and no more, however long a year-to-date statement of the same marginal reads; a group bounded over more
cells than the asking statement reads is never used for it; and the joint sensitivity still bounds what one
unit moves across all the groups (docs/bounding.md)."""

from __future__ import annotations

import numpy as np
import pytest

import parser as sqlparser
from lapras import Engine, EngineSettings, MemoryLedger
from lapras.engine import prediction_from_sql
from lapras.exact import PostgresExactSource
from lapras.matrix_mechanism import MMRelease, StatementCells, joint_sensitivity
from parser.model.schema import Attribute, Catalog, IntType, TableSchema
from tests.fixtures.engine_helpers import events_database, light_units, release_engine, release_histograms

K = 13
EVENTS = TableSchema("events", (Attribute("day", IntType(0, 363)), Attribute("kind", IntType(0, 4)),
                                Attribute("amount", IntType(0, 99))), privacy_unit="user_id", max_rows_per_unit=K)
CATALOG = Catalog((EVENTS,))
WINDOW = "SELECT day, count(*) FROM events WHERE day BETWEEN 200 AND 227 GROUP BY day"
WINDOW_TOTAL = "SELECT count(*) FROM events WHERE day BETWEEN 200 AND 227"
WEEK = "SELECT count(*) FROM events WHERE day BETWEEN 221 AND 227"
YTD = "SELECT count(*) FROM events WHERE day BETWEEN 0 AND 227"
HEAVY = 150


def _rows(drop: int | None = None) -> list[tuple[int | None, int, int, int]]:
    """150 heavy units with a row every day (28 in the window: k = 13 of them count fresh) and 600 light
    ones with 1-6 rows over the year; ``drop``: without that unit (a neighbouring database)."""
    rng = np.random.default_rng(5)
    rows: list[tuple[int | None, int, int, int]] = []
    for u in range(HEAVY):
        rows += [(u, d, int(rng.integers(0, 5)), int(rng.integers(0, 100))) for d in range(364)]
    rows += light_units(rng, HEAVY)
    return [r for r in rows if r[0] != drop]


@pytest.fixture(scope="module")
def daily(embedded_pg) -> str:
    return events_database(embedded_pg, "regions_daily", _rows())


@pytest.fixture(scope="module")
def without_heavy(embedded_pg) -> str:
    return events_database(embedded_pg, "regions_minus", _rows(drop=7))


def _engine(src: PostgresExactSource, by_statement: bool) -> Engine:
    pred = prediction_from_sql([WINDOW, WINDOW_TOTAL, WEEK, YTD], 10, 1.0, CATALOG)
    if not by_statement:
        pred = type(pred)(pred.queries, pred.s_estimate, pred.rho_estimate, pred.source)  # no statements
    return release_engine(CATALOG, src, pred)




def _noise_free(rel: MMRelease, hists: list[np.ndarray], sql: str) -> np.ndarray:
    """The statement's answers from P's release with no noise, chosen by the engine's own rule."""
    exact = MMRelease(rel.groups, [g.strategy.measure(x) for g, x in zip(rel.groups, hists, strict=True)],
                      rel.sigma, rel.cost, rel.cells)
    sizes = {a.name: a.domain.size for a in EVENTS.attributes}
    qs = [q for q in sqlparser.plan_query(sql, CATALOG).queries if not q.is_zero]
    reads = StatementCells([(tuple(q.marginal), q.factors(EVENTS)) for q in qs], sizes)
    out = []
    for q in qs:
        est = exact.estimate("events", tuple(q.marginal), q.factors(EVENTS), sizes, reads)
        assert est is not None, sql
        out.append(est[0])
    return np.array(out)


def test_a_windowed_query_from_p_is_the_fresh_statement_bounded_answer(daily: str) -> None:
    """P of four statements over the day marginal (a 28-day window by day and in total, its last 7 days,
    the year to date): three groups, one per region read; each statement's noise-free answer from P equals
    the fresh statement-bounded answer exactly (28 daily counts: k = 13 of a heavy unit's 28 window rows),
    and the proxy answers all four from P within 1% of it. One group over the year to date (the marginal's
    union) kept 13 of a heavy unit's 228 rows: its windowed total is 91% low, and it is not used."""
    src = PostgresExactSource(daily)
    eng = _engine(src, by_statement=True)
    rel = eng._mm
    assert rel is not None
    assert sorted(int(c.sum()) for c in rel.cells if c is not None) == [7, 28, 228]
    hists = release_histograms(src, rel, EVENTS)
    for sql in (WINDOW, WINDOW_TOTAL, WEEK, YTD):
        plan = sqlparser.plan_query(sql, CATALOG)
        fresh = src.answers(EVENTS, [q for q in plan.queries if not q.is_zero])
        assert np.allclose(_noise_free(rel, hists, sql), fresh, rtol=1e-9, atol=1e-6), sql
        a = eng.answer(plan, "u")
        assert a.outcome == "good" and a.cost is None and a.predicted, sql
        assert np.abs(a.values[~np.isnan(a.values)].sum() - fresh.sum()) < 0.01 * fresh.sum(), sql
    total = src.answers(EVENTS, [q for q in sqlparser.plan_query(WINDOW_TOTAL, CATALOG).queries if not q.is_zero])[0]
    assert total > HEAVY * K  # light units' rows too
    src.close()


def test_a_group_bounded_over_more_cells_than_the_statement_reads_is_not_used(daily: str) -> None:
    """Without the statements (one group per marginal: the year to date's union), the window's statements
    are answered fresh, not from the year-bounded group; the year to date itself still comes from P."""
    src = PostgresExactSource(daily)
    eng = _engine(src, by_statement=False)
    rel = eng._mm
    assert rel is not None and len(rel.groups) == 1 and int(rel.cells[0].sum()) == 228  # type: ignore[union-attr]
    hists = release_histograms(src, rel, EVENTS)
    exact = MMRelease(rel.groups, [rel.groups[0].strategy.measure(hists[0])], rel.sigma, rel.cost, rel.cells)
    sizes = {a.name: a.domain.size for a in EVENTS.attributes}
    window = [q for q in sqlparser.plan_query(WINDOW_TOTAL, CATALOG).queries if not q.is_zero]
    biased = exact.estimate("events", tuple(window[0].marginal), window[0].factors(EVENTS), sizes)
    fresh = src.answers(EVENTS, window)[0]
    assert biased is not None and biased[0] < 0.5 * fresh  # what the rule keeps out: year-wide k rows
    for sql, outcome in ((WINDOW, "bad"), (WEEK, "bad"), (YTD, "good")):
        assert eng.answer(sqlparser.plan_query(sql, CATALOG), "u").outcome == outcome, sql
    src.close()


def test_one_unit_moves_the_split_release_by_at_most_its_joint_sensitivity(daily: str, without_heavy: str) -> None:
    """Red team: removing a heavy unit (a row every day) changes each group's histogram by at most k rows,
    k in each group (the groups bound it separately), and the stacked, weighted measurements by at most the
    joint sensitivity the release is calibrated on (per group k times its column norm, added in squares)."""
    src, minus = PostgresExactSource(daily), PostgresExactSource(without_heavy)
    eng = _engine(src, by_statement=True)
    rel = eng._mm
    assert rel is not None and len(rel.groups) == 3
    moved = []
    for g, x, y in zip(rel.groups, release_histograms(src, rel, EVENTS), release_histograms(minus, rel, EVENTS), strict=True):
        assert 0 < np.abs(x - y).sum() <= K
        moved.append(g.weight * g.strategy.measure(x - y))
    shift = float(np.linalg.norm(np.concatenate(moved)))
    bound = joint_sensitivity(rel.groups, {"events": K})
    assert shift <= bound + 1e-9
    src.close()
    minus.close()


def test_the_split_counts_only_statements_the_release_answers_whole(daily: str) -> None:
    """rho (the share of the epoch's statements predicted) is scaled by the share of P's statements the
    release answers whole: a predicted SUM over a measure is answered fresh all the same, so with one count
    statement and one SUM statement predicted at rho = 1 the epoch plans for half of its statements good."""
    from parser.coltypes.numeric import NumericType

    measured = TableSchema("events", (*EVENTS.attributes[:2], Attribute("amount", NumericType(lo=0.0, hi=99.0))),
                           privacy_unit="user_id", max_rows_per_unit=K)
    catalog = Catalog((measured,))
    src = PostgresExactSource(daily)
    pred = prediction_from_sql([WINDOW, "SELECT sum(amount) FROM events WHERE day BETWEEN 200 AND 227"], 10, 1.0,
                               catalog)
    assert len(pred.statements) == 2 and any(q.measure for q in pred.queries)
    eng = Engine(catalog, MemoryLedger(), src,
                 EngineSettings(epsilon=1e4, split="matrix_heavy", rho_estimate=1.0, joint_max_cells=0,
                                mm_time_limit=2.0),
                 predictions=lambda _c: pred)
    ep = eng._epoch
    assert ep is not None and ep.spec.rho_estimate == 0.5
    src.close()
