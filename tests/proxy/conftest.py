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
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.local_proxy import RawClient, ServerThread, Target, proxy_test_config, start_local

REPO = Path(__file__).resolve().parents[2]
_shadow_counter = itertools.count()


@pytest.fixture(scope="session")
def shadow_dsn(embedded_pg: Any) -> str:
    from proxy.catalog.relay import ensure_shadow

    name = f"proxytest_catalog_{next(_shadow_counter)}"
    cfg = proxy_test_config()
    return asyncio.run(ensure_shadow(embedded_pg.dsn(), name, cfg.catalog))


@pytest.fixture(scope="session")
def local_proxy(shadow_dsn: str) -> Iterator[ServerThread]:
    srv = start_local(shadow_dsn)
    try:
        yield srv
    finally:
        srv.stop()


@pytest.fixture(scope="session")
def e2e(request: pytest.FixtureRequest) -> Target:
    """The real proxy process with the real DP service when it exists, else the in-process stub server."""
    if importlib.util.find_spec("proxy.dp.service") is not None:
        p = request.getfixturevalue("proxy")
        return Target(p.host, p.port, True)
    srv = request.getfixturevalue("local_proxy")
    return Target(srv.host, srv.port, False)


@pytest.fixture
def raw(local_proxy: ServerThread) -> Iterator[RawClient]:
    c = RawClient(local_proxy.host, local_proxy.port)
    c.login_trust()
    try:
        yield c
    finally:
        c.close()
