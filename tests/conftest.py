"""Shared fixtures: one real embedded PostgreSQL per test session, the Adult table, fresh databases.

The proxy fixture starts the real `lapras-proxy serve` process on a free port against that cluster.
"""

from __future__ import annotations

import itertools
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict

from proxy.ops.config import load_config
from proxy.ops.demo_data import ensure_table
from proxy.ops.embedded import EmbeddedPostgres

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def bi_log(tmp_path_factory) -> dict[str, Path]:
    """A generated 21-day BI log over Adult: paths by format (stderr, csvlog) and its truth file."""
    import bi_log_fixture

    return bi_log_fixture.write(tmp_path_factory.mktemp("bilog"))


@pytest.fixture(scope="session")
def default_config():
    return load_config(REPO / "config.toml")


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


_db_counter = itertools.count()
# tests/reliability/harness.py loads this file a second time under another name: a token per loaded copy
# keeps the two copies' database names apart.
_COPY = secrets.token_hex(3)


def _db_name(prefix: str) -> str:
    return f"{prefix}_{os.getpid()}_{_COPY}_{next(_db_counter)}"


def create_database(embedded_pg: EmbeddedPostgres, prefix: str = "t", template: str | None = None) -> str:
    """Conninfo of a new database, empty or a copy of ``template``."""
    name = _db_name(prefix)
    copy = f' TEMPLATE "{template}"' if template else ""
    with psycopg.connect(embedded_pg.dsn(), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"{copy}')
    return embedded_pg.dsn(name)


@pytest.fixture
def fresh_db(embedded_pg: EmbeddedPostgres) -> str:
    """Conninfo of a new, empty database (one per test)."""
    return create_database(embedded_pg, "fresh")


TEST_EVENTS_ROWS = 20_000
"""Rows of the generated `events` table in test databases: enough for its tests, made in a second."""
TEST_EVENTS_END = datetime(2027, 1, 1, tzinfo=UTC)
"""End of the test `events` span: the whole declared year 2026, whatever today is (the generator's default
end is today, so the rows, and every test reading them, would change with the date)."""


def fill_demo_tables(dsn: str, cfg: Any) -> None:
    """Every protected table of ``cfg`` in the database at ``dsn``, as the embedded default fills them:
    census-like rows from the demo generator, event logs from the events generator (smaller here)."""
    from proxy.ops.events_data import EventsSpec, ensure_events_table

    for table in cfg.catalog.tables:
        load = cfg.loads.get(table.name)
        if load is not None and load.generator == "events":
            ensure_events_table(dsn, EventsSpec(rows=TEST_EVENTS_ROWS, end=TEST_EVENTS_END), table.schema,
                                table.name)
        else:
            ensure_table(dsn, table, load, None)


_TEMPLATES: list[tuple[EmbeddedPostgres, Any, str]] = []


def demo_database(embedded_pg: EmbeddedPostgres, cfg: Any, prefix: str = "t") -> str:
    """A new database holding ``cfg``'s protected tables as :func:`fill_demo_tables` fills them, copied
    from a template filled once per cluster and config (CREATE DATABASE ... TEMPLATE copies files in a
    fraction of a second; generating and loading the rows again took about 2 s a database)."""
    template = next((name for pg, c, name in _TEMPLATES if pg is embedded_pg and c is cfg), None)
    if template is None:
        dsn = create_database(embedded_pg, "template")
        fill_demo_tables(dsn, cfg)
        template = conninfo_to_dict(dsn)["dbname"]
        _TEMPLATES.append((embedded_pg, cfg, str(template)))
    return create_database(embedded_pg, prefix, template)


@pytest.fixture(scope="session")
def adult_db(embedded_pg: EmbeddedPostgres, default_config) -> str:
    """Conninfo of a database holding the shipped config's tables (adult, events) with generated rows
    (the suite never needs ../shared)."""
    return demo_database(embedded_pg, default_config, "adult")


# ---------------------------------------------------------------------------------------------- proxy


def _md5_secret(user: str, password: str) -> str:
    import hashlib

    return "md5" + hashlib.md5((password + user).encode()).hexdigest()


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _drop_shipped_keys(text: str, section: str, extra: str) -> str:
    """The shipped config without its own lines for the keys ``extra`` (inserted at the section's top) sets:
    a TOML key may appear once (config.toml sets partition_fraction; a test may set it again)."""
    import re

    head = text.index(f"[{section}]\n") + len(f"[{section}]\n") + len(extra) + 1
    end = text.find("\n[", head)
    body = text[head:end if end >= 0 else len(text)]
    for line in extra.splitlines():
        key = line.split("=", 1)[0].strip()
        if key:
            body = re.sub(rf"(?m)^{re.escape(key)}\s*=.*\n", "", body, count=1)
    return text[:head] + body + (text[end:] if end >= 0 else "")


def make_test_config(upstream_dsn: str, port: int, *, epsilon: float = 1.0, delta: float = 1e-3,
                     stream_length: int = 200, extra: str = "", privacy_extra: str = "",
                     lapras_extra: str = "", learn_prediction: bool = True) -> str:
    """config.toml for tests: the shipped default pointed at a test database, plus md5 and trust users."""
    text = (REPO / "config.toml").read_text()
    if not learn_prediction:  # nothing learnt: neither P nor S (S would pace the budget to the few statements)
        text = text.replace("learn_prediction = true ", "learn_prediction = false ", 1)
        text = text.replace("learn_stream = true ", "learn_stream = false ", 1)
    text = text.replace('listen = "127.0.0.1:6432"', f'listen = "127.0.0.1:{port}"')
    text = text.replace('dsn = ""', f"dsn = {upstream_dsn!r}".replace("'", '"'))
    text = text.replace("epsilon = 1.0\n", f"epsilon = {epsilon!r}\n", 1)
    text = text.replace("delta = 1e-3 ", f"delta = {delta!r} ", 1)
    text = text.replace("stream_length = 200 ", f"stream_length = {stream_length} ", 1)
    if privacy_extra:
        text = text.replace("[privacy]\n", "[privacy]\n" + privacy_extra + "\n", 1)
        text = _drop_shipped_keys(text, "privacy", privacy_extra)
    if lapras_extra:
        text = text.replace("[lapras]\n", "[lapras]\n" + lapras_extra + "\n", 1)
        text = _drop_shipped_keys(text, "lapras", lapras_extra)
    users = (f'\n[[users]]\nname = "md5user"\nauth = "md5"\nsecret = "{_md5_secret("md5user", "md5pass")}"\n'
             '\n[[users]]\nname = "trustuser"\nauth = "trust"\n'
             f'\n[[users]]\nname = "dba"\nauth = "md5"\nadmin = true\nsecret = "{_md5_secret("dba", "dbapass")}"\n')
    marker = "\n[privacy]"
    text = text.replace(marker, users + marker, 1)
    return text + "\n" + extra


class ProxyProcess:
    """A real `lapras-proxy serve` process on a free port."""

    def __init__(self, config_path: Path, state_dir: Path, port: int, extra_args: tuple[str, ...] = ()) -> None:
        self.config_path = config_path
        self.extra_args = extra_args
        self.state_dir = state_dir
        self.host = "127.0.0.1"
        self.port = port
        self.proc: Any = None
        self.output: list[str] = []

    def dsn(self, user: str = "analyst", password: str | None = "lapras", dbname: str = "adult") -> str:
        pw = f" password={password}" if password is not None else ""
        return f"host={self.host} port={self.port} user={user} dbname={dbname}{pw} sslmode=disable"

    def start(self, timeout: float = 60.0) -> None:
        import subprocess
        import sys
        import threading
        import time

        self.output = []
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "proxy.ops.cli", "serve", "--config", str(self.config_path),
             "--state-dir", str(self.state_dir), *self.extra_args],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO)
        ready = threading.Event()

        def pump() -> None:
            assert self.proc.stdout is not None
            for line in self.proc.stdout:
                self.output.append(line)
                if "ready" in line:
                    ready.set()

        threading.Thread(target=pump, daemon=True).start()
        deadline = time.monotonic() + timeout
        while not ready.is_set():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("proxy did not become ready:\n" + "".join(self.output))
            time.sleep(0.05)
        # "ready" is printed after the listening socket is open
        time.sleep(0.05)

    def stop(self, sig: int | None = None) -> None:
        import signal

        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(sig or signal.SIGTERM)
        try:
            self.proc.wait(20)
        except Exception:
            self.proc.kill()
            self.proc.wait(5)


def serve_config(root: Path, text: str, port: int, upstream_dsn: str) -> Iterator[ProxyProcess]:
    """A proxy serving config ``text`` (written to ROOT/config.toml, its state in ROOT/state) on ``port``,
    its ``upstream_dsn`` noted for the test, stopped after use: a proxy fixture's body
    (``yield from harness.serve_config(...)``)."""
    (root / "config.toml").write_text(text)
    p = ProxyProcess(root / "config.toml", root / "state", port)
    p.upstream_dsn = upstream_dsn  # type: ignore[attr-defined]
    p.start()
    try:
        yield p
    finally:
        p.stop()


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
    """This module's names (ProxyProcess, free_port, create_database, make_test_config, fill_demo_tables...)
    for tests that start their own proxies and databases: ``from conftest import`` may name another
    directory's conftest when the whole suite is collected."""
    return SimpleNamespace(**globals())
