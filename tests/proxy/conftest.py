"""Fixtures for the proxy's tests: an in-process ProxyServer (stub DP service) and the end-to-end target.

`local_proxy` runs the real server code (protocol, auth, router, catalog relay to a real schema-only
shadow database in the session's embedded PostgreSQL) with a small in-test QueryService, in a thread of
its own. `e2e` is the lead's real `lapras-proxy serve` process (real DP service) when proxy.dp.service
exists, otherwise `local_proxy`.
"""

from __future__ import annotations

import asyncio
import importlib.util
import itertools
import socket
import struct
import sys
import threading
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import pgwire_frames as wire  # noqa: E402
from proxy_stub_service import StubService  # noqa: E402

from proxy.config import Config, parse_config  # noqa: E402
from proxy.server.auth import md5_secret, scram_verifier  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
_shadow_counter = itertools.count()


def proxy_test_config(tls: dict[str, str] | None = None, **server: Any) -> Config:
    """The shipped config.toml plus md5, trust and cleartext users; [server] keys overridden."""
    tree = tomllib.loads((REPO / "config.toml").read_text())
    tree["users"] = [
        {"name": "analyst", "auth": "scram-sha-256", "secret": tree["users"][0]["secret"]},
        {"name": "scramuser", "auth": "scram-sha-256", "secret": scram_verifier("scrampass")},
        {"name": "md5user", "auth": "md5", "secret": md5_secret("md5user", "md5pass")},
        {"name": "trustuser", "auth": "trust"},
        {"name": "clearuser", "auth": "password", "secret": md5_secret("clearuser", "clearpass")},
    ]
    tree["server"]["listen"] = "127.0.0.1:0"
    tree["server"].update(server)
    if tls:
        tree["tls"] = tls
    return parse_config(tree, str(REPO / "config.toml"))


class ServerThread:
    """A ProxyServer on its own event loop in a background thread."""

    def __init__(self, config: Config, service: Any, catalog_dsn: str) -> None:
        from proxy.server.listener import ProxyServer

        self.loop = asyncio.new_event_loop()
        self.server = ProxyServer(config, service, catalog_dsn)
        self.service = service
        self.config = config
        self.host = "127.0.0.1"
        self.port = 0
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    def start(self) -> ServerThread:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self.server.start(), self.loop).result(30)
        self.port = self.server.port
        return self

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self.server.close(), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)

    def dsn(self, user: str = "analyst", password: str | None = "lapras", dbname: str = "adult") -> str:
        pw = f" password={password}" if password is not None else ""
        return f"host={self.host} port={self.port} user={user} dbname={dbname}{pw} sslmode=disable"


@pytest.fixture(scope="session")
def shadow_dsn(embedded_pg: Any) -> str:
    from proxy.catalog.relay import ensure_shadow

    name = f"proxytest_catalog_{next(_shadow_counter)}"
    cfg = proxy_test_config()
    return asyncio.run(ensure_shadow(embedded_pg.dsn(), name, cfg.catalog))


def start_local(shadow_dsn: str, service: Any | None = None, tls: dict[str, str] | None = None,
                **server: Any) -> ServerThread:
    return ServerThread(proxy_test_config(tls, **server), service or StubService(), shadow_dsn).start()


@pytest.fixture(scope="session")
def local_proxy(shadow_dsn: str) -> Iterator[ServerThread]:
    srv = start_local(shadow_dsn)
    try:
        yield srv
    finally:
        srv.stop()


@dataclass
class Target:
    host: str
    port: int
    real_service: bool

    def dsn(self, user: str = "analyst", password: str | None = "lapras", dbname: str = "adult") -> str:
        pw = f" password={password}" if password is not None else ""
        return f"host={self.host} port={self.port} user={user} dbname={dbname}{pw} sslmode=disable"

    def url(self, scheme: str = "postgresql", user: str = "analyst", password: str = "lapras") -> str:
        return f"{scheme}://{user}:{password}@{self.host}:{self.port}/adult"


@pytest.fixture(scope="session")
def e2e(request: pytest.FixtureRequest) -> Target:
    """The real proxy process with the real DP service when it exists, else the in-process stub server."""
    if importlib.util.find_spec("proxy.dp.service") is not None:
        p = request.getfixturevalue("proxy")
        return Target(p.host, p.port, True)
    srv = request.getfixturevalue("local_proxy")
    return Target(srv.host, srv.port, False)


class RawClient:
    """A byte-level client: sends frontend messages, reads backend messages."""

    def __init__(self, host: str, port: int) -> None:
        self.sock = socket.create_connection((host, port), timeout=15)
        self.buf = b""
        self.params: dict[str, str] = {}
        self.pid = 0
        self.secret = 0

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def recv_message(self) -> tuple[str, bytes]:
        while True:
            if len(self.buf) >= 5:
                (length,) = struct.unpack_from("!i", self.buf, 1)
                if len(self.buf) >= length + 1:
                    kind, body = chr(self.buf[0]), self.buf[5:length + 1]
                    self.buf = self.buf[length + 1:]
                    return kind, body
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("closed")
            self.buf += chunk

    def until_ready(self) -> list[tuple[str, bytes]]:
        out = []
        while True:
            kind, body = self.recv_message()
            out.append((kind, body))
            if kind == "Z":
                return out

    def login_trust(self, user: str = "trustuser", **extra: str) -> list[tuple[str, bytes]]:
        self.send(wire.startup(user, **extra))
        msgs = self.until_ready()
        for kind, body in msgs:
            if kind == "S":
                name, value, _ = body.split(b"\0", 2)
                self.params[name.decode()] = value.decode()
            if kind == "K":
                self.pid, self.secret = struct.unpack("!iI", body[:8])
        return msgs

    def closed(self) -> bool:
        """True when the server closes the connection (after whatever it still sends)."""
        try:
            self.sock.settimeout(5)
            while self.sock.recv(65536):
                pass
            return True
        except TimeoutError:
            return False
        except (ConnectionError, OSError):
            return True

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def raw(local_proxy: ServerThread) -> Iterator[RawClient]:
    c = RawClient(local_proxy.host, local_proxy.port)
    c.login_trust()
    try:
        yield c
    finally:
        c.close()
