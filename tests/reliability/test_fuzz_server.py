"""Socket-level fuzzing of the running proxy: malformed, truncated, oversized and out-of-order messages,
garbage before and after authentication. The proxy never crashes, never stalls a well-behaved client, and
never sends a row (or AuthenticationOk) to a client that did not authenticate.

As in test_fuzz_statemachine.py, the hostile input is one grammar of plain functions of a ``random.Random``,
run by a seeded sweep (``SWEEP`` connections; a new seed every run, printed with the failing case,
``LAPRAS_FUZZ_SEED`` replays it) and by ``CASES`` hypothesis examples through ``st.randoms`` (edge-biased
choices, shrinking). Hypothesis costs ~10 ms an example on top of a ~5 ms exchange, so most cases are
in the sweep."""

from __future__ import annotations

import random
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest

pytest.importorskip("proxy.server.listener")

from hypothesis import HealthCheck, settings  # noqa: E402

from . import wire  # noqa: E402
from .fuzzing import LONG, fuzz, wire_piece  # noqa: E402

# Per property: 1,400 sweep connections + 100 hypothesis examples (the 1,500 hypothesis-only cases this file
# ran before, at about a third of the time); LAPRAS_FUZZ_LONG=1 runs 20,000 of each.
SWEEP = 20_000 if LONG else 1_400
CASES = 20_000 if LONG else 100
FUZZ = settings(max_examples=CASES, deadline=None, database=None, suppress_health_check=list(HealthCheck))
PROTECTED = "SELECT count(*) FROM adult"

_VALID = [
    wire.query(PROTECTED), wire.query("SELECT * FROM adult"), wire.parse(PROTECTED), wire.bind(),
    wire.describe(), wire.describe("S"), wire.execute(), wire.SYNC, wire.FLUSH, wire.msg(b"p", b"x\0"),
    wire.msg(b"p", b"SCRAM-SHA-256\0" + struct.pack("!i", 4) + b"n,,x"), wire.startup("analyst"),
    wire.ssl_request(), wire.msg(b"F", struct.pack("!I", 1)), wire.msg(b"d", b"row"), wire.msg(b"c"),
    wire.parse("SELECT $1", "s1", (23,)), wire.bind((b"1",), "", "s1"), wire.bind((None,), "p", "nope"),
    wire.execute("missing", 5), wire.msg(b"C", b"S\0"), wire.msg(b"Q", b"SELECT 1"),
]


def _piece(r: random.Random) -> bytes:
    """One piece: a valid message out of place, raw garbage, a typed random message, or a bad length."""
    return wire_piece(r, _VALID, 48, 32, lambda r: r.choice(b"QPBDESp\x00"), [-5, 0, 3, 1 << 21, 2**31 - 1],
                      truncations=False)


def _pieces(r: random.Random) -> bytes:
    return b"".join(_piece(r) for _ in range(r.randint(0, 10)))


def _fuzz(prop: Callable[[Any, random.Random], None], proxy: Any) -> None:
    fuzz(lambda r: prop(proxy, r), prop.__name__, SWEEP, FUZZ)


class Bystander(threading.Thread):
    """A well-behaved client that keeps running statements while the fuzzer attacks; records stalls."""

    def __init__(self, proxy: Any) -> None:
        super().__init__(daemon=True)
        self.proxy = proxy
        self.stop = threading.Event()
        self.worst = 0.0
        self.count = 0
        self.errors: list[str] = []

    def run(self) -> None:
        with psycopg.connect(self.proxy.dsn(), autocommit=True) as conn:
            while not self.stop.is_set():
                t0 = time.monotonic()
                try:
                    conn.execute(PROTECTED).fetchall()
                except psycopg.Error as exc:
                    self.errors.append(f"{exc.sqlstate}: {exc}")
                self.worst = max(self.worst, time.monotonic() - t0)
                self.count += 1
                self.stop.wait(0.02)


