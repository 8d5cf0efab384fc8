"""Byte-level fuzzing of the protocol state machine: malformed, truncated, oversized and out-of-order
input never raises, never loops, and never yields a query event before authentication.

The machine is I/O-free and takes ~0.1 ms a case, so the cost of a case is its generation. Each property
runs twice over one grammar of hostile input (plain functions of a ``random.Random``):

- a seeded sweep of ``SWEEP`` cases (a new seed every run, printed with the failing case; reproduce with
  ``LAPRAS_FUZZ_SEED``), where generation costs microseconds;
- ``CASES`` hypothesis examples driving the same grammar through ``st.randoms``, whose edge-biased choices
  and shrinking give a minimal failing input. Hypothesis costs ~10 ms an example here (its own
  bookkeeping, not the machine), which is why the bulk of the cases are in the sweep.

The socket-level fuzzer (test_fuzz_server.py) then checks the same properties against the running proxy.
"""

from __future__ import annotations

import random
import struct
from collections.abc import Callable

import pytest

pytest.importorskip("proxy.protocol.connection")

from hypothesis import HealthCheck, settings  # noqa: E402

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
from .fuzzing import LONG, fuzz, wire_piece  # noqa: E402

# Per property: 5,000 sweep cases + 150 hypothesis examples (4 properties: 20,600 cases per CI run, twice
# the 10,000 hypothesis-only cases this file ran before at a seventh of the time); LAPRAS_FUZZ_LONG=1 runs
# 50 times the sweep and the former 2,500 hypothesis examples.
SWEEP = 250_000 if LONG else 5_000
CASES = 2_500 if LONG else 150
FUZZ = settings(max_examples=CASES, deadline=None, database=None, derandomize=False,
                suppress_health_check=list(HealthCheck))
MAX_MSG = 8192
QUERY_EVENTS = (Query, Parse, Bind, Describe, Execute, FunctionCall)

# Pieces a hostile client strings together: valid messages in the wrong place, garbage, truncations.
_VALID = [
    wire.startup("analyst"), wire.startup("analyst", options="-c x=y"), wire.ssl_request(),
    struct.pack("!ii", 8, 80877104), struct.pack("!iiii", 16, 80877102, 1, 2),
    wire.query("SELECT count(*) FROM adult"), wire.parse("SELECT count(*) FROM adult"), wire.bind(),
    wire.describe(), wire.execute(), wire.SYNC, wire.FLUSH, wire.TERMINATE, wire.msg(b"p", b"pw\0"),
    wire.msg(b"F", struct.pack("!I", 1)), wire.msg(b"d", b"x"), wire.msg(b"c"),
]
_BAD_LENGTHS = [-1, 0, 3, MAX_MSG + 1, 2**31 - 1, -(2**31)]
# Bytes that make lengths, type codes and terminators likely (0, 8, 'Q', 'S', 'p', 0xff ...).
_DENSE = b"\x00\x01\x03\x04\x08\xff QPBDESHXpFdc"


def _piece(r: random.Random) -> bytes:
    """One piece: a valid message, raw garbage, a typed random message, a bad length, or a truncation."""
    return wire_piece(r, _VALID, 64, 40, lambda r: r.randrange(256), _BAD_LENGTHS, truncations=True)


def _pieces(r: random.Random, most: int = 12) -> bytes:
    return b"".join(_piece(r) for _ in range(r.randint(0, most)))


def _splits(r: random.Random, top: int, most: int) -> list[int]:
    return [r.randint(0, top) for _ in range(r.randint(0, most))]


def _fuzz(prop: Callable[[random.Random], None]) -> None:
    fuzz(prop, prop.__name__, SWEEP, FUZZ)


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


def _no_query_event_before_authentication(r: random.Random) -> None:
    data, splits, accept_ssl = _pieces(r), _splits(r, 400, 6), bool(r.randrange(2))
    conn = ServerConnection(max_message_bytes=MAX_MSG)
    events = _drive(conn, data, splits, accept_ssl, authenticate=False)
    _check_common(conn, events)
    assert not any(isinstance(e, QUERY_EVENTS) for e in events), events
    assert conn.phase is not Phase.READY


def test_no_query_event_before_authentication() -> None:
    _fuzz(_no_query_event_before_authentication)


def _garbage_after_authentication(r: random.Random) -> None:
    data, splits = _pieces(r), _splits(r, 400, 6)
    conn = ServerConnection(max_message_bytes=MAX_MSG)
    events = _drive(conn, wire.startup("analyst") + data, splits, False, authenticate=True)
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


def test_garbage_after_authentication() -> None:
    _fuzz(_garbage_after_authentication)


def _oversized_message_fails_with_54000(r: random.Random) -> None:
    # Sizes just past the limit, at the int32 end, and anywhere between.
    size = r.choice([MAX_MSG + 1 + r.randrange(64), 2**31 - 1 - r.randrange(64),
                     r.randint(MAX_MSG + 1, 2**31 - 1)])
    kind, authenticated = r.choice(b"QPBDESHXpF"), bool(r.randrange(2))
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


def test_oversized_message_fails_with_54000() -> None:
    _fuzz(_oversized_message_fails_with_54000)


def _pure_random_bytes(r: random.Random) -> None:
    n = r.randint(0, 200)
    # Half the cases draw from a few dense bytes, so lengths, codes and terminators line up often.
    data = r.randbytes(n) if r.randrange(2) else bytes(r.choice(_DENSE) for _ in range(n))
    conn = ServerConnection(max_message_bytes=MAX_MSG)
    events = _drive(conn, data, _splits(r, 200, 8), False, authenticate=False)
    _check_common(conn, events)
    assert not any(isinstance(e, QUERY_EVENTS) for e in events)


def test_pure_random_bytes() -> None:
    _fuzz(_pure_random_bytes)


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
