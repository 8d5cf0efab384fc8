"""Byte-level fuzzing of the protocol state machine: malformed, truncated, oversized and out-of-order
input never raises, never loops, and never yields a query event before authentication.

The machine is I/O-free, so thousands of cases run in seconds; the socket-level fuzzer
(test_fuzz_server.py) then checks the same properties against the running proxy.
"""

from __future__ import annotations

import os
import struct

import pytest

pytest.importorskip("proxy.protocol.connection")

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from proxy.protocol import (  # noqa: E402
    NEED_DATA,
    PAUSED,
    Bind,
    ConnectionFailed,
    Describe,
    Execute,
    FunctionCall,
    Parse,
    PgError,
    Phase,
    Query,
    ServerConnection,
    StartupReceived,
    Sync,
    Terminate,
)

from . import wire  # noqa: E402

LONG = os.environ.get("LAPRAS_FUZZ_LONG") == "1"
# 4 properties x 2,500 = 10,000 state-machine cases per CI run; LAPRAS_FUZZ_LONG=1 runs 25 times more.
CASES = 62_500 if LONG else 2_500
FUZZ = settings(max_examples=CASES, deadline=None, database=None, derandomize=False,
                suppress_health_check=list(HealthCheck))
MAX_MSG = 8192
QUERY_EVENTS = (Query, Parse, Bind, Describe, Execute, FunctionCall)

# Pieces a hostile client strings together: valid messages in the wrong place, garbage, truncations.
_valid_pieces = st.sampled_from([
    wire.startup("analyst"), wire.startup("analyst", options="-c x=y"), wire.ssl_request(),
    struct.pack("!ii", 8, 80877104), struct.pack("!iiii", 16, 80877102, 1, 2),
    wire.query("SELECT count(*) FROM adult"), wire.parse("SELECT count(*) FROM adult"), wire.bind(),
    wire.describe(), wire.execute(), wire.SYNC, wire.FLUSH, wire.TERMINATE, wire.msg(b"p", b"pw\0"),
    wire.msg(b"F", struct.pack("!I", 1)), wire.msg(b"d", b"x"), wire.msg(b"c"),
])
_garbage = st.binary(min_size=1, max_size=64)
_typed_random = st.builds(lambda k, b: wire.msg(bytes([k]), b), st.integers(0, 255), st.binary(max_size=40))
_bad_length = st.builds(lambda k, n: bytes([k]) + struct.pack("!i", n), st.integers(0, 255),
                        st.sampled_from([-1, 0, 3, MAX_MSG + 1, 2**31 - 1, -(2**31)]))
_truncated = st.builds(lambda m, cut: m[:cut], _valid_pieces, st.integers(0, 8))
_piece = st.one_of(_valid_pieces, _garbage, _typed_random, _bad_length, _truncated)


def _drive(conn: ServerConnection, data: bytes, splits: list[int], accept_ssl: bool,
           authenticate: bool) -> list[object]:
    """Feed `data` in chunks like a server would, answering negotiation; return every event."""
    events: list[object] = []
    cuts = sorted({min(max(0, s), len(data)) for s in splits} | {0, len(data)})
    chunks = [data[a:b] for a, b in zip(cuts, cuts[1:], strict=False)] + [b""]
    for chunk in chunks:
        conn.receive_data(chunk)
        for _ in range(10_000):
            ev = conn.next_event()
            if ev is NEED_DATA:
                break
            if ev is PAUSED:
                conn.answer_negotiation(accept_ssl)
                continue
            events.append(ev)
            if isinstance(ev, StartupReceived) and authenticate:
                conn.authenticated()
            if isinstance(ev, ConnectionFailed | Terminate):
                break
            if isinstance(ev, QUERY_EVENTS) and authenticate:
                # Every query errors out, as a refused statement does; the machine must then discard
                # until Sync in the extended protocol.
                conn.error(PgError("42501", "refused"))
        else:
            pytest.fail("next_event did not settle within 10,000 steps")
        if conn.phase is Phase.CLOSED:
            break
    return events


