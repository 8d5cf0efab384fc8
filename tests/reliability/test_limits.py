"""Configured limits end only the offending request or connection, with the documented SQLSTATE, and
every other client keeps being served."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest

pytest.importorskip("proxy.server.listener")
pytest.importorskip("proxy.dp.service")

from . import wire  # noqa: E402
from .harness import proxy_fixture  # noqa: E402

LIMITS = {"max_connections": 6, "max_message_bytes": 8192, "statement_timeout_s": 1.0, "idle_timeout_s": 2.0,
          "auth_timeout_s": 1.0, "queries_per_minute": 40}


limited = proxy_fixture("limits", epsilon=1e4, server=LIMITS)


def _connect(proc: Any, user: str = "trustuser", password: str | None = None, **kw: Any) -> psycopg.Connection:
    return psycopg.connect(proc.dsn(user, password), autocommit=True, connect_timeout=5, **kw)


def _healthy(proc: Any, user: str = "md5user", password: str = "md5pass") -> None:
    """Another client, another user, is served normally."""
    with _connect(proc, user, password) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)


def _raw(proc: Any) -> socket.socket:
    return socket.create_connection((proc.host, proc.port), timeout=5)


def test_oversized_message_ends_only_that_connection(limited: Any) -> None:
    with _connect(limited) as bystander:
        sock = _raw(limited)
        sock.sendall(wire.startup("trustuser"))
        data, _ = wire.recv_all(sock, 5, until=b"Z")
        assert any(m.kind == "Z" for m in wire.split_backend(data)[0])
        sock.sendall(wire.query("SELECT '" + "x" * 9000 + "'"))
        data, closed = wire.recv_all(sock, 5)
        sock.close()
        errors = [m.error_fields() for m in wire.split_backend(data)[0] if m.kind == "E"]
        assert closed and errors and errors[0]["C"] == "54000" and errors[0]["S"] == "FATAL", errors
        assert bystander.execute("SELECT 2").fetchone() == (2,)


def test_max_connections(limited: Any) -> None:
    held = [_connect(limited) for _ in range(LIMITS["max_connections"])]  # type: ignore[arg-type]
    try:
        with pytest.raises(psycopg.OperationalError) as info:
            _connect(limited)
        assert info.value.sqlstate == "53300" or "too many" in str(info.value)
        for conn in held:
            assert conn.execute("SELECT 1").fetchone() == (1,)
    finally:
        held.pop().close()
    try:
        # A slot freed is a slot usable again.
        with _connect(limited) as again:
            assert again.execute("SELECT 1").fetchone() == (1,)
    finally:
        for conn in held:
            conn.close()


def test_auth_timeout_ends_silent_login(limited: Any) -> None:
    sock = _raw(limited)
    sock.sendall(wire.startup("analyst"))     # SCRAM: the server waits for our first message
    t0 = time.monotonic()
    data, closed = wire.recv_all(sock, 6)
    elapsed = time.monotonic() - t0
    sock.close()
    assert closed and elapsed < 4.0, (closed, elapsed)
    msgs = wire.split_backend(data)[0]
    assert not any(m.auth_code() == 0 for m in msgs)
    _healthy(limited)


def test_slow_start_up_packet_does_not_block_others(limited: Any) -> None:
    # Half a start-up packet, then silence: others log in meanwhile; the server drops it at auth timeout.
    socks = [_raw(limited) for _ in range(3)]
    for s in socks:
        s.sendall(wire.startup("trustuser")[:7])
    _healthy(limited)
    for s in socks:
        _, closed = wire.recv_all(s, 6)
        assert closed
        s.close()


def test_idle_timeout(limited: Any) -> None:
    conn = _connect(limited)
    assert conn.execute("SELECT 1").fetchone() == (1,)
    time.sleep(LIMITS["idle_timeout_s"] + 1.0)  # type: ignore[operator]
    with pytest.raises(psycopg.OperationalError):
        conn.execute("SELECT 1")
    conn.close()
    _healthy(limited)


def test_statement_timeout_cancels_only_that_statement(limited: Any) -> None:
    with _connect(limited) as slow, _connect(limited, "md5user", "md5pass") as other:
        done = threading.Event()
        seen: dict[str, Any] = {}

        def run_slow() -> None:
            try:
                slow.execute("SELECT pg_sleep(5)")
                seen["result"] = "finished"
            except psycopg.Error as exc:
                seen["sqlstate"] = exc.sqlstate
            done.set()

        t0 = time.monotonic()
        threading.Thread(target=run_slow, daemon=True).start()
        time.sleep(0.2)
        assert other.execute("SELECT 3").fetchone() == (3,)   # not blocked by the sleeping session
        assert done.wait(6)
        if seen.get("sqlstate") in ("42501", "0A000"):
            pytest.skip("pg_sleep is refused by the router; no slow statement to time out")
        assert seen.get("sqlstate") == "57014", seen
        assert time.monotonic() - t0 < 3.0
        # The session survives a timeout.
        assert slow.execute("SELECT 4").fetchone() == (4,)


def test_rate_limit_per_user(limited: Any, tmp_path: Path) -> None:
    refused_at = None
    with _connect(limited, "analyst", "lapras") as conn:
        for i in range(LIMITS["queries_per_minute"] + 5):  # type: ignore[operator]
            try:
                conn.execute("SELECT 1")
            except psycopg.Error as exc:
                assert exc.sqlstate == "53400", exc
                refused_at = i
                break
        assert refused_at is not None and refused_at >= LIMITS["queries_per_minute"] - 2  # type: ignore[operator]
        # The refusal ends the statement, not the session; another user is unaffected.
        assert not conn.closed
    _healthy(limited)
