"""Helpers for reliability tests: proxies with custom limits and budgets on their own ledger database,
budget readings that spend nothing, and exact answers straight from PostgreSQL."""

from __future__ import annotations

import re
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from proxy.replay.runner import parse_budget
from tests.fixtures.databases import demo_database
from tests.fixtures.proxy_process import ProxyProcess, free_port, make_test_config

REPO = Path(__file__).resolve().parents[2]




def set_server_keys(text: str, **values: object) -> str:
    """Replace `key = value` lines of the [server] section (the keys must exist in config.toml)."""
    head, sep, rest = text.partition("[server]\n")
    section, sep2, tail = rest.partition("\n[")
    for key, value in values.items():
        literal = repr(value).lower() if isinstance(value, bool) else repr(value)
        section, n = re.subn(rf"(?m)^{key}\s*=\s*[^#\n]*", f"{key} = {literal} ", section)
        assert n == 1, f"[server] {key} not found in config.toml"
    return head + sep + section + sep2 + tail


def new_adult_db(embedded_pg: Any, default_config: Any, prefix: str = "rel") -> str:
    """A database of its own with the shipped config's tables, so a test's ledger starts empty."""
    return str(demo_database(embedded_pg, default_config, prefix))


def start_proxy(root: Path, upstream_dsn: str, *, epsilon: float = 1.0, delta: float = 1e-3,
                server: dict[str, object] | None = None, privacy_extra: str = "", lapras_extra: str = "",
                port: int | None = None, start: bool = True, extra: str = "") -> Any:
    """A real `lapras-proxy serve` process on its own port with the given limits and budget (``extra``:
    TOML appended to the config, e.g. more protected tables)."""
    root.mkdir(parents=True, exist_ok=True)
    port = port or free_port()
    text = make_test_config(upstream_dsn, port, epsilon=epsilon, delta=delta, privacy_extra=privacy_extra,
                            lapras_extra=lapras_extra, extra=extra)
    if server:
        text = set_server_keys(text, **server)
    cfg = root / "config.toml"
    cfg.write_text(text)
    proc = ProxyProcess(cfg, root / "state", port)
    if start:
        proc.start()
    return proc


def proxy_fixture(prefix: str, **options: Any) -> Any:
    """A module fixture (assign it to the fixture's name): a proxy started by :func:`start_proxy` with
    ``options`` on a new database of its own named after ``prefix`` (its conninfo as ``upstream``),
    stopped after the module."""

    @pytest.fixture(scope="module")
    def proxy(embedded_pg: Any, default_config: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
        dsn = new_adult_db(embedded_pg, default_config, prefix)
        proc = start_proxy(tmp_path_factory.mktemp(prefix), dsn, **options)
        proc.upstream = dsn
        try:
            yield proc
        finally:
            proc.stop()

    return proxy


def connect(proc: Any) -> psycopg.Connection:
    """An autocommit analyst connection to the proxy ``proc`` (10 s to connect)."""
    return psycopg.connect(proc.dsn(), autocommit=True, connect_timeout=10)


def kill(proc: Any) -> None:
    """SIGKILL the proxy process: no shutdown code runs."""
    if proc.proc is not None and proc.proc.poll() is None:
        proc.proc.send_signal(signal.SIGKILL)
        proc.proc.wait(10)


def budget_remaining(proc: Any, user: str = "analyst", password: str = "lapras") -> float:
    """`SHOW lapras.budget` through the proxy (it spends nothing)."""
    with psycopg.connect(proc.dsn(user, password), autocommit=True, connect_timeout=10) as conn:
        cur = conn.execute("SHOW lapras.budget")
        value = parse_budget(cur.description, cur.fetchall())
    assert value is not None, "SHOW lapras.budget returned no number"
    return value


def wait_ready(proc: Any, timeout: float = 30.0) -> None:
    """Until a client can log in and run a statement."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with psycopg.connect(proc.dsn(), autocommit=True, connect_timeout=5) as conn:
                conn.execute("SELECT 1")
            return
        except psycopg.Error:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def exact_scalar(upstream_dsn: str, sql: str) -> Any:
    """Run a statement directly on PostgreSQL (inside the trust boundary) and return the first cell."""
    with psycopg.connect(upstream_dsn) as conn:
        row = conn.execute(sql).fetchone()
    return None if row is None else row[0]


def ledger_problems(upstream_dsn: str) -> list[str]:
    """Consistency of the ledger tables (schema `lapras`) as committed; an empty list means consistent.

    Spent units equal the releases' units and the spends' units; nothing is spent beyond the parts'
    units; every fresh release has its answers committed with it, and every fresh answer its release.
    """
    problems: list[str] = []
    with psycopg.connect(upstream_dsn, autocommit=True) as conn:
        epochs = conn.execute(
            "SELECT e.id, e.spent_units,"
            " (SELECT coalesce(sum(units), 0) FROM lapras.releases r WHERE r.epoch_id = e.id),"
            " (SELECT coalesce(sum(units), 0) FROM lapras.spends s WHERE s.epoch_id = e.id),"
            " (SELECT coalesce(sum(units), 0) FROM lapras.parts p WHERE p.epoch_id = e.id)"
            " FROM lapras.epochs e ORDER BY e.id").fetchall()
        if sum(1 for _ in conn.execute("SELECT 1 FROM lapras.epochs WHERE ended_at IS NULL")) != 1:
            problems.append("not exactly one open epoch")
        for eid, spent, released, spends, total in epochs:
            tol = 1e-9 * max(1.0, total)
            if abs(spent - released) > tol:
                problems.append(f"epoch {eid}: spent_units {spent} but releases add up to {released}")
            if abs(spent - spends) > tol:
                problems.append(f"epoch {eid}: spent_units {spent} but spends add up to {spends}")
            if spent > total + tol:
                problems.append(f"epoch {eid}: overspent: {spent} units of {total}")
        orphans = conn.execute(
            "SELECT r.id, k FROM lapras.releases r, jsonb_array_elements_text(r.meta -> 'keys') k"
            " WHERE r.kind = 'fresh' AND NOT EXISTS (SELECT 1 FROM lapras.answers a"
            "  WHERE a.epoch_id = r.epoch_id AND a.key = k)").fetchall()
        if orphans:
            problems.append(f"{len(orphans)} released keys without a stored answer, e.g. {orphans[0]}")
        missing = conn.execute("SELECT count(*) FROM lapras.answers WHERE outcome = 'fresh' AND release_id IS NULL"
                               ).fetchone()
        if missing and missing[0]:
            problems.append(f"{missing[0]} fresh answers without their release")
    return problems
