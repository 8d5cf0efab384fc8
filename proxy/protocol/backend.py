"""Backend (server -> client) message builders; each returns the complete wire bytes."""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence

from pgcore.pgtypes import type_size
from pgcore.sqlstate import SqlError

_I = struct.Struct("!i")
_HDR = struct.Struct("!ci")


def message(kind: bytes, body: bytes = b"") -> bytes:
    """Frame a body with its type byte and length word."""
    return _HDR.pack(kind, len(body) + 4) + body


def _cstr(s: str) -> bytes:
    return s.encode("utf-8") + b"\0"


AUTH_OK = message(b"R", _I.pack(0))
AUTH_CLEARTEXT = message(b"R", _I.pack(3))
PARSE_COMPLETE = message(b"1")
BIND_COMPLETE = message(b"2")
CLOSE_COMPLETE = message(b"3")
NO_DATA = message(b"n")
PORTAL_SUSPENDED = message(b"s")
EMPTY_QUERY = message(b"I")
READY = {s: message(b"Z", s.encode()) for s in "ITE"}


def auth_md5(salt: bytes) -> bytes:
    return message(b"R", _I.pack(5) + salt)


def auth_sasl(mechanisms: Iterable[str]) -> bytes:
    return message(b"R", _I.pack(10) + b"".join(_cstr(m) for m in mechanisms) + b"\0")


def auth_sasl_continue(data: bytes) -> bytes:
    return message(b"R", _I.pack(11) + data)


def auth_sasl_final(data: bytes) -> bytes:
    return message(b"R", _I.pack(12) + data)


def parameter_status(name: str, value: str) -> bytes:
    return message(b"S", _cstr(name) + _cstr(value))


def backend_key_data(pid: int, secret: int) -> bytes:
    return message(b"K", struct.pack("!iI", pid, secret))


def negotiate_protocol_version(minor: int, options: Sequence[str]) -> bytes:
    body = struct.pack("!ii", minor, len(options)) + b"".join(_cstr(o) for o in options)
    return message(b"v", body)


def ready_for_query(status: str) -> bytes:
    return READY[status]


def command_complete(tag: str) -> bytes:
    return message(b"C", _cstr(tag))


def parameter_description(oids: Sequence[int]) -> bytes:
    return message(b"t", struct.pack(f"!h{len(oids)}I", len(oids), *oids))


# (name, table_oid, column_number, type_oid, type_size, type_modifier)
Field = tuple[str, int, int, int, int, int]

def field(name: str, type_oid: int) -> Field:
    """A RowDescription field for a computed column (no source table)."""
    return (name, 0, 0, type_oid, type_size(type_oid), -1)


def row_description(fields: Sequence[Field], formats: Sequence[int] = ()) -> bytes:
    """RowDescription; `formats` is empty (all text), one code for all, or one per column."""
    parts = [struct.pack("!h", len(fields))]
    nf = len(formats)
    for i, (name, table_oid, attnum, type_oid, size, typmod) in enumerate(fields):
        fmt = 0 if nf == 0 else formats[0] if nf == 1 else formats[i]
        parts.append(_cstr(name) + struct.pack("!IhIhih", table_oid, attnum, type_oid, size, typmod, fmt))
    return message(b"T", b"".join(parts))


def data_row(values: Sequence[bytes | None]) -> bytes:
    parts = [struct.pack("!h", len(values))]
    for v in values:
        if v is None:
            parts.append(b"\xff\xff\xff\xff")
        else:
            parts.append(_I.pack(len(v)))
            parts.append(v)
    body = b"".join(parts)
    return _HDR.pack(b"D", len(body) + 4) + body

def data_row_values(data_row: bytes) -> list[bytes | None]:
    """The column values of a DataRow message (None for NULL)."""
    (count,) = struct.unpack_from("!h", data_row, 5)
    pos, out = 7, list[bytes | None]()
    for _ in range(count):
        (n,) = struct.unpack_from("!i", data_row, pos)
        pos += 4
        if n < 0:
            out.append(None)
        else:
            out.append(data_row[pos:pos + n])
            pos += n
    return out


def _notice_fields(severity: str, sqlstate: str, message_: str, detail: str | None, hint: str | None,
                   position: int | None) -> bytes:
    parts = [b"S", _cstr(severity), b"V", _cstr(severity), b"C", _cstr(sqlstate), b"M", _cstr(message_)]
    if detail:
        parts += [b"D", _cstr(detail)]
    if hint:
        parts += [b"H", _cstr(hint)]
    if position:
        parts += [b"P", _cstr(str(position))]
    parts.append(b"\0")
    return b"".join(parts)


def error_response(err: SqlError, severity: str | None = None) -> bytes:
    sev = severity or err.severity
    return message(b"E", _notice_fields(sev, err.sqlstate, err.message, err.detail, err.hint, err.position))


def notice_response(text: str, severity: str = "NOTICE", sqlstate: str = "00000") -> bytes:
    return message(b"N", _notice_fields(severity, sqlstate, text, None, None, None))


def single_byte(accept: bool) -> bytes:
    """The one-byte answer to SSLRequest / GSSENCRequest."""
    return b"S" if accept else b"N"
