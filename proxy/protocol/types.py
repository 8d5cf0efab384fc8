"""Text/binary codecs for the types the product exchanges (int, float8, numeric, text, bool, date,
timestamp, timestamptz); the oids come from the one table in pgcore.pgtypes."""

from __future__ import annotations

import math
import struct
from collections.abc import Callable
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal, InvalidOperation
from typing import Any

from pgcore.arrays import array_items
from pgcore.errors import Refusal
from pgcore.pgtypes import (
    BOOL,
    BPCHAR,
    DATE,
    ELEMENT_OF,
    FLOAT4,
    FLOAT8,
    INT2,
    INT4,
    INT8,
    INTERVAL,
    NAME,
    NUMERIC,
    OID,
    TEXT,
    TIME,
    TIMESTAMP,
    TIMESTAMPTZ,
    UNKNOWN,
    VARCHAR,
    type_name,
)

from .errors import PgError

_INTS = {INT2: "!h", INT4: "!i", INT8: "!q", OID: "!I"}
_TEXTISH = {TEXT, VARCHAR, BPCHAR, NAME, UNKNOWN, 0}


def _bad(oid: int, raw: bytes | str) -> PgError:
    shown = raw if isinstance(raw, str) else raw[:40].decode("utf-8", "replace")
    return PgError("22P02", f"invalid input syntax for type {type_name(oid)}: \"{shown}\"")


# -- parameters (client -> proxy) -----------------------------------------------------------------

_PG_EPOCH = datetime(2000, 1, 1)
_PG_EPOCH_DATE = date(2000, 1, 1)
_TRUE = {"t", "true", "y", "yes", "on", "1"}
_FALSE = {"f", "false", "n", "no", "off", "0"}


def decode_text(oid: int, raw: bytes) -> Any:
    """Decode a text-format parameter of type `oid` into a Python value."""
    try:
        s = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise PgError("22021", "invalid byte sequence for encoding \"UTF8\"") from None
    if oid in _TEXTISH:
        return s
    if oid in ELEMENT_OF:
        try:
            items = array_items(s)
        except Refusal as r:
            raise PgError(r.sqlstate, r.message) from None
        return [None if item is None else decode_text(ELEMENT_OF[oid], item.encode()) for item in items]
    try:
        if oid in _INTS:
            return int(s.strip())
        if oid in (FLOAT8, FLOAT4):
            return float(s.strip())
        if oid == NUMERIC:
            return Decimal(s.strip())
    except (ValueError, InvalidOperation):
        raise _bad(oid, s) from None
    if oid == BOOL:
        low = s.strip().lower()
        if low in _TRUE:
            return True
        if low in _FALSE:
            return False
        raise _bad(oid, s)
    return s


def _array_from_binary(oid: int, raw: bytes) -> list[Any]:
    """A binary array (ndim, flags, element oid, per dimension size and lower bound, then each element as
    a length and its bytes, -1 for NULL), flattened."""
    ndim, _flags, elem = struct.unpack_from("!iiI", raw, 0)
    if ndim < 0 or ndim > 6 or elem != ELEMENT_OF[oid]:
        raise struct.error("bad array header")
    pos, count = 12, 1
    for _ in range(ndim):
        size, _lower = struct.unpack_from("!ii", raw, pos)
        count, pos = count * size, pos + 8
    out: list[Any] = []
    for _ in range(count if ndim else 0):
        (length,) = struct.unpack_from("!i", raw, pos)
        pos += 4
        if length < 0:
            out.append(None)
            continue
        if pos + length > len(raw):
            raise struct.error("short array element")
        out.append(decode_binary(elem, raw[pos:pos + length]))
        pos += length
    if pos != len(raw):
        raise struct.error("trailing bytes")
    return out