def _check_common(conn: ServerConnection, events: list[object]) -> None:
    for i, ev in enumerate(events):
        if isinstance(ev, ConnectionFailed | Terminate):
            # Nothing but further Terminates after the connection failed or ended.
            assert all(isinstance(e, Terminate) for e in events[i + 1:]), events[i:]
            assert conn.phase is Phase.CLOSED
            break
    for ev in events:
        if isinstance(ev, ConnectionFailed):
            assert len(ev.sqlstate) == 5 and ev.message


@FUZZ
@given(pieces=st.lists(_piece, max_size=12), splits=st.lists(st.integers(0, 400), max_size=6),
       accept_ssl=st.booleans())
def test_no_query_event_before_authentication(pieces: list[bytes], splits: list[int], accept_ssl: bool) -> None:
    conn = ServerConnection(max_message_bytes=MAX_MSG)
    events = _drive(conn, b"".join(pieces), splits, accept_ssl, authenticate=False)
    _check_common(conn, events)
    assert not any(isinstance(e, QUERY_EVENTS) for e in events), events
    assert conn.phase is not Phase.READY


@FUZZ
@given(pieces=st.lists(_piece, max_size=12), splits=st.lists(st.integers(0, 400), max_size=6))
def test_garbage_after_authentication(pieces: list[bytes], splits: list[int]) -> None:
    conn = ServerConnection(max_message_bytes=MAX_MSG)
    events = _drive(conn, wire.startup("analyst") + b"".join(pieces), splits, False, authenticate=True)
    _check_common(conn, events)
    assert isinstance(events[0], StartupReceived)
    # After an error in the extended protocol, nothing but Sync (or the end) comes out until the Sync.
    discarding = False
    for ev in events[1:]:
        if discarding:
            assert isinstance(ev, Sync | Terminate | ConnectionFailed), ev
            if isinstance(ev, Sync):
                discarding = False
        if isinstance(ev, Parse | Bind | Describe | Execute):
            discarding = True


@FUZZ
@given(size=st.integers(MAX_MSG + 1, 2**31 - 1), kind=st.sampled_from(b"QPBDESHXpF"),
       authenticated=st.booleans())
def test_oversized_message_fails_with_54000(size: int, kind: int, authenticated: bool) -> None:
    conn = ServerConnection(max_message_bytes=MAX_MSG)
    head = wire.startup("analyst")
    if authenticated:
        conn.receive_data(head)
        assert isinstance(conn.next_event(), StartupReceived)
        conn.authenticated()
        head = b""
    elif kind != ord("p"):
        kind = ord("p")
    events = _drive(conn, head + bytes([kind]) + struct.pack("!i", size) + b"x" * 16, [], False,
                    authenticate=False)
    failed = [e for e in events if isinstance(e, ConnectionFailed)]
    assert failed and failed[0].sqlstate == "54000", events
    assert conn.phase is Phase.CLOSED


@FUZZ
@given(data=st.binary(max_size=200), splits=st.lists(st.integers(0, 200), max_size=8))
def test_pure_random_bytes(data: bytes, splits: list[int]) -> None:
    conn = ServerConnection(max_message_bytes=MAX_MSG)
    events = _drive(conn, data, splits, False, authenticate=False)
    _check_common(conn, events)
    assert not any(isinstance(e, QUERY_EVENTS) for e in events)


def test_startup_packet_limit_and_bad_protocol() -> None:
    conn = ServerConnection(max_message_bytes=MAX_MSG)
    events = _drive(conn, struct.pack("!i", 10_001) + b"\0" * 20, [], False, False)
    assert isinstance(events[-1], ConnectionFailed)
    conn = ServerConnection(max_message_bytes=MAX_MSG)
    events = _drive(conn, struct.pack("!ii", 8, 2 << 16), [], False, False)
    assert isinstance(events[-1], ConnectionFailed) and events[-1].sqlstate == "0A000"
    # Plaintext pipelined behind an accepted SSLRequest must not be read as if it were encrypted.
    conn = ServerConnection(max_message_bytes=MAX_MSG)
    events = _drive(conn, wire.ssl_request() + wire.startup("analyst"), [], True, False)
    assert not any(isinstance(e, StartupReceived) for e in events)
