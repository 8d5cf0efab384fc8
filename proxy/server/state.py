"""What a client connection and the admin console read and change of the listening server, as a Protocol:
they take the server as a ``ServerState`` and do not import the listener, which imports them."""

from __future__ import annotations

import ssl
from typing import Any, Protocol

from ..catalog.relay import CatalogDB
from ..config import Config
from ..dp.service_api import QueryService
from ..observability.metrics import ProxyMetrics
from ..statements.router import Router


class Limiter(Protocol):
    def allow(self, user: str) -> bool: ...


class ServerState(Protocol):
    """``proxy.server.listener.ProxyServer`` as its connections and its admin console see it."""

    active: int  # sessions past start-up, counted against max_connections
    sessions: dict[int, Any]  # pid -> ClientConnection (typed loosely: connection.py imports this module)

    config: Config
    service: QueryService
    catalog: CatalogDB
    router: Router
    metrics: ProxyMetrics | None
    ssl_context: ssl.SSLContext | None
    admin: Any  # the ServerAdmin, or None (admin_control.py imports this module)

    @property
    def rate(self) -> Limiter: ...

    @property
    def port(self) -> int: ...

    def apply_config(self, config: Config, ssl_context: ssl.SSLContext | None) -> None: ...

    def new_pid(self) -> int: ...

    async def route_cancel(self, pid: int, secret: int) -> None: ...
