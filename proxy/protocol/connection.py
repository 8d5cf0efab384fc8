"""Per-connection v3 protocol state machine: bytes in, events out; no sockets, no SQL.

The server feeds received bytes with `receive_data`, pulls events one at a time with `next_event`, and
builds the replies that change protocol state (ReadyForQuery, ErrorResponse, the SSL answer) through this
object so that the phase, the transaction status and the discard-until-Sync rule stay consistent.
Events are pulled one at a time because an error in the extended protocol must discard messages that a
client already pipelined behind it.
"""

from __future__ import annotations

import enum
import struct

from pgcore.sqlstate import SqlError

from . import backend
from .errors import PgError, ProtocolViolation
from .frontend import (
    MAX_STARTUP_PACKET,
    CancelRequested,
    ConnectionFailed,
    Event,
    GSSENCRequested,
    SSLRequested,
    StartupReceived,
    Sync,
    Terminate,
    parse_message,
    parse_startup,
)


class Phase(enum.Enum):
    STARTUP = "startup"          # waiting for the start-up packet (or SSL/GSS/cancel request)
    NEGOTIATING = "negotiating"  # SSLRequest/GSSENCRequest seen; waiting for the server's one-byte answer
    AUTH = "auth"                # start-up seen; only password messages until authentication ends
    READY = "ready"              # normal operation (simple and extended query protocol)
    CLOSED = "closed"


class _Sentinel:
    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


NEED_DATA = _Sentinel("NEED_DATA")
PAUSED = _Sentinel("PAUSED")
_SKIP = _Sentinel("SKIP")

_EXTENDED_BYTES = frozenset(b"PBDECH")
_READY_BYTES = frozenset(b"QPBDECHSXFdcf")   # 'p' (password) after authentication is a violation
_AUTH_BYTES = frozenset(b"pX")
_COPY_BYTES = frozenset(b"dcf")
_READY = Phase.READY
_STARTUP = Phase.STARTUP
_CLOSED = Phase.CLOSED
_NEGOTIATING = Phase.NEGOTIATING
_LEN = struct.Struct("!i")


