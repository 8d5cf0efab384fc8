"""What the catalog reader role may not do, enforced by PostgreSQL itself (the router's deny-list is the
second line, not the only one).

Catalog statements run in the shadow database as an unprivileged role. Anything that role can call or read
there runs with analysts' SQL, so it must give nothing that depends on the protected data or on other
sessions: no sizes, transaction or WAL counters, snapshots, control data, activity statistics or locks;
and nothing that leaves state on a pooled backend for the next client (settings, advisory locks,
notifications, large objects) or lets one client interfere with another's backend (cancel, terminate).
A slow statement (pg_sleep, a large generate_series) only holds its own backend until the statement
timeout: there is no way to forbid slowness by name. The start-up locks of the proxy itself are taken with a timeout and a clear error.
"""

from __future__ import annotations

import asyncio
import re
import time
from typing import Any

import psycopg
from psycopg import sql

# pg_catalog functions revoked from PUBLIC in the shadow database (PostgreSQL regular expressions on
# proname). Sizes other than the database's own are covered by revoking CONNECT on the real database:
# pg_database_size needs it.
REVOKED_FUNCTIONS = (
    r"^pg_stat_",                        # activity and table statistics, every counter
    r"^pg_(try_)?advisory_",             # session state on pooled backends; the proxy's start-up locks
    r"^set_config$",                     # settings that would stay on a pooled backend
    r"^(txid_|pg_current_|pg_snapshot_|pg_xact_|pg_visible_in_snapshot$|pg_export_snapshot$)",
    r"^(age|mxid_age|pg_get_multixact_members|pg_last_committed_xact|pg_xact_commit_timestamp\w*)$",
    r"^pg_(control_|walfile|wal_|last_wal|last_xact|get_wal|split_walfile|switch_wal|create_restore_point)",
    r"^pg_tablespace_size$",             # pg_default holds every database's files
    r"^pg_(lock_status|blocking_pids|safe_snapshot_blocking_pids|isolation_test_session_is_blocked)$",
    r"^pg_(cancel|terminate)_backend$",  # the pooled backends share one role: one client could stop another's
    r"^pg_(notify|listening_channels|notification_queue_usage)$",
    r"^(lo_|loread$|lowrite$)",
    r"_to_xml",                          # query_to_xml and friends run SQL given as a string
    r"^pg_(prepared_statement|cursor|prepared_xact)$",   # other clients' statements on the same backend
    r"^pg_(read_file|read_binary_file|ls_|stat_file|get_replication_slots|get_aios|get_process_memory)",
    r"^pg_replication_origin_",
)

# pg_catalog views revoked from PUBLIC (LIKE patterns on relname).
REVOKED_VIEWS = (
    r"pg\_stat%", "pg_locks", "pg_prepared_statements", "pg_cursors", "pg_prepared_xacts",
    "pg_replication_slots", "pg_replication_origin_status", "pg_aios",
)

# Fixed for the reader role: a relayed statement cannot change them (SET is answered by the proxy and
# set_config is revoked), and they bound what one statement may hold.
ROLE_SETTINGS = {
    "default_transaction_read_only": "on",
    "statement_timeout": "60s",
    "lock_timeout": "5s",
    "idle_in_transaction_session_timeout": "10s",
}

SETUP_LOCK = 74737300
"""Serialises catalog set-up cluster-wide. Taken only in the admin connection's database, which the
reader role never connects to, and the advisory functions are revoked in the shadow database anyway."""


