"""A minimal asyncio v3 client that relays statements to PostgreSQL and returns wire-ready rows.

The proxy forwards catalog queries with the client's own parameter and result formats, so PostgreSQL
does the encoding and DataRow messages are relayed as raw bytes (no decode/re-encode per value).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import struct
from collections.abc import Sequence
from dataclasses import dataclass, field

from scramp import ScramClient

from ..protocol.backend import Field
from ..protocol.errors import PgError

_HDR = struct.Struct("!ci")
_MAX_PREPARED = 256


def _msg(kind: bytes, body: bytes) -> bytes:
    return _HDR.pack(kind, len(body) + 4) + body


def _cstr(s: str) -> bytes:
    return s.encode("utf-8") + b"\0"


RESET_SQL = "RESET ALL; CLOSE ALL; UNLISTEN *; DISCARD TEMP; DISCARD SEQUENCES"
"""What a pooled catalog backend runs before it serves another client."""

_EXECUTE_SYNC = _msg(b"E", b"\0\0\0\0\0") + _msg(b"S", b"")


def parse_error(body: bytes) -> PgError:
    """ErrorResponse/NoticeResponse fields -> PgError."""
    fields: dict[str, str] = {}
    for part in body.split(b"\0"):
        if part:
            fields[chr(part[0])] = part[1:].decode("utf-8", "replace")
    pos = fields.get("P")
    return PgError(fields.get("C", "XX000"), fields.get("M", "error"), detail=fields.get("D"),
                   hint=fields.get("H"), position=int(pos) if pos and pos.isdigit() else None,
                   severity=fields.get("V", fields.get("S", "ERROR")))


def parse_row_description(body: bytes) -> list[Field]:
    (n,) = struct.unpack_from("!h", body, 0)
    pos = 2
    out: list[Field] = []
    for _ in range(n):
        end = body.index(b"\0", pos)
        name = body[pos:end].decode("utf-8")
        table_oid, attnum, type_oid, size, typmod, _fmt = struct.unpack_from("!IhIhih", body, end + 1)
        out.append((name, table_oid, attnum, type_oid, size, typmod))
        pos = end + 19
    return out


@dataclass(slots=True)
class Relayed:
    """What PostgreSQL answered to one statement."""

    fields: list[Field] | None = None
    rows: list[bytes] = field(default_factory=list)
    tag: str = ""
    error: PgError | None = None
    param_oids: list[int] = field(default_factory=list)
    notices: list[bytes] = field(default_factory=list)


class _Feed(asyncio.Protocol):
    """The socket side of a BackendConnection: bytes go straight into its buffer, and the waiting reader is
    woken only when a reply may be complete (the bytes end like a ReadyForQuery), not once per chunk.

    A protocol rather than asyncio streams: StreamReader.read copies each chunk and builds a future per
    read, which was a measurable share of the proxy's time per relayed catalog statement."""

    def __init__(self) -> None:
        self.buf = bytearray()
        self.waiter: asyncio.Future[None] | None = None
        self.eof = False
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        buf = self.buf
        buf += data
        w = self.waiter
        # ReadyForQuery is 'Z', length 5, status: a reply's last message. A DataRow may end with the same
        # bytes by chance; the reader then finds the reply incomplete and waits again.
        if w is not None and (self.want_any or buf[-6:-1] == b"Z\0\0\0\x05") and not w.done():
            w.set_result(None)

    want_any = False

    def eof_received(self) -> bool:
        self.eof = True
        self._wake()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.eof = True
        self._wake()

    def _wake(self) -> None:
        w = self.waiter
        if w is not None and not w.done():
            w.set_result(None)

    async def wait(self, any_data: bool) -> None:
        """Until more bytes arrive (`any_data`) or the buffer may end with a complete reply."""
        if self.eof:
            return
        self.want_any = any_data
        self.waiter = w = asyncio.get_running_loop().create_future()
        try:
            await w
        finally:
            self.waiter = None