def decode_binary(oid: int, raw: bytes) -> Any:
    """Decode a binary-format parameter of type `oid` into a Python value."""
    try:
        if oid in ELEMENT_OF:
            return _array_from_binary(oid, raw)
        if oid in _INTS:
            fmt = _INTS[oid]
            if len(raw) != struct.calcsize(fmt):
                raise _bad(oid, raw)
            return struct.unpack(fmt, raw)[0]
        if oid == FLOAT8:
            return struct.unpack("!d", raw)[0]
        if oid == FLOAT4:
            return struct.unpack("!f", raw)[0]
        if oid == BOOL:
            if len(raw) != 1:
                raise _bad(oid, raw)
            return raw != b"\0"
        if oid == NUMERIC:
            return _numeric_from_binary(raw)
        if oid == DATE:
            (days,) = struct.unpack("!i", raw)
            return _PG_EPOCH_DATE + timedelta(days=days)
        if oid in (TIMESTAMP, TIMESTAMPTZ):
            (micros,) = struct.unpack("!q", raw)
            ts = _PG_EPOCH + timedelta(microseconds=micros)
            return ts.replace(tzinfo=UTC) if oid == TIMESTAMPTZ else ts
        if oid in (TEXT, VARCHAR, BPCHAR, NAME, UNKNOWN):
            return raw.decode("utf-8")
    except struct.error:
        raise PgError("22P03", f"incorrect binary data format in parameter of type {type_name(oid)}") from None
    except UnicodeDecodeError:
        raise PgError("22021", "invalid byte sequence for encoding \"UTF8\"") from None
    raise PgError("0A000", f"binary format is not supported for parameters of type {type_name(oid)}",
                  hint="send this parameter in text format")


def _numeric_from_binary(raw: bytes) -> Decimal:
    ndigits, weight, sign, dscale = struct.unpack_from("!hhHh", raw, 0)
    if ndigits < 0 or len(raw) != 8 + 2 * ndigits:
        raise struct.error("bad numeric")
    if sign == 0xC000:
        return Decimal("NaN")
    if sign == 0xD000:
        return Decimal("Infinity")
    if sign == 0xF000:
        return Decimal("-Infinity")
    digits = struct.unpack_from(f"!{ndigits}H", raw, 8)
    value = 0
    for d in digits:
        value = value * 10000 + d
    exp = (weight - ndigits + 1) * 4
    out = Decimal(value).scaleb(exp)
    if sign == 0x4000:
        out = -out
    return out.quantize(Decimal(1).scaleb(-dscale)) if dscale >= 0 and out.is_finite() else out


# -- results (proxy -> client) --------------------------------------------------------------------

def _float_text(v: Any) -> bytes:
    f = float(v)
    if math.isnan(f):
        return b"NaN"
    if math.isinf(f):
        return b"Infinity" if f > 0 else b"-Infinity"
    s = repr(f)
    if s.endswith(".0"):
        s = s[:-2]
    return s.encode()


def _bool_text(v: Any) -> bytes:
    return b"t" if v else b"f"


def _numeric_text(v: Any) -> bytes:
    if isinstance(v, float):
        return _float_text(v)
    if isinstance(v, Decimal):
        if v.is_nan():
            return b"NaN"
        if v.is_infinite():
            return b"Infinity" if v > 0 else b"-Infinity"
        return format(v, "f").encode()
    return str(v).encode()


def _int_text(v: Any) -> bytes:
    return str(int(v)).encode()


def _str_text(v: Any) -> bytes:
    return str(v).encode("utf-8")


def _date_text(v: Any) -> bytes:
    return v.isoformat().encode() if isinstance(v, date) else str(v).encode()


def _clock(v: datetime) -> str:
    text = v.strftime("%Y-%m-%d %H:%M:%S")
    return text + (f".{v.microsecond:06d}".rstrip("0") if v.microsecond else "")


def _timestamp_text(v: Any) -> bytes:
    if not isinstance(v, datetime):
        return str(v).encode()
    return _clock(v.replace(tzinfo=None)).encode()


def _timestamptz_text(v: Any) -> bytes:
    """In the value's own zone (the executor moves values into the session's TimeZone), as PostgreSQL
    prints it: +HH, or +HH:MM for zones off the hour."""
    if not isinstance(v, datetime):
        return str(v).encode()
    if v.tzinfo is None:
        v = v.replace(tzinfo=UTC)
    off = v.utcoffset() or timedelta(0)
    sign = "-" if off < timedelta(0) else "+"
    minutes = abs(int(off.total_seconds())) // 60
    zone = f"{sign}{minutes // 60:02d}" + (f":{minutes % 60:02d}" if minutes % 60 else "")
    return (_clock(v) + zone).encode()


