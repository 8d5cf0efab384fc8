"""The statement caches (router, planner, catalog Describe) are keyed by digests and bounded in bytes: many
distinct 1 MB probes leave a few megabytes behind at most, measured with tracemalloc (retained bytes,
not time)."""

from __future__ import annotations

import asyncio
import gc
import tracemalloc
from typing import Any

from parser import Planner, Refusal
from proxy.catalog.relay import CatalogDB
from proxy.config import load_config
from proxy.statements.router import Kind, Router
from tests.fixtures.proxy_process import REPO

PROBES = 24
MB = 1 << 20


def _probe(i: int, body: str) -> str:
    return f"{body} /* probe {i} {chr(97 + i % 26) * MB} */"


def test_megabyte_probes_leave_bounded_memory(shadow_dsn: str) -> None:
    catalog = load_config(REPO / "config.toml").catalog
    router, planner, relay = Router(catalog), Planner(catalog), CatalogDB(shadow_dsn)

    async def describe(sql: str) -> Any:
        return await relay.describe(sql, [])

    async def run() -> int:
        await relay.open()
        try:
            gc.collect()
            tracemalloc.start()
            before = tracemalloc.get_traced_memory()[0]
            for i in range(PROBES):
                dp = _probe(i, f"SELECT count(*) FROM adult WHERE age > {i}")
                assert router.route(dp).kind is Kind.DP
                for call in (planner.describe, planner.plan):
                    try:
                        call(dp)
                        raise AssertionError("a 1 MB statement was planned")
                    except Refusal as r:
                        assert r.sqlstate == "54000"
                cat = _probe(i, f"SELECT {i} AS n, relname FROM pg_class")
                assert router.route(cat).kind is Kind.CATALOG
                _, fields = await describe(cat)
                assert fields is not None and len(fields) == 2
                del dp, cat
            gc.collect()
            retained = tracemalloc.get_traced_memory()[0] - before
            tracemalloc.stop()
            return retained
        finally:
            await relay.close()

    retained = asyncio.run(run())
    print(f"retained after {PROBES} x 2 probes of 1 MB: {retained / MB:.2f} MB")
    # 48 MB of distinct statement text went through the caches; texts keyed by value would keep all of it.
    assert retained < 4 * MB, f"{retained / MB:.1f} MB retained"
    assert len(router._cache) == 0  # a 1 MB route outweighs an eighth of the router's budget: not kept
    assert len(planner.templates) == PROBES  # each probe's 54000 refusal, cached without its text
