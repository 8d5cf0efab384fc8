"""The I/O-free protocol state machine, driven with bytes alone."""

from __future__ import annotations

import struct

from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.protocol import (
    NEED_DATA,
    PAUSED,
    Bind,
    CancelRequested,
    ConnectionFailed,
    Describe,
    Execute,
    GSSENCRequested,
    Parse,
    PasswordMessage,
    PgError,
    Phase,
    Query,
    ServerConnection,
    SSLRequested,
    StartupReceived,
    Sync,
    Terminate,
)
from tests.fixtures import pgwire_frames as wire


def events(conn: ServerConnection) -> list[object]:
    out = []
    while True:
        ev = conn.next_event()
        if ev is NEED_DATA or ev is PAUSED:
            return out
        out.append(ev)
        if isinstance(ev, ConnectionFailed | Terminate):
            return out


def assert_fails(c: ServerConnection, sqlstate: str, note: object = None) -> None:
    """The connection's next event is its failure with ``sqlstate``."""
    ev = c.next_event()
    assert isinstance(ev, ConnectionFailed) and ev.sqlstate == sqlstate, (ev, note)


def ready_conn() -> ServerConnection:
    c = ServerConnection(max_message_bytes=8192)
    c.receive_data(wire.startup())
    assert isinstance(c.next_event(), StartupReceived)
    c.authenticated()
    return c


def test_startup_params_and_arbitrary_keys() -> None:
    c = ServerConnection()
    c.receive_data(wire.startup(application_name="x", some_tool_param="y"))
    ev = c.next_event()
    assert isinstance(ev, StartupReceived)
    assert ev.params["user"] == "analyst" and ev.params["some_tool_param"] == "y"
    assert c.phase is Phase.AUTH


def test_startup_split_across_reads() -> None:
    c = ServerConnection()
    data = wire.startup()
    for b in data[:-1]:
        c.receive_data(bytes([b]))
        assert c.next_event() is NEED_DATA
    c.receive_data(data[-1:])
    assert isinstance(c.next_event(), StartupReceived)


def test_ssl_request_pauses_until_answered() -> None:
    c = ServerConnection()
    c.receive_data(wire.ssl_request())
    assert isinstance(c.next_event(), SSLRequested)
    assert c.next_event() is PAUSED
    assert c.answer_negotiation(False) == b"N"
    c.receive_data(wire.startup())
    assert isinstance(c.next_event(), StartupReceived)


def test_gssenc_then_ssl_then_startup() -> None:
    c = ServerConnection()
    c.receive_data(wire.gssenc_request())
    assert isinstance(c.next_event(), GSSENCRequested)
    assert c.answer_negotiation(False) == b"N"
    c.receive_data(wire.ssl_request())
    assert isinstance(c.next_event(), SSLRequested)


def test_plaintext_pipelined_after_ssl_accept_is_refused() -> None:
    c = ServerConnection()
    c.receive_data(wire.ssl_request() + wire.startup())
    assert isinstance(c.next_event(), SSLRequested)
    assert c.answer_negotiation(True) == b"S"
    assert_fails(c, "08P01")


def test_cancel_request() -> None:
    c = ServerConnection()
    c.receive_data(wire.cancel_request(1234, 0xDEADBEEF))
    ev = c.next_event()
    assert ev == CancelRequested(1234, 0xDEADBEEF)
    assert c.closed


def test_unsupported_protocol_version() -> None:
    c = ServerConnection()
    c.receive_data(wire.startup(version=2 << 16))
    assert_fails(c, "0A000")


def test_minor_version_and_pq_options_reported() -> None:
    c = ServerConnection()
    body = struct.pack("!i", 196610) + b"user\0u\0_pq_.foo\0x\0\0"
    c.receive_data(struct.pack("!i", len(body) + 4) + body)
    ev = c.next_event()
    assert isinstance(ev, StartupReceived) and ev.unsupported_options == ["_pq_.foo"]


def test_startup_length_bounds() -> None:
    for length in (3, 7, 10001):
        c = ServerConnection()
        c.receive_data(struct.pack("!ii", length, 196608))
        assert_fails(c, "08P01", length)


def test_startup_without_user() -> None:
    c = ServerConnection()
    body = struct.pack("!i", 196608) + b"database\0x\0\0"
    c.receive_data(struct.pack("!i", len(body) + 4) + body)
    assert_fails(c, "28000")


def test_auth_phase_accepts_only_password_messages() -> None:
    c = ServerConnection()
    c.receive_data(wire.startup() + wire.password("secret"))
    assert isinstance(c.next_event(), StartupReceived)
    assert c.next_event() == PasswordMessage(b"secret\0")
    c.receive_data(wire.query("select 1"))
    assert_fails(c, "08P01")