def _time_text(v: Any) -> bytes:
    return v.isoformat().encode() if isinstance(v, time) else str(v).encode()


TEXT_ENCODERS: dict[int, Callable[[Any], bytes]] = {
    DATE: _date_text, TIME: _time_text, TIMESTAMP: _timestamp_text, TIMESTAMPTZ: _timestamptz_text, INTERVAL: _str_text,
    INT8: _int_text, INT4: _int_text, INT2: _int_text, OID: _int_text, FLOAT8: _float_text,
    FLOAT4: _float_text, NUMERIC: _numeric_text, BOOL: _bool_text, TEXT: _str_text, VARCHAR: _str_text,
    NAME: _str_text, BPCHAR: _str_text, UNKNOWN: _str_text,
}


def _numeric_binary(v: Any) -> bytes:
    d = v if isinstance(v, Decimal) else Decimal(repr(v)) if isinstance(v, float) else Decimal(v)
    if d.is_nan():
        return struct.pack("!hhHh", 0, 0, 0xC000, 0)
    if d.is_infinite():
        return struct.pack("!hhHh", 0, 0, 0xD000 if d > 0 else 0xF000, 0)
    sign, digits, exp = d.as_tuple()
    assert isinstance(exp, int)
    dscale = max(-exp, 0)
    # Pad the decimal digits so that the point falls on a base-10000 boundary.
    ds = "".join(map(str, digits)) or "0"
    if exp > 0:
        ds += "0" * exp
        exp = 0
    int_len = len(ds) + exp
    frac = ds[int_len:] if int_len >= 0 else "0" * (-int_len) + ds
    ip = ds[:int_len] if int_len > 0 else ""
    ip = "0" * ((4 - len(ip) % 4) % 4) + ip
    frac = frac + "0" * ((4 - len(frac) % 4) % 4)
    groups = [int(ip[i:i + 4]) for i in range(0, len(ip), 4)] + [int(frac[i:i + 4])
                                                                  for i in range(0, len(frac), 4)]
    weight = len(ip) // 4 - 1
    while groups and groups[0] == 0:
        groups.pop(0)
        weight -= 1
    while groups and groups[-1] == 0:
        groups.pop()
    if not groups:
        weight = 0
    return struct.pack(f"!hhHh{len(groups)}H", len(groups), weight, 0x4000 if sign else 0, dscale, *groups)


def _micros(v: datetime) -> int:
    naive = v.astimezone(UTC).replace(tzinfo=None) if v.tzinfo is not None else v
    d = naive - _PG_EPOCH
    return (d.days * 86400 + d.seconds) * 1_000_000 + d.microseconds


BINARY_ENCODERS: dict[int, Callable[[Any], bytes]] = {
    DATE: lambda v: struct.pack("!i", (v - _PG_EPOCH_DATE).days),
    TIMESTAMP: lambda v: struct.pack("!q", _micros(v)),
    TIME: lambda v: struct.pack("!q", ((v.hour * 60 + v.minute) * 60 + v.second) * 1_000_000 + v.microsecond),
    TIMESTAMPTZ: lambda v: struct.pack("!q", _micros(v if v.tzinfo is not None else v.replace(tzinfo=UTC))),
    INT8: lambda v: struct.pack("!q", int(v)),
    INT4: lambda v: struct.pack("!i", int(v)),
    INT2: lambda v: struct.pack("!h", int(v)),
    OID: lambda v: struct.pack("!I", int(v)),
    FLOAT8: lambda v: struct.pack("!d", float(v)),
    FLOAT4: lambda v: struct.pack("!f", float(v)),
    BOOL: lambda v: b"\x01" if v else b"\x00",
    NUMERIC: _numeric_binary,
    TEXT: _str_text, VARCHAR: _str_text, NAME: _str_text, BPCHAR: _str_text, UNKNOWN: _str_text,
}


def encoder(oid: int, fmt: int) -> Callable[[Any], bytes]:
    """The encoder for one result column; raises 0A000 for binary output of an unsupported type."""
    if fmt == 0:
        return TEXT_ENCODERS.get(oid, _str_text)
    enc = BINARY_ENCODERS.get(oid)
    if enc is None:
        raise PgError("0A000", f"binary output is not supported for type {type_name(oid)}",
                      hint="request this column in text format")
    return enc