class BackendConnection:
    """One connection to the catalog database."""

    def __init__(self, feed: _Feed, writer: asyncio.Transport, address: tuple) -> None:
        self._feed = feed
        self.writer = writer
        self.address = address
        self.pid = 0
        self.key = b""
        self.params: dict[str, str] = {}
        self.broken = False
        self.owner: int | None = None     # the client session that used this backend last
        self._buf = feed.buf
        self._prepared: dict[tuple[str, tuple[int, ...]], bytes] = {}
        self._next_name = 1

    @classmethod
    async def connect(cls, info: dict[str, str], startup: dict[str, str], timeout: float = 10.0
                      ) -> BackendConnection:
        host = (info.get("host") or "localhost").split(",")[0]
        port = int((info.get("port") or "5432").split(",")[0])
        loop = asyncio.get_running_loop()
        feed = _Feed()
        try:
            if host.startswith("/"):
                path = f"{host}/.s.PGSQL.{port}"
                transport, _ = await asyncio.wait_for(loop.create_unix_connection(lambda: feed, path), timeout)
                address: tuple = ("unix", path)
            else:
                transport, _ = await asyncio.wait_for(loop.create_connection(lambda: feed, host, port), timeout)
                address = ("tcp", host, port)
        except (OSError, TimeoutError):
            raise PgError("08006", "the catalog database is not reachable",
                          hint="the proxy retries on the next statement") from None
        conn = cls(feed, transport, address)
        try:
            await asyncio.wait_for(conn._startup(info, startup), timeout)
        except BaseException:
            conn.close()
            raise
        return conn

    async def _startup(self, info: dict[str, str], startup: dict[str, str]) -> None:
        user = info.get("user") or "postgres"
        params = {"user": user, "database": info.get("dbname") or user, **startup}
        body = struct.pack("!i", 196608) + b"".join(_cstr(k) + _cstr(v) for k, v in params.items()) + b"\0"
        self.writer.write(struct.pack("!i", len(body) + 4) + body)
        password = info.get("password") or ""
        scram: ScramClient | None = None
        while True:
            kind, body = await self._read()
            if kind == b"R":
                (code,) = struct.unpack_from("!i", body, 0)
                if code == 0:
                    continue
                if code == 3:
                    self.writer.write(_msg(b"p", _cstr(password)))
                elif code == 5:
                    inner = hashlib.md5((password + user).encode()).hexdigest()
                    outer = "md5" + hashlib.md5(inner.encode() + body[4:8]).hexdigest()
                    self.writer.write(_msg(b"p", _cstr(outer)))
                elif code == 10:
                    scram = ScramClient(["SCRAM-SHA-256"], user, password)
                    first = scram.get_client_first().encode()
                    self.writer.write(_msg(b"p", _cstr("SCRAM-SHA-256") + struct.pack("!i", len(first)) + first))
                elif code == 11 and scram is not None:
                    scram.set_server_first(body[4:].decode())
                    self.writer.write(_msg(b"p", scram.get_client_final().encode()))
                elif code == 12 and scram is not None:
                    scram.set_server_final(body[4:].decode())
                else:
                    raise PgError("08004", f"catalog database asks for unsupported authentication {code}")
            elif kind == b"S":
                name, value, _ = body.split(b"\0", 2)
                self.params[name.decode()] = value.decode()
            elif kind == b"K":
                (self.pid,) = struct.unpack_from("!i", body, 0)
                self.key = body[4:]
            elif kind == b"E":
                raise parse_error(body)
            elif kind == b"Z":
                return

    async def _read(self) -> tuple[bytes, bytes]:
        buf = self._buf
        while True:
            if len(buf) >= 5:
                kind, length = _HDR.unpack_from(buf, 0)
                if len(buf) >= length + 1:
                    body = bytes(buf[5:length + 1])
                    del buf[:length + 1]
                    return kind, body
            await self._read_more(True)

    async def _read_more(self, any_data: bool = False) -> None:
        """Wait until the buffer has more bytes (`any_data`) or may hold a complete reply; a closed or failed
        socket breaks this connection."""
        feed = self._feed
        before = len(feed.buf)
        await feed.wait(any_data)
        if feed.eof and len(feed.buf) == before:
            self.broken = True
            raise PgError("08006", "the catalog database closed the connection")

    async def relay(self, sql: str, param_oids: Sequence[int], param_formats: Sequence[int],
                    params: Sequence[bytes | None], result_formats: Sequence[int], describe: bool) -> Relayed:
        """Bind/(Describe)/Execute/Sync one statement (Parse only on first use) and collect the answer.

        Statements are prepared once per connection under a generated name, so that a repeated catalog
        query skips PostgreSQL's parse and plan, as the client's own prepared statement would.
        """
        key = (sql, tuple(param_oids))
        name = self._prepared.get(key)
        parts = []
        if name is None:
            if len(self._prepared) >= _MAX_PREPARED:
                old_key, old_name = next(iter(self._prepared.items()))
                del self._prepared[old_key]
                parts.append(_msg(b"C", b"S" + old_name + b"\0"))
            name = b"lp%d" % self._next_name
            self._next_name += 1
            parts.append(_msg(b"P", name + b"\0" + _cstr(sql)
                              + struct.pack(f"!h{len(param_oids)}I", len(param_oids), *param_oids)))
            new = True
        else:
            new = False
        bind = [b"\0", name, b"\0", struct.pack(f"!h{len(param_formats)}h", len(param_formats), *param_formats),
                struct.pack("!h", len(params))]
        for p in params:
            bind.append(b"\xff\xff\xff\xff" if p is None else struct.pack("!i", len(p)) + p)
        bind.append(struct.pack(f"!h{len(result_formats)}h", len(result_formats), *result_formats))
        parts.append(_msg(b"B", b"".join(bind)))
        if describe:
            parts.append(_msg(b"D", b"P\0"))
        parts.append(_EXECUTE_SYNC)
        self.writer.write(b"".join(parts))
        out = await self._collect()
        if new and out.error is None:
            self._prepared[key] = name
        elif new:
            # The Parse may have failed: make sure no half-known statement keeps the name.
            self.writer.write(_msg(b"C", b"S" + name + b"\0") + _msg(b"S", b""))
            await self._collect()
        return out

    async def describe(self, sql: str, param_oids: Sequence[int]) -> Relayed:
        """Parse + Describe statement: parameter types and result columns, without executing."""
        self.writer.write(
            _msg(b"P", b"\0" + _cstr(sql) + struct.pack(f"!h{len(param_oids)}I", len(param_oids), *param_oids))
            + _msg(b"D", b"S\0") + _msg(b"S", b""))
        return await self._collect()

    async def _collect(self) -> Relayed:
        out = Relayed()
        rows = out.rows
        buf = self._buf
        try:
            while True:
                # Fast path: slice complete DataRow messages straight out of the buffer.
                while len(buf) >= 5:
                    kind, length = _HDR.unpack_from(buf, 0)
                    if len(buf) < length + 1:
                        break
                    if kind == b"D":
                        rows.append(bytes(buf[:length + 1]))
                        del buf[:length + 1]
                        continue
                    body = bytes(buf[5:length + 1])
                    del buf[:length + 1]
                    if kind == b"T":
                        out.fields = parse_row_description(body)
                    elif kind == b"C":
                        out.tag = body[:-1].decode()
                    elif kind == b"t":
                        (n,) = struct.unpack_from("!h", body, 0)
                        out.param_oids = list(struct.unpack_from(f"!{n}I", body, 2))
                    elif kind == b"E":
                        out.error = parse_error(body)
                    elif kind == b"N":
                        out.notices.append(bytes(_msg(b"N", body)))
                    elif kind == b"I":
                        out.tag = ""
                    elif kind == b"Z":
                        return out
                await self._read_more()
        except BaseException:
            # Interrupted mid-answer (cancel, timeout): this connection's stream position is unknown.
            self.broken = True
            raise

    async def reset(self) -> None:
        """Return the backend to its start-up state between clients (settings, cursors, listeners,
        temporary objects, sequence state), as pgbouncer's reset query does; breaks it on failure.

        The relay's own prepared statements stay (DISCARD ALL would drop them: a full re-parse per client
        switch, about a millisecond); advisory locks cannot be held, as the reader role may not call the
        advisory-lock functions (hardening.py)."""
        self.writer.write(_msg(b"Q", _cstr(RESET_SQL)))
        out = await self._collect()
        if out.error is not None:
            self.broken = True
            raise out.error

    async def cancel(self) -> None:
        """Ask PostgreSQL to cancel whatever this connection is running (a separate connection)."""
        try:
            if self.address[0] == "unix":
                r, w = await asyncio.open_unix_connection(self.address[1])
            else:
                r, w = await asyncio.open_connection(self.address[1], self.address[2])
            body = struct.pack("!ii", 80877102, self.pid) + self.key
            w.write(struct.pack("!i", len(body) + 4) + body)
            await w.drain()
            w.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(r.read(), 2)
        except OSError:
            pass

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.writer.write(_msg(b"X", b""))
        with contextlib.suppress(Exception):
            self.writer.close()


