"""Frontend message builders for byte-level tests (what a client would send)."""

from __future__ import annotations

import struct


def msg(kind: bytes, body: bytes = b"") -> bytes:
    return kind + struct.pack("!i", len(body) + 4) + body


def cstr(s: str) -> bytes:
    return s.encode() + b"\0"


def startup(user: str = "analyst", database: str = "adult", version: int = 196608, **extra: str) -> bytes:
    params = {"user": user, "database": database, **extra}
    body = struct.pack("!i", version) + b"".join(cstr(k) + cstr(v) for k, v in params.items()) + b"\0"
    return struct.pack("!i", len(body) + 4) + body


def ssl_request() -> bytes:
    return struct.pack("!ii", 8, 80877103)


def gssenc_request() -> bytes:
    return struct.pack("!ii", 8, 80877104)


def cancel_request(pid: int, secret: int) -> bytes:
    return struct.pack("!iiiI", 16, 80877102, pid, secret)


def query(sql: str) -> bytes:
    return msg(b"Q", cstr(sql))


def parse(sql: str, name: str = "", oids: tuple[int, ...] = ()) -> bytes:
    return msg(b"P", cstr(name) + cstr(sql) + struct.pack(f"!h{len(oids)}I", len(oids), *oids))


def bind(params: list[bytes | None] = (), portal: str = "", stmt: str = "", pformats: tuple[int, ...] = (),
         rformats: tuple[int, ...] = ()) -> bytes:  # type: ignore[assignment]
    body = cstr(portal) + cstr(stmt) + struct.pack(f"!h{len(pformats)}h", len(pformats), *pformats)
    body += struct.pack("!h", len(params))
    for p in params:
        body += b"\xff\xff\xff\xff" if p is None else struct.pack("!i", len(p)) + p
    body += struct.pack(f"!h{len(rformats)}h", len(rformats), *rformats)
    return msg(b"B", body)


def describe(kind: str = "P", name: str = "") -> bytes:
    return msg(b"D", kind.encode() + cstr(name))


def execute(portal: str = "", max_rows: int = 0) -> bytes:
    return msg(b"E", cstr(portal) + struct.pack("!i", max_rows))


def close(kind: str = "S", name: str = "") -> bytes:
    return msg(b"C", kind.encode() + cstr(name))


SYNC = msg(b"S")
FLUSH = msg(b"H")
TERMINATE = msg(b"X")


def password(pw: str) -> bytes:
    return msg(b"p", cstr(pw))


def split_backend(data: bytes) -> list[tuple[str, bytes]]:
    """Backend byte stream -> [(type, body)]."""
    out = []
    i = 0
    while i < len(data):
        kind = chr(data[i])
        (length,) = struct.unpack_from("!i", data, i + 1)
        out.append((kind, data[i + 5:i + 1 + length]))
        i += 1 + length
    return out


def error_fields(body: bytes) -> dict[str, str]:
    return {chr(p[0]): p[1:].decode() for p in body.split(b"\0") if p}
