"""Frontend (client -> server) messages as events, and their strict parsers."""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from .errors import ProtocolViolation

PROTOCOL_3_0 = 196608
SSL_REQUEST_CODE = 80877103
GSSENC_REQUEST_CODE = 80877104
CANCEL_REQUEST_CODE = 80877102
MAX_STARTUP_PACKET = 10000


@dataclass(slots=True)
class StartupReceived:
    protocol: int
    params: dict[str, str]
    unsupported_options: list[str] = field(default_factory=list)


@dataclass(slots=True)
class SSLRequested:
    pass


@dataclass(slots=True)
class GSSENCRequested:
    pass


@dataclass(slots=True)
class CancelRequested:
    pid: int
    secret: int


@dataclass(slots=True)
class PasswordMessage:
    data: bytes


@dataclass(slots=True)
class Query:
    sql: str


@dataclass(slots=True)
class Parse:
    name: str
    sql: str
    param_oids: list[int]


@dataclass(slots=True)
class Bind:
    portal: str
    statement: str
    param_formats: list[int]
    params: list[bytes | None]
    result_formats: list[int]


@dataclass(slots=True)
class Describe:
    kind: str  # 'S' statement or 'P' portal
    name: str


@dataclass(slots=True)
class Execute:
    portal: str
    max_rows: int


@dataclass(slots=True)
class Close:
    kind: str
    name: str


@dataclass(slots=True)
class Sync:
    pass


@dataclass(slots=True)
class Flush:
    pass


@dataclass(slots=True)
class Terminate:
    pass


@dataclass(slots=True)
class FunctionCall:
    oid: int


@dataclass(slots=True)
class ConnectionFailed:
    """The byte stream is unusable; report `error` as FATAL and close."""

    sqlstate: str
    message: str


Event = (StartupReceived | SSLRequested | GSSENCRequested | CancelRequested | PasswordMessage | Query | Parse
         | Bind | Describe | Execute | Close | Sync | Flush | Terminate | FunctionCall | ConnectionFailed)


class _Reader:
    """Cursor over one message body that refuses to read past its end."""

    __slots__ = ("buf", "pos", "end", "what")

    def __init__(self, buf: bytes | memoryview, what: str) -> None:
        self.buf = bytes(buf)
        self.pos = 0
        self.end = len(self.buf)
        self.what = what

    def _need(self, n: int) -> None:
        if n < 0 or self.pos + n > self.end:
            raise ProtocolViolation(f"invalid {self.what} message: truncated")

    def _int(self, fmt: str, n: int) -> int:
        """The ``n``-byte big-endian integer at the cursor (``struct`` format ``fmt``)."""
        self._need(n)
        (v,) = struct.unpack_from(fmt, self.buf, self.pos)
        self.pos += n
        return int(v)

    def int16(self) -> int:
        return self._int("!h", 2)

    def uint16(self) -> int:
        return self._int("!H", 2)

    def int32(self) -> int:
        return self._int("!i", 4)

    def uint32(self) -> int:
        return self._int("!I", 4)

    def byte(self) -> str:
        self._need(1)
        v = chr(self.buf[self.pos])
        self.pos += 1
        return v

    def cstring(self) -> str:
        nul = self.buf.find(b"\0", self.pos, self.end)
        if nul < 0:
            raise ProtocolViolation(f"invalid {self.what} message: string is not NUL-terminated")
        raw = self.buf[self.pos:nul]
        self.pos = nul + 1
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise ProtocolViolation(f"invalid {self.what} message: string is not valid UTF-8",
                                    "22021") from None

    def take(self, n: int) -> bytes:
        self._need(n)
        v = self.buf[self.pos:self.pos + n]
        self.pos += n
        return v

    def rest(self) -> bytes:
        v = self.buf[self.pos:self.end]
        self.pos = self.end
        return v

    def done(self) -> None:
        if self.pos != self.end:
            raise ProtocolViolation(f"invalid {self.what} message: {self.end - self.pos} unexpected "
                                    f"trailing bytes")


def parse_startup(body: bytes) -> Event:
    """Parse an untyped start-up packet body (after its length word)."""
    r = _Reader(body, "startup packet")
    code = r.int32()
    if code == SSL_REQUEST_CODE:
        r.done()
        return SSLRequested()
    if code == GSSENC_REQUEST_CODE:
        r.done()
        return GSSENCRequested()
    if code == CANCEL_REQUEST_CODE:
        pid = r.int32()
        # PostgreSQL 18 allows longer cancel keys; protocol 3.0 keys are 4 bytes.
        secret = r.rest()
        if len(secret) < 4:
            raise ProtocolViolation("invalid cancel request: key too short")
        return CancelRequested(pid, int.from_bytes(secret, "big", signed=False))
    major = code >> 16
    if major != 3:
        raise ProtocolViolation(f"unsupported frontend protocol {major}.{code & 0xFFFF}: server supports "
                                f"3.0 to 3.0", "0A000")
    params: dict[str, str] = {}
    unsupported: list[str] = []
    while True:
        key = r.cstring()
        if key == "":
            break
        value = r.cstring()
        if key.startswith("_pq_."):
            unsupported.append(key)
        else:
            params[key] = value
    r.done()
    if "user" not in params or not params["user"]:
        raise ProtocolViolation("no PostgreSQL user name specified in startup packet", "28000")
    return StartupReceived(code, params, unsupported)


