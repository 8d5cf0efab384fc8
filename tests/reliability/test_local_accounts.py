"""Another local OS account against the embedded PostgreSQL (issue 13, finding 1).

The proxy runs on the embedded default; an unprivileged account (`nobody`, entered with setpriv) then tries
what an attacker on the same machine would: the database socket, the state dir, the data files. Each must
fail. The second line is checked too: with the socket opened up by the test itself, peer authentication
still refuses an account that is not the service's. The operator's way in (`lapras-proxy psql`) works.
"""

from __future__ import annotations

import os
import pwd
import shutil
import stat
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from proxy.upstream.embedded import EmbeddedPostgres, bin_dir

from .harness import REPO, ProxyProcess, free_port, make_test_config

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None,
                                reason="acting as another OS account needs root and setpriv")

ATTACKER = "nobody"
Attack = tuple[Any, EmbeddedPostgres, dict[Path, int], str]   # proxy, cluster, modes before, attacker's python

# Run by the attacker with the system interpreter in isolated mode: nothing of ours is imported, so a
# failure means the operating system or PostgreSQL refused, not that the attacker lacked our code.
_PROBE = textwrap.dedent("""
    import os, socket, struct, sys
    what, path = sys.argv[1], sys.argv[2]
    try:
        if what == "list":
            os.listdir(path)
        elif what == "read":
            open(path, "rb").read(1)
        else:
            s = socket.socket(socket.AF_UNIX)
            s.settimeout(10)
            s.connect(path)
            body = struct.pack("!i", 196608) + b"user\\0postgres\\0database\\0postgres\\0\\0"
            s.sendall(struct.pack("!i", len(body) + 4) + body)
            reply = s.recv(4096)
            if reply[:1] == b"E":
                fields = dict((p[:1].decode(), p[1:].decode()) for p in reply[5:].split(b"\\0") if p)
                print("REFUSED", fields.get("C"), fields.get("M"))
                sys.exit(0)
            print("ANSWERED", reply[:1])
            sys.exit(0)
        print("ALLOWED")
    except PermissionError:
        print("EACCES")
    except FileNotFoundError:
        print("ENOENT")
""")


def _setpriv() -> list[str]:
    entry = pwd.getpwnam(ATTACKER)
    return ["setpriv", f"--reuid={entry.pw_uid}", f"--regid={entry.pw_gid}", "--clear-groups"]


def _attacker_python() -> str | None:
    """An interpreter the attacker account can run (ours may live under /root, out of its reach)."""
    for candidate in ("/usr/bin/python3", "/usr/local/bin/python3", os.path.realpath(sys.executable)):
        if os.path.exists(candidate) and subprocess.run([*_setpriv(), candidate, "-I", "-c", "pass"], cwd="/",
                                                        capture_output=True, timeout=30).returncode == 0:
            return candidate
    return None


def as_attacker(python: str, what: str, path: Path) -> str:
    done = subprocess.run([*_setpriv(), python, "-I", "-c", _PROBE, what, str(path)],
                          capture_output=True, text=True, timeout=30, cwd="/")
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def _modes(path: Path) -> dict[Path, int]:
    return {p: p.stat().st_mode for p in path.resolve().parents}


@pytest.fixture(scope="module")
def embedded_proxy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Attack]:
    try:
        pwd.getpwnam(ATTACKER)
    except KeyError:
        pytest.skip(f"no {ATTACKER!r} account on this machine")
    python = _attacker_python()
    if python is None:
        pytest.skip(f"no Python interpreter that the {ATTACKER!r} account may run")

    root = tmp_path_factory.mktemp("local-accounts")
    state = root / "state"
    before = {**_modes(state), **_modes(bin_dir())}
    port = free_port()
    cfg = root / "config.toml"
    cfg.write_text(make_test_config("", port))   # no upstream: the embedded default
    proc = ProxyProcess(cfg, state, port)
    proc.start(timeout=180)
    pg = EmbeddedPostgres(state)
    try:
        yield proc, pg, before, python
    finally:
        proc.stop()
        pg.destroy()


