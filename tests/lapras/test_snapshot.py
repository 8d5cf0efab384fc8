"""`[lapras] snapshot = "epoch"`: exact answers from per-epoch marginal histograms, on a real PostgreSQL.

Answers equal the live aggregates; the data is as of the marginal's first use in the epoch (rows written
later appear at the next epoch); a marginal contained in one already read costs no read; memory stays
within the bound, and a marginal larger than the bound is answered live.
"""

from __future__ import annotations

import numpy as np
import psycopg
import pytest

import parser as sqlparser
from lapras.exact import PostgresExactSource
from lapras.snapshot import SnapshotExactSource
from proxy.upstream.demo_data import ensure_table

SQL = [
    "SELECT COUNT(*) FROM adult WHERE age BETWEEN 30 AND 40 AND sex = 1",
    "SELECT SUM(hours_per_week) FROM adult WHERE age >= 50",
    "SELECT AVG(capital_gain) FROM adult WHERE race IN (1, 2) AND age < 35",
    "SELECT sex, COUNT(*) FROM adult WHERE education_num > 12 GROUP BY sex",
    "SELECT COUNT(*) FROM adult WHERE age < 25",
]


@pytest.fixture
def adult(fresh_db, default_config):  # type: ignore[no-untyped-def]
    dsn = fresh_db
    table = default_config.catalog.table("adult")
    ensure_table(dsn, table, default_config.loads["adult"], None)
    return dsn, default_config.catalog, table


def _queries(catalog, sql):  # type: ignore[no-untyped-def]
    return list(sqlparser.plan_query(sql, catalog).queries)


def test_snapshot_answers_equal_live_ones_and_hold_the_epoch(adult) -> None:  # type: ignore[no-untyped-def]
    dsn, catalog, table = adult
    live = PostgresExactSource(dsn)
    snap = SnapshotExactSource(PostgresExactSource(dsn))
    snap.new_epoch(1)
    try:
        for sql in SQL:
            qs = _queries(catalog, sql)
            assert np.allclose(snap.answers(table, qs), live.answers(table, qs), rtol=1e-12, atol=1e-9), sql
        reads = snap.scans
        # (age) is inside (age, sex), read by the first statement: summed down, not read again.
        qs = _queries(catalog, "SELECT COUNT(*) FROM adult WHERE age > 60")
        assert np.allclose(snap.answers(table, qs), live.answers(table, qs))
        assert snap.scans == reads
        # Rows written after the marginal's first use reach live answers now, snapshot answers next epoch.
        qs = _queries(catalog, SQL[0])
        before = snap.answers(table, qs)
        with psycopg.connect(dsn, autocommit=True) as c:
            cols = [a.name for a in table.attributes]
            c.execute(f"INSERT INTO adult ({', '.join(cols)}) SELECT {', '.join(cols)} FROM adult "
                      "WHERE age BETWEEN 30 AND 40 AND sex = 1 LIMIT 7")
        assert live.answers(table, qs)[0] == before[0] + 7
        assert snap.answers(table, qs)[0] == before[0]
        snap.new_epoch(2)
        assert snap.answers(table, qs)[0] == before[0] + 7
    finally:
        live.close()
        snap.close()


def test_snapshot_memory_is_bounded(adult) -> None:  # type: ignore[no-untyped-def]
    dsn, catalog, table = adult
    live = PostgresExactSource(dsn)
    snap = SnapshotExactSource(PostgresExactSource(dsn), max_cells=200)
    snap.new_epoch(1)
    try:
        one_way = ["SELECT COUNT(*) FROM adult WHERE age > 40",              # 74 cells
                   "SELECT COUNT(*) FROM adult WHERE hours_per_week > 40",   # 99 cells
                   "SELECT COUNT(*) FROM adult WHERE capital_gain > 10"]     # 100 cells: evicts age
        for sql in one_way:
            snap.answers(table, _queries(catalog, sql))
            assert snap._cells <= 200
        assert snap.scans == 3
        snap.answers(table, _queries(catalog, one_way[0]))  # evicted: read again
        assert snap.scans == 4
        big = _queries(catalog, "SELECT COUNT(*) FROM adult WHERE age > 40 AND hours_per_week < 20")  # 7,326 cells
        assert np.allclose(snap.answers(table, big), live.answers(table, big))
        assert snap.scans == 4  # answered live, never kept
    finally:
        live.close()
        snap.close()


def test_engine_with_snapshot_reads_each_marginal_once_per_epoch(adult) -> None:  # type: ignore[no-untyped-def]
    """Through the config (`snapshot = "epoch"`) and the engine: fresh statements over one marginal read it
    once; a new epoch reads it again."""
    import re
    import tomllib
    from pathlib import Path

    from lapras.engine import Engine
    from lapras.ledger.memory import MemoryLedger
    from proxy.config import parse_config
    from proxy.dp.engine_factory import engine_settings, exact_source

    dsn, catalog, table = adult
    text = (Path(__file__).resolve().parents[2] / "config.toml").read_text()
    text = re.sub(r'(?m)^snapshot = "live"', 'snapshot = "epoch"', text)
    text = re.sub(r'(?m)^epoch = "daily"', 'epoch = "manual"', text)
    cfg = parse_config(tomllib.loads(text))
    exact = exact_source(cfg, dsn)
    assert isinstance(exact, SnapshotExactSource)
    engine = Engine(cfg.catalog, MemoryLedger(), exact, engine_settings(cfg, progress=False))
    try:
        for sql in ("SELECT COUNT(*) FROM adult WHERE age BETWEEN 30 AND 40 AND sex = 1",
                    "SELECT COUNT(*) FROM adult WHERE age BETWEEN 20 AND 29 AND sex = 0",
                    "SELECT COUNT(*) FROM adult WHERE age > 70 AND sex = 1"):
            assert engine.answer(sqlparser.plan_query(sql, catalog)).outcome == "bad"
        assert exact.scans == 1 and exact.hits == 2
        engine.new_epoch()
        engine.answer(sqlparser.plan_query("SELECT COUNT(*) FROM adult WHERE age < 30 AND sex = 1", catalog))
        assert exact.scans == 2
    finally:
        engine.close()
