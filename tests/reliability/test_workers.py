"""`serve --workers N` as an operator runs it: dead workers are replaced, stopping or killing the
supervisor leaves no worker behind, and a CancelRequest reaches the worker running the statement
whichever worker the kernel hands the cancel connection to."""

from __future__ import annotations

import concurrent.futures
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from proxy.server.cancel_relay import MAX_WORKERS, new_pid, worker_of

from .harness import ProxyProcess, free_port, make_test_config, new_adult_db

pytestmark = pytest.mark.process


def _children(pid: int) -> set[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return set()
    return {int(x) for x in text.split()}


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _wait(cond, timeout: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def _start(embedded_pg, default_config, root: Path, workers: int = 2) -> ProxyProcess:  # type: ignore[no-untyped-def]
    dsn = new_adult_db(embedded_pg, default_config, "wk")
    port = free_port()
    cfg = root / "config.toml"
    cfg.write_text(make_test_config(dsn, port, epsilon=1e4, stream_length=100_000))
    p = ProxyProcess(cfg, root / "state", port, extra_args=("--workers", str(workers)))
    p.start(timeout=120)
    _wait(lambda: len(_children(p.proc.pid)) == workers, 60, f"{workers} workers")
    return p


@pytest.fixture(scope="module")
def workers_proxy(embedded_pg, default_config, tmp_path_factory) -> Iterator[ProxyProcess]:  # type: ignore[no-untyped-def]
    p = _start(embedded_pg, default_config, tmp_path_factory.mktemp("workers"))
    try:
        yield p
    finally:
        p.stop()


def test_cancel_keys_name_their_worker() -> None:
    for worker in (0, 1, MAX_WORKERS - 1):
        pids = {new_pid(worker, lambda _pid: False) for _ in range(200)}
        assert all(0 < pid < 2**31 and worker_of(pid) == worker for pid in pids)
        assert len(pids) > 190


def test_a_cancel_reaches_the_worker_running_the_statement(workers_proxy: ProxyProcess) -> None:
    # The kernel picks a worker per connection; over 8 rounds a cancel lands on the wrong worker about
    # half the time, and each must still interrupt the statement.
    owners = set()
    for _ in range(8):
        with psycopg.connect(workers_proxy.dsn(), autocommit=True) as conn:
            owners.add(worker_of(conn.info.backend_pid))
            with concurrent.futures.ThreadPoolExecutor(1) as pool:
                t0 = time.monotonic()
                fut = pool.submit(lambda c=conn: c.execute("SELECT pg_sleep(8)").fetchone())
                time.sleep(0.4)
                conn.cancel()
                with pytest.raises(psycopg.errors.QueryCanceled):
                    fut.result(15)
                assert time.monotonic() - t0 < 6
            assert conn.execute("SELECT 1").fetchone() == (1,)
    assert owners <= {0, 1}


def test_a_dead_worker_is_replaced(workers_proxy: ProxyProcess) -> None:
    supervisor = workers_proxy.proc.pid
    before = _children(supervisor)
    victim = min(before)
    os.kill(victim, signal.SIGKILL)
    _wait(lambda: len(_children(supervisor)) == 2 and victim not in _children(supervisor), 60,
          "a replacement worker")
    # Both workers serve: sessions land on each (their keys say which) and answer.
    _wait(lambda: _serves_both(workers_proxy), 60, "both workers answering")


def _serves_both(p: ProxyProcess) -> bool:
    seen = set()
    for _ in range(24):
        try:
            with psycopg.connect(p.dsn(), autocommit=True, connect_timeout=5) as conn:
                assert conn.execute("SELECT COUNT(*) FROM adult").fetchone() is not None
                seen.add(worker_of(conn.info.backend_pid))
        except psycopg.OperationalError:
            return False
    return seen == {0, 1}


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_stopping_or_killing_the_supervisor_leaves_no_worker(sig: int, embedded_pg, default_config,  # type: ignore[no-untyped-def]
                                                             tmp_path: Path) -> None:
    p = _start(embedded_pg, default_config, tmp_path)
    workers = _children(p.proc.pid)
    try:
        os.kill(p.proc.pid, sig)
        code = p.proc.wait(30)
        assert code == (0 if sig == signal.SIGTERM else -signal.SIGKILL)
        _wait(lambda: not any(_alive(w) for w in workers), 30, "every worker to exit")
        with pytest.raises(psycopg.OperationalError):
            psycopg.connect(p.dsn(), connect_timeout=3).close()
    finally:
        for w in workers:
            if _alive(w):
                os.kill(w, signal.SIGKILL)
        p.stop()