async def harden_shadow(conn: psycopg.AsyncConnection[Any], shadow_dbname: str, role: str) -> None:
    """Revoke functions, views and the TEMPORARY/CREATE privileges in the shadow database (run there, as a
    superuser, inside the set-up transaction). Only what PUBLIC still holds is revoked, so a restart
    writes nothing here."""
    await conn.execute(sql.SQL("REVOKE CREATE ON SCHEMA public FROM PUBLIC"))
    await conn.execute(sql.SQL("REVOKE TEMPORARY ON DATABASE {} FROM PUBLIC").format(
        sql.Identifier(shadow_dbname)))
    # Matched here rather than with a regular expression in SQL (a tenth of a second per start there);
    # only what PUBLIC still holds is revoked, so a restart writes nothing.
    rx = re.compile("|".join(f"(?:{p})" for p in REVOKED_FUNCTIONS))
    cur = await conn.execute("SELECT oid, proname, coalesce(proacl::text, '') FROM pg_proc"
                             " WHERE pronamespace = 'pg_catalog'::regnamespace")
    oids = [oid for oid, name, acl in await cur.fetchall() if rx.search(name) and _public_holds(acl, "X")]
    if oids:
        cur = await conn.execute("SELECT oid::regprocedure::text FROM pg_proc WHERE oid = ANY(%s)", (oids,))
        for (signature,) in await cur.fetchall():
            await conn.execute(sql.SQL("REVOKE EXECUTE ON FUNCTION {} FROM PUBLIC").format(sql.SQL(signature)))
    cur = await conn.execute("SELECT relname, coalesce(relacl::text, '') FROM pg_class"
                             " WHERE relnamespace = 'pg_catalog'::regnamespace AND relkind = 'v'")
    for name, acl in await cur.fetchall():
        if any(_like(name, v) for v in REVOKED_VIEWS) and _public_holds(acl, "r"):
            await conn.execute(sql.SQL("REVOKE SELECT ON {} FROM PUBLIC").format(sql.Identifier("pg_catalog", name)))
    for name, value in ROLE_SETTINGS.items():
        await conn.execute(sql.SQL("ALTER ROLE {} SET {} = {}").format(
            sql.Identifier(role), sql.Identifier(name), sql.Literal(value)))


def _public_holds(acl: str, privilege: str) -> bool:
    """Whether PUBLIC holds `privilege` (an aclitem letter) in an ACL's text. An empty ACL is the default:
    PUBLIC may execute a function, but not read a view (system views that PUBLIC reads grant it
    explicitly)."""
    if not acl:
        return privilege == "X"
    for item in acl.strip("{}").split(","):
        grantee, _, rest = item.strip('"').partition("=")
        if grantee == "" and privilege in rest.split("/", 1)[0]:
            return True
    return False


def _like(name: str, pattern: str) -> bool:
    """SQL LIKE with % and escaped underscores, as written in REVOKED_VIEWS."""
    rx = re.escape(pattern.replace("\\_", "\x00")).replace("%", ".*").replace("_", ".").replace("\x00", "_")
    return re.fullmatch(rx, name) is not None


async def close_protected_database(conn: psycopg.AsyncConnection[Any], dbname: str) -> None:
    """Revoke CONNECT on the database holding the protected tables from PUBLIC, keeping it for the role the
    proxy itself uses: the reader role (and any other role without an explicit grant) can then neither
    connect to it nor ask for its size."""
    await conn.execute(sql.SQL("GRANT CONNECT ON DATABASE {} TO CURRENT_USER").format(sql.Identifier(dbname)))
    await conn.execute(sql.SQL("REVOKE CONNECT ON DATABASE {} FROM PUBLIC").format(sql.Identifier(dbname)))


class SetupLockTimeout(RuntimeError):
    """Another session held the catalog set-up lock for longer than the timeout."""


async def take_setup_lock(conn: psycopg.AsyncConnection[Any], timeout: float = 60.0) -> None:
    """Take the cluster-wide set-up lock on `conn` (session level), giving up after `timeout` seconds with
    an error that names the session holding it."""
    deadline = time.monotonic() + timeout
    while True:
        cur = await conn.execute("SELECT pg_try_advisory_lock(%s)", (SETUP_LOCK,))
        row = await cur.fetchone()
        if row is not None and row[0]:
            return
        if time.monotonic() >= deadline:
            cur = await conn.execute(
                "SELECT l.pid, a.usename, a.application_name, d.datname FROM pg_locks l"
                " LEFT JOIN pg_stat_activity a ON a.pid = l.pid LEFT JOIN pg_database d ON d.oid = l.database"
                " WHERE l.locktype = 'advisory' AND l.granted AND l.objid = %s LIMIT 1", (SETUP_LOCK,))
            holder = await cur.fetchone()
            who = (f"backend pid {holder[0]} (user {holder[1]}, application {holder[2]!r}, database {holder[3]})"
                   if holder else "another session")
            raise SetupLockTimeout(
                f"the catalog set-up lock (advisory lock {SETUP_LOCK}) is held by {who} for more than "
                f"{timeout:.0f} s; another proxy may be stuck starting up. End that session "
                f"(SELECT pg_terminate_backend(pid)) or wait, then start again")
        await asyncio.sleep(0.2)


async def release_setup_lock(conn: psycopg.AsyncConnection[Any]) -> None:
    await conn.execute("SELECT pg_advisory_unlock(%s)", (SETUP_LOCK,))