class ServerConnection:
    """Protocol state of one client connection, as seen by the server."""

    def __init__(self, max_message_bytes: int = 1 << 20) -> None:
        self.max_message_bytes = max_message_bytes
        self.phase = Phase.STARTUP
        self.transaction_status = "I"
        self.discarding = False      # an error in the extended protocol: skip messages until Sync
        self.in_extended = False     # extended-protocol messages received since the last Sync
        self._buf = bytearray()
        self._pos = 0                # bytes of _buf already consumed
        self._eof = False
        self._pending: ConnectionFailed | None = None   # a failure detected outside next_event

    # -- input ---------------------------------------------------------------------------------

    def receive_data(self, data: bytes) -> None:
        """Buffer bytes from the peer; b"" means the peer closed its side."""
        if data:
            self._buf += data
        else:
            self._eof = True

    def next_event(self) -> Event | _Sentinel:
        """The next complete event, NEED_DATA, or PAUSED while the server must answer an SSL request."""
        while True:
            phase = self.phase
            if phase is _CLOSED:
                if self._pending is not None:
                    failure, self._pending = self._pending, None
                    return failure
                return NEED_DATA if not self._eof else Terminate()
            if phase is _NEGOTIATING:
                return PAUSED
            try:
                ev = self._next_event()
            except ProtocolViolation as exc:
                return self._fail(exc.sqlstate, exc.message)
            if ev is _SKIP:
                continue
            if ev is None:
                if self._eof:
                    self.phase = Phase.CLOSED
                    return Terminate()
                return NEED_DATA
            if self.discarding:
                if isinstance(ev, Sync):
                    self.discarding = False
                    self.in_extended = False
                    return ev
                if isinstance(ev, Terminate):
                    self.phase = Phase.CLOSED
                    return ev
                continue
            return ev

    def _fail(self, sqlstate: str, message: str) -> ConnectionFailed:
        self.phase = Phase.CLOSED
        self._buf.clear()
        self._pos = 0
        return ConnectionFailed(sqlstate, message)

    def _next_event(self) -> Event | _Sentinel | None:
        buf = self._buf
        if self.phase is _STARTUP:
            if self._pos:
                del buf[:self._pos]
                self._pos = 0
            if len(buf) < 4:
                return None
            (length,) = _LEN.unpack_from(buf, 0)
            if length < 8 or length > MAX_STARTUP_PACKET:
                raise ProtocolViolation("invalid length of startup packet")
            if len(buf) < length:
                return None
            body = bytes(buf[4:length])
            del buf[:length]
            ev = parse_startup(body)
            if isinstance(ev, SSLRequested | GSSENCRequested):
                self.phase = Phase.NEGOTIATING
            elif isinstance(ev, CancelRequested):
                self.phase = Phase.CLOSED
            elif isinstance(ev, StartupReceived):
                self.phase = Phase.AUTH
            return ev
        pos = self._pos
        avail = len(buf) - pos
        if avail < 5:
            return None
        kind_byte = buf[pos]
        (length,) = _LEN.unpack_from(buf, pos + 1)
        if length < 4:
            raise ProtocolViolation(f"invalid message length {length}")
        if length > self.max_message_bytes:
            raise ProtocolViolation(f"message of {length} bytes exceeds the limit of {self.max_message_bytes} "
                                    f"bytes (server.max_message_bytes)", "54000")
        phase = self.phase
        if phase is _READY:
            if kind_byte not in _READY_BYTES:
                raise ProtocolViolation(f"invalid frontend message type {kind_byte}")
        elif kind_byte not in _AUTH_BYTES:   # phase is AUTH
            raise ProtocolViolation(f"expected password response, got message type {kind_byte}")
        if avail < length + 1:
            return None
        end = pos + length + 1
        body = bytes(memoryview(buf)[pos + 5:end])
        if end == len(buf):
            buf.clear()
            self._pos = 0
        elif end > 65536:
            # Compact now and then so that a long pipelined burst does not keep its consumed prefix.
            del buf[:end]
            self._pos = 0
        else:
            self._pos = end
        if kind_byte in _COPY_BYTES:
            # CopyData/CopyDone/CopyFail outside COPY are ignored, as PostgreSQL does.
            return _SKIP
        ev = parse_message(chr(kind_byte), body)
        if kind_byte in _EXTENDED_BYTES:
            self.in_extended = True
        elif kind_byte == 83 or kind_byte == 81:   # Sync, Query
            self.in_extended = False
        elif kind_byte == 88:                      # Terminate
            self.phase = Phase.CLOSED
        return ev

    # -- output that changes protocol state ------------------------------------------------------

    def answer_negotiation(self, accept: bool) -> bytes:
        """The one-byte answer to SSLRequest/GSSENCRequest; after accepting, buffered plaintext is an attack."""
        if self.phase is not Phase.NEGOTIATING:
            raise RuntimeError("no SSL/GSS request to answer")
        self.phase = Phase.STARTUP
        if accept and len(self._buf) > self._pos:
            # Bytes sent before the TLS handshake would be read as if protected (CVE-2021-23214).
            self._pending = self._fail("08P01", "received unencrypted data after SSL request")
        return backend.single_byte(accept)

    def authenticated(self) -> None:
        """Authentication succeeded: regular messages are accepted from now on."""
        if self.phase is Phase.AUTH:
            self.phase = Phase.READY

    def ready_for_query(self) -> bytes:
        return backend.ready_for_query(self.transaction_status)

    def error(self, err: SqlError) -> bytes:
        """ErrorResponse; moves to discard-until-Sync in the extended protocol, or closes when FATAL."""
        if err.severity in ("FATAL", "PANIC"):
            self.phase = Phase.CLOSED
        else:
            if self.in_extended:
                self.discarding = True
            if self.transaction_status == "T":
                self.transaction_status = "E"
        return backend.error_response(err)

    def fatal(self, sqlstate: str, message: str) -> bytes:
        return self.error(PgError(sqlstate, message, severity="FATAL"))

    @property
    def closed(self) -> bool:
        return self.phase is Phase.CLOSED
