"""Per-epoch materialisation of the bounded rows of privacy-unit tables (``[lapras] bounding = "epoch"``).

A table with a privacy unit is read by every exact answer with each unit's rows cut to k
(``parser.pushdown.bounding.bounded_rows_sql``: a window over all rows, sorted by unit and a hash of the row text).
Run per statement that costs far more than the aggregate itself (1M rows: 18.7 s against 0.4 s). Here
the window runs once per epoch and table: its rows (the unit and the declared columns: narrower than
the source when it has others) go into a table in the proxy's own schema on the upstream (``lapras``,
where the ledger lives), and every exact answer of the epoch reads that table like an unbounded one
(``TableSchema.rows_from``). The rows kept are exactly the window's; the data is as of
the table's first use in the epoch (or the epoch's preparation), as with ``[lapras] snapshot = "epoch"``.

- **Shared.** The table's name is a function of (epoch, the table and everything that decides the rows
  kept and what is stored: schema, name, unit, k, seed, declared columns), and it is built under a transaction-level advisory lock keyed by
  the epoch: proxies (and workers) on one upstream build it once and all read it.
- **Atomic and durable.** ``CREATE TABLE AS``, the privilege revocation and its row in
  ``lapras.bounded_tables`` commit in one transaction, so a crash leaves the table with its row or
  neither. The table is logged (an UNLOGGED one would come back empty after a crash and answer zeros);
  on use the row and the relation must both exist, else it is built again.
- **Private.** Owned by the proxy's role; every privilege anyone else holds on it (PUBLIC's, or what
  ``ALTER DEFAULT PRIVILEGES`` granted) is revoked before the commit. Analysts never reach it: the
  proxy plans and relays only declared tables (superusers and ``pg_read_all_data`` members can read it,
  as they can read the tables it is cut from).
- **Dropped.** Building an epoch's table drops every older epoch's, each in its own transaction after
  the build commits; one that cannot be dropped (an operator's view over it, a lock) is logged and tried
  again later, and never fails the new epoch. A process still in an older epoch that finds its table
  gone (or newer ones built) reads through the window instead (same rows kept).
- **Sharded upstreams.** On a postgres_fdw coordinator the ``CREATE TABLE AS`` pulls every row of the
  foreign partitions once per epoch (no window function is pushed to a shard) and keeps the bounded rows
  on the coordinator, where that epoch's exact answers of the table then run.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from typing import Any

import psycopg

from parser.model.schema import TableSchema
from parser.pushdown.bounding import bounded_rows_sql, bounding_seed
from pgcore.identifiers import quote_ident

log = logging.getLogger("lapras.bounded")

DROP_LOCK_TIMEOUT = "2s"  # how long dropping an old epoch's table waits for a lock someone holds on it
DROP_RETRY_S = 60.0  # a table that could not be dropped is tried again after this

SCHEMA = "lapras"
SCHEMA_LOCK = 0x1A9A5  # the ledger's DDL lock (lapras.ledger.postgres.SCHEMA_LOCK)

META_DDL = """
CREATE SCHEMA IF NOT EXISTS lapras;
CREATE TABLE IF NOT EXISTS lapras.bounded_tables (
    epoch_id bigint NOT NULL,
    fingerprint text NOT NULL,
    source text NOT NULL,
    relname text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    build_seconds double precision NOT NULL,
    PRIMARY KEY (epoch_id, fingerprint)
);
"""


def stored_columns(table: TableSchema) -> list[str]:
    """The columns a materialisation keeps: the unit and the declared ones (all any exact answer reads;
    the row text that chooses the rows is still the whole stored row's)."""
    assert table.privacy_unit is not None
    return [table.privacy_unit, *(a.name for a in table.attributes
                                  if a.name != table.privacy_unit and not a.domain.virtual)]


def fingerprint(table: TableSchema) -> str:
    """What decides the rows kept and what they hold: a table built for one fingerprint holds the window's
    rows for it, with its declared columns."""
    text = "|".join((table.schema, table.name, table.privacy_unit or "", str(table.max_rows_per_unit),
                     str(bounding_seed(table)), *stored_columns(table)))
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


def relname(epoch_id: int, table: TableSchema) -> str:
    """The materialised table's name in schema ``lapras``: deterministic, so every proxy finds it."""
    return f"bounded_{int(epoch_id)}_{fingerprint(table)}"


def epoch_lock(epoch_id: int) -> int:
    """The advisory lock (signed 64-bit) under which an epoch's tables are built and older ones dropped."""
    h = hashlib.blake2b(f"lapras-bounded|{int(epoch_id)}".encode(), digest_size=8).digest()
    return int.from_bytes(h, "big", signed=True)


class BoundedTables:
    """Finds or builds each epoch's bounded table of a privacy-unit table; one per exact-answer source."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._known: dict[tuple[int, str], str | None] = {}  # (epoch, fingerprint) -> SQL name, None: window
        self._ddl = False
        self.built: list[tuple[str, int, float]] = []  # (source, epoch, seconds) built by this process
        self._retry: tuple[int, float] | None = None  # (epoch, monotonic time): older tables left to drop

    def ref(self, conn: Any, table: TableSchema, epoch_id: int) -> str | None:
        """SQL naming the epoch's bounded rows of ``table`` (built now if no process did), or None when this
        epoch is behind the newest one materialised (its table dropped): read through the window then.

        ``conn``: an autocommit psycopg connection with ``EXACT_SESSION_SQL`` applied (the row text the
        window hashes depends on those settings)."""
        key = (int(epoch_id), fingerprint(table))
        due = self._retry_due()
        if due is not None:
            self.drop_older(conn, due)
        with self._lock:
            if key in self._known:
                return self._known[key]
        if not self._ddl:
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK,))
                conn.execute(META_DDL)
                _revoke_all(conn, "lapras.bounded_tables")
            self._ddl = True
        found = self._find_or_build(conn, table, key)
        with self._lock:
            self._known[key] = found
        return found

    def forget(self, table: TableSchema, epoch_id: int) -> None:
        """Drop what this process knows of the epoch's table (it was dropped: look again next time)."""
        with self._lock:
            self._known.pop((int(epoch_id), fingerprint(table)), None)

    def _find_or_build(self, conn: Any, table: TableSchema, key: tuple[int, str]) -> str | None:
        epoch_id, fp = key
        name = relname(epoch_id, table)
        sql_name = f"{SCHEMA}.{quote_ident(name)}"
        source = f"{quote_ident(table.schema)}.{quote_ident(table.name)}"
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (epoch_lock(epoch_id),))
            newest = conn.execute("SELECT max(epoch_id) FROM lapras.bounded_tables").fetchone()[0]
            if newest is not None and int(newest) > epoch_id:
                return None  # a later epoch began (and dropped this one's tables): the window serves
            row = conn.execute("SELECT 1 FROM lapras.bounded_tables WHERE epoch_id = %s AND fingerprint = %s "
                               "AND to_regclass(%s) IS NOT NULL", (epoch_id, fp, sql_name)).fetchone()
            if row is not None:
                return sql_name
            # Not there, or its row outlived the relation (dropped by hand): build it afresh.
            conn.execute("DELETE FROM lapras.bounded_tables WHERE epoch_id = %s AND fingerprint = %s", (epoch_id, fp))
            conn.execute(f"DROP TABLE IF EXISTS {sql_name}")
            t0 = time.monotonic()
            conn.execute(f"CREATE TABLE {sql_name} AS {bounded_rows_sql(table, stored_columns(table))}")
            _revoke_all(conn, sql_name)
            conn.execute(f"ANALYZE {sql_name}")
            seconds = time.monotonic() - t0
            conn.execute("INSERT INTO lapras.bounded_tables (epoch_id, fingerprint, source, relname, build_seconds) "
                         "VALUES (%s, %s, %s, %s, %s)", (epoch_id, fp, source, name, seconds))
        log.info("epoch %d: bounded rows of %s materialised in %.1f s", epoch_id, source, seconds)
        self.built.append((source, epoch_id, seconds))
        self.drop_older(conn, epoch_id)
        return sql_name

    def drop_older(self, conn: Any, epoch_id: int) -> None:
        """Drop the tables of epochs before ``epoch_id``, each in its own transaction after the new one is
        committed: an operator's view over an old table or a lock on it (a debugging session) must not fail
        the new epoch. A table that cannot be dropped now (dependent objects, or locked past
        ``DROP_LOCK_TIMEOUT``) keeps its row, is logged, and is tried again at the next build or use of a
        bounded table after ``DROP_RETRY_S``."""
        failed = False
        for (old,) in conn.execute("SELECT relname FROM lapras.bounded_tables WHERE epoch_id < %s",
                                   (epoch_id,)).fetchall():
            try:
                with conn.transaction():
                    conn.execute(f"SET LOCAL lock_timeout = '{DROP_LOCK_TIMEOUT}'")
                    conn.execute("DELETE FROM lapras.bounded_tables WHERE relname = %s", (old,))
                    conn.execute(f"DROP TABLE IF EXISTS {SCHEMA}.{quote_ident(old)}")
            except psycopg.Error as exc:
                failed = True
                log.warning("epoch %d: the old bounded table %s.%s could not be dropped (%s); it is kept and "
                            "dropped later", epoch_id, SCHEMA, old, str(exc).strip().splitlines()[0])
        with self._lock:
            self._retry = (epoch_id, time.monotonic() + DROP_RETRY_S) if failed else None

    def _retry_due(self) -> int | None:
        """The epoch whose older tables are due for another drop attempt, if any."""
        with self._lock:
            if self._retry is None or time.monotonic() < self._retry[1]:
                return None
            epoch_id = self._retry[0]
            self._retry = None
            return epoch_id


def _revoke_all(conn: Any, sql_name: str) -> None:
    """Leave the owner the only role with any privilege on the table (default privileges may have granted
    some to PUBLIC or to other roles when it was created)."""
    conn.execute(f"REVOKE ALL ON {sql_name} FROM PUBLIC")
    for (grantee,) in conn.execute(
            "SELECT DISTINCT pg_get_userbyid(a.grantee) FROM pg_class c, aclexplode(c.relacl) AS a "
            "WHERE c.oid = to_regclass(%s) AND a.grantee <> c.relowner AND a.grantee <> 0", (sql_name,)).fetchall():
        conn.execute(f"REVOKE ALL ON {sql_name} FROM {quote_ident(grantee)}")