@pytest.fixture(scope="module")
def bystander(proxy: Any) -> Iterator[Bystander]:
    # On a fresh proxy the first predicted statement waits up to lapras.mm_wait (5 s) for the epoch's
    # release of P: answered once before any fuzzing, so a wait measured below is one the fuzzing caused.
    with psycopg.connect(proxy.dsn(), autocommit=True) as conn:
        conn.execute(PROTECTED).fetchall()
    b = Bystander(proxy)
    b.start()
    yield b
    b.stop.set()
    b.join(10)
    assert proxy.proc.poll() is None, "the proxy process died under fuzzing"
    assert not b.errors, b.errors[:5]
    assert b.count > 10
    assert b.worst < 3.0, f"a well-behaved client waited {b.worst:.2f} s"


def _exchange(proxy: Any, payload: bytes, half_close: bool = True) -> tuple[list[wire.BackendMessage], bool]:
    sock = socket.create_connection((proxy.host, proxy.port), timeout=5)
    try:
        try:
            sock.sendall(payload)
            if half_close:
                sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        data, closed = wire.recv_all(sock, 5.0)
    finally:
        sock.close()
    # After an accepted SSLRequest the rest would be TLS; the proxy under test has no TLS configured.
    msgs, _tail = wire.split_backend(data, expect_negotiation_byte=True)
    return msgs, closed


def _assert_unauthenticated(msgs: list[wire.BackendMessage]) -> None:
    for m in msgs:
        assert m.auth_code() != 0, "AuthenticationOk sent to a client that never authenticated"
        assert m.kind not in ("T", "D", "C", "Z"), f"{m.kind!r} sent before authentication"


def _garbage_before_authentication(proxy: Any, r: random.Random) -> None:
    user, with_startup = r.choice(["analyst", "md5user", "nobody"]), bool(r.randrange(2))
    payload = (wire.startup(user) if with_startup else b"") + _pieces(r)
    msgs, closed = _exchange(proxy, payload)
    assert closed, "the proxy kept a half-closed garbage connection open"
    _assert_unauthenticated(msgs)


def test_garbage_before_authentication(proxy: Any, bystander: Bystander) -> None:
    _fuzz(_garbage_before_authentication, proxy)


def _garbage_after_authentication(proxy: Any, r: random.Random) -> None:
    payload = wire.startup("trustuser") + _pieces(r)
    msgs, closed = _exchange(proxy, payload)
    assert closed
    kinds = [m.kind for m in msgs]
    assert kinds and msgs[0].auth_code() == 0, kinds[:3]
    for m in msgs:
        if m.kind == "E":
            f = m.error_fields()
            assert len(f.get("C", "")) == 5 and f.get("S") in ("ERROR", "FATAL"), f
            assert f.get("C") != "XX000", f"internal error on fuzzed input: {f}"


def test_garbage_after_authentication(proxy: Any, bystander: Bystander) -> None:
    _fuzz(_garbage_after_authentication, proxy)


def test_oversized_and_truncated_messages(proxy: Any, bystander: Bystander) -> None:
    big = wire.startup("trustuser") + b"Q" + struct.pack("!i", (1 << 20) + 100) + b"x" * 1000
    msgs, closed = _exchange(proxy, big, half_close=False)
    codes = [m.error_fields().get("C") for m in msgs if m.kind == "E"]
    assert closed and codes[-1] == "54000", codes
    # A message cut short then silence: the connection waits, others are served, EOF ends it cleanly.
    msgs, closed = _exchange(proxy, wire.startup("trustuser") + wire.query(PROTECTED)[:9])
    assert closed and not any(m.kind == "D" for m in msgs)


def test_many_stalled_connections_do_not_block_others(proxy: Any, bystander: Bystander) -> None:
    socks = []
    for i in range(40):
        s = socket.create_connection((proxy.host, proxy.port), timeout=5)
        s.sendall([b"\x00\x00", wire.startup("analyst"), wire.startup("trustuser") + b"Q\x00"][i % 3])
        socks.append(s)
    t0 = time.monotonic()
    with psycopg.connect(proxy.dsn(), autocommit=True, connect_timeout=5) as conn:
        conn.execute("SELECT 1").fetchall()
    assert time.monotonic() - t0 < 3.0
    for s in socks:
        s.close()
