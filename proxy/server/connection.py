"""The connection driver: one client's socket, fed through start-up, authentication and the conversation.

The driver is the only part that reads and writes the socket. It feeds received bytes to the protocol
state machine (`proxy.protocol`), drives the authentication generator (`proxy.server.auth`), then hands
each event to the session's conversation (`proxy.conversation`), sending what they produce. It owns what
needs the event loop: TLS upgrade, back-pressure, the idle and authentication timeouts, and cancelling a
running statement on CancelRequest or the statement timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import ssl
import time
from typing import Any

from ..catalog.relay import CatalogDB
from ..conversation.core import Conversation
from ..dp.timeout import duration_ms
from ..protocol import backend
from ..protocol.connection import NEED_DATA, ServerConnection
from ..protocol.errors import PgError
from ..protocol.frontend import (
    CancelRequested,
    ConnectionFailed,
    Flush,
    GSSENCRequested,
    PasswordMessage,
    Query,
    SSLRequested,
    StartupReceived,
)
from ..statements.executor import Executor
from ..statements.session import Session
from .auth import AuthFailed, authenticate
from .state import ServerState

log = logging.getLogger("lapras.server")


class _Closed(Exception):
    """The client went away or the connection must end."""


class _IdleTimeout(Exception):
    """The session was idle longer than server.idle_timeout_s (not an OSError, unlike TimeoutError)."""


def _server_version(catalog: CatalogDB) -> str:
    return catalog.server_version or "16.0"


class ClientConnection:
    """One client: start-up and authentication, then the conversation, fed from the socket."""

    def __init__(self, server: ServerState, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.server = server
        self.reader = reader
        self.writer = writer
        self.conn = ServerConnection(self.cfg.max_message_bytes)
        self.connected_at = time.time()
        self.last_request_at: float | None = None
        peer = writer.get_extra_info("peername")
        self.peer: tuple[str, int] = (str(peer[0]), int(peer[1])) if isinstance(peer, tuple) else ("", 0)
        self.out: list[bytes] = []
        self.tls = False
        self.pid = 0
        self.secret = 0
        self.counted = False
        self.session: Session | None = None
        self.conversation: Conversation | None = None
        self.user = ""
        self._task: asyncio.Task[Any] | None = None
        self._running = False
        self._cancel_reason: str | None = None
        self._loop = asyncio.get_running_loop()
        self._last_input = 0.0
        self._waiting_idle = False
        self._idle_expired = False
        self._idle_handle: asyncio.TimerHandle | None = None
        self._timeout_cache: tuple[tuple[str, float], float] = (("", -1.0), 0.0)
        self._deadline = 0.0
        self._deadline_handle: asyncio.TimerHandle | None = None

    @property
    def cfg(self) -> Any:
        """The server settings in force (a reload replaces them: limits apply to running sessions too)."""
        return self.server.config.server

    @property
    def running(self) -> bool:
        return self._running

    @property
    def statements(self) -> int:
        executor = self.conversation.executor if self.conversation is not None else None
        return executor.statements if executor is not None else 0

    # -- I/O helpers ---------------------------------------------------------------------------------

    def flush(self) -> None:
        if self.out:
            self.writer.write(b"".join(self.out) if len(self.out) > 1 else self.out[0])
            self.out.clear()

    async def _drain(self) -> None:
        """Send buffered replies; wait for the client to read only when its socket buffer backs up."""
        self.flush()
        transport = self.writer.transport
        if transport.is_closing() or transport.get_write_buffer_size() > 1 << 16:
            await self.writer.drain()

    async def _read_more(self, idle: bool = False) -> None:
        """Flush replies, then wait for bytes; with `idle`, the idle watchdog may end the wait."""
        await self._drain()
        try:
            if idle:
                self._waiting_idle = True
                try:
                    data = await self.reader.read(1 << 16)
                except asyncio.CancelledError:
                    if not self._idle_expired:
                        raise
                    if self._task is not None:
                        self._task.uncancel()
                    raise _IdleTimeout() from None
                finally:
                    self._waiting_idle = False
                self._last_input = self._loop.time()
            else:
                data = await self.reader.read(1 << 16)
        except (ConnectionError, OSError):
            data = b""
        self.conn.receive_data(data)

    def _idle_watchdog(self) -> None:
        """One timer per connection (not one per read): end the session when idle too long."""
        limit = self.cfg.idle_timeout_s
        waited = self._loop.time() - self._last_input
        if self._waiting_idle and waited >= limit and self._task is not None:
            self._idle_expired = True
            self._task.cancel()
            return
        self._idle_handle = self._loop.call_later(max(limit - waited, 0.05) if self._waiting_idle else limit,
                                                  self._idle_watchdog)

    # -- lifecycle -----------------------------------------------------------------------------------

    async def run(self) -> None:
        self._task = asyncio.current_task()
        try:
            try:
                async with asyncio.timeout(self.server.config.server.auth_timeout_s):
                    ok = await self._startup()
            except TimeoutError:
                self.out.append(self.conn.fatal("08006", "authentication timeout"))
                ok = False
            if ok:
                await self._serve()
        except _Closed:
            pass
        except (ConnectionError, OSError, ssl.SSLError):
            pass
        except _IdleTimeout:
            with contextlib.suppress(Exception):
                self.out.append(self.conn.fatal("57P05", "terminating connection due to idle-session timeout"))
        except asyncio.CancelledError:
            with contextlib.suppress(Exception):
                self.out.append(self.conn.fatal("57P01", "terminating connection due to administrator command"))
        except Exception:
            log.exception("connection failed")
            with contextlib.suppress(Exception):
                self.out.append(self.conn.fatal("XX000", "internal error in the proxy"))
        finally:
            self.server.sessions.pop(self.pid, None)
            if self.counted:
                self.server.active -= 1
            with contextlib.suppress(Exception):
                self.flush()
                self.writer.close()

    async def _startup(self) -> bool:
        conn = self.conn
        while True:
            ev = conn.next_event()
            if ev is NEED_DATA:
                await self._read_more()
                continue
            if isinstance(ev, SSLRequested):
                accept = self.server.ssl_context is not None and not self.tls
                self.out.append(conn.answer_negotiation(accept))
                await self._drain()
                if accept and not conn.closed:
                    assert self.server.ssl_context is not None
                    await self.writer.start_tls(self.server.ssl_context)
                    self.tls = True
                continue
            if isinstance(ev, GSSENCRequested):
                self.out.append(conn.answer_negotiation(False))
                continue
            if isinstance(ev, CancelRequested):
                await self.server.route_cancel(ev.pid, ev.secret)
                return False
            if isinstance(ev, ConnectionFailed):
                self.out.append(conn.fatal(ev.sqlstate, ev.message))
                return False
            if isinstance(ev, StartupReceived):
                return await self._login(ev)
            return False   # Terminate, or anything else before start-up

    async def _login(self, ev: StartupReceived) -> bool:
        srv = self.server
        if srv.active >= self.cfg.max_connections:
            self.out.append(self.conn.fatal("53300", "sorry, too many clients already"))
            return False
        srv.active += 1
        self.counted = True
        if (ev.protocol & 0xFFFF) != 0 or ev.unsupported_options:
            self.out.append(backend.negotiate_protocol_version(0, ev.unsupported_options))
        name = ev.params["user"]
        user = srv.config.user(name)

        async def receive() -> bytes:
            while True:
                nxt = self.conn.next_event()
                if nxt is NEED_DATA:
                    await self._read_more()
                    continue
                if isinstance(nxt, PasswordMessage):
                    return nxt.data
                if isinstance(nxt, ConnectionFailed):
                    raise PgError(nxt.sqlstate, nxt.message, severity="FATAL")
                raise _Closed()

        exchange = authenticate(name, user, tls=self.tls, allow_cleartext=self.cfg.allow_cleartext_without_tls)
        try:
            request = next(exchange)
            while True:
                self.out.append(request)
                await self._drain()
                request = exchange.send(await receive())
        except StopIteration as done:
            if done.value:
                self.out.append(done.value)
        except AuthFailed as exc:
            log.info("authentication failed for user %r", name)
            self.out.append(self.conn.error(exc))
            return False
        except PgError as exc:
            self.out.append(self.conn.fatal(exc.sqlstate, exc.message))
            return False
        database = ev.params.get("database") or name
        if database != self.cfg.database:
            self.out.append(self.conn.fatal("3D000", f"database \"{database}\" does not exist"))
            return False
        self.user = name
        self.conn.authenticated()
        pid = srv.new_pid()
        self.pid, self.secret = pid, secrets.randbits(32)
        srv.sessions[pid] = self
        session = Session.start(self.conn, name, database, ev.params, _server_version(srv.catalog), self.tls)
        self.session = session
        admin = srv.admin
        executor = Executor(session, srv.router, srv.service, srv.catalog, srv.metrics, admin=admin,
                            gate=admin.gate if admin is not None else None,
                            stats=admin.stats if admin is not None else None)
        self.conversation = Conversation(self.conn, session, executor, srv.router, out=self.out,
                                         guard=self._guarded, admit=self._check_rate)
        self.out.append(backend.AUTH_OK)
        self.out.extend(session.startup_status())
        self.out.append(backend.backend_key_data(pid, self.secret))
        self.out.append(self.conn.ready_for_query())
        return True

    # -- statements ----------------------------------------------------------------------------------

    def cancel_statement(self, reason: str) -> None:
        """Interrupt the statement this session is running, if any (cancel request or timeout)."""
        if self._running and self._cancel_reason is None and self._task is not None:
            self._cancel_reason = reason
            self._task.cancel()

    def _statement_timeout(self) -> float:
        """The tighter of server.statement_timeout_s and the session's statement_timeout (0 = unset)."""
        assert self.session is not None
        raw = self.session.settings.get("statement_timeout", "0")
        limit = self.cfg.statement_timeout_s
        if (raw, limit) != self._timeout_cache[0]:
            ms = duration_ms(raw)
            self._timeout_cache = ((raw, limit), min(limit, ms / 1000.0) if ms > 0 else limit)
        return self._timeout_cache[1]

    def _arm_deadline(self) -> None:
        """Start this statement's timeout. One timer per connection, moved only when a statement's deadline
        comes before the armed one (a timer per statement cost a measurable share of a relayed catalog
        statement); when it fires early for a later statement it re-arms itself."""
        loop = self._loop
        self._deadline = deadline = loop.time() + self._statement_timeout()
        handle = self._deadline_handle
        if handle is not None:
            if handle.when() <= deadline:
                return
            handle.cancel()
        self._deadline_handle = loop.call_at(deadline, self._deadline_due)

    def _deadline_due(self) -> None:
        self._deadline_handle = None
        if not self._running:
            return
        if self._loop.time() >= self._deadline:
            self.cancel_statement("timeout")
        else:
            self._deadline_handle = self._loop.call_at(self._deadline, self._deadline_due)

    async def _guarded(self, coro: Any) -> Any:
        """Await a statement so that CancelRequest and the statement timeout interrupt only it."""
        self._arm_deadline()
        self._running = True
        self.last_request_at = time.time()
        try:
            return await coro
        except asyncio.CancelledError:
            reason = self._cancel_reason
            if reason is None:
                raise
            task = self._task
            if task is not None:
                task.uncancel()
            if reason == "timeout":
                raise PgError("57014", "canceling statement due to statement timeout") from None
            raise PgError("57014", "canceling statement due to user request") from None
        finally:
            self._running = False
            self._cancel_reason = None

    def _check_rate(self) -> None:
        if not self.server.rate.allow(self.user):
            raise PgError("53400", f"rate limit exceeded: user \"{self.user}\" may run "
                                   f"{self.cfg.queries_per_minute} statements per minute",
                          hint="wait a moment and retry, or raise server.queries_per_minute")

    async def _serve(self) -> None:
        conn = self.conn
        self._last_input = self._loop.time()
        self._idle_handle = self._loop.call_later(self.cfg.idle_timeout_s, self._idle_watchdog)
        try:
            await self._serve_loop(conn)
        finally:
            self._idle_handle.cancel()
            if self._deadline_handle is not None:
                self._deadline_handle.cancel()

    async def _serve_loop(self, conn: ServerConnection) -> None:
        conversation = self.conversation
        assert conversation is not None
        while True:
            ev = conn.next_event()
            if ev is NEED_DATA:
                await self._read_more(idle=True)
                continue
            if not await conversation.handle(ev):
                return
            if isinstance(ev, Query | Flush):
                # Send a simple query's answer (and what a Flush asks for) before reading on.
                await self._drain()
