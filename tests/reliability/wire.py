"""Hand-made PostgreSQL v3 frontend messages and a backend stream splitter, for tests that must control
every byte (fuzzing, out-of-order messages) or read every byte (wire-leak checks)."""

from __future__ import annotations

import hashlib
import socket
import struct
import time
from dataclasses import dataclass

PROTOCOL_3 = 196608
SSL_REQUEST = 80877103


def msg(kind: bytes, body: bytes = b"") -> bytes:
    """A typed frontend message."""
    return kind + struct.pack("!i", len(body) + 4) + body


def cstr(s: str | bytes) -> bytes:
    return (s.encode() if isinstance(s, str) else s) + b"\0"


def startup(user: str, database: str = "adult", **extra: str) -> bytes:
    """A protocol 3.0 start-up packet."""
    body = struct.pack("!i", PROTOCOL_3) + cstr("user") + cstr(user) + cstr("database") + cstr(database)
    for k, v in extra.items():
        body += cstr(k) + cstr(v)
    body += b"\0"
    return struct.pack("!i", len(body) + 4) + body


def ssl_request() -> bytes:
    return struct.pack("!ii", 8, SSL_REQUEST)


def query(sql: str) -> bytes:
    return msg(b"Q", cstr(sql))


def parse(sql: str, name: str = "", oids: tuple[int, ...] = ()) -> bytes:
    return msg(b"P", cstr(name) + cstr(sql) + struct.pack("!h", len(oids)) +
               b"".join(struct.pack("!I", o) for o in oids))


def bind(params: tuple[bytes | None, ...] = (), portal: str = "", stmt: str = "") -> bytes:
    body = cstr(portal) + cstr(stmt) + struct.pack("!h", 0) + struct.pack("!h", len(params))
    for p in params:
        body += struct.pack("!i", -1) if p is None else struct.pack("!i", len(p)) + p
    return msg(b"B", body + struct.pack("!h", 0))


def describe(kind: str = "P", name: str = "") -> bytes:
    return msg(b"D", kind.encode() + cstr(name))


def execute(portal: str = "", max_rows: int = 0) -> bytes:
    return msg(b"E", cstr(portal) + struct.pack("!i", max_rows))


SYNC = msg(b"S")
FLUSH = msg(b"H")
TERMINATE = msg(b"X")


def md5_password(user: str, password: str, salt: bytes) -> bytes:
    inner = hashlib.md5((password + user).encode()).hexdigest()
    return msg(b"p", cstr("md5" + hashlib.md5(inner.encode() + salt).hexdigest()))


@dataclass
class BackendMessage:
    kind: str
    body: bytes

    def error_fields(self) -> dict[str, str]:
        """Fields of an ErrorResponse or NoticeResponse, keyed by their one-letter code."""
        out: dict[str, str] = {}
        for part in self.body.split(b"\0"):
            if part:
                out[chr(part[0])] = part[1:].decode("utf-8", "replace")
        return out

    def auth_code(self) -> int | None:
        return struct.unpack("!i", self.body[:4])[0] if self.kind == "R" and len(self.body) >= 4 else None


def split_backend(data: bytes, expect_negotiation_byte: bool = False) -> tuple[list[BackendMessage], bytes]:
    """Split a server byte stream into messages; returns the messages and the incomplete tail."""
    out: list[BackendMessage] = []
    pos = 0
    if expect_negotiation_byte and data[:1] in (b"N", b"S"):
        out.append(BackendMessage("ssl", data[:1]))
        pos = 1
    while len(data) - pos >= 5:
        kind = chr(data[pos])
        (length,) = struct.unpack_from("!i", data, pos + 1)
        if length < 4:
            raise ValueError(f"server sent an invalid length {length} for {kind!r}")
        if len(data) - pos < length + 1:
            break
        out.append(BackendMessage(kind, data[pos + 5:pos + 1 + length]))
        pos += length + 1
    return out, data[pos:]


def recv_all(sock: socket.socket, timeout: float, until: bytes | None = None) -> tuple[bytes, bool]:
    """Read until the peer closes or `timeout` passes (or a message of kind `until` arrives).

    Returns (bytes, closed_by_peer)."""
    sock.settimeout(0.05)
    data = bytearray()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            if until is not None and _has_kind(bytes(data), until):
                return bytes(data), False
            continue
        except (ConnectionResetError, BrokenPipeError):
            return bytes(data), True
        if not chunk:
            return bytes(data), True
        data += chunk
        if until is not None and _has_kind(bytes(data), until):
            return bytes(data), False
    return bytes(data), False


def _has_kind(data: bytes, kinds: bytes) -> bool:
    try:
        msgs, _ = split_backend(data, expect_negotiation_byte=True)
    except ValueError:
        return False
    return any(m.kind.encode() in kinds for m in msgs if m.kind != "ssl")
