"""The listener: accepts clients, runs one connection driver each, and routes cancel requests to them.

Surface used by the application:

    server = ProxyServer(config, service, catalog_dsn, reuse_port=False)
    await server.start()          # opens the catalog pool and the listening socket
    server.port                   # the bound port (useful with port 0)
    await server.serve_forever()  # or keep the loop alive yourself
    await server.close()          # stops accepting, ends sessions, closes the catalog pool

Each client connection runs in its own task; nothing a client does blocks another.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import ssl
import time

from ..catalog.relay import CatalogDB
from ..config import Config
from ..dp.service_api import QueryService
from ..observability.metrics import ProxyMetrics
from ..statements.router import Router
from .admin_control import ServerAdmin
from .cancel_relay import CancelRelay, new_pid, worker_of
from .connection import ClientConnection

log = logging.getLogger("lapras.server")


class RateLimiter:
    """Per-user token bucket: `per_minute` statements, refilled continuously."""

    def __init__(self, per_minute: int) -> None:
        self.rate = per_minute / 60.0
        self.capacity = float(per_minute)
        self._buckets: dict[str, tuple[float, float]] = {}

    def allow(self, user: str) -> bool:
        now = time.monotonic()
        tokens, last = self._buckets.get(user, (self.capacity, now))
        tokens = min(self.capacity, tokens + (now - last) * self.rate)
        if tokens < 1.0:
            self._buckets[user] = (tokens, now)
            return False
        self._buckets[user] = (tokens - 1.0, now)
        return True


class ProxyServer:
    """Accepts PostgreSQL clients and serves them from the DP service and the catalog database."""

    def __init__(self, config: Config, service: QueryService, catalog_dsn: str, *, reuse_port: bool = False,
                 catalog_pool_size: int = 8, metrics: ProxyMetrics | None = None,
                 cancel_relay: CancelRelay | None = None) -> None:
        self.config = config
        self.service = service
        self.metrics = metrics
        self.catalog = CatalogDB(catalog_dsn, catalog_pool_size, client_database=config.server.database)
        self.router = Router(config.catalog)
        self.reuse_port = reuse_port
        self.cancel_relay = cancel_relay
        self.rate = RateLimiter(config.server.queries_per_minute)
        self.sessions: dict[int, ClientConnection] = {}
        self.active = 0
        self.ssl_context: ssl.SSLContext | None = None
        if config.tls.enabled:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.minimum_version = ssl.TLSVersion.TLSv1_2
            ctx.load_cert_chain(config.tls.cert, config.tls.key)
            self.ssl_context = ctx
        self._server: asyncio.base_events.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        # The admin console's side of this server (stats, PAUSE gate, RELOAD); set by the application.
        self.admin: ServerAdmin | None = None

    def apply_config(self, config: Config, ssl_context: ssl.SSLContext | None) -> None:
        """A reloaded configuration's live part: limits and timeouts (read per statement and per new
        connection), users, and the TLS context of new connections."""
        if config.server.queries_per_minute != self.config.server.queries_per_minute:
            self.rate = RateLimiter(config.server.queries_per_minute)
        self.config = config
        self.ssl_context = ssl_context

    @property
    def port(self) -> int:
        assert self._server is not None and self._server.sockets
        return int(self._server.sockets[0].getsockname()[1])

    async def start(self) -> None:
        await self.catalog.open()
        if self.cancel_relay is not None:
            await self.cancel_relay.start(self.cancel)
        s = self.config.server
        self._server = await asyncio.start_server(self._accept, s.host, s.port, reuse_port=self.reuse_port or None,
                                                  limit=1 << 16, backlog=max(128, s.max_connections))
        log.info("listening on %s:%d", s.host, self.port)

    async def serve_forever(self) -> None:
        if self._server is None:
            await self.start()
        assert self._server is not None
        await self._server.serve_forever()

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(BaseException):
                await task
        await self.catalog.close()
        if self.cancel_relay is not None:
            await self.cancel_relay.close()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        client = ClientConnection(self, reader, writer)
        if self.metrics is not None:
            self.metrics.connections.inc()
            self.metrics.connections_total.inc()
        try:
            await client.run()
        finally:
            self._tasks.discard(task)
            if self.metrics is not None:
                self.metrics.connections.dec()

    def new_pid(self) -> int:
        """A process id for a new session's cancel key; with workers its low bits name this worker."""
        index = self.cancel_relay.index if self.cancel_relay is not None else 0
        return new_pid(index, lambda pid: pid in self.sessions)

    async def route_cancel(self, pid: int, secret: int) -> None:
        """A CancelRequest: served here when the key is this worker's, else handed to its worker."""
        if self.cancel_relay is not None and worker_of(pid) != self.cancel_relay.index:
            await self.cancel_relay.forward(pid, secret)
        else:
            self.cancel(pid, secret)

    def cancel(self, pid: int, secret: int) -> None:
        """Cancel the running statement of the session that owns this key; anything else is ignored."""
        target = self.sessions.get(pid)
        if target is not None and secrets.compare_digest(target.secret.to_bytes(4, "big"),
                                                         (secret & 0xFFFFFFFF).to_bytes(4, "big")):
            target.cancel_statement("user")
