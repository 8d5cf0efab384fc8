"""An operator's view over the proxy's per-epoch bounded table (lapras.bounded_*), or a lock on it, does not
fail the next epoch: the new epoch's table is built and answers, the old one is kept and logged, and it is
dropped at a later build once nothing holds it (lapras/bounded.py, real proxy and upstream)."""

from __future__ import annotations

import time
from typing import Any

import psycopg
import pytest

pytestmark = pytest.mark.process

SQL = "SELECT count(*) FROM events WHERE category = 'search' AND duration_s < {n}"


def _tables(dsn: str) -> list[tuple[int, str]]:
    """The epoch tables of ``events`` (the demo's other tables with a privacy unit get their own)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        if conn.execute("SELECT to_regclass('lapras.bounded_tables')").fetchone()[0] is None:  # type: ignore[index]
            return []
        return [(int(e), str(r)) for e, r in
                conn.execute("SELECT epoch_id, relname FROM lapras.bounded_tables WHERE source LIKE %s "
                             "ORDER BY epoch_id", ("%events%",)).fetchall()]


def _exists(dsn: str, relname: str) -> bool:
    with psycopg.connect(dsn, autocommit=True) as conn:
        return conn.execute("SELECT to_regclass(%s)", (f"lapras.{relname}",)).fetchone()[0] is not None  # type: ignore[index]


def _wait(cond: Any, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline
        time.sleep(0.2)


def test_new_epoch_answers_despite_a_view_and_a_lock_on_the_old_table(proxy_factory: Any) -> None:
    px = proxy_factory(epsilon=1e5, stream_length=1000)
    dsn = px.upstream_dsn
    with psycopg.connect(px.dsn(), autocommit=True) as c:
        assert c.execute(SQL.format(n=600)).fetchone() is not None
    _wait(lambda: bool(_tables(dsn)))
    ((epoch1, old1),) = _tables(dsn)
    with psycopg.connect(dsn, autocommit=True) as up:
        up.execute(f'CREATE VIEW public.debug_bounded AS SELECT * FROM lapras."{old1}"')  # the operator's view
    with psycopg.connect(px.dsn("dba", "dbapass"), autocommit=True) as admin:
        admin.execute("SELECT lapras.new_epoch()")
    with psycopg.connect(px.dsn(), autocommit=True) as c:
        for n in (700, 800):  # fresh statements of the new epoch: answered, not XX000
            assert c.execute(SQL.format(n=n)).fetchone() is not None
    _wait(lambda: len(_tables(dsn)) == 2)
    assert _exists(dsn, old1)  # kept: the view depends on it
    _wait(lambda: any("could not be dropped" in line and old1 in line for line in px.output), 10)

    # A lock held on the old table (an open transaction reading it) waits DROP_LOCK_TIMEOUT, no longer.
    with psycopg.connect(dsn) as holder:
        # The lock is taken while the view still protects the table, then the view goes: a retried drop
        # between the two would otherwise remove the table before the lock is held.
        holder.execute(f'SELECT count(*) FROM lapras."{old1}"')  # ACCESS SHARE held until the rollback
        with psycopg.connect(dsn, autocommit=True) as up:
            up.execute("DROP VIEW public.debug_bounded")
        ((_, old2),) = [t for t in _tables(dsn) if t[0] != epoch1]
        with psycopg.connect(px.dsn("dba", "dbapass"), autocommit=True) as admin:
            admin.execute("SELECT lapras.new_epoch()")
        t0 = time.monotonic()
        with psycopg.connect(px.dsn(), autocommit=True) as c:
            assert c.execute(SQL.format(n=900)).fetchone() is not None
        assert time.monotonic() - t0 < 30
        _wait(lambda: not _exists(dsn, old2))  # nothing held it: dropped with the build
        assert _exists(dsn, old1)
        holder.rollback()
    # The next build drops what is left once nothing holds it.
    with psycopg.connect(px.dsn("dba", "dbapass"), autocommit=True) as admin:
        admin.execute("SELECT lapras.new_epoch()")
    with psycopg.connect(px.dsn(), autocommit=True) as c:
        assert c.execute(SQL.format(n=1000)).fetchone() is not None
    _wait(lambda: not _exists(dsn, old1))
    assert len(_tables(dsn)) == 1