def test_other_account_cannot_reach_socket_state_or_data(embedded_proxy: Attack
                                                         ) -> None:
    proc, pg, _, python = embedded_proxy
    assert pg.is_running()
    socket_path = pg.socket_dir / ".s.PGSQL.5432"
    assert as_attacker(python, "connect", socket_path) == "EACCES"
    assert as_attacker(python, "list", pg.socket_dir) == "EACCES"
    assert as_attacker(python, "list", pg.state_dir) == "EACCES"
    assert as_attacker(python, "list", pg.data_dir) == "EACCES"
    assert as_attacker(python, "read", pg.data_dir / "PG_VERSION") == "EACCES"
    assert as_attacker(python, "read", pg.data_dir / "pg_hba.conf") == "EACCES"
    assert as_attacker(python, "read", pg.log_file) == "EACCES"
    # The analyst's way in still works for the same account: through the proxy's port only.
    with psycopg.connect(proc.dsn(), autocommit=True) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)


def test_peer_authentication_refuses_other_accounts_even_at_an_open_socket(
        embedded_proxy: Attack) -> None:
    _, pg, _, python = embedded_proxy
    socket_path = pg.socket_dir / ".s.PGSQL.5432"
    # Simulate a mistake that opened the socket: a hard link in a directory the attacker may enter, with
    # the socket's mode widened. The server must still refuse on the connecting account alone.
    door = Path(tempfile.mkdtemp(prefix="lapras-door-"))
    link = door / ".s.PGSQL.5432"
    mode = socket_path.stat().st_mode
    try:
        door.chmod(0o711)
        os.link(socket_path, link)
        link.chmod(0o777)
        answer = as_attacker(python, "connect", link)
        assert answer.startswith("REFUSED 28000"), answer
        assert "peer authentication failed" in answer.lower(), answer
    finally:
        socket_path.chmod(mode & 0o777)
        shutil.rmtree(door, ignore_errors=True)
    with psycopg.connect(pg.dsn(), autocommit=True) as conn:
        rules = conn.execute("SELECT type, auth_method, options FROM pg_hba_file_rules").fetchall()
        mapped = {r[0] for r in conn.execute("SELECT sys_name FROM pg_ident_file_mappings")}
        listen = conn.execute("SHOW listen_addresses").fetchone()
    assert rules and all(r[0] == "local" and r[1] == "peer" for r in rules), rules
    assert ATTACKER not in mapped and mapped <= {"root", pwd.getpwuid(os.geteuid()).pw_name, "embedded_postgres"}
    assert listen == ("",), "the embedded PostgreSQL listens on no TCP address"


def test_no_directory_outside_the_product_was_opened_up(embedded_proxy: Attack
                                                         ) -> None:
    _, pg, before, _ = embedded_proxy
    after = {**_modes(pg.state_dir / "x"), **_modes(bin_dir())}
    widened = {str(p): (oct(before[p]), oct(after[p])) for p in before if p in after and after[p] != before[p]
               and p not in (pg.state_dir,)}
    assert not widened, f"permissions changed on directories the product does not own: {widened}"


def test_operator_gets_in_with_lapras_proxy_psql(embedded_proxy: Attack) -> None:
    proc, pg, _, python = embedded_proxy
    done = subprocess.run([sys.executable, "-m", "proxy.ops.cli", "psql", "--config", str(proc.config_path),
                           "--state-dir", str(pg.state_dir), "--", "-XAtc", "SELECT count(*) > 0 FROM adult"],
                          capture_output=True, text=True, timeout=60, cwd=REPO)
    assert done.returncode == 0 and done.stdout.strip() == "t", done.stderr


def test_query_log_is_readable_by_the_service_account_only(tmp_path: Path) -> None:
    """A sibling of finding 1: the query log holds every analyst's statements and outcomes."""
    import logging

    from proxy.observability import querylog

    path = tmp_path / "queries.jsonl"
    handler = querylog.configure(str(path))
    try:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    finally:
        logging.getLogger(querylog.log.name).removeHandler(handler)
        handler.close()


def test_cluster_of_the_earlier_layout_is_moved_not_replaced(tmp_path: Path) -> None:
    """Earlier versions kept the cluster in state_dir/pgdata (and opened its parents); starting the new
    version moves it into the product's own directory, ledger and all."""
    state = tmp_path / "state"
    first = EmbeddedPostgres(state)
    first.start()
    try:
        with psycopg.connect(first.dsn(), autocommit=True) as conn:
            conn.execute("CREATE TABLE kept (x int)")
        first.stop()
        shutil.move(str(first.data_dir), str(state / "pgdata"))   # as the earlier version laid it out
        again = EmbeddedPostgres(state)
        again.start()
        with psycopg.connect(again.dsn(), autocommit=True) as conn:
            assert conn.execute("SELECT count(*) FROM kept").fetchone() == (0,)
        assert not (state / "pgdata").exists()
    finally:
        first.destroy()
