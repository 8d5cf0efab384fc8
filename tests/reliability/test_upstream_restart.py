"""The upstream PostgreSQL restarts under a running proxy: clients get errors while it is down, nothing is
answered without its spend committed, and service resumes by itself when the database is back."""

from __future__ import annotations

import random
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

pytest.importorskip("proxy.server.listener")
pytest.importorskip("proxy.dp.service")

from proxy.upstream.embedded import EmbeddedPostgres  # noqa: E402  # noqa: E402
from tests.fixtures.databases import fill_demo_tables  # noqa: E402

from .harness import budget_remaining, ledger_problems, start_proxy  # noqa: E402


@pytest.fixture(scope="module")
def own_cluster(default_config: Any) -> Iterator[EmbeddedPostgres]:
    """A cluster of its own, so stopping it does not disturb the rest of the suite."""
    root = Path(tempfile.mkdtemp(prefix="lapras-upstream-"))
    pg = EmbeddedPostgres(root)
    pg.start()
    with psycopg.connect(pg.dsn(), autocommit=True) as conn:
        conn.execute("CREATE DATABASE adult")
    fill_demo_tables(pg.dsn("adult"), default_config)
    try:
        yield pg
    finally:
        pg.destroy()
        shutil.rmtree(root, ignore_errors=True)


class Client(threading.Thread):
    """Sends new DP queries one after another, reconnecting as needed; records (time, sql, outcome)."""

    def __init__(self, proc: Any, seed: int) -> None:
        super().__init__(daemon=True)
        self.proc = proc
        self.rng = random.Random(seed)
        self.stop = threading.Event()
        self.log: list[tuple[float, float, str, str, Any]] = []

    def run(self) -> None:
        conn = None
        while not self.stop.is_set():
            lo = self.rng.randint(17, 80)
            sql = f"SELECT count(*) FROM adult WHERE age BETWEEN {lo} AND {lo + self.rng.randint(0, 10)} " \
                  f"AND hours_per_week >= {self.rng.randint(0, 98)}"
            t0 = time.monotonic()
            try:
                if conn is None or conn.closed:
                    conn = psycopg.connect(self.proc.dsn(), autocommit=True, connect_timeout=5)
                rows = conn.execute(sql).fetchall()
                self.log.append((t0, time.monotonic(), sql, "answer", rows))
            except psycopg.Error as exc:
                self.log.append((t0, time.monotonic(), sql, "error", exc.sqlstate))
                time.sleep(0.05)
        if conn is not None:
            conn.close()


def test_upstream_restart(own_cluster: EmbeddedPostgres, tmp_path: Path) -> None:
    proc = start_proxy(tmp_path, own_cluster.dsn("adult"), epsilon=10.0,
                       server={"queries_per_minute": 1_000_000, "statement_timeout_s": 10.0})
    clients = [Client(proc, s) for s in range(4)]
    try:
        for c in clients:
            c.start()
        # The outage starts once answers flow (the first ones wait for start-up work on a loaded machine).
        ready_by = time.monotonic() + 60
        while time.monotonic() < ready_by and not any(e[3] == "answer" for c in clients for e in c.log):
            time.sleep(0.1)
        time.sleep(0.5)
        down_at = time.monotonic()
        own_cluster.stop(mode="fast")
        down_done = time.monotonic()
        time.sleep(2.0)
        up_at = time.monotonic()
        own_cluster.start()
        # Service resumes by itself: a new statement is answered within 30 s of the database's return.
        deadline = time.monotonic() + 30
        resumed = None
        while time.monotonic() < deadline and resumed is None:
            time.sleep(0.2)
            resumed = next((t for c in clients for (t, _e, _s, kind, _r) in c.log
                            if kind == "answer" and t > up_at), None)
        time.sleep(0.5)
    finally:
        for c in clients:
            c.stop.set()
        for c in clients:
            c.join(30)
    try:
        assert proc.proc.poll() is None, "the proxy died with its upstream"
        assert resumed is not None, "no statement was answered after the database came back"
        logs = [e for c in clients for e in c.log]
        before = [e for e in logs if e[1] < down_at]
        during = [e for e in logs if e[0] > down_done and e[1] < up_at]
        assert any(e[3] == "answer" for e in before)
        # While the database is down only stored answers can be served (repeats, from memory); anything
        # new is an error. A statement sent before the database had finished stopping may have committed
        # (and its repeat then come from memory) even if its reply came after down_at.
        earlier = {e[2]: e[4] for e in logs if e[3] == "answer" and e[0] < down_done}
        served = [e for e in during if e[3] == "answer"]
        assert all(earlier.get(e[2]) == e[4] for e in served), [e for e in served if e[2] not in earlier][:3]
        during = [e for e in during if e[3] == "error"]
        codes = {e[4] for e in during}
        assert codes and None not in codes, codes
        # Every answer any client received, even around the outage, is in the ledger: asked again it comes
        # back identical and spends nothing.
        answered = {e[2]: e[4] for e in logs if e[3] == "answer"}
        b0 = budget_remaining(proc)
        with psycopg.connect(proc.dsn(), autocommit=True) as conn:
            for sql, rows in answered.items():
                assert conn.execute(sql).fetchall() == rows, sql
        assert budget_remaining(proc) == b0
        assert not ledger_problems(own_cluster.dsn("adult"))
    finally:
        proc.stop()
