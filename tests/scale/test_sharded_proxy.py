"""The proxy in front of the sharded dev cluster, as a user runs it: the BI corpus through real clients
gives the answers a proxy on one PostgreSQL with the same data gives (the exact path: a budget so large
that the noise is far below the rounding of counts and sums), a shard restart answers 57P03 while the shard
is down and loses nothing, and two proxies on the coordinator share one budget."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import psycopg
import pytest

from proxy.devcluster.cluster import DevCluster
from tests.fixtures.parser_corpus import CORPUS, OK
from tests.fixtures.proxy_process import ProxyProcess, free_port, make_test_config

from .conftest import Running

pytestmark = [pytest.mark.slow, pytest.mark.process]

EPSILON = 1e10          # noise stderr ~1e-4 on a count, ~1e-2 on a sum of hours: rounding hides it
STREAM = 600


ADULT_CORPUS = [(sql, params) for sql, expected, params in CORPUS
                if expected == OK and "hr.people" not in sql]


def _proxy(upstream: str, root: Path) -> Any:
    root.mkdir(parents=True, exist_ok=True)
    port = free_port()
    cfg = root / "config.toml"
    cfg.write_text(make_test_config(upstream, port, epsilon=EPSILON, stream_length=STREAM))
    p = ProxyProcess(cfg, root / "state", port)
    p.start(timeout=120)
    return p


@pytest.fixture(scope="module")
def proxies(sharded_cluster: Running, single_cluster: Running, tmp_path_factory) -> Iterator[tuple[Any, Any]]:  # type: ignore[no-untyped-def]
    root = tmp_path_factory.mktemp("sharded-proxy")
    sharded = _proxy(sharded_cluster.dsn, root / "sharded")
    single = _proxy(single_cluster.dsn, root / "single")
    try:
        yield sharded, single
    finally:
        sharded.stop()
        single.stop()


def _same(a: Any, b: Any) -> bool:
    # Counts and sums are released as integers: equal. Ratios (AVG) of two noisy sums carry a little of
    # their noise (more in small groups): equal to 0.5%, far below what a lost or doubled shard changes.
    if isinstance(a, float | Decimal) or isinstance(b, float | Decimal):  # numeric results are Decimal
        return a is not None and b is not None and abs(float(a) - float(b)) <= 5e-3 * max(10.0, abs(float(b)))
    if isinstance(a, int) and isinstance(b, int):
        # A sum of a weighted column (hours x 52: sensitivity 5,148 a row) keeps a noise stderr near 0.5 even
        # at this budget: two such releases differ by a few units (5 is over 7 stderrs of the difference);
        # a lost or doubled shard moves it by half.
        return abs(a - b) <= max(0, int(5e-8 * abs(b)))
    return bool(a == b)


def _rows(p: Any, sql: str, params: list[Any]) -> list[tuple[Any, ...]]:
    with psycopg.connect(p.dsn(), autocommit=True) as conn:
        return _rows_on(conn, sql, params)


def _rows_on(conn: psycopg.Connection, sql: str, params: list[Any]) -> list[tuple[Any, ...]]:
    if not params:
        return conn.execute(sql).fetchall()   # type: ignore[call-overload]
    # $n placeholders, sent as text parameters as an extended-protocol client does.
    res = conn.pgconn.exec_params(sql.encode(), [None if v is None else str(v).encode() for v in params])
    assert res.status == 2, res.error_message.decode()
    return [tuple(_value(res.get_value(r, c)) for c in range(res.nfields)) for r in range(res.ntuples)]


def _value(raw: bytes | None) -> Any:
    if raw is None:
        return None
    text = raw.decode()
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def _remaining(p: Any) -> float:
    with psycopg.connect(p.dsn(), autocommit=True) as conn:
        rows = dict(conn.execute("SHOW lapras.budget").fetchall())
    return float(rows["remaining.mu"])


def test_corpus_answers_equal_a_single_postgresql(proxies: tuple[Any, Any]) -> None:
    sharded, single = proxies
    assert len(ADULT_CORPUS) >= 100
    # One session a proxy for the whole corpus (as a BI tool keeps its connection), not one per statement.
    with psycopg.connect(sharded.dsn(), autocommit=True) as to_sharded, \
            psycopg.connect(single.dsn(), autocommit=True) as to_single:
        for sql, params in ADULT_CORPUS:
            ours, theirs = _rows_on(to_sharded, sql, params), _rows_on(to_single, sql, params)
            assert len(ours) == len(theirs), sql
            for a, b in zip(ours, theirs, strict=True):
                assert all(_same(x, y) for x, y in zip(a, b, strict=True)), (sql, a, b)


def test_other_clients_get_the_same_answers(proxies: tuple[Any, Any]) -> None:
    import asyncpg

    sharded, _ = proxies
    sql = "SELECT sex, count(*) AS n, sum(hours_per_week) AS h FROM adult WHERE age >= 30 GROUP BY sex ORDER BY sex"
    expected = _rows(sharded, sql, [])

    async def fetch() -> list[tuple[Any, ...]]:
        conn = await asyncpg.connect(host=sharded.host, port=sharded.port, user="analyst", password="lapras",
                                     database="adult", ssl=False)
        try:
            return [tuple(r) for r in await conn.fetch(sql)]
        finally:
            await conn.close()

    assert asyncio.run(fetch()) == expected        # a repeat: the stored answer, through another driver


def test_a_shard_restart_answers_57P03_then_loses_nothing(proxies: tuple[Any, Any],
                                                          sharded_cluster: Running) -> None:
    sharded, _ = proxies
    before_sql = "SELECT count(*) FROM adult WHERE hours_per_week > 50 AND sex = 1"
    during_sql = "SELECT count(*) FROM adult WHERE hours_per_week > 50 AND sex = 0"
    first = _rows(sharded, before_sql, [])
    remaining = _remaining(sharded)
    shard = DevCluster(sharded_cluster.state_dir).shards()[0]
    shard.stop()
    try:
        with psycopg.connect(sharded.dsn(), autocommit=True) as conn:
            with pytest.raises(psycopg.Error) as info:
                conn.execute(during_sql).fetchall()
            assert info.value.sqlstate == "57P03"
            assert conn.execute(before_sql).fetchall() == first     # released answers still served
        assert _remaining(sharded) == pytest.approx(remaining)     # nothing charged for the failure
    finally:
        shard.start()
    assert _rows(sharded, before_sql, []) == first
    after = _rows(sharded, during_sql, [])
    assert after[0][0] > 0 and _remaining(sharded) < remaining


def test_two_proxies_on_the_coordinator_share_one_budget(proxies: tuple[Any, Any], sharded_cluster: Running,
                                                         tmp_path: Path) -> None:
    first, _ = proxies
    second = _proxy(sharded_cluster.dsn, tmp_path / "second")
    try:
        assert _remaining(second) == pytest.approx(_remaining(first))
        released = _rows(first, ADULT_CORPUS[0][0], ADULT_CORPUS[0][1])
        before = _remaining(first)
        assert _rows(second, ADULT_CORPUS[0][0], ADULT_CORPUS[0][1]) == released    # replayed, not redrawn
        assert _remaining(first) == pytest.approx(before)
        _rows(second, "SELECT count(*) FROM adult WHERE race = 4 AND age < 25", [])   # a fresh spend on B
        assert _remaining(first) < before and _remaining(first) == pytest.approx(_remaining(second))
    finally:
        second.stop()
