"""CancelRequest interrupts the running statement of the session that owns the key, and nothing else."""

from __future__ import annotations

import concurrent.futures
import socket
import struct
import time

import psycopg
import pytest

from tests.fixtures.local_proxy import Target

pytestmark = pytest.mark.process  # real client runtimes and a real proxy process


def test_cancel_interrupts_only_that_session(e2e: Target) -> None:
    a = psycopg.connect(e2e.dsn(), autocommit=True)
    b = psycopg.connect(e2e.dsn(), autocommit=True)
    try:
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            t0 = time.monotonic()
            fa = pool.submit(lambda: a.execute("SELECT pg_sleep(5)").fetchone())
            fb = pool.submit(lambda: b.execute("SELECT pg_sleep(1.5), 42").fetchone())
            time.sleep(0.5)
            a.cancel()
            with pytest.raises(psycopg.errors.QueryCanceled) as info:
                fa.result(10)
            assert info.value.sqlstate == "57014"
            assert time.monotonic() - t0 < 4
            assert fb.result(10)[1] == 42          # the other session's statement was not touched
        assert a.execute("SELECT 1").fetchone() == (1,)   # the cancelled session goes on
        assert a.execute("SELECT COUNT(*) FROM adult").fetchone() is not None
    finally:
        a.close()
        b.close()


def test_cancel_with_a_wrong_key_does_nothing(e2e: Target) -> None:
    a = psycopg.connect(e2e.dsn(), autocommit=True)
    try:
        pid = a.info.backend_pid
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            fut = pool.submit(lambda: a.execute("SELECT pg_sleep(1), 7").fetchone())
            time.sleep(0.3)
            with socket.create_connection((e2e.host, e2e.port), timeout=5) as s:
                s.sendall(struct.pack("!iiiI", 16, 80877102, pid, 12345))
            assert fut.result(10)[1] == 7
    finally:
        a.close()


def test_idle_session_cancel_is_harmless(e2e: Target) -> None:
    with psycopg.connect(e2e.dsn(), autocommit=True) as a:
        a.cancel()
        time.sleep(0.2)
        assert a.execute("SELECT 1").fetchone() == (1,)