class BackendPool:
    """A small pool of catalog connections; broken ones are cancelled at the server and dropped."""

    def __init__(self, info: dict[str, str], startup: dict[str, str], size: int = 8) -> None:
        self.info = info
        self.startup = startup
        self.size = size
        self._idle: list[BackendConnection] = []
        self._sem = asyncio.Semaphore(size)
        self._tasks: set[asyncio.Task[None]] = set()

    async def acquire(self, owner: int | None = None) -> BackendConnection:
        """A backend for the client session `owner`: preferably the one it used last; a backend another
        client used is reset first, so no session state crosses from one client to the next."""
        await self._sem.acquire()
        try:
            while self._idle:
                conn = self._take_idle(owner)
                if conn.broken or conn.writer.is_closing():
                    conn.close()
                    continue
                if conn.owner is not None and conn.owner != owner:
                    try:
                        await conn.reset()
                    except (PgError, OSError):
                        conn.close()
                        continue
                conn.owner = owner
                return conn
            conn = await BackendConnection.connect(self.info, self.startup)
            conn.owner = owner
            return conn
        except BaseException:
            self._sem.release()
            raise

    def try_acquire(self, owner: int | None) -> BackendConnection | None:
        """Without waiting: an idle backend this session used last (nothing to reset), when one is free and
        nobody waits; else None (then `acquire`). The hot path of a session's repeated catalog statements."""
        sem = self._sem
        idle = self._idle
        if not idle or sem._value <= 0 or sem._waiters:  # noqa: SLF001 - see usage()
            return None
        conn = idle[-1]
        if conn.owner != owner or conn.broken or conn.writer.is_closing():
            return None
        idle.pop()
        sem._value -= 1  # noqa: SLF001 - what Semaphore.acquire does when it need not wait
        return conn

    def usage(self) -> tuple[int, int, int]:
        """(backends in use, idle backends, acquirers waiting) for the admin console's SHOW SERVERS."""
        free = self._sem._value  # noqa: SLF001 - asyncio.Semaphore has no public count
        waiting = len(self._sem._waiters or ())  # noqa: SLF001
        return self.size - free, len(self._idle), waiting

    def _take_idle(self, owner: int | None) -> BackendConnection:
        for i in range(len(self._idle) - 1, -1, -1):
            if self._idle[i].owner == owner:
                return self._idle.pop(i)
        return self._idle.pop()

    def release(self, conn: BackendConnection) -> None:
        self._sem.release()
        if conn.broken:
            task = asyncio.get_running_loop().create_task(self._discard(conn))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        else:
            self._idle.append(conn)

    def drop_idle(self) -> None:
        """Close every idle connection (after one turned out dead, the others likely are too)."""
        for conn in self._idle:
            conn.close()
        self._idle.clear()

    async def _discard(self, conn: BackendConnection) -> None:
        await conn.cancel()
        conn.close()

    async def close(self) -> None:
        for conn in self._idle:
            conn.close()
        self._idle.clear()
        for task in list(self._tasks):
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(task, 2)
