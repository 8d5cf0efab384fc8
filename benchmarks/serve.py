"""Start a real `lapras-proxy serve` for a benchmark and stop it: the process, and the seconds it took to
print its ready line; the embedded PostgreSQL a benchmark serves, with a database of its own (or the shipped
config's tables); a free port and the shipped config set up for a benchmark."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from proxy.config import Config
    from proxy.upstream.embedded import EmbeddedPostgres

REPO = Path(__file__).resolve().parents[1]


def start(config: Path, state: Path, timeout: float = 300.0,
          extra_args: Sequence[str] = ()) -> tuple[subprocess.Popen[str], float]:
    """`serve --config config --state-dir state [extra_args]`; returns once it is ready (raises with its
    output if not) with the seconds it took."""
    t0 = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "proxy.ops.cli", "serve", "--config", str(config),
                             "--state-dir", str(state), *extra_args], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, cwd=REPO)
    lines: list[str] = []
    ready = threading.Event()

    def pump() -> None:  # keeps reading, so a chatty proxy never blocks on a full pipe
        assert proc.stdout is not None
        for line in proc.stdout:
            if len(lines) < 200:
                lines.append(line)
            if "ready" in line:
                ready.set()

    threading.Thread(target=pump, daemon=True).start()
    while not ready.wait(0.05):
        if proc.poll() is not None or time.monotonic() - t0 > timeout:
            stop(proc)
            raise RuntimeError("the proxy did not start:\n" + "".join(lines))
    return proc, time.monotonic() - t0


@contextmanager
def embedded_database(root: Path, name: str) -> Iterator[str]:
    """The conninfo of a new database ``name`` in an embedded PostgreSQL started under ``root``; the
    cluster is destroyed after the block."""
    import psycopg

    from proxy.upstream.embedded import EmbeddedPostgres

    pg = EmbeddedPostgres(root)
    pg.start()
    try:
        with psycopg.connect(pg.dsn(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        yield pg.dsn(name)
    finally:
        pg.destroy()


def shipped_tables(pg: EmbeddedPostgres, adult_csv: Path | None = None) -> Config:
    """Database "adult" created in the started cluster ``pg`` and filled with the shipped config.toml's tables
    (a 20,000-row event log for an events table, generated rows for the others, ``adult_csv``'s rows for
    adult when given); returns that config."""
    import psycopg

    from proxy.config import load_config
    from proxy.upstream.demo_data import ensure_table
    from proxy.upstream.events_data import EventsSpec, ensure_events_table

    with psycopg.connect(pg.dsn(), autocommit=True) as conn:
        conn.execute("CREATE DATABASE adult")
    cfg = load_config(REPO / "config.toml")
    for t in cfg.catalog.tables:
        if cfg.loads[t.name].generator == "events":
            ensure_events_table(pg.dsn("adult"), EventsSpec(rows=20_000), t.schema, t.name)
        else:
            ensure_table(pg.dsn("adult"), t, cfg.loads[t.name], adult_csv if t.name == "adult" else None)
    return cfg


def stop(proc: subprocess.Popen[str]) -> None:
    proc.terminate()
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def peak_rss_mib(pid: int) -> float:
    """The process's peak resident memory so far (VmHWM)."""
    status = Path(f"/proc/{pid}/status").read_text()
    return next(int(x.split()[1]) for x in status.splitlines() if x.startswith("VmHWM:")) / 1024


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def config_text(upstream_dsn: str, port: int) -> str:
    """The shipped config.toml listening on ``port`` over ``upstream_dsn``, without a rate limit and with a
    budget that outlasts the run (a benchmark times work, not refusals)."""
    text = (REPO / "config.toml").read_text()
    text = text.replace('listen = "127.0.0.1:6432"', f'listen = "127.0.0.1:{port}"')
    text = text.replace('dsn = ""', "dsn = " + json.dumps(upstream_dsn))
    text = re.sub(r"(?m)^queries_per_minute = \d+", "queries_per_minute = 100000000", text)
    text = re.sub(r"(?m)^epsilon = [^\n#]+", "epsilon = 10000.0 ", text, count=1)
    return text
