"""The exact source's reads under a statement's ReadGuard, on a real PostgreSQL: a query waiting for a lock ends
at the statement's deadline (the upstream statement_timeout) or when the guard is cancelled (an upstream
cancel), with 57014 and PostgreSQL's message, and the connection is reused clean."""

from __future__ import annotations

import concurrent.futures
import contextvars
import time
from collections.abc import Callable
from typing import Any

import psycopg
import pytest

import parser as sqlparser
from lapras.errors import StatementInterrupted
from lapras.exact import PostgresExactSource
from lapras.read_guard import READ_GUARD, TIMEOUT_MESSAGE, USER_MESSAGE, ReadGuard, armed_reads

pytestmark = pytest.mark.process


def _under(guard: ReadGuard, fn: Callable[[], Any]) -> Any:
    """``fn`` with its reads armed under ``guard``, as the answerer arms the statement's answer read."""
    ctx = contextvars.copy_context()
    ctx.run(READ_GUARD.set, guard)

    def armed() -> Any:
        with armed_reads():
            return fn()
    return ctx.run(armed)


def _lock_waits(dsn: str) -> int:
    with psycopg.connect(dsn, autocommit=True) as c:
        (n,) = c.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                         "AND state = 'active' AND wait_event_type = 'Lock'").fetchone()  # type: ignore[misc]
    return int(n)


def test_deadline_ends_the_upstream_query_and_the_connection_is_reset(adult_db: str, default_config) -> None:
    """No cancel is sent: the upstream statement_timeout (the time left) ends the query. False-failure rate
    0 (the 10 s bound is a generous check; without the timeout the query waits for the lock for good)."""
    catalog = default_config.catalog
    queries = sqlparser.plan_query("SELECT COUNT(*) FROM adult WHERE age = 31", catalog).queries
    src = PostgresExactSource(adult_db, bounding="live")
    locker = psycopg.connect(adult_db)
    try:
        locker.execute("LOCK TABLE adult IN ACCESS EXCLUSIVE MODE")
        t0 = time.monotonic()
        with pytest.raises(StatementInterrupted) as info:
            _under(ReadGuard(time.monotonic() + 1.0), lambda: src.answers(catalog.table("adult"), queries))
        assert 0.9 <= time.monotonic() - t0 < 10
        assert info.value.sqlstate == "57014" and str(info.value) == TIMEOUT_MESSAGE
        conn = src._conn()
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        # A read for nobody's statement (the epoch preparer) runs without the statement's timeout.
        events = sqlparser.plan_query("SELECT COUNT(*) FROM events", catalog).queries
        assert src.answers(catalog.table("events"), events)[0] > 0
        assert src._conn() is conn and conn.execute("SHOW statement_timeout").fetchone() == ("0",)
    finally:
        locker.rollback()
        locker.close()
        src.close()


def test_cancelled_guard_cancels_the_running_upstream_query(adult_db: str, default_config) -> None:
    """The guard is cancelled while its query waits for a lock (no deadline): the query is cancelled at the
    upstream, the read raises 57014 'due to user request', and no later query starts under the guard.
    False-failure rate 0 (10 s bounds are generous checks that the cancel acted)."""
    catalog = default_config.catalog
    queries = sqlparser.plan_query("SELECT COUNT(*) FROM adult WHERE age = 32", catalog).queries
    src = PostgresExactSource(adult_db, bounding="live")
    guard = ReadGuard(None)
    locker = psycopg.connect(adult_db)
    try:
        locker.execute("LOCK TABLE adult IN ACCESS EXCLUSIVE MODE")
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            fut = pool.submit(_under, guard, lambda: src.answers(catalog.table("adult"), queries))
            deadline = time.monotonic() + 10
            while not _lock_waits(adult_db) and time.monotonic() < deadline:
                time.sleep(0.05)
            assert _lock_waits(adult_db) == 1
            guard.cancel()
            with pytest.raises(StatementInterrupted) as info:
                fut.result(10)
            assert str(info.value) == USER_MESSAGE
            assert _lock_waits(adult_db) == 0
            # The worker's connection is clean and serves the next statement (another guard) at once.
            locker.rollback()
            fresh = ReadGuard(time.monotonic() + 30)
            assert pool.submit(_under, fresh, lambda: src.answers(catalog.table("adult"), queries)).result(10)[0] >= 0
        with pytest.raises(StatementInterrupted):
            _under(guard, lambda: src.answers(catalog.table("adult"), queries))  # cancelled: nothing starts
    finally:
        locker.rollback()
        locker.close()
        src.close()