def test_unauthenticated_query_is_a_protocol_error() -> None:
    c = ServerConnection()
    c.receive_data(wire.startup() + wire.query("select 1"))
    assert isinstance(c.next_event(), StartupReceived)
    assert_fails(c, "08P01")


def test_simple_and_extended_messages() -> None:
    c = ready_conn()
    c.receive_data(wire.query("select 1") + wire.parse("select $1", "s1", (20,))
                   + wire.bind([b"5", None], stmt="s1", pformats=(0,), rformats=(1,))
                   + wire.describe("P") + wire.execute("", 10) + wire.SYNC)
    evs = events(c)
    assert evs[0] == Query("select 1")
    assert evs[1] == Parse("s1", "select $1", [20])
    assert evs[2] == Bind("", "s1", [0], [b"5", None], [1])
    assert evs[3] == Describe("P", "")
    assert evs[4] == Execute("", 10)
    assert isinstance(evs[5], Sync)


def test_error_in_extended_discards_until_sync() -> None:
    c = ready_conn()
    c.receive_data(wire.parse("bad") + wire.bind() + wire.execute() + wire.SYNC + wire.query("select 2"))
    assert isinstance(c.next_event(), Parse)
    err = c.error(PgError("42601", "syntax error"))
    assert err[:1] == b"E"
    assert c.discarding
    assert isinstance(c.next_event(), Sync)     # Bind and Execute were discarded
    assert not c.discarding
    assert c.next_event() == Query("select 2")


def test_error_in_simple_query_does_not_discard() -> None:
    c = ready_conn()
    c.receive_data(wire.query("bad") + wire.query("good"))
    c.next_event()
    c.error(PgError("42601", "syntax error"))
    assert c.next_event() == Query("good")


def test_transaction_status_in_ready_for_query() -> None:
    c = ready_conn()
    assert c.ready_for_query() == b"Z\0\0\0\5I"
    c.transaction_status = "T"
    c.error(PgError("42601", "x"))
    assert c.ready_for_query() == b"Z\0\0\0\5E"


def test_oversized_message_is_54000() -> None:
    c = ready_conn()
    c.receive_data(b"Q" + struct.pack("!i", 100_000))
    assert_fails(c, "54000")
    assert c.closed


def test_truncated_and_malformed_messages_are_08P01() -> None:
    bad = [
        wire.msg(b"Q", b"no terminator"),
        wire.msg(b"P", b"s\0select 1\0"),                      # missing parameter count
        wire.msg(b"P", b"s\0select 1\0\0\x02\0\0\0\x17"),       # 2 oids declared, 1 present
        wire.msg(b"B", b"\0\0\0\0\0\x01\0\0\0\x09ab\0\0"),      # parameter longer than message
        wire.msg(b"B", b"\0\0\0\x01\0\x05\0\0\0\0"),            # format code 5
        wire.msg(b"D", b"Xname\0"),                             # bad describe kind
        wire.msg(b"E", b"\0\0\0"),                              # short Execute
        wire.msg(b"S", b"extra"),
        wire.msg(b"Q", b"select 1\0trailing"),
        b"Q\0\0\0\x02",                                         # length below 4
        wire.msg(b"z", b""),                                    # unknown type
        wire.msg(b"p", b"pw\0"),                                # password after authentication
    ]
    for data in bad:
        c = ready_conn()
        c.receive_data(data)
        ev = c.next_event()
        assert isinstance(ev, ConnectionFailed), data
        assert ev.sqlstate in ("08P01", "22021"), (data, ev)


def test_copy_messages_outside_copy_are_ignored() -> None:
    c = ready_conn()
    c.receive_data(wire.msg(b"d", b"xx") * 1000 + wire.msg(b"c") + wire.query("select 1"))
    assert c.next_event() == Query("select 1")


def test_eof_and_terminate() -> None:
    c = ready_conn()
    c.receive_data(wire.TERMINATE)
    assert isinstance(c.next_event(), Terminate)
    c2 = ready_conn()
    c2.receive_data(b"")
    assert isinstance(c2.next_event(), Terminate)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300))
def test_random_bytes_never_raise(data: bytes) -> None:
    for conn in (ServerConnection(8192), ready_conn()):
        conn.receive_data(data)
        for _ in range(200):
            ev = conn.next_event()
            if ev is NEED_DATA or ev is PAUSED or isinstance(ev, ConnectionFailed | Terminate):
                break
