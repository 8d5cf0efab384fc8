"""The admin console, RELOAD and SIGHUP through a real proxy process, as an operator and an analyst use them
(issue 27): every console command refused to an analyst with 42501 (and without effect), each command's
rows for an admin, PAUSE holding an analyst's statement until RESUME, RELOAD applying users and limits at
once and privacy keys at the next epoch, a bad file refused with the running configuration untouched,
SIGHUP doing the same as RELOAD (with `--workers 2`, in every worker), check-config saying what a changed
file would change, SHUTDOWN stopping the proxy; and SHOW of the lapras.* settings SET takes.
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest

pytestmark = pytest.mark.process

REPO = Path(__file__).resolve().parents[3]
COMMANDS = ["SHOW STATS", "SHOW CLIENTS", "SHOW SERVERS", "SHOW CONFIG", "SHOW VERSION", "SHOW EPOCHS",
            "RELOAD", "PAUSE", "RESUME", "SHUTDOWN"]


def connect(proxy: Any, user: str = "analyst", password: str = "lapras") -> psycopg.Connection[Any]:
    return psycopg.connect(proxy.dsn(user, password), autocommit=True, connect_timeout=10)


def admin(proxy: Any) -> psycopg.Connection[Any]:
    return connect(proxy, "dba", "dbapass")


def rows_of(conn: psycopg.Connection[Any], sql: str) -> list[dict[str, str]]:
    cur = conn.execute(sql)
    names = [d.name for d in cur.description or []]
    return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]


def add_user(proxy: Any, harness: Any, name: str, password: str, extra: str = "") -> None:
    text = proxy.config_path.read_text()
    text += f'\n[[users]]\nname = "{name}"\nauth = "md5"\nsecret = "{harness._md5_secret(name, password)}"\n'
    proxy.config_path.write_text(text + extra)


def can_login(proxy: Any, user: str, password: str) -> bool:
    try:
        with connect(proxy, user, password) as conn:
            return conn.execute("SELECT 1").fetchone() == (1,)
    except psycopg.OperationalError:
        return False


def test_every_console_command_refused_to_an_analyst(proxy_factory: Any) -> None:
    proxy = proxy_factory(epsilon=2.0)
    with connect(proxy) as conn:
        for cmd in COMMANDS:
            with pytest.raises(psycopg.errors.InsufficientPrivilege) as err:
                conn.execute(cmd)
            assert "admin" in str(err.value), cmd
            # Through Parse/Describe too (a prepared statement): the same check, before anything runs.
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(cmd, prepare=True)
        # Nothing took effect: not paused, not shut down, not reloaded.
        assert conn.execute("SELECT COUNT(*) FROM adult WHERE sex = 1").fetchone() is not None
    assert proxy.proc.poll() is None
    with admin(proxy) as dba:
        stats = {r["user"]: r for r in rows_of(dba, "SHOW STATS")}
    assert int(stats["analyst"]["refused"]) >= len(COMMANDS)   # the prepared ones fail at Describe


def test_admin_sees_the_console(proxy_factory: Any) -> None:
    proxy = proxy_factory(epsilon=2.0)
    with connect(proxy) as analyst, admin(proxy) as dba:
        analyst.execute("SELECT COUNT(*) FROM adult WHERE age > 40").fetchall()
        analyst.execute("SELECT 1").fetchall()
        version = rows_of(dba, "SHOW VERSION")
        cli = subprocess.run([sys.executable, "-m", "proxy.ops.cli", "--version"], capture_output=True, text=True,
                             cwd=REPO, timeout=60)
        assert version == [{"version": cli.stdout.strip()}]
        stats = {r["user"]: r for r in rows_of(dba, "SHOW STATS")}
        assert int(stats["analyst"]["dp_answers"]) == 1 and int(stats["analyst"]["metadata"]) >= 1
        assert int(stats["*"]["statements"]) >= int(stats["analyst"]["statements"])
        clients = rows_of(dba, "SHOW CLIENTS")
        mine = [c for c in clients if c["user"] == "analyst"]
        assert len(mine) == 1 and mine[0]["state"] == "idle" and mine[0]["addr"] == "127.0.0.1"
        assert int(mine[0]["statements"]) >= 2
        assert any(c["user"] == "dba" and c["state"] == "active" for c in clients)
        servers = {r["type"]: r for r in rows_of(dba, "SHOW SERVERS")}
        assert set(servers) == {"catalog", "ledger"} and int(servers["ledger"]["max"]) >= 1
        config = {r["key"]: r for r in rows_of(dba, "SHOW CONFIG")}
        assert config["privacy.epsilon"]["value"] == "2" and config["privacy.epsilon"]["changeable"] == "next epoch"
        assert config["server.queries_per_minute"]["changeable"] == "live"
        assert config["server.listen"]["changeable"] == "restart"
        assert "secret" not in " ".join(str(r) for r in config.values()).lower()
        assert "md5" in config["users.md5user"]["value"] and "admin" in config["users.dba"]["value"]
        epochs = rows_of(dba, "SHOW EPOCHS")
        assert epochs and epochs[-1]["budget_epsilon"] == "2" and epochs[-1]["ended_at"] == ""


def test_lapras_settings_show_what_set_takes(proxy_factory: Any) -> None:
    proxy = proxy_factory(epsilon=2.0)
    with connect(proxy) as conn:
        assert conn.execute("SHOW lapras.show_stderr").fetchone() == ("off",)
        conn.execute("SET lapras.show_stderr = on")
        assert conn.execute("SHOW lapras.show_stderr").fetchone() == ("on",)
        assert conn.execute("SELECT current_setting('lapras.show_stderr')").fetchone() == ("on",)
        with pytest.raises(psycopg.errors.UndefinedObject) as err:
            conn.execute("SET lapras.show_stdrr = on")
        assert "reserved prefix" in (err.value.diag.message_detail or "")
        with pytest.raises(psycopg.errors.UndefinedObject):
            conn.execute("SHOW lapras.show_stdrr")
        with pytest.raises(psycopg.errors.CantChangeRuntimeParam):
            conn.execute("SET lapras.budget = 1")
        budget = dict(conn.execute("SHOW lapras.budget").fetchall())
        assert budget["budget.epsilon"] == "2"


def test_pause_holds_statements_until_resume(proxy_factory: Any) -> None:
    proxy = proxy_factory(epsilon=2.0)
    done: list[float] = []
    with admin(proxy) as dba, connect(proxy) as analyst:
        dba.execute("PAUSE")

        def ask() -> None:
            analyst.execute("SELECT COUNT(*) FROM adult WHERE race = 2").fetchall()
            done.append(time.monotonic())

        t = threading.Thread(target=ask, daemon=True)
        t.start()
        time.sleep(1.5)
        assert not done, "a statement ran while the proxy was paused"
        # The console still answers while paused (it is not a statement of the DP service or the catalog).
        assert rows_of(dba, "SHOW VERSION")
        resumed = time.monotonic()
        dba.execute("RESUME")
        t.join(30)
        assert done and done[0] >= resumed


def test_reload_applies_live_keys_now_and_privacy_at_the_next_epoch(proxy_factory: Any, harness: Any) -> None:
    proxy = proxy_factory(epsilon=2.0)
    assert not can_login(proxy, "newbie", "newpass")
    text = proxy.config_path.read_text()
    assert "queries_per_minute = 6000" in text and "epsilon = 2.0" in text
    text = text.replace("queries_per_minute = 6000", "queries_per_minute = 5000")
    text = text.replace("epsilon = 2.0", "epsilon = 3.0", 1)
    text = re.sub(r'listen = "127\.0\.0\.1:\d+"', 'listen = "127.0.0.1:1"', text, count=1)
    proxy.config_path.write_text(text)
    add_user(proxy, harness, "newbie", "newpass")
    with admin(proxy) as dba:
        cur = dba.execute("RELOAD")
        changes = {r[0]: r for r in cur.fetchall()}
        assert changes["server.queries_per_minute"][1:] == ("6000", "5000", "live")
        assert changes["privacy.epsilon"][1:] == ("2", "3", "next epoch")
        assert changes["server.listen"][3] == "restart"
        assert changes["users.newbie"][3] == "live"
        assert can_login(proxy, "newbie", "newpass"), "a user added by RELOAD cannot log in"
        config = {r["key"]: r for r in rows_of(dba, "SHOW CONFIG")}
        assert config["privacy.epsilon"]["pending"] == "3 at the next epoch"
        assert config["server.listen"]["value"] == f"127.0.0.1:{proxy.port}"   # the running one stays
        # The current epoch keeps its budget; the next one has the reloaded one.
        assert rows_of(dba, "SHOW EPOCHS")[-1]["budget_epsilon"] == "2"
        dba.execute("SELECT lapras.new_epoch()")
        assert rows_of(dba, "SHOW EPOCHS")[-1]["budget_epsilon"] == "3"

        # A bad file is refused whole: the running configuration (newbie included) stays.
        good = proxy.config_path.read_text()
        proxy.config_path.write_text(good.replace("delta = 0.001", "delta = 7", 1).replace(
            'name = "newbie"', 'name = "newbie"\nbogus_key = 1'))
        with pytest.raises(psycopg.errors.ConfigFileError) as err:
            dba.execute("RELOAD")
        assert "unchanged" in str(err.value) and "privacy.delta" in str(err.value)
        assert can_login(proxy, "newbie", "newpass")
        assert {r["key"]: r for r in rows_of(dba, "SHOW CONFIG")}["privacy.delta"]["value"] == "0.001"
        proxy.config_path.write_text(good)

    # check-config says what reloading a changed file would change, against the recorded running config.
    proxy.config_path.write_text(good.replace("epsilon = 3.0", "epsilon = 4.0", 1))
    done = subprocess.run([sys.executable, "-m", "proxy.ops.cli", "check-config", "--config",
                           str(proxy.config_path), "--state-dir", str(proxy.state_dir)],
                          capture_output=True, text=True, cwd=REPO, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "privacy.epsilon: 3 -> 4: applies at the next epoch" in done.stdout, done.stdout
    assert re.search(r"privacy\.epsilon: the current epoch \d+ runs with 3 \(fixed in the ledger\); 4 from the "
                     r"next epoch \(epoch \d+, due \d{4}-", done.stdout), done.stdout


def test_restart_says_which_privacy_settings_wait_for_the_next_epoch(proxy_factory: Any) -> None:
    """The issue's case: partition_fraction set and the proxy restarted; the epoch in force keeps 0, and
    the start-up says so instead of leaving the refusal to puzzle the analyst."""
    proxy = proxy_factory(epsilon=2.0)
    proxy.stop()
    text = proxy.config_path.read_text()
    assert re.search(r"^partition_fraction = 0\.1 ", text, re.M), "the shipped default changed"
    proxy.config_path.write_text(re.sub(r"^partition_fraction = 0\.1 ", "partition_fraction = 0.2 ", text, count=1,
                                        flags=re.M))
    # A restart with privacy settings other than those stored with the ledger is refused, naming them ...
    with pytest.raises(RuntimeError) as refused:
        proxy.start()
    assert "privacy.partition_fraction" in str(refused.value) and "--replace-stored" in str(refused.value)
    # ... and with --replace-stored it says they wait for the next epoch.
    proxy.extra_args = (*proxy.extra_args, "--replace-stored")
    proxy.start()
    out = "".join(proxy.output)
    assert re.search(r"note: privacy\.partition_fraction: the current epoch 1 runs with 0\.1 \(fixed in the "
                     r"ledger\); 0\.2 from the next epoch \(epoch 2, due \d{4}-\d\d-\d\d ", out), out


def test_reload_turns_tls_and_the_query_log_on(proxy_factory: Any, tmp_path: Path) -> None:
    """TLS files are read again at each reload: [tls] set in the file, then RELOAD, and sslmode=require works
    (the renewed-certificate case reads the same files the same way); the query log starts writing to the
    file the reload names, and stops when a reload empties query_log."""
    cert, key = tmp_path / "server.crt", tmp_path / "server.key"
    try:
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj",
                        "/CN=localhost", "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("openssl is not installed")
    proxy = proxy_factory(epsilon=2.0)
    tls_dsn = proxy.dsn().replace("sslmode=disable", "sslmode=require")
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(tls_dsn, connect_timeout=10).close()
    text = proxy.config_path.read_text()
    qlog = tmp_path / "queries.jsonl"
    assert 'query_log = ""' in text
    proxy.config_path.write_text(text.replace('cert = ""\nkey = ""', f'cert = "{cert}"\nkey = "{key}"', 1)
                                 .replace('query_log = ""', f'query_log = "{qlog}"', 1))
    with admin(proxy) as dba:
        changes = {r[0]: r[3] for r in dba.execute("RELOAD").fetchall()}
    assert changes == {"tls.cert": "live", "tls.key": "live", "server.query_log": "live"}
    with psycopg.connect(tls_dsn, connect_timeout=10) as conn:
        assert conn.pgconn.ssl_in_use
        assert conn.execute("SELECT 1").fetchone() == (1,)
    lines = qlog.read_text().splitlines()
    assert any('"user":"analyst"' in line for line in lines), lines
    proxy.config_path.write_text(proxy.config_path.read_text().replace(f'query_log = "{qlog}"', 'query_log = ""'))
    with admin(proxy) as dba:
        dba.execute("RELOAD")
    before = qlog.read_text()
    with connect(proxy) as conn:
        conn.execute("SELECT 1").fetchall()
    assert qlog.read_text() == before, "the query log kept writing after a reload turned it off"


def test_sighup_reloads_and_shutdown_stops(proxy_factory: Any, harness: Any) -> None:
    proxy = proxy_factory(epsilon=2.0)
    add_user(proxy, harness, "hupuser", "huppass")
    proxy.proc.send_signal(signal.SIGHUP)
    deadline = time.monotonic() + 20
    while not can_login(proxy, "hupuser", "huppass"):
        assert time.monotonic() < deadline, "SIGHUP did not reload the users"
        time.sleep(0.2)
    assert proxy.proc.poll() is None, "SIGHUP stopped the proxy"
    with admin(proxy) as dba:
        dba.execute("SHUTDOWN")
    assert proxy.proc.wait(30) == 0


def test_sighup_reaches_every_worker(embedded_pg: Any, default_config: Any, harness: Any,
                                     tmp_path: Path) -> None:
    proxy = two_workers(embedded_pg, default_config, harness, tmp_path, "adm")
    try:
        seen: set[int] = set()
        deadline = time.monotonic() + 60
        while len(seen) < 2:   # both workers serve (the kernel spreads connections over them)
            with admin(proxy) as dba:
                seen.add(worker_of(dba))
            assert time.monotonic() < deadline, f"only worker(s) {seen} answered"
        add_user(proxy, harness, "hupuser", "huppass")
        proxy.proc.send_signal(signal.SIGHUP)
        time.sleep(3)
        # Every connection lands on some worker: all of them must know the new user.
        for _ in range(12):
            assert can_login(proxy, "hupuser", "huppass")
        assert proxy.proc.poll() is None
        # RELOAD typed in one worker's console reaches the others through the supervisor.
        add_user(proxy, harness, "consoleuser", "consolepass")
        with admin(proxy) as dba:
            assert [r[0] for r in dba.execute("RELOAD").fetchall()] == ["users.consoleuser"]
        time.sleep(3)
        for _ in range(12):
            assert can_login(proxy, "consoleuser", "consolepass")
        # SHUTDOWN in one worker's console stops the supervisor and every worker.
        with admin(proxy) as dba:
            dba.execute("SHUTDOWN")
        assert proxy.proc.wait(60) == 0
    finally:
        proxy.stop()


def two_workers(embedded_pg: Any, default_config: Any, harness: Any, tmp_path: Path, name: str) -> Any:
    """A started proxy with `--workers 2` over a new demo database ``name``."""
    dsn = harness.demo_database(embedded_pg, default_config, name)
    return harness.start_test_proxy(tmp_path, dsn, extra_args=("--workers", "2"), timeout=120, epsilon=2.0)


def worker_of(conn: psycopg.Connection[Any]) -> int:
    """The worker serving a connection: the low bits of its process id (proxy.server.cancel_relay)."""
    return conn.info.backend_pid & 63


def test_console_covers_every_worker(embedded_pg: Any, default_config: Any, harness: Any,
                                            tmp_path: Path) -> None:
    """With `--workers 2`, SHOW STATS, CLIENTS and SERVERS typed on either worker list both workers' rows,
    and SHOW STATS sums them (worker `*`); PAUSE and RESUME typed on one worker hold and release the other."""
    proxy = two_workers(embedded_pg, default_config, harness, tmp_path, "fig")
    held: list[psycopg.Connection[Any]] = []
    try:
        deadline = time.monotonic() + 60
        while len({worker_of(c) for c in held}) < 2 or len(held) < 4:   # analysts on both workers
            c = connect(proxy)
            c.execute("SELECT 1").fetchall()
            held.append(c)
            assert time.monotonic() < deadline, "connections reached one worker only"
        per_worker = {w: sum(worker_of(c) == w for c in held) for w in (0, 1)}
        asked: set[int] = set()
        while asked != {0, 1}:   # the console on each worker
            with admin(proxy) as dba:
                asked.add(worker_of(dba))
                clients = rows_of(dba, "SHOW CLIENTS")
                analysts = {int(r["pid"]): int(r["worker"]) for r in clients if r["user"] == "analyst"}
                assert analysts == {c.info.backend_pid: worker_of(c) for c in held}
                assert all(int(r["statements"]) == 1 for r in clients if r["user"] == "analyst")
                stats = {(r["worker"], r["user"]): r for r in rows_of(dba, "SHOW STATS")}
                for w, n in per_worker.items():
                    assert int(stats[(str(w), "analyst")]["statements"]) == n
                    assert (str(w), "*") in stats    # each worker's own total
                assert int(stats[("*", "analyst")]["statements"]) == len(held)
                assert int(stats[("*", "analyst")]["metadata"]) == len(held)
                assert int(stats[("*", "*")]["statements"]) == sum(
                    int(r["statements"]) for (w, u), r in stats.items() if w != "*" and u == "*")
                servers = rows_of(dba, "SHOW SERVERS")
                assert {(r["worker"], r["type"]) for r in servers} >= {("0", "catalog"), ("1", "catalog")}
            assert time.monotonic() < deadline + 60, f"the console answered on worker(s) {asked} only"
        # PAUSE typed on one worker holds catalog statements on the other; RESUME there releases them.
        with admin(proxy) as dba:
            other = next(c for c in held if worker_of(c) != worker_of(dba))
            dba.execute("PAUSE")
            done = threading.Event()

            def catalog_query() -> None:
                other.execute("SELECT relname FROM pg_catalog.pg_class LIMIT 1").fetchall()
                done.set()

            waiting = threading.Thread(target=catalog_query)
            waiting.start()
            assert not done.wait(2), "PAUSE did not hold the other worker's statement"
            dba.execute("RESUME")
            assert done.wait(30), "RESUME did not release the other worker's statement"
            waiting.join(5)
    finally:
        for c in held:
            c.close()
        proxy.stop()


def test_reload_keeps_the_listen_address_of_the_command_line(proxy_factory: Any, harness: Any) -> None:
    """`serve --listen` wins over the file's address. RELOAD (or SIGHUP) of a file whose address did not change
    once reported server.listen as changed, the file's against the flag's, "needs a restart", and SHOW CONFIG
    kept it pending; an address changed in the file is still reported (the flag's stays until a restart)."""
    first = proxy_factory()
    first.stop()
    port = harness.free_port()
    proxy = harness.ProxyProcess(first.config_path, first.state_dir, port,
                                 extra_args=("--listen", f"127.0.0.1:{port}"))
    proxy.start()
    try:
        text = proxy.config_path.read_text()
        assert f'listen = "127.0.0.1:{first.port}"' in text and port != first.port
        proxy.config_path.write_text(text.replace("queries_per_minute = 6000", "queries_per_minute = 5000"))
        with admin(proxy) as dba:
            changes = {r[0]: r for r in dba.execute("RELOAD").fetchall()}
            assert list(changes) == ["server.queries_per_minute"], changes
            config = {r["key"]: r for r in rows_of(dba, "SHOW CONFIG")}
            assert config["server.listen"]["value"] == f"127.0.0.1:{port}" and not config["server.listen"]["pending"]
            proxy.config_path.write_text(proxy.config_path.read_text().replace(
                f'listen = "127.0.0.1:{first.port}"', 'listen = "127.0.0.1:1"'))
            changes = {r[0]: r for r in dba.execute("RELOAD").fetchall()}
            assert changes["server.listen"][1:] == (f"127.0.0.1:{port}", "127.0.0.1:1", "restart"), changes
        proxy.config_path.write_text(text)   # the file's own address again, reloaded by SIGHUP
        proxy.proc.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + 20
        while not any("queries_per_minute: 5000 -> 6000" in line for line in proxy.output):
            assert time.monotonic() < deadline, "".join(proxy.output)
            time.sleep(0.1)
        assert not any(f"-> 127.0.0.1:{first.port}" in line for line in proxy.output), "".join(proxy.output)
    finally:
        proxy.stop()