def _formats(r: _Reader) -> list[int]:
    n = r.int16()
    if n < 0:
        raise ProtocolViolation(f"invalid {r.what} message: negative format count")
    out = [r.int16() for _ in range(n)]
    for f in out:
        if f not in (0, 1):
            raise ProtocolViolation(f"unsupported format code: {f}")
    return out


_H = struct.Struct("!h")
_I32 = struct.Struct("!i")
_SYNC = Sync()
_FLUSH = Flush()


def _fast_formats(body: bytes, pos: int) -> tuple[list[int], int] | None:
    """The format-code list at ``pos`` of a Bind body and the position after it; None when its count is
    negative or a code is neither 0 (text) nor 1 (binary). Raises struct.error when the body is too short."""
    (n,) = _H.unpack_from(body, pos)
    if n < 0:
        return None
    pos += 2
    formats = list(struct.unpack_from(f"!{n}h", body, pos)) if n else []
    for f in formats:
        if f != 0 and f != 1:
            return None
    return formats, pos + 2 * n


def _fast_bind(body: bytes) -> Bind | None:
    """Bind parsed with direct struct reads (the hot path); None sends it to the checked parser."""
    try:
        a = body.index(b"\0")
        b = body.index(b"\0", a + 1)
        portal = body[:a].decode("utf-8")
        stmt = body[a + 1:b].decode("utf-8")
        got = _fast_formats(body, b + 1)
        if got is None:
            return None
        pformats, pos = got
        (n,) = _H.unpack_from(body, pos)
        if n < 0:
            return None
        pos += 2
        params: list[bytes | None] = []
        for _ in range(n):
            (ln,) = _I32.unpack_from(body, pos)
            pos += 4
            if ln == -1:
                params.append(None)
            elif ln < 0 or pos + ln > len(body):
                return None
            else:
                params.append(body[pos:pos + ln])
                pos += ln
        got = _fast_formats(body, pos)
        if got is None:
            return None
        rformats, pos = got
    except (ValueError, struct.error, UnicodeDecodeError):
        return None
    if pos != len(body) or len(pformats) not in (0, 1, n):
        return None
    return Bind(portal, stmt, pformats, params, rformats)


def parse_message(kind: str, body: bytes) -> Event:
    """Parse one typed frontend message body; raises ProtocolViolation when it is malformed."""
    if kind == "B":
        fast = _fast_bind(body)
        if fast is not None:
            return fast
        return _checked_bind(body)
    if kind == "E":
        nul = body.find(b"\0")
        if nul >= 0 and len(body) == nul + 5:
            try:
                portal = body[:nul].decode("utf-8")
            except UnicodeDecodeError:
                raise ProtocolViolation("invalid Execute message: string is not valid UTF-8", "22021") from None
            (max_rows,) = _I32.unpack_from(body, nul + 1)
            return Execute(portal, max(max_rows, 0))
    if kind == "S" and not body:
        return _SYNC
    return _parse_checked(kind, body)


def _checked_bind(body: bytes) -> Bind:
    r = _Reader(body, "Bind")
    portal = r.cstring()
    stmt = r.cstring()
    pformats = _formats(r)
    n = r.int16()
    if n < 0:
        raise ProtocolViolation("invalid Bind message: negative parameter count")
    params: list[bytes | None] = []
    for _ in range(n):
        length = r.int32()
        if length == -1:
            params.append(None)
        elif length < 0:
            raise ProtocolViolation("invalid Bind message: negative parameter length")
        else:
            params.append(r.take(length))
    rformats = _formats(r)
    r.done()
    if len(pformats) not in (0, 1, n):
        raise ProtocolViolation(f"bind message has {len(pformats)} parameter formats but {n} parameters")
    return Bind(portal, stmt, pformats, params, rformats)


def _parse_checked(kind: str, body: bytes) -> Event:
    if kind == "Q":
        r = _Reader(body, "Query")
        sql = r.cstring()
        r.done()
        return Query(sql)
    if kind == "P":
        r = _Reader(body, "Parse")
        name = r.cstring()
        sql = r.cstring()
        n = r.int16()
        if n < 0:
            raise ProtocolViolation("invalid Parse message: negative parameter count")
        oids = [r.uint32() for _ in range(n)]
        r.done()
        return Parse(name, sql, oids)
    if kind == "B":
        return _checked_bind(body)
    if kind in ("D", "C"):
        r = _Reader(body, "Describe" if kind == "D" else "Close")
        which = r.byte()
        name = r.cstring()
        r.done()
        if which not in ("S", "P"):
            raise ProtocolViolation(f"invalid {r.what} message subtype {ord(which)}")
        return Describe(which, name) if kind == "D" else Close(which, name)
    if kind == "E":
        r = _Reader(body, "Execute")
        portal = r.cstring()
        max_rows = r.int32()
        r.done()
        return Execute(portal, max(max_rows, 0))
    if kind in ("S", "H", "X"):
        if body:
            raise ProtocolViolation(f"invalid message format: '{kind}' carries {len(body)} unexpected bytes")
        return _SYNC if kind == "S" else _FLUSH if kind == "H" else Terminate()
    if kind == "p":
        return PasswordMessage(bytes(body))
    if kind == "F":
        r = _Reader(body, "FunctionCall")
        return FunctionCall(r.uint32())
    raise ProtocolViolation(f"invalid frontend message type {ord(kind)}")
