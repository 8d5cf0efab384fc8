"""Two real proxies on one upstream with the shipped `events` table (privacy unit, k = 10): its bounded
rows are materialised once per epoch in the upstream's `lapras` schema, shared by both proxies and by a
restart, answers through either equal PostgreSQL's over each unit's k rows among those the statement's WHERE
keeps (``bounding = "statement"``, the default; epsilon large enough that noise is negligible),
and the materialisation is out of the analyst's reach: no name of it resolves or shows through the proxy."""

from __future__ import annotations

import time
from typing import Any

import psycopg
import pytest

from parser.pushdown.bounding import bounded_rows_sql
from parser.pushdown.sql import EXACT_SESSION_SQL

WHERE = "category = 'search' AND duration_s < {n}"
SQL = "SELECT count(*) FROM events WHERE " + WHERE


def _wait_for_build(dsn: str, timeout: float = 60.0) -> list[tuple[Any, ...]]:
    deadline = time.monotonic() + timeout
    while True:
        with psycopg.connect(dsn, autocommit=True) as conn:
            if conn.execute("SELECT to_regclass('lapras.bounded_tables')").fetchone()[0] is not None:
                # events' own (the shop's orders, the other table with a privacy unit, gets its own too)
                rows = conn.execute("SELECT epoch_id, relname, created_at FROM lapras.bounded_tables "
                                    "WHERE source = '\"public\".\"events\"'").fetchall()
                if rows:
                    return rows
        assert time.monotonic() < deadline, "the epoch preparer did not materialise events"
        time.sleep(0.2)


def test_two_proxies_share_the_epochs_bounded_rows_out_of_the_analysts_reach(
        harness: Any, embedded_pg: Any, default_config: Any, tmp_path: Any) -> None:
    dsn = harness.demo_database(embedded_pg, default_config, "bw")
    events = next(t for t in default_config.catalog.tables if t.name == "events")
    proxies = []
    for i in range(2):
        port = harness.free_port()
        cfg = tmp_path / f"config{i}.toml"
        cfg.write_text(harness.make_test_config(dsn, port, epsilon=1e5, stream_length=1000))
        proxies.append(harness.ProxyProcess(cfg, tmp_path / f"state{i}", port))
    try:
        for p in proxies:
            p.start()
        meta = _wait_for_build(dsn)
        assert len(meta) == 1  # one table of events, whichever proxy built it
        epoch, relname, created = meta[0]
        with psycopg.connect(dsn, autocommit=True) as conn:
            for s in EXACT_SESSION_SQL:
                conn.execute(s)
            truth = {n: conn.execute(f"SELECT count(*) FROM ({bounded_rows_sql(events, where=WHERE.format(n=n))}) "
                                     "AS e").fetchone()[0] for n in (600, 1200)}
        for p, n in zip(proxies, (600, 1200), strict=True):
            with psycopg.connect(p.dsn(), autocommit=True) as c:
                got = c.execute(SQL.format(n=n)).fetchone()[0]
                assert abs(got - truth[n]) <= 2, (got, truth[n])  # epsilon 1e5: noise well under 1
        # A regression over events scans the materialised rows too (its sequential scans rise).
        def scans() -> int:
            with psycopg.connect(dsn, autocommit=True) as conn:
                return int(conn.execute("SELECT coalesce(seq_scan, 0) FROM pg_stat_user_tables WHERE "
                                        "schemaname = 'lapras' AND relname = %s", (relname,)).fetchone()[0])

        before = scans()
        with psycopg.connect(proxies[1].dsn(), autocommit=True) as c:
            rows = c.execute("SELECT * FROM lapras.linear_regression('events', 'amount', 'duration_s', 'adassp', 1.0)").fetchall()
        assert [r[0] for r in rows] == ["intercept", "duration_s"]
        deadline = time.monotonic() + 10
        while scans() == before:
            assert time.monotonic() < deadline, "the regression did not read the materialised table"
            time.sleep(0.2)
        # The analyst cannot name it, list it or find it in the catalog.
        with psycopg.connect(proxies[0].dsn(), autocommit=True) as c:
            for sql in (f'SELECT count(*) FROM lapras."{relname}"', f'SELECT * FROM lapras."{relname}"',
                        "SELECT count(*) FROM lapras.bounded_tables", "SELECT * FROM lapras.epochs"):
                with pytest.raises(psycopg.Error) as err:
                    c.execute(sql)
                assert err.value.sqlstate in ("42P01", "42501", "3F000"), (sql, err.value.sqlstate)
            assert c.execute("SELECT count(*) FROM information_schema.tables "
                             "WHERE table_schema = 'lapras' OR table_name LIKE 'bounded%'").fetchone()[0] == 0
            assert c.execute("SELECT count(*) FROM pg_catalog.pg_class "
                             "WHERE relname LIKE 'bounded%'").fetchone()[0] == 0
            assert c.execute("SELECT count(*) FROM pg_catalog.pg_namespace "
                             "WHERE nspname = 'lapras'").fetchone()[0] == 0
        # A restart in the same epoch reads the same table: nothing is built again.
        proxies[0].stop()
        proxies[0].start()
        with psycopg.connect(proxies[0].dsn(), autocommit=True) as c:
            c.execute(SQL.format(n=900)).fetchone()
        with psycopg.connect(dsn, autocommit=True) as conn:
            assert conn.execute("SELECT epoch_id, relname, created_at FROM lapras.bounded_tables "
                                "WHERE source = '\"public\".\"events\"'").fetchall() == meta
    finally:
        for p in proxies:
            p.stop()
