"""The authentication exchange driven with bytes alone: no socket, no server, a real SCRAM client (scramp)."""

from __future__ import annotations

import hashlib
import struct

import pytest
from scramp import ScramClient

from proxy.config import User
from proxy.protocol.errors import PgError
from proxy.server.auth import AuthFailed, Exchange, authenticate, md5_secret, scram_verifier


def auth_request(msg: bytes) -> tuple[int, bytes]:
    """Split an AuthenticationXXX message into its code and payload, checking the framing."""
    assert msg[:1] == b"R"
    (length,) = struct.unpack("!i", msg[1:5])
    assert length == len(msg) - 1
    (code,) = struct.unpack("!i", msg[5:9])
    return code, msg[9:]


def finish(exchange: Exchange, answer: bytes) -> bytes:
    """Send the client's last answer; the exchange must end and return what precedes AuthenticationOk."""
    with pytest.raises(StopIteration) as done:
        exchange.send(answer)
    value = done.value.value
    assert isinstance(value, bytes)
    return value


def scram_login(user: User | None, name: str, password: str) -> tuple[ScramClient, Exchange, bytes]:
    """Run SCRAM up to the client's final message; returns the client, the exchange and that message."""
    exchange = authenticate(name, user, tls=False, allow_cleartext=False)
    code, payload = auth_request(next(exchange))
    assert code == 10 and payload == b"SCRAM-SHA-256\0\0"
    client = ScramClient(["SCRAM-SHA-256"], name, password)
    first = client.get_client_first().encode()
    code, server_first = auth_request(exchange.send(b"SCRAM-SHA-256\0" + struct.pack("!i", len(first)) + first))
    assert code == 11
    client.set_server_first(server_first.decode())
    return client, exchange, client.get_client_final().encode()


def test_scram_right_password_proves_both_sides() -> None:
    user = User("ana", "scram-sha-256", scram_verifier("s3cret", iterations=4096))
    client, exchange, final = scram_login(user, "ana", "s3cret")
    code, server_final = auth_request(finish(exchange, final))
    assert code == 12
    client.set_server_final(server_final.decode())   # raises unless the server knew the verifier


def test_scram_wrong_password_fails_with_28P01_after_the_full_exchange() -> None:
    user = User("ana", "scram-sha-256", scram_verifier("s3cret"))
    _, exchange, final = scram_login(user, "ana", "wrong")
    with pytest.raises(AuthFailed) as info:
        exchange.send(final)
    assert info.value.sqlstate == "28P01" and info.value.severity == "FATAL"
    assert 'password authentication failed for user "ana"' in info.value.message


def test_unknown_user_gets_the_same_exchange_and_message() -> None:
    _, exchange, final = scram_login(None, "nobody", "whatever")
    with pytest.raises(AuthFailed) as info:
        exchange.send(final)
    assert 'password authentication failed for user "nobody"' in info.value.message


def test_scram_with_a_broken_verifier_refuses_like_an_unknown_user() -> None:
    _, exchange, final = scram_login(User("ana", "scram-sha-256", "not a verifier"), "ana", "s3cret")
    with pytest.raises(AuthFailed):
        exchange.send(final)


@pytest.mark.parametrize("answer,sqlstate", [
    (b"SCRAM-SHA-256\0\x00\x00", "08P01"),                         # length word cut short
    (b"SCRAM-SHA-1\0" + struct.pack("!i", 3) + b"n,,", "28000"),   # a mechanism not offered
    (b"SCRAM-SHA-256\0" + struct.pack("!i", 99) + b"n,,", "08P01"),  # length disagrees with the data
])
def test_malformed_sasl_initial_response_is_fatal(answer: bytes, sqlstate: str) -> None:
    exchange = authenticate("ana", User("ana", "scram-sha-256", scram_verifier("x")), tls=False,
                            allow_cleartext=False)
    next(exchange)
    with pytest.raises(PgError) as info:
        exchange.send(answer)
    assert info.value.sqlstate == sqlstate and info.value.severity == "FATAL"


@pytest.mark.parametrize("password,ok", [("m5pass", True), ("other", False)])
def test_md5_checks_the_salted_hash(password: str, ok: bool) -> None:
    exchange = authenticate("bob", User("bob", "md5", md5_secret("bob", "m5pass")), tls=False,
                            allow_cleartext=False)
    code, salt = auth_request(next(exchange))
    assert code == 5 and len(salt) == 4
    inner = hashlib.md5(password.encode() + b"bob").hexdigest()
    answer = ("md5" + hashlib.md5(inner.encode() + salt).hexdigest()).encode() + b"\0"
    if ok:
        assert finish(exchange, answer) == b""
    else:
        with pytest.raises(AuthFailed):
            exchange.send(answer)


def test_cleartext_refused_without_tls_before_asking_for_the_password() -> None:
    exchange = authenticate("cl", User("cl", "password", md5_secret("cl", "pw")), tls=False, allow_cleartext=False)
    with pytest.raises(AuthFailed):
        next(exchange)


@pytest.mark.parametrize("tls,allow", [(True, False), (False, True)])
def test_cleartext_over_tls_or_when_allowed(tls: bool, allow: bool) -> None:
    exchange = authenticate("cl", User("cl", "password", md5_secret("cl", "pw")), tls=tls, allow_cleartext=allow)
    code, _ = auth_request(next(exchange))
    assert code == 3
    assert finish(exchange, b"pw\0") == b""


def test_cleartext_password_packet_must_be_one_c_string() -> None:
    exchange = authenticate("cl", User("cl", "password", md5_secret("cl", "pw")), tls=True, allow_cleartext=False)
    next(exchange)
    with pytest.raises(PgError) as info:
        exchange.send(b"pw\0extra\0")
    assert info.value.sqlstate == "08P01"


def test_trust_needs_no_exchange() -> None:
    with pytest.raises(StopIteration) as done:
        next(authenticate("t", User("t", "trust"), tls=False, allow_cleartext=False))
    assert done.value.value == b""
