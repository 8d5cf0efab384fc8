"""Exact answers of SUMs over a measure (each row adds its own clamped value) on a real PostgreSQL: every
exact source answers them as PostgreSQL does, whether the statement is narrow or a wide GROUP BY (which
the live source otherwise answers from a count histogram), live, per epoch snapshot or what-if snapshot."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import numpy as np
import psycopg
import pytest

import parser as sqlparser
from lapras.engine.statements import table_of
from lapras.exact import MARGINAL_MIN_QUERIES, PostgresExactSource
from lapras.snapshot import SnapshotExactSource
from parser.coltypes import from_config
from parser.model.schema import Attribute, Catalog, TableSchema
from parser.pushdown.sql import answers_sql
from proxy.replay.whatif.exact import SnapshotExactSource as WhatIfSnapshot
from tests.fixtures.databases import fill_table

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


HOUR_OF_DAY = [
    "SELECT extract(hour FROM ts) AS h, SUM(amount), AVG(amount) FROM events WHERE country = 'FR' GROUP BY 1",
    "SELECT extract(hour FROM ts) AS h, SUM(duration_s) FROM events WHERE category = 'share' GROUP BY 1",
    "SELECT to_char(ts, 'Day') AS d, category, SUM(amount) FROM events WHERE amount > 100 GROUP BY 1, 2",
]


@pytest.mark.parametrize("sql", HOUR_OF_DAY)
def test_sums_over_scattered_cells_are_one_group_by(sql: str, adult_db: str, default_config: Any,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """SUMs grouped by hour of day (365 ranges of hourly cells a group) are read from one GROUP BY over the
    cells, with per cell the count and each summed column's sum, not as per-query CASEs listing every
    range (24 x 365 of them, a minute on 100,000 rows): the same answers as that per-query SQL."""
    catalog = default_config.catalog
    plan = sqlparser.plan_query(sql, catalog)
    table = table_of(plan, catalog)
    assert table is not None and any(q.value for q in plan.queries)
    src = PostgresExactSource(adult_db, bounding="live")  # each unit's k rows of the whole table, both ways
    sent: list[str] = []
    conn = src._conn()

    class Recorder:
        closed = False

        def execute(self, query: str, *args: Any) -> Any:
            sent.append(query)
            return conn.execute(query, *args)

    try:
        with monkeypatch.context() as m:
            m.setattr(src, "_conn", Recorder)
            got = src.answers(table, plan.queries)
        per_query = conn.execute(answers_sql(table, list(plan.queries))).fetchone()
    finally:
        src.close()
    assert np.allclose(got, np.asarray(per_query, dtype=np.float64), rtol=1e-9, atol=1e-6)
    answers = [s for s in sent if "pg_get_partkeydef" not in s]
    assert len(answers) == 1 and "GROUP BY" in answers[0] and len(answers[0]) < 20_000, answers


LOGS = TableSchema("logs", (
    Attribute("ts", from_config({"type": "timestamp", "min": "2026-01-01T00:00:00", "max": "2026-03-31T23:59:59",
                                 "resolution": "hour"})),
    Attribute("page", from_config({"type": "text", "values": ["home", "cart"], "nullable": True})),
    Attribute("latency", from_config({"type": "int", "min": 0, "max": 5000, "nullable": True})),
    Attribute("revenue", from_config({"type": "numeric", "min": 0, "max": 200, "bins": 10, "nullable": True})),
), privacy_unit="uid", max_rows_per_unit=5)


@pytest.mark.parametrize("sql", [
    "SELECT extract(hour FROM ts) AS h, AVG(latency), COUNT(latency), COUNT(*) FROM logs GROUP BY 1",
    "SELECT extract(dow FROM ts) AS d, page, AVG(revenue), SUM(latency) FROM logs WHERE page IS NOT NULL "
    "OR revenue > 100 GROUP BY 1, 2",
])
def test_averages_of_nullable_columns_by_scattered_cells(sql: str, fresh_db: str) -> None:
    """AVG(col) of a nullable column is SUM(col) / COUNT(col): COUNT(col) is read from the non-NULL counts
    per cell, as the SUM from the sums per cell (4,000 hour cells by 5,002 latency cells would be too many
    to read back): one GROUP BY, the per-query SQL's answers (NULLs, values outside the list, each unit's k
    rows)."""
    rows = [(datetime(2026, 1, 1) + timedelta(seconds=i * 1297 % (90 * 86400)), i % 400,
             None if i % 7 == 0 else ("home", "cart", "other")[i % 3], None if i % 5 == 0 else i * 31 % 6000,
             None if i % 3 else i * 13 % 25000 / 100) for i in range(6000)]
    with psycopg.connect(fresh_db) as conn:
        fill_table(conn, "logs (ts timestamp, uid bigint, page text, latency int, revenue numeric)", rows)
    plan = sqlparser.plan_query(sql, Catalog((LOGS,)))
    table = table_of(plan, Catalog((LOGS,)))
    assert table is not None
    src = PostgresExactSource(fresh_db, bounding="live")
    try:
        got = src._answers_by_cells(table, plan.queries)
        per_query = src._conn().execute(answers_sql(table, list(plan.queries))).fetchone()
    finally:
        src.close()
    assert got is not None
    assert np.allclose(got, np.asarray(per_query, dtype=np.float64), rtol=1e-9, atol=1e-6)
