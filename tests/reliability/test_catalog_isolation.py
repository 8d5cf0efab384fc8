"""The catalog relay against an analyst (issue 13, findings 3, 4 and 5).

Each attack runs through the real proxy, spelled the ways that fooled the old text deny-list (Unicode
escapes, quoted and qualified names), and is refused. The second line is checked on its own: connected
straight to the shadow database as the reader role, PostgreSQL itself refuses. An audit then calls every
function without arguments and reads every view the reader role can reach, before and after the protected
data and other sessions change: nothing the role can see may move with them.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import time
from collections.abc import Sequence
from typing import Any

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from proxy.catalog.hardening import SETUP_LOCK, SetupLockTimeout
from proxy.catalog.pgclient import BackendPool
from proxy.catalog.relay import ensure_shadow, reader_role
from proxy.ops.app import shadow_name

from .harness import proxy_fixture, start_proxy

proxy = proxy_fixture("catiso", epsilon=10.0, server={"queries_per_minute": 1_000_000})


@pytest.fixture(scope="module")
def setup(proxy: Any) -> tuple[str, Any]:
    return proxy.upstream, proxy


def reader_dsn(upstream_dsn: str) -> str:
    """The reader role on the shadow database, as the proxy connects (peer authentication lets root in)."""
    shadow = shadow_name(upstream_dsn)
    return make_conninfo(upstream_dsn, dbname=shadow, user=reader_role(shadow))


def _error(conn: psycopg.Connection, text: str | bytes) -> str | None:
    try:
        cur = conn.execute(text if isinstance(text, bytes) else text.encode())
        if cur.description is not None:
            cur.fetchall()
    except psycopg.Error as exc:
        return exc.sqlstate or "?"
    return None


# Spellings of one call: plain, qualified and quoted, Unicode-escaped (with and without UESCAPE).
def spellings(name: str, args: str) -> list[str]:
    u = "".join(f"\\{ord(c):04x}" if c == "_" else c for c in name)
    bang = "".join(f"!{ord(c):04x}" if c in "_p" else c for c in name)
    return [f"SELECT {name}({args})", f'SELECT pg_catalog."{name}"({args})', f'SELECT U&"{u}"({args})',
            f"SELECT U&\"{bang}\" UESCAPE '!' ({args})", f'SELECT * FROM pg_catalog.U&"{u}"({args})']


STATE_CHANGES = [
    ("set_config", "'statement_timeout', '1', false"),
    ("set_config", "'search_path', 'nowhere', false"),
    ("pg_advisory_lock", str(SETUP_LOCK)),
    ("pg_advisory_lock", "74737301"),
    ("pg_try_advisory_lock", "1"),
    ("pg_advisory_xact_lock_shared", "1"),
    ("pg_notify", "'c', 'x'"),
    ("pg_cancel_backend", "pg_backend_pid()"),
    ("pg_terminate_backend", "pg_backend_pid()"),
    ("lo_creat", "-1"),
    ("query_to_xml", "'select 1', true, true, ''"),
]

DATA_OR_ACTIVITY = [
    ("pg_database_size", "'{db}'"),
    ("pg_tablespace_size", "'pg_default'"),
    ("txid_current", ""),
    ("pg_current_xact_id", ""),
    ("txid_current_snapshot", ""),
    ("pg_current_snapshot", ""),
    ("pg_current_wal_lsn", ""),
    ("pg_current_wal_insert_lsn", ""),
    ("pg_control_system", ""),
    ("pg_control_checkpoint", ""),
    ("pg_last_committed_xact", ""),
    ("age", "'3'::xid"),
    ("mxid_age", "'1'::xid"),
    ("pg_stat_get_db_xact_commit", "(SELECT oid FROM pg_database WHERE datname = current_database())"),
    ("pg_stat_get_db_tuples_returned", "1"),
    ("pg_stat_get_activity", "NULL"),
    ("pg_lock_status", ""),
    ("pg_blocking_pids", "1"),
]


def test_state_changing_calls_refused_through_the_relay_and_by_the_database(setup: Any) -> None:
    dsn, proc = setup
    through_proxy: list[str] = []
    with psycopg.connect(proc.dsn(), autocommit=True) as conn:
        for name, args in STATE_CHANGES:
            for text in spellings(name, args):
                if (state := _error(conn, text)) not in ("42501",):
                    through_proxy.append(f"{text}: {state}")
        # The deny-list is the second line: the database refuses on its own.
    direct: list[str] = []
    with psycopg.connect(reader_dsn(dsn), autocommit=True) as reader:
        for name, args in STATE_CHANGES:
            if (state := _error(reader, f"SELECT {name}({args})")) != "42501":
                direct.append(f"{name}: {state}")
        assert reader.execute("SHOW default_transaction_read_only").fetchone() == ("on",)
    assert not through_proxy, through_proxy
    assert not direct, direct


def test_one_client_cannot_disturb_anothers_catalog_queries(setup: Any) -> None:
    _, proc = setup
    # Many sessions try to poison pooled backends at once; a bystander's catalog queries keep working.
    def attack(i: int) -> list[str | None]:
        with psycopg.connect(proc.dsn(), autocommit=True) as conn:
            return [_error(conn, t) for name, args in STATE_CHANGES[:4] for t in spellings(name, args)]

    with concurrent.futures.ThreadPoolExecutor(6) as pool:
        outcomes = [s for r in pool.map(attack, range(12)) for s in r]
    assert set(outcomes) == {"42501"}, set(outcomes)
    with psycopg.connect(proc.dsn(), autocommit=True) as bystander:
        for _ in range(20):
            t0 = time.monotonic()
            n = bystander.execute("SELECT count(*) FROM pg_catalog.pg_class WHERE relname LIKE 'pg_%'").fetchone()
            assert n is not None and n[0] > 50
            assert time.monotonic() - t0 < 1.0
            assert bystander.execute("SELECT current_setting('search_path')").fetchone() is not None


def test_pooled_backend_is_reset_before_another_client_uses_it(setup: Any) -> None:
    dsn, _ = setup
    info = {k: str(v) for k, v in conninfo_to_dict(reader_dsn(dsn)).items() if v is not None}

    async def run() -> tuple[str, str, str]:
        pool = BackendPool(info, {"client_encoding": "UTF8"}, size=1)
        try:
            a = await pool.acquire(owner=1)
            # State a relayed statement could leave behind if anything let it through.
            await a.relay("SET work_mem = '77kB'", [], [], [], [], False)
            pool.release(a)
            a_again = await pool.acquire(owner=1)     # the same client keeps its backend as it was
            same = (await a_again.relay("SHOW work_mem", [], [], [], [], False)).rows[0]
            pool.release(a_again)
            b = await pool.acquire(owner=2)           # another client: the backend was reset
            other = (await b.relay("SHOW work_mem", [], [], [], [], False)).rows[0]
            ro = (await b.relay("SHOW default_transaction_read_only", [], [], [], [], False)).rows[0]
            pool.release(b)
            return same.decode("latin-1"), other.decode("latin-1"), ro.decode("latin-1")
        finally:
            await pool.close()

    same, other, ro = asyncio.run(run())
    assert "77kB" in same
    assert "77kB" not in other
    assert ro.endswith("on"), "the reset keeps the start-up settings"


def test_data_size_and_activity_refused_through_the_relay_and_by_the_database(setup: Any) -> None:
    dsn, proc = setup
    db = str(conninfo_to_dict(dsn)["dbname"])    # the database holding the protected table
    calls = [(name, args.replace("{db}", db)) for name, args in DATA_OR_ACTIVITY]
    wrong: list[str] = []
    with psycopg.connect(proc.dsn(), autocommit=True) as conn:
        for name, args in calls:
            for text in spellings(name, args):
                if (state := _error(conn, text)) != "42501":
                    wrong.append(f"{text}: {state}")
        for text in ("SELECT * FROM pg_locks", 'SELECT * FROM U&"pg\\005flocks"',
                     "SELECT * FROM pg_stat_activity", 'SELECT * FROM "pg_stat_database"',
                     "SELECT * FROM pg_prepared_statements", "SELECT system_identifier FROM pg_control_system()",
                     "SELECT datname, age(datfrozenxid) FROM pg_database"):
            if (state := _error(conn, text)) != "42501":
                wrong.append(f"{text}: {state}")
    with psycopg.connect(reader_dsn(dsn), autocommit=True) as reader:
        for name, args in calls:
            if (state := _error(reader, f"SELECT {name}({args})")) != "42501":
                wrong.append(f"as the reader role: {name}: {state}")
        for view in ("pg_locks", "pg_stat_activity", "pg_stat_database", "pg_prepared_statements"):
            if (state := _error(reader, f"SELECT * FROM {view}")) != "42501":
                wrong.append(f"as the reader role: {view}: {state}")
        # The real database is closed to the reader role altogether.
        with pytest.raises(psycopg.OperationalError, match="permission denied for database"):
            psycopg.connect(make_conninfo(reader_dsn(dsn), dbname=db))
    assert not wrong, "\n".join(wrong)


# Functions whose value changes by nature, whatever the data and the other sessions do.
VOLATILE_BY_NATURE = {
    "now", "clock_timestamp", "statement_timestamp", "transaction_timestamp", "timeofday", "random",
    "random_normal", "gen_random_uuid", "uuidv4", "uuidv7", "localtime", "localtimestamp", "current_time",
    "current_timestamp",
}


def _snapshot(reader: psycopg.Connection, functions: list[str], views: list[str],
              about_db: Sequence[tuple[str, str, Any]] = ()) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in functions:
        try:
            out[f] = reader.execute(sql.SQL("SELECT * FROM {}() LIMIT 1000").format(
                sql.Identifier("pg_catalog", f))).fetchall()
        except psycopg.Error as exc:
            out[f] = exc.sqlstate
    for f, typ, arg in about_db:
        key = f"{f}({typ})"
        try:
            out[key] = reader.execute(sql.SQL("SELECT * FROM {}(%s::{}) LIMIT 1000").format(
                sql.Identifier("pg_catalog", f), sql.SQL(typ)), (arg,)).fetchall()
        except psycopg.Error as exc:
            out[key] = exc.sqlstate
    for v in views:
        try:
            rows = reader.execute(sql.SQL("SELECT * FROM {}").format(sql.SQL(v))).fetchall()
            out[v] = sorted(map(repr, rows))
        except psycopg.Error as exc:
            out[v] = exc.sqlstate
    return out


def test_audit_nothing_the_reader_role_reaches_moves_with_data_or_other_sessions(setup: Any) -> None:
    dsn, proc = setup
    with psycopg.connect(reader_dsn(dsn), autocommit=True) as reader:
        functions = [r[0] for r in reader.execute(
            "SELECT DISTINCT p.proname FROM pg_proc p WHERE p.pronamespace = 'pg_catalog'::regnamespace"
            " AND p.pronargs = 0 AND p.prokind = 'f' AND has_function_privilege(p.oid, 'EXECUTE')"
            " AND p.prorettype <> 'trigger'::regtype AND p.prorettype <> 'event_trigger'::regtype"
            " AND p.prorettype <> 'internal'::regtype ORDER BY 1")]
        views = [f"{r[0]}.{r[1]}" for r in reader.execute(
            "SELECT n.nspname, c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname IN ('pg_catalog', 'information_schema') AND c.relkind IN ('v', 'r', 'm')"
            " AND has_table_privilege(c.oid, 'SELECT') ORDER BY 1, 2")]
        # Functions of one database-identifying argument, asked about the protected database itself.
        db = str(conninfo_to_dict(dsn)["dbname"])
        db_oid = reader.execute("SELECT oid FROM pg_database WHERE datname = %s", (db,)).fetchone()
        assert db_oid is not None
        about_db = [(r[0], r[1], db_oid[0] if r[1] == "oid" else db) for r in reader.execute(
            "SELECT DISTINCT p.proname, format_type(p.proargtypes[0], NULL) FROM pg_proc p"
            " WHERE p.pronamespace = 'pg_catalog'::regnamespace AND p.pronargs = 1 AND p.prokind = 'f'"
            " AND p.proargtypes[0] IN ('oid'::regtype, 'name'::regtype) AND p.proretset = false"
            " AND has_function_privilege(p.oid, 'EXECUTE') ORDER BY 1")]
        assert len(functions) > 50 and len(views) > 50 and len(about_db) > 10
        # A first pass loads what the backend loads lazily (libraries, their settings): our own doing.
        _snapshot(reader, functions, views, about_db)
        before = _snapshot(reader, functions, views, about_db)
        # The protected data changes, other analysts ask fresh questions, another session browses the catalog.
        with psycopg.connect(dsn, autocommit=True) as admin:
            admin.execute("INSERT INTO adult SELECT * FROM adult LIMIT 3000")
            admin.execute("ANALYZE adult")
        with psycopg.connect(proc.dsn(), autocommit=True) as other:
            for age in range(20, 30):
                other.execute(f"SELECT count(*) FROM adult WHERE age > {age} AND sex = 1").fetchall()
            other.execute("SELECT count(*) FROM pg_catalog.pg_attribute").fetchall()
        time.sleep(1.0)   # cumulative statistics are flushed about once a second
        after = _snapshot(reader, functions, views, about_db)
    moved = sorted(k for k in before if before[k] != after[k] and k not in VOLATILE_BY_NATURE)
    assert not moved, f"the reader role sees values that move with data or other sessions: {moved}"


def test_setup_lock_waits_with_a_timeout_and_names_the_holder(setup: Any, embedded_pg: Any,
                                                              default_config: Any) -> None:
    dsn, _ = setup
    admin = make_conninfo(dsn, dbname="postgres")
    with psycopg.connect(admin, autocommit=True) as holder:
        holder.execute("SET application_name = 'stuck-start-up'")
        holder.execute("SELECT pg_advisory_lock(%s)", (SETUP_LOCK,))
        t0 = time.monotonic()
        with pytest.raises(SetupLockTimeout, match="stuck-start-up"):
            asyncio.run(ensure_shadow(admin, shadow_name(dsn), default_config.catalog, lock_timeout=1.0))
        assert time.monotonic() - t0 < 10
    # Released: set-up goes through again (and is idempotent).
    asyncio.run(ensure_shadow(admin, shadow_name(dsn), default_config.catalog, lock_timeout=5.0))


def test_second_proxy_starts_while_an_analyst_tries_the_start_up_locks(setup: Any,
                                                                       tmp_path_factory: pytest.TempPathFactory
                                                                       ) -> None:
    dsn, proc = setup
    with psycopg.connect(proc.dsn(), autocommit=True) as analyst:
        for key in (SETUP_LOCK, SETUP_LOCK + 1, SETUP_LOCK + 2):
            for text in spellings("pg_advisory_lock", str(key)):
                assert _error(analyst, text) == "42501", text
        second = start_proxy(tmp_path_factory.mktemp("catiso2"), dsn, epsilon=10.0, start=False)
        t0 = time.monotonic()
        second.start(timeout=60)
        try:
            assert time.monotonic() - t0 < 45
            with psycopg.connect(second.dsn(), autocommit=True) as conn:
                assert conn.execute("SELECT 1").fetchone() == (1,)
        finally:
            second.stop()


def test_one_user_cannot_take_every_catalog_backend(setup: Any) -> None:
    _, proc = setup
    # One analyst runs more slow catalog statements at once than the pool has backends.
    def slow(_: int) -> None:
        with psycopg.connect(proc.dsn("md5user", "md5pass"), autocommit=True) as conn:
            conn.execute("SELECT pg_sleep(4)").fetchall()

    with concurrent.futures.ThreadPoolExecutor(10) as pool:
        futures = [pool.submit(slow, i) for i in range(10)]
        time.sleep(1.0)
        with psycopg.connect(proc.dsn(), autocommit=True) as bystander:
            t0 = time.monotonic()
            assert bystander.execute("SELECT count(*) > 0 FROM pg_catalog.pg_class").fetchone() == (True,)
            waited = time.monotonic() - t0
        for f in futures:
            f.result()
    assert waited < 1.0, f"a bystander's catalog query waited {waited:.1f} s behind another user's statements"
