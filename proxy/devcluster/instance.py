"""One PostgreSQL cluster of the dev cluster: initialised with password (SCRAM) authentication, listening on
a Unix socket only, in a directory only the service account may enter.

As for the embedded default, no other local OS account can reach the data: the state directory is 0700,
there is no TCP listener and no `trust` line. When the command runs as root the servers run as the
unprivileged system user (PostgreSQL refuses root), which then owns the state directory.
"""

from __future__ import annotations

import functools
import os
import pwd
import subprocess
from dataclasses import dataclass
from pathlib import Path

from ..upstream.embedded import (
    SYSTEM_USER,
    _ensure_system_user,
    _reachable_bin_dir,
    bin_dir,
    pg_ctl_stop,
    wait_accepting,
)

_HBA = """# Written by lapras-proxy dev-cluster. Unix socket only (no TCP listener); passwords, never trust.
local   all   all   scram-sha-256
"""


class ClusterError(RuntimeError):
    """A dev-cluster server could not be initialised, started or stopped; the message says why."""


@functools.cache
def server_bin_dir() -> Path:
    """The server binaries, as the account that runs the servers can execute them."""
    account = service_account()
    return _reachable_bin_dir(account.pw_name) if account is not None else bin_dir()


def service_account() -> pwd.struct_passwd | None:
    """The account the servers run as: None for the current user, the system user when running as root."""
    return _ensure_system_user(SYSTEM_USER) if os.geteuid() == 0 else None


@dataclass(frozen=True)
class PgInstance:
    """A cluster in ``data_dir`` whose socket is ``socket_dir/.s.PGSQL.<port>``."""

    name: str
    data_dir: Path
    socket_dir: Path
    port: int
    password_file: Path            # the superuser's password, 0600 in the state dir
    settings: tuple[tuple[str, str], ...] = ()

    @property
    def log_file(self) -> Path:
        return self.data_dir.parent / f"{self.name}.log"

    def dsn(self, dbname: str = "postgres") -> str:
        password = self.password_file.read_text().strip()
        return (f"host={self.socket_dir} port={self.port} user=postgres password={password} "
                f"dbname={dbname}")

    def _run(self, exe: str, args: list[str], timeout: float) -> str:
        account = service_account()
        try:
            done = subprocess.run([str(server_bin_dir() / exe), *args], capture_output=True, text=True,
                                  timeout=timeout, check=False, cwd="/",
                                  user=account.pw_uid if account else None,
                                  group=account.pw_gid if account else None)
        except subprocess.TimeoutExpired as exc:
            raise ClusterError(f"{self.name}: {exe} did not finish within {timeout:.0f} s") from exc
        except PermissionError as exc:
            raise ClusterError(f"{self.name}: the service account cannot run {server_bin_dir() / exe}: {exc}") from None
        if done.returncode != 0:
            raise ClusterError(f"{self.name}: {exe} failed: {(done.stderr or done.stdout).strip()}")
        return done.stdout

    def init(self) -> None:
        """initdb with the superuser's password and a password-only pg_hba.conf (idempotent)."""
        if (self.data_dir / "PG_VERSION").exists():
            return
        # initdb reads the password from a file the service account can read; removed right after.
        pw_tmp = self.data_dir.parent / f".{self.name}.pw"
        pw_tmp.write_text(self.password_file.read_text())
        _give(pw_tmp, 0o600)
        try:
            self._run("initdb", ["-D", str(self.data_dir), "-U", "postgres", f"--pwfile={pw_tmp}",
                                 "--auth=scram-sha-256", "--encoding=UTF8", "--locale=C"], timeout=180)
        finally:
            pw_tmp.unlink(missing_ok=True)
        (self.data_dir / "pg_hba.conf").write_text(_HBA)
        _give(self.data_dir / "pg_hba.conf", 0o600)

    def is_running(self) -> bool:
        pid_file = self.data_dir / "postmaster.pid"
        try:
            pid = int(pid_file.read_text().split("\n", 1)[0])
            os.kill(pid, 0)
        except (OSError, ValueError):
            return False
        return (self.socket_dir / f".s.PGSQL.{self.port}").exists()

    def start(self, timeout: float = 60.0) -> None:
        """Start the server (no-op when it runs) and wait until it accepts connections."""
        if self.is_running():
            return
        opts = [f"-k {self.socket_dir}", "-h ''", f"-p {self.port}",
                *(f"-c {k}={v}" for k, v in self.settings)]
        if not self.log_file.exists():
            self.log_file.touch()
            _give(self.log_file, 0o600)
        self._run("pg_ctl", ["-D", str(self.data_dir), "-w", "-t", str(int(timeout)), "-l", str(self.log_file),
                             "-o", " ".join(opts), "start"], timeout=timeout + 30)
        wait_accepting(self.dsn(), timeout, ClusterError, self.name)

    def stop(self, mode: str = "fast") -> None:
        """Stop the server (mode: smart, fast or immediate); no-op when it is not running."""
        if self.is_running():
            pg_ctl_stop(self._run, self.data_dir, mode)


def _give(path: Path, mode: int) -> None:
    """Hand a file to the service account with ``mode`` (the servers read and write it)."""
    path.chmod(mode)
    account = service_account()
    if account is not None:
        os.chown(path, account.pw_uid, account.pw_gid)


def private_dir(path: Path, mode: int = 0o700) -> None:
    """Create ``path`` (parents included) as a directory of the service account with ``mode``.

    A path that exists but is a symlink or belongs to another account is refused, not taken over: shared
    places such as /tmp could otherwise hand the data to whoever created the directory first."""
    path.mkdir(parents=True, exist_ok=True, mode=mode)
    st = path.lstat()
    account = service_account()
    uid = account.pw_uid if account else os.geteuid()
    if path.is_symlink() or not path.is_dir():
        raise ClusterError(f"{path} is not a directory")
    if st.st_uid not in (uid, os.geteuid()):
        raise ClusterError(f"{path} belongs to another account (uid {st.st_uid}); choose another --state-dir")
    path.chmod(mode)
    if account is not None:
        os.chown(path, account.pw_uid, account.pw_gid)


def check_reachable(path: Path) -> None:
    """Fail clearly when the service account cannot traverse the parents of ``path``: the product never
    widens the permissions of directories it does not own."""
    account = service_account()
    if account is None:
        return
    for parent in path.resolve().parents:
        st = parent.stat()
        ok = (st.st_mode & 0o001) or (st.st_uid == account.pw_uid and st.st_mode & 0o100) or (
            st.st_gid == account.pw_gid and st.st_mode & 0o010)
        if not ok:
            raise ClusterError(f"the service account {SYSTEM_USER} cannot enter {parent}; choose a --state-dir "
                               f"under a directory it can traverse (e.g. /var/tmp or /srv)")
