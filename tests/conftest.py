"""Shared fixtures: one real embedded PostgreSQL per test session, the Adult table, fresh databases.

The proxy fixture starts the real `lapras-proxy serve` process on a free port against that cluster.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from proxy.config import parse_config
from proxy.upstream.embedded import EmbeddedPostgres
from tests.fixtures import databases, proxy_process
from tests.fixtures.databases import create_database, demo_database
from tests.fixtures.proxy_process import ProxyProcess, free_port, make_test_config

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def bi_log(tmp_path_factory) -> dict[str, Path]:
    """A generated 21-day BI log over Adult: paths by format (stderr, csvlog) and its truth file."""
    from tests.fixtures import bi_log_fixture

    return bi_log_fixture.write(tmp_path_factory.mktemp("bilog"))


@pytest.fixture(scope="session")
def default_config():
    """The shipped config.toml, `events` declared with the tests' bounds (``events_test_config``)."""
    import tomllib

    return parse_config(tomllib.loads(proxy_process.events_test_config((REPO / "config.toml").read_text())),
                        str(REPO / "config.toml"))


@pytest.fixture(scope="session")
def embedded_pg() -> Iterator[EmbeddedPostgres]:
    """A real PostgreSQL cluster for the whole test session (not per test)."""
    root = Path(tempfile.mkdtemp(prefix="lapras-test-"))
    pg = EmbeddedPostgres(root)
    pg.start()
    try:
        yield pg
    finally:
        pg.destroy()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def pg_dsn(embedded_pg: EmbeddedPostgres) -> str:
    """Admin conninfo of the session's cluster (database postgres)."""
    return embedded_pg.dsn()


# ------------------------------------------------------------------------------------------ test tiers

# A test whose fixtures (directly or through other fixtures) include one of these starts real processes.
PROCESS_FIXTURES = frozenset({"embedded_pg", "e2e"})
# Modules whose tests start processes of their own (linters, proxies, clusters, client runtimes).
PROCESS_DIRS = ("reliability", "clients", "scale")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the `process` tier; `-m "not process and not slow"` is the fast tier (pure Python, seconds)."""
    for item in items:
        # Parts below tests/ only: a checkout under a directory named like one (…/scale/) is not one.
        in_dir = any(part in PROCESS_DIRS for part in item.path.relative_to(Path(__file__).parent).parts)
        if in_dir or PROCESS_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.process)


_MYPY = pytest.StashKey["subprocess.Popen[str]"]()


def _mypy_command() -> list[str]:
    exe = Path(sys.executable).parent / "mypy"
    return [str(exe) if exe.exists() else (shutil.which("mypy") or "mypy")]


def pytest_collection_finish(session: pytest.Session) -> None:
    """Start mypy as soon as the suite is collected, when the type check is among the selected tests: it
    needs a core for 30-60 s, which overlaps the process tests' waits instead of adding to the wall time;
    tests/test_lint.py collects its result."""
    if hasattr(session.config, "workerinput"):
        return  # under pytest-xdist every worker collects every test: the one that runs it starts mypy
    if any(item.name == "test_mypy_clean" for item in session.items):
        session.config.stash[_MYPY] = subprocess.Popen(_mypy_command(), cwd=REPO, stdout=subprocess.PIPE,
                                                       stderr=subprocess.STDOUT, text=True)


def pytest_sessionfinish(session: pytest.Session) -> None:
    proc = session.config.stash.get(_MYPY, None)
    if proc is not None and proc.poll() is None:
        proc.kill()
        proc.wait()


@pytest.fixture
def mypy_result(request: pytest.FixtureRequest) -> tuple[int, str]:
    """Exit code and output of mypy on the packages (started at collection, or now)."""
    proc = request.config.stash.get(_MYPY, None)
    if proc is None:
        proc = subprocess.Popen(_mypy_command(), cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True)
    out, _ = proc.communicate(timeout=900)
    return proc.returncode, out


@pytest.fixture(autouse=True)
def _fast_tier_starts_no_process(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """In the fast tier, a test that starts a process fails, so the `process` marks cannot go stale."""
    if "not process" not in request.config.getoption("markexpr", ""):
        return

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError(f"{request.node.nodeid} starts a process: mark it @pytest.mark.process")

    monkeypatch.setattr(subprocess, "Popen", refuse)


@pytest.fixture
def fresh_db(embedded_pg: EmbeddedPostgres) -> str:
    """Conninfo of a new, empty database (one per test)."""
    return create_database(embedded_pg, "fresh")


@pytest.fixture(scope="session")
def adult_db(embedded_pg: EmbeddedPostgres, default_config) -> str:
    """Conninfo of a database holding the shipped config's tables (adult, events) with generated rows
    (the suite never needs ../shared)."""
    return demo_database(embedded_pg, default_config, "adult")


@pytest.fixture(scope="session")
def proxy(embedded_pg: EmbeddedPostgres, adult_db: str, tmp_path_factory) -> Iterator[ProxyProcess]:
    """The real proxy (one per test session) in front of the session's Adult database.

    Its budget is large (epsilon = 1e4 per epoch, S = 100,000) so the many protocol tests never exhaust
    it; tests of budget behaviour start their own with `proxy_factory`.
    """
    root = tmp_path_factory.mktemp("proxy")
    port = free_port()
    cfg = root / "config.toml"
    cfg.write_text(make_test_config(adult_db, port, epsilon=1e4, delta=1e-3, stream_length=100_000))
    p = ProxyProcess(cfg, root / "state", port)
    p.start()
    try:
        yield p
    finally:
        p.stop()


@pytest.fixture
def proxy_factory(embedded_pg: EmbeddedPostgres, default_config, tmp_path_factory):
    """Start extra proxies, each on its own database holding the Adult table (so each has its own
    ledger), with config overrides: ``proxy_factory(epsilon=1.0, stream_length=100, ...)``."""
    started: list[ProxyProcess] = []

    def make(**overrides: Any) -> ProxyProcess:
        dsn = demo_database(embedded_pg, default_config, "px")
        root = tmp_path_factory.mktemp("proxyf")
        port = free_port()
        cfg = root / "config.toml"
        cfg.write_text(make_test_config(dsn, port, **overrides))
        p = ProxyProcess(cfg, root / "state", port)
        p.upstream_dsn = dsn  # type: ignore[attr-defined]
        p.start()
        started.append(p)
        return p

    yield make
    for p in started:
        p.stop()


@pytest.fixture(scope="session")
def harness() -> Any:
    """The databases' and proxy processes' helpers (ProxyProcess, free_port, create_database,
    make_test_config, fill_demo_tables...) in one namespace, for tests that start their own proxies and
    databases."""
    return SimpleNamespace(**{k: v for module in (databases, proxy_process) for k, v in vars(module).items()
                              if not k.startswith("__")})
