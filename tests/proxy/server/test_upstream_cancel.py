"""A statement that times out or is cancelled stops its upstream query too: the proxy's worker threads are
few, and a statement left running upstream (behind a lock, or slow) would hold one until it ended."""

from __future__ import annotations

import concurrent.futures
import time
from typing import Any

import psycopg
import pytest

pytestmark = pytest.mark.process  # a real proxy process and its embedded PostgreSQL

N_STUCK = 10
"""More statements than the proxy's default executor has threads (min(32, cpus + 4): 6 on 2 cores)."""


def _blocked_upstream(upstream_dsn: str) -> int:
    """How many of the proxy's upstream queries wait for a lock (pg_stat_activity, read directly)."""
    with psycopg.connect(upstream_dsn, autocommit=True) as c:
        (n,) = c.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                         "AND pid <> pg_backend_pid() AND state = 'active' AND wait_event_type = 'Lock'"
                         ).fetchone()  # type: ignore[misc]
    return int(n)


def _admin_view(px: Any) -> dict[str, str]:
    with psycopg.connect(px.dsn(user="dba", password="dbapass"), autocommit=True) as c:
        return {str(k): str(v) for k, v in c.execute("SHOW lapras.budget").fetchall()}


def _timed_out(px: Any, i: int) -> psycopg.Error:
    with psycopg.connect(px.dsn(), autocommit=True) as c:
        c.execute("SET statement_timeout = '1s'")
        try:
            c.execute(f"SELECT count(*) FROM adult WHERE age = {20 + i} AND hours_per_week > 40").fetchall()
        except psycopg.Error as exc:
            assert c.execute("SELECT 1").fetchone() == (1,)  # the session goes on
            return exc
    raise AssertionError("a statement behind the lock was answered")


def test_timed_out_statements_stop_upstream_and_leave_the_proxy_serving(proxy_factory: Any) -> None:
    """Ten fresh statements behind an ACCESS EXCLUSIVE lock each time out (57014, PostgreSQL's message);
    their upstream queries end with them, each whose read began is charged with nothing stored (a read's
    duration decides between answer and 57014: it is paid for, and a retry is charged again), and while the lock is still held
    another analyst's SHOW and fresh statement on another table are answered. False-failure rate 0: the
    bounds (10 s) are generous checks that the cancel acted; without it the upstream queries wait for the
    lock for good and the other analyst's statements wait for a thread."""
    px = proxy_factory(epsilon=1e4, stream_length=1000, learn_prediction=False)
    before = _admin_view(px)
    locker = psycopg.connect(px.upstream_dsn)
    try:
        locker.execute("LOCK TABLE adult IN ACCESS EXCLUSIVE MODE")
        with concurrent.futures.ThreadPoolExecutor(N_STUCK) as pool:
            errors = list(pool.map(lambda i: _timed_out(px, i), range(N_STUCK)))
        for exc in errors:
            assert isinstance(exc, psycopg.errors.QueryCanceled), repr(exc)
            assert exc.diag.message_primary == "canceling statement due to statement timeout"
        deadline = time.monotonic() + 10
        while _blocked_upstream(px.upstream_dsn) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _blocked_upstream(px.upstream_dsn) == 0, "the timed-out statements still run upstream"
        # The lock is still held: everyone else is served.
        t0 = time.monotonic()
        with psycopg.connect(px.dsn("md5user", "md5pass"), autocommit=True) as other:
            other.execute("SET statement_timeout = '20s'")
            assert other.execute("SHOW lapras.budget").fetchall()
            (n,) = other.execute("SELECT count(*) FROM events WHERE category = 'refund'").fetchone()  # type: ignore[misc]
            assert n is not None
        assert time.monotonic() - t0 < 10
        after = _admin_view(px)
        # The other analyst's statement is a stream item, and so is each of the ten whose read began
        # upstream before its timeout (charged, nothing stored: lapras.read_guard); those still waiting
        # for a worker thread at their timeout never read and are not charged.
        charged = int(after["operator.stream_position"]) - int(before["operator.stream_position"]) - 1
        assert 1 <= charged <= N_STUCK, charged
    finally:
        locker.rollback()
        locker.close()
    # Once the lock is gone the same statement is answered fresh and charged again (nothing was stored).
    with psycopg.connect(px.dsn(), autocommit=True) as c:
        assert c.execute("SELECT count(*) FROM adult WHERE age = 20 AND hours_per_week > 40").fetchone()
    assert int(_admin_view(px)["operator.stream_position"]) == int(after["operator.stream_position"]) + 1


def test_cancelled_statement_stops_its_upstream_query(proxy_factory: Any) -> None:
    """CancelRequest on a statement waiting upstream for a lock: the client gets 57014 'due to user request'
    and the upstream query is cancelled too. False-failure rate 0 (the 10 s bound is a generous check)."""
    px = proxy_factory(epsilon=1e4, stream_length=1000, learn_prediction=False)
    locker = psycopg.connect(px.upstream_dsn)
    try:
        locker.execute("LOCK TABLE adult IN ACCESS EXCLUSIVE MODE")
        with psycopg.connect(px.dsn(), autocommit=True) as c, concurrent.futures.ThreadPoolExecutor(1) as pool:
            fut = pool.submit(lambda: c.execute("SELECT count(*) FROM adult WHERE age = 33").fetchall())
            deadline = time.monotonic() + 10
            while not _blocked_upstream(px.upstream_dsn) and time.monotonic() < deadline:
                time.sleep(0.05)
            assert _blocked_upstream(px.upstream_dsn) == 1, "the statement never reached the upstream"
            c.cancel()
            with pytest.raises(psycopg.errors.QueryCanceled) as info:
                fut.result(10)
            assert info.value.diag.message_primary == "canceling statement due to user request"
            deadline = time.monotonic() + 10
            while _blocked_upstream(px.upstream_dsn) and time.monotonic() < deadline:
                time.sleep(0.05)
            assert _blocked_upstream(px.upstream_dsn) == 0, "the cancelled statement still runs upstream"
            assert c.execute("SELECT 1").fetchone() == (1,)
    finally:
        locker.rollback()
        locker.close()


def test_timed_out_regression_runs_to_its_end_and_is_replayed(proxy_factory: Any) -> None:
    """lapras.linear_regression behind the lock: 57014 at the session's statement_timeout, but its read is
    not cancelled (a stopped read would escape its charge, lapras.read_guard): once the lock is gone it ends
    and commits, so the same call is then a free replay. False-failure rate 0 (the 10 s bound is generous)."""
    px = proxy_factory(epsilon=1e4, stream_length=1000, learn_prediction=False)
    locker = psycopg.connect(px.upstream_dsn)
    call = "SELECT * FROM lapras.linear_regression('adult', 'age', 'education_num')"
    notices: list[str] = []
    try:
        locker.execute("LOCK TABLE adult IN ACCESS EXCLUSIVE MODE")
        with psycopg.connect(px.dsn(), autocommit=True) as c:
            c.execute("SET statement_timeout = '1s'")
            with pytest.raises(psycopg.errors.QueryCanceled) as info:
                c.execute(call).fetchall()
            assert info.value.diag.message_primary == "canceling statement due to statement timeout"
        locker.rollback()
        deadline = time.monotonic() + 10
        while not any("replayed" in n for n in notices) and time.monotonic() < deadline:
            time.sleep(0.2)
            with psycopg.connect(px.dsn(), autocommit=True) as c:
                c.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
                assert len(c.execute(call).fetchall()) == 2
        assert any("replayed" in n for n in notices), notices
    finally:
        locker.rollback()
        locker.close()
