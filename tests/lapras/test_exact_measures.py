"""Exact answers of SUMs over a measure (each row adds its own clamped value) on a real PostgreSQL: every
exact source answers them as PostgreSQL does, whether the statement is narrow or a wide GROUP BY (which
the live source otherwise answers from a count histogram), live, per epoch snapshot or what-if snapshot."""

from __future__ import annotations

import numpy as np
import pytest

import parser as sqlparser
from lapras.exact import MARGINAL_MIN_QUERIES, PostgresExactSource
from lapras.snapshot import SnapshotExactSource
from proxy.replay.whatif.exact import SnapshotExactSource as WhatIfSnapshot

WIDE = "SELECT country, category, SUM(amount), COUNT(*) FROM events GROUP BY country, category"
NARROW = "SELECT AVG(amount) FROM events WHERE country IN ('US', 'FR') AND duration_s < 600"


def test_wide_group_by_sums_over_a_measure_are_postgresql_s(adult_db: str, default_config) -> None:
    catalog = default_config.catalog
    table = catalog.table("events")
    plan = sqlparser.plan_query(WIDE, catalog)
    sums = [q for q in plan.queries if q.measure]
    assert len(plan.queries) >= MARGINAL_MIN_QUERIES and sums  # the wide path
    src = PostgresExactSource(adult_db, bounding="live")
    try:
        got = src.answers(table, plan.queries)
    finally:
        src.close()
    # The same queries a few at a time (one aggregate per query, pushed down): what PostgreSQL sums, with
    # the table's contribution bound applied the same way (each unit's k rows of the whole table: under
    # bounding = "statement" a batch of 8 would read only its own groups' rows).
    src = PostgresExactSource(adult_db, bounding="live")
    try:
        one_by_one = np.concatenate([src.answers(table, plan.queries[i:i + 8])
                                     for i in range(0, len(plan.queries), 8)])
    finally:
        src.close()
    assert np.allclose(got, one_by_one)
    assert sum(v for q, v in zip(plan.queries, got, strict=True) if q.measure) > 0


@pytest.mark.parametrize("source", ["epoch snapshot", "what-if snapshot"])
def test_snapshots_answer_sums_over_a_measure(adult_db: str, default_config, source: str) -> None:
    catalog = default_config.catalog
    table = catalog.table("events")
    queries = list(sqlparser.plan_query(NARROW, catalog).queries)
    assert any(q.measure for q in queries)
    # The what-if replay reads each unit's k rows of the whole table (its histograms are over them), as
    # `lapras-proxy whatif` builds it; the proxy's snapshot bounds as its source does (per statement).
    bounding = "statement" if source == "epoch snapshot" else "live"
    live = PostgresExactSource(adult_db, bounding=bounding)
    snap = SnapshotExactSource(PostgresExactSource(adult_db)) if source == "epoch snapshot" else \
        WhatIfSnapshot(PostgresExactSource(adult_db, bounding="live"))
    try:
        want = live.answers(table, queries)
        assert np.allclose(snap.answers(table, queries), want)
        assert np.allclose(snap.answers(table, queries), want)  # again, from what the snapshot kept
    finally:
        live.close()
        snap.close()
    assert all(v > 0 for v in want)
