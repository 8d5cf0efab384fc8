"""The dev cluster as a user gets it from `lapras-proxy dev-cluster`: sharded layout, private and
password-protected servers, and the proxy's exact-answer SQL pushed down whole to each shard with answers
equal to a single PostgreSQL's on the same data."""

from __future__ import annotations

import json
import stat
import subprocess

import numpy as np
import psycopg
import pytest

from lapras.exact import PostgresExactSource, partition_key_sql
from parser import plan_query
from parser.model.schema import Attribute, Catalog, IntType, TableSchema, TextType
from proxy.config import load_config
from proxy.upstream.events_data import CATEGORIES, COUNTRIES

from .conftest import REPO, ROWS, Running, is_root

ADULT = load_config(REPO / "config.toml").catalog.table("adult")
# events as the parser can declare it today (integer and text domains only).
EVENTS = TableSchema("events", (
    Attribute("category", TextType(values=tuple(c[0] for c in CATEGORIES))),
    Attribute("country", TextType(values=tuple(c[0] for c in COUNTRIES))),
    Attribute("duration_s", IntType(0, 3600)),
))
CATALOG = Catalog((ADULT, EVENTS)) if ADULT is not None else Catalog((EVENTS,))

STATEMENTS = [
    "SELECT count(*) FROM adult",
    "SELECT sex, count(*), avg(hours_per_week) FROM adult WHERE age BETWEEN 30 AND 50 GROUP BY sex",
    "SELECT race, sum(capital_gain) FROM adult WHERE education_num >= 10 OR income_gt_50k = 1 GROUP BY race",
    "SELECT count(*) FROM events WHERE category = 'purchase'",
    "SELECT country, count(*), sum(duration_s) FROM events WHERE duration_s < 600 GROUP BY country",
    "SELECT category, avg(duration_s) FROM events GROUP BY category",
]


def test_start_prints_the_dsn_last_and_leaves_servers_running(sharded_cluster: Running) -> None:
    status = sharded_cluster.cli("status").stdout.splitlines()
    assert status[-1] == sharded_cluster.dsn
    assert [line.split(":")[0].strip() for line in status[:-1]] == ["coordinator", "shard1", "shard2"]
    assert all(": running" in line for line in status[:-1])
    # Starting again reuses the running cluster and prints the same DSN; other sizes are refused.
    again = sharded_cluster.cli("start", "--shards", "2", "--rows", str(ROWS)).stdout.splitlines()[-1]
    assert again == sharded_cluster.dsn
    other = sharded_cluster.cli("start", "--shards", "3", "--rows", str(ROWS), check=False)
    assert other.returncode == 1 and "holds a cluster of 2 shard(s)" in other.stderr


def test_servers_are_private(sharded_cluster: Running) -> None:
    root = sharded_cluster.state_dir
    assert stat.S_IMODE(root.stat().st_mode) == 0o700
    state = json.loads((root / "cluster.json").read_text())
    assert state["shards"] == 2 and state["loaded"]
    for name in ("coordinator", "shard1", "shard2"):
        hba = (root / name / "pg_hba.conf").read_text()
        assert "trust" not in hba.replace("never trust", "") and "host " not in hba
    without_password = sharded_cluster.dsn.replace(" password=", " x=").split(" x=")[0] + " dbname=lapras"
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(without_password, connect_timeout=5).close()
    if is_root():
        # Another local OS account cannot even reach the socket, password or not.
        host = sharded_cluster.dsn.split("host=")[1].split()[0]
        done = subprocess.run(["su", "-s", "/bin/sh", "nobody", "-c",
                               f"ls {host} >/dev/null 2>&1 && echo reachable || echo denied"],
                              capture_output=True, text=True, timeout=30)
        assert done.stdout.strip() == "denied"


def test_tables_are_hash_partitioned_over_the_shards(sharded_cluster: Running) -> None:
    with psycopg.connect(sharded_cluster.dsn) as conn:
        assert conn.execute("SHOW enable_partitionwise_aggregate").fetchone()[0] == "on"
        options = conn.execute("SELECT srvname, srvoptions FROM pg_foreign_server ORDER BY 1").fetchall()
        assert [o[0] for o in options] == ["shard1", "shard2"]
        assert all("async_capable=true" in o[1] for o in options)
        key = conn.execute("SELECT pg_get_partkeydef('events'::regclass)").fetchone()[0]
        assert "hashint8(user_id)" in key
        per_part = dict(conn.execute("SELECT tableoid::regclass::text, count(*) FROM events GROUP BY 1").fetchall())
        assert sum(per_part.values()) == ROWS and min(per_part.values()) > ROWS / 4
        # A user's rows live on one shard only.
        assert conn.execute("SELECT max(n) FROM (SELECT count(DISTINCT tableoid) n FROM events GROUP BY user_id) s"
                            ).fetchone()[0] == 1
        assert conn.execute("SELECT count(*) FROM adult").fetchone()[0] > 40_000


def _exact_answers(dsn: str) -> list[np.ndarray]:
    source = PostgresExactSource(dsn)
    try:
        out = []
        for text in STATEMENTS:
            plan = plan_query(text, CATALOG)
            table = CATALOG.table(plan.table)
            assert table is not None
            out.append(source.answers(table, plan.queries))
        out.append(source.marginal(EVENTS, ("category", "country")))
        out.append(source.marginal(EVENTS, ()))
        if ADULT is not None:
            out.append(source.marginal(ADULT, ("sex", "race")))
        return out
    finally:
        source.close()


def test_exact_answers_equal_a_single_postgresql(sharded_cluster: Running, single_cluster: Running) -> None:
    sharded, single = _exact_answers(sharded_cluster.dsn), _exact_answers(single_cluster.dsn)
    for a, b in zip(sharded, single, strict=True):
        np.testing.assert_array_equal(a, b)
    assert sharded[-2].sum() == ROWS


def test_exact_sql_runs_as_one_aggregate_per_shard(sharded_cluster: Running) -> None:
    from parser.pushdown.sql import answers_sql, marginal_sql

    source = PostgresExactSource(sharded_cluster.dsn)
    try:
        key = source.partition_key(EVENTS)
        assert key is not None and "hashint8(user_id)" in key
        texts = []
        for statement in STATEMENTS:
            plan = plan_query(statement, CATALOG)
            table = CATALOG.table(plan.table)
            assert table is not None
            texts.append(answers_sql(table, plan.queries, source.partition_key(table)))
        texts.append(marginal_sql(EVENTS, ("country", "duration_s"), key))
        if ADULT is not None:
            texts.append(marginal_sql(ADULT, ("age", "sex"), source.partition_key(ADULT)))
        for text in texts:
            plan_text = "\n".join(r[0] for r in source._conn().execute("EXPLAIN (VERBOSE) " + text).fetchall())
            # One aggregate per shard, run on both at once; nothing aggregated row by row on the coordinator.
            assert plan_text.count("Async Foreign Scan") == 2, plan_text
            assert plan_text.count("Relations: Aggregate on") == 2, plan_text
            assert "Partial" not in plan_text, plan_text
    finally:
        source.close()


def test_partition_key_sql_reads_pg_get_partkeydef() -> None:
    assert partition_key_sql("LIST ((((hashint8(user_id) & 2147483647) % 2)))") == \
        "(((hashint8(user_id) & 2147483647) % 2))"
    assert partition_key_sql("HASH (a, b)") == "a, b"
    assert partition_key_sql('LIST (name COLLATE "C")') is None
