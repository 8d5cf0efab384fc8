"""Starting and stopping the proxy on its embedded PostgreSQL as a new user does (issue 27, lifecycle).

One state dir, real `lapras-proxy serve` processes in order: a proxy killed with SIGKILL leaves its cluster
running; the next start with a misspelt privacy_unit fails and leaves nothing running (it adopted the
orphan); a good start on port 0 prints its bound port and a SIGTERM stops everything; `--data` for a table
that exists is refused naming `--reload-data`, which replaces the table; `reset` removes the database
(refused while a proxy uses it). `--version` and readable `budget` output come with it.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from proxy.upstream.embedded import EmbeddedPostgres

pytestmark = pytest.mark.process

REPO = Path(__file__).resolve().parents[3]
CSV_ROWS = 37


def cli(*args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "proxy.ops.cli", *args], capture_output=True, text=True,
                          cwd=REPO, timeout=timeout)


class Serve:
    """A `serve` process whose output is read until its ready line (or its exit)."""

    def __init__(self, config: Path, state: Path, *extra: str) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "proxy.ops.cli", "serve", "--config", str(config),
                                      "--state-dir", str(state), *extra],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO)
        self.lines: list[str] = []
        self.port = 0

    def ready(self, timeout: float = 240) -> bool:
        """True at the ready line (its bound port read), False when the process ended first."""
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        for line in self.proc.stdout:
            self.lines.append(line)
            m = re.search(r"port=(\d+)", line)
            if m and any("ready" in x for x in self.lines):
                self.port = int(m.group(1))
                return True
            assert time.monotonic() < deadline, "".join(self.lines)
        self.proc.wait(30)
        return False

    @property
    def text(self) -> str:
        return "".join(self.lines)

    def stop(self, sig: int = signal.SIGTERM) -> int:
        self.proc.send_signal(sig)
        code = self.proc.wait(60)
        assert self.proc.stdout is not None
        self.lines.extend(self.proc.stdout.readlines())
        return code


def _config(root: Path, *, unit: str | None = None) -> Path:
    text = (REPO / "config.toml").read_text()
    text = text.replace('listen = "127.0.0.1:6432"', 'listen = "127.0.0.1:0"')
    if unit is not None:
        text = text.replace('description = "UCI Adult census extract, integer-coded"\n',
                            f'description = "UCI Adult census extract, integer-coded"\nprivacy_unit = "{unit}"\n')
    path = root / ("config.toml" if unit is None else "misspelt.toml")
    path.write_text(text)
    return path


def _csv(root: Path) -> Path:
    header = ["age", "workclass", "fnlwgt", "education-num", "marital-status", "occupation", "relationship",
              "race", "sex", "capital-gain", "capital-loss", "hours-per-week", "native-country", "income>50K"]
    rows = [[str(1 + i % 50)] + ["1"] * 13 for i in range(CSV_ROWS)]
    path = root / "small.csv"
    path.write_text(",".join(header) + "\n" + "".join(",".join(r) + "\n" for r in rows))
    return path


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path, EmbeddedPostgres]]:
    root = tmp_path_factory.mktemp("lifecycle")
    state = root / "state"
    pg = EmbeddedPostgres(state)
    try:
        yield root, state, pg
    finally:
        pg.destroy()


def _rows(pg: EmbeddedPostgres) -> int:
    with psycopg.connect(pg.dsn("adult")) as conn:
        row = conn.execute("SELECT count(*) FROM adult").fetchone()
        assert row is not None
        return int(row[0])


def test_version() -> None:
    done = cli("--version")
    assert done.returncode == 0 and re.fullmatch(r"lapras-proxy \d+\.\d+\.\d+\S*\n", done.stdout), done


def test_lifecycle_on_one_state_dir(site: tuple[Path, Path, EmbeddedPostgres]) -> None:
    root, state, pg = site
    good = _config(root)

    # 1. First start on port 0: the ready line names the port the OS gave; clients connect there.
    first = Serve(good, state)
    assert first.ready(), first.text
    assert first.port != 0, first.text
    with psycopg.connect(f"host=127.0.0.1 port={first.port} user=analyst password=lapras dbname=adult "
                         "sslmode=disable", autocommit=True) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)
    # A killed proxy cannot stop its cluster: it is left running, used by nobody.
    first.stop(signal.SIGKILL)
    assert pg.is_running() and not pg.in_use_elsewhere()

    # 2. A misspelt privacy_unit fails after the cluster is up: the start adopted the orphan and stops it.
    bad = Serve(_config(root, unit="persn_id"), state)
    assert not bad.ready()
    assert bad.proc.returncode == 1 and "persn_id" in bad.text and "Traceback" not in bad.text, bad.text
    assert not pg.is_running(), "a failed start left the embedded PostgreSQL running"

    # 3. --data for a table that exists is refused, naming --reload-data; nothing is left running.
    csv = _csv(root)
    refused = Serve(good, state, "--data", f"adult={csv}")
    assert not refused.ready()
    assert refused.proc.returncode == 1 and "--reload-data" in refused.text and "already exists" in refused.text
    assert not pg.is_running()

    # 4. --reload-data replaces the table with the file's rows; reset is refused while the proxy runs;
    #    SIGTERM stops the proxy and its cluster.
    reloaded = Serve(good, state, "--data", f"adult={csv}", "--reload-data")
    assert reloaded.ready(), reloaded.text
    assert "replaced table public.adult" in reloaded.text
    if os.geteuid() == 0:   # the cluster lives outside the state dir: the start says where and how to reset it
        assert f"using the embedded database in {pg.data_dir}" in reloaded.text and "reset" in reloaded.text
    assert _rows(pg) == CSV_ROWS
    busy = cli("reset", "--state-dir", str(state), "--yes")
    assert busy.returncode == 1 and "in use" in busy.stderr
    budget = cli("budget", "--config", str(good), "--state-dir", str(state))
    assert budget.returncode == 0, budget.stderr
    started = next(line for line in budget.stdout.splitlines() if line.strip().startswith("current.started_at"))
    assert re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\+00$", started), budget.stdout
    assert not re.search(r"\d\.\d{9,}", budget.stdout), budget.stdout   # no 0.7000000000000001
    with psycopg.connect(pg.dsn("adult"), autocommit=True) as conn:   # an operator's view over the table
        conn.execute("CREATE VIEW adult_by_age AS SELECT age FROM adult")
    assert reloaded.stop() == 0
    assert not pg.is_running(), "SIGTERM left the embedded PostgreSQL running"
    blocked = Serve(good, state, "--data", f"adult={csv}", "--reload-data")
    assert not blocked.ready()
    assert blocked.proc.returncode == 1 and "other objects depend on it" in blocked.text, blocked.text
    assert "Traceback" not in blocked.text and not pg.is_running()

    # Two proxies on one state dir: the cluster stays up while either runs and stops with the last one,
    # whichever started it.
    one, two = Serve(good, state), None
    assert one.ready(), one.text
    two = Serve(good, state)
    assert two.ready(), two.text
    assert one.stop() == 0
    assert pg.is_running(), "the first proxy out stopped the cluster the second still uses"
    with psycopg.connect(f"host=127.0.0.1 port={two.port} user=analyst password=lapras dbname=adult "
                         "sslmode=disable", autocommit=True) as conn:
        assert conn.execute("SELECT COUNT(*) FROM adult WHERE age > 30").fetchone() is not None
    assert two.stop() == 0
    assert not pg.is_running(), "the last proxy out left the cluster running"

    # whatif --data over the same table: refused the same way, and the cluster it started is stopped.
    log = root / "q.jsonlog"
    log.write_text("".join(json.dumps({
        "timestamp": f"2026-10-0{d} 10:00:00.000 UTC", "user": "analyst", "dbname": "adult", "pid": 7,
        "error_severity": "LOG", "message": f"statement: SELECT COUNT(*) FROM adult WHERE age > {20 + d}"}) + "\n"
        for d in (1, 2)))
    whatif = cli("whatif", str(log), "--config", str(good), "--state-dir", str(state), "--data", f"adult={csv}",
                 "--no-progress", "--workers", "1")
    assert whatif.returncode == 2 and "--reload-data" in whatif.stderr, whatif.stderr
    assert not pg.is_running()

    # 5. reset: says what it removes without --yes, removes it with --yes.
    ask = cli("reset", "--state-dir", str(state))
    assert ask.returncode == 2 and "ledger" in ask.stderr and (pg.data_dir / "PG_VERSION").exists()
    done = cli("reset", "--state-dir", str(state), "--yes")
    assert done.returncode == 0, done.stderr
    assert not (pg.data_dir / "PG_VERSION").exists()
    assert not os.path.exists(pg.data_dir)

    # 6. SIGTERM during start-up (the cluster up, the tables being filled): the process ends, and so does
    #    the cluster it started.
    early = Serve(good, state)
    assert early.proc.stdout is not None
    for line in early.proc.stdout:
        early.lines.append(line)
        if "initialising embedded PostgreSQL" in line:
            break
    deadline = time.monotonic() + 120
    while not pg.is_running():
        assert time.monotonic() < deadline and early.proc.poll() is None, early.text
        time.sleep(0.05)
    code = early.stop()
    assert code != 0 and "ready" not in early.text, early.text
    assert not pg.is_running(), "SIGTERM during start-up left the embedded PostgreSQL running"
