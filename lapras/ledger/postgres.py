"""PostgreSQL ledger in the upstream database's own schema ``lapras``.

Serialisation: every spender takes ``SELECT ... FOR UPDATE`` on its epoch row, re-reads the allocation
state and the stored answers under that lock, and commits the new state, the release, its spends and the
answers in the same transaction (``synchronous_commit = on``). Several proxy processes sharing the database
therefore share one budget, and a crash leaves either the whole stream item or none of it.

What is stored for a release: its cost, scale, the noisy measurements and the strategy (for the MM
release). The raw noise vector is deliberately *not* stored: next to the measurements it would reveal the
exact data to anyone who can read the ledger; the measurements alone are all answers need.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import psycopg
from psycopg_pool import ConnectionPool

from lapras.allocation import AllocState
from lapras.errors import LedgerError
from lapras.ledger.base import (
    EpochRecord,
    EpochSpan,
    EpochSpec,
    EpochTxn,
    HistoryRow,
    Ledger,
    PartitionRecord,
    ReleaseRecord,
    StaleEpoch,
    StoredAnswer,
    StoredSettings,
    check_partition,
    check_regression,
    check_reserved,
    iter_parts,
)
from lapras.mechanisms import Cost

SCHEMA_LOCK = 0x1A9A5  # advisory lock id for DDL and epoch roll-over
SCHEMA_VERSION = 2
"""The ledger layout this code writes (lapras.meta 'schema_version'): 1 before the table existed, 2 with
the shared privacy settings. A binary refuses a ledger of a higher version: it could misread it."""

DDL = """
CREATE SCHEMA IF NOT EXISTS lapras;
CREATE TABLE IF NOT EXISTS lapras.epochs (
    id bigserial PRIMARY KEY,
    started_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    ended_at timestamptz,
    spec jsonb NOT NULL,
    state jsonb NOT NULL,
    spent_units double precision NOT NULL DEFAULT 0,
    regression_epsilon_spent double precision NOT NULL DEFAULT 0,
    regression_delta_spent double precision NOT NULL DEFAULT 0
);
CREATE UNIQUE INDEX IF NOT EXISTS epochs_one_open ON lapras.epochs ((true)) WHERE ended_at IS NULL;
CREATE TABLE IF NOT EXISTS lapras.parts (
    epoch_id bigint NOT NULL REFERENCES lapras.epochs(id),
    part text NOT NULL,
    fraction double precision NOT NULL,
    units double precision NOT NULL,
    PRIMARY KEY (epoch_id, part)
);
CREATE TABLE IF NOT EXISTS lapras.releases (
    id bigserial PRIMARY KEY,
    epoch_id bigint NOT NULL REFERENCES lapras.epochs(id),
    position bigint,
    kind text NOT NULL,
    units double precision NOT NULL,
    mechanism text NOT NULL,
    params jsonb NOT NULL,
    sensitivity double precision NOT NULL,
    cost jsonb NOT NULL,
    meta jsonb,
    payload bytea,
    created_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE TABLE IF NOT EXISTS lapras.spends (
    id bigserial PRIMARY KEY,
    epoch_id bigint NOT NULL REFERENCES lapras.epochs(id),
    release_id bigint REFERENCES lapras.releases(id),
    position bigint,
    part text NOT NULL,
    units double precision NOT NULL,
    epsilon double precision,
    delta double precision,
    created_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE TABLE IF NOT EXISTS lapras.answers (
    epoch_id bigint NOT NULL REFERENCES lapras.epochs(id),
    key text NOT NULL,
    value double precision NOT NULL,
    stderr double precision NOT NULL,
    outcome text NOT NULL,
    position bigint,
    release_id bigint REFERENCES lapras.releases(id),
    username text,
    created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (epoch_id, key)
);
CREATE TABLE IF NOT EXISTS lapras.partitions (
    epoch_id bigint NOT NULL REFERENCES lapras.epochs(id),
    key text NOT NULL,
    keys jsonb NOT NULL,
    cost jsonb NOT NULL,
    mechanism text NOT NULL,
    params jsonb NOT NULL,
    created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (epoch_id, key)
);
CREATE TABLE IF NOT EXISTS lapras.meta (
    key text PRIMARY KEY,
    value jsonb NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE TABLE IF NOT EXISTS lapras.statement_history (
    id bigserial PRIMARY KEY,
    epoch_id bigint NOT NULL,
    at timestamptz NOT NULL,
    sql text NOT NULL,
    params jsonb,
    outcome text NOT NULL,
    zone text
);
CREATE INDEX IF NOT EXISTS statement_history_epoch ON lapras.statement_history (epoch_id);
CREATE TABLE IF NOT EXISTS lapras.regression_answers (
    epoch_id bigint NOT NULL,
    call_key text NOT NULL,
    rows jsonb NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (epoch_id, call_key)
);
"""

# Ledgers written before releases named their mechanism kept a mandatory sigma: every such release was
# Gaussian, so the row becomes mechanism 'gaussian' with params {"sigma": sigma}, in the DDL's transaction.
MIGRATIONS = """
ALTER TABLE lapras.releases ADD COLUMN IF NOT EXISTS mechanism text;
ALTER TABLE lapras.releases ADD COLUMN IF NOT EXISTS params jsonb;
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM information_schema.columns
               WHERE table_schema = 'lapras' AND table_name = 'releases' AND column_name = 'sigma') THEN
        UPDATE lapras.releases SET mechanism = 'gaussian', params = jsonb_build_object('sigma', sigma)
            WHERE mechanism IS NULL;
        ALTER TABLE lapras.releases DROP COLUMN sigma;
    END IF;
END $$;
ALTER TABLE lapras.releases ALTER COLUMN mechanism SET NOT NULL, ALTER COLUMN params SET NOT NULL;
ALTER TABLE lapras.epochs ADD COLUMN IF NOT EXISTS partition_rho_spent double precision NOT NULL DEFAULT 0;
ALTER TABLE lapras.epochs ADD COLUMN IF NOT EXISTS partition_delta_spent double precision NOT NULL DEFAULT 0;
ALTER TABLE lapras.statement_history ADD COLUMN IF NOT EXISTS zone text;
"""

# The spec without its value lists: every spend reads the epoch row, and a 100,000-value list made that
# read 54 ms instead of 1-3 (Ledger.value_lists reads them, once per epoch adoption).
_EPOCH_COLS = ("id, extract(epoch from started_at), spec - 'value_lists', state, spent_units, regression_epsilon_spent, "
               "regression_delta_spent, extract(epoch from ended_at), "
               "(SELECT count(*) FROM lapras.answers a WHERE a.epoch_id = e.id), partition_rho_spent, "
               "partition_delta_spent")



def _check_version(c: Any) -> None:
    """Refuse a ledger written by a newer layout than this code's (before any DDL touches it)."""
    if c.execute("SELECT to_regclass('lapras.meta')").fetchone()[0] is None:
        return
    row = c.execute("SELECT value FROM lapras.meta WHERE key = 'schema_version'").fetchone()
    if row is not None and int(row[0]) > SCHEMA_VERSION:
        raise LedgerError(f"the ledger's schema is version {int(row[0])}, newer than this lapras-proxy's "
                          f"{SCHEMA_VERSION}: upgrade lapras-proxy (an older binary could misread the ledger)")


def _lock_open_epoch(c: Any, epoch_id: int) -> EpochRecord:
    """The epoch's row, locked FOR UPDATE until the transaction ends: every spend and every stored
    release of the epoch serialises on it. Raises when the epoch is missing or already ended."""
    row = c.execute(f"SELECT {_EPOCH_COLS} FROM lapras.epochs e WHERE id = %s FOR UPDATE", (epoch_id,)).fetchone()
    if row is None:
        raise LedgerError(f"epoch {epoch_id} is not in the ledger")
    ep = _epoch(row)
    if ep.ended_at is not None:
        raise StaleEpoch(epoch_id)
    return ep

def _epoch(row: Sequence[Any]) -> EpochRecord:
    return EpochRecord(int(row[0]), float(row[1]), EpochSpec.from_json(row[2]), AllocState.from_json(row[3]),
                       float(row[4]), float(row[5]), float(row[6]), float(row[7]) if row[7] is not None else None,
                       int(row[8]), float(row[9]), float(row[10]))


_RELEASE_COLS = "kind, cost, units, mechanism, params, sensitivity, position, meta"


def _release(row: Sequence[Any], payload: bytes | None = None) -> ReleaseRecord:
    return ReleaseRecord(row[0], Cost.from_json(row[1]), row[2], row[3], dict(row[4]), row[5], row[6], {}, row[7],
                         payload)


class _PgTxn(EpochTxn):
    def __init__(self, conn: psycopg.Connection[Any], epoch: EpochRecord) -> None:
        self.conn = conn
        self.epoch = epoch

    def find(self, keys: Sequence[str]) -> dict[str, StoredAnswer]:
        if not keys:
            return {}
        rows = self.conn.execute(
            "SELECT key, value, stderr, outcome, position FROM lapras.answers WHERE epoch_id = %s AND key = ANY(%s)",
            (self.epoch.id, list(keys))).fetchall()
        return {r[0]: StoredAnswer(r[0], r[1], r[2], r[3], r[4]) for r in rows}

    def commit_item(self, state: AllocState, release: ReleaseRecord | None, answers: Sequence[StoredAnswer],
                    user: str = "") -> int | None:
        rid = _insert_release(self.conn, self.epoch, release) if release is not None else None
        units = release.units if release is not None else 0.0
        self.conn.execute("UPDATE lapras.epochs SET state = %s, spent_units = spent_units + %s WHERE id = %s",
                          (json.dumps(state.to_json()), units, self.epoch.id))
        if answers:
            # COPY stores thousands of answers (a wide GROUP BY) in one round trip, keeping the epoch lock
            # short. No key can collide: the caller found every stored one under this same lock.
            with self.conn.cursor().copy(
                    "COPY lapras.answers (epoch_id, key, value, stderr, outcome, position, release_id, username)"
                    " FROM STDIN") as copy:
                for a in answers:
                    copy.write_row((self.epoch.id, a.key, a.value, a.stderr, a.outcome, a.position, rid, user))
        self.epoch.state = state
        self.epoch.spent_units += units
        return rid


def _insert_release(conn: psycopg.Connection[Any], epoch: EpochRecord, r: ReleaseRecord) -> int:
    row = conn.execute(
        "INSERT INTO lapras.releases (epoch_id, position, kind, units, mechanism, params, sensitivity, cost, meta,"
        " payload) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s) RETURNING id",
        (epoch.id, r.position, r.kind, r.units, r.mechanism, json.dumps(dict(r.params)), r.sensitivity,
         json.dumps(r.cost.to_json()), json.dumps(r.meta) if r.meta is not None else None, r.payload)).fetchone()
    assert row is not None
    rid = int(row[0])
    budget = epoch.spec.budget
    for part, units in r.parts.items():
        if units > 0:
            eps, delta = budget.part_eps_delta(units) or (None, None)
            conn.execute("INSERT INTO lapras.spends (epoch_id, release_id, position, part, units, epsilon, delta)"
                         " VALUES (%s, %s, %s, %s, %s, %s, %s)", (epoch.id, rid, r.position, part, units, eps, delta))
    return rid


def revoke_others(conn: psycopg.Connection[Any], sql_name: str) -> None:
    """Leave the owner the only role with any privilege on ``sql_name`` (a trusted literal name)."""
    conn.execute(f"REVOKE ALL ON {sql_name} FROM PUBLIC")
    for (grantee,) in conn.execute(
            "SELECT DISTINCT quote_ident(pg_get_userbyid(a.grantee)) FROM pg_class c, aclexplode(c.relacl) AS a "
            "WHERE c.oid = to_regclass(%s) AND a.grantee <> c.relowner AND a.grantee <> 0", (sql_name,)).fetchall():
        conn.execute(f"REVOKE ALL ON {sql_name} FROM {grantee}")


def _durable(conn: psycopg.Connection[Any]) -> None:
    # Every pooled connection commits durably: a spend is on disk before its answer leaves.
    conn.execute("SET synchronous_commit = on")
    conn.commit()


class PostgresLedger(Ledger):
    """Ledger over a small connection pool. Spends serialise on their epoch's row lock alone (no process
    mutex), so several sessions decide in turn while reads (the budget report, stored answers) never wait
    behind a spend: plain snapshot reads take no row lock."""

    def __init__(self, conninfo: str, max_connections: int = 8) -> None:
        self.conninfo = conninfo
        self._pool = ConnectionPool(conninfo, min_size=1, max_size=max_connections, open=True,
                                    kwargs={"autocommit": False}, configure=_durable, timeout=60.0,
                                    name="lapras-ledger")
        with self._tx() as c:
            c.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK,))
            _check_version(c)
            c.execute(DDL)
            c.execute(MIGRATIONS)
            # Analysts' statement texts are operator-only data: no other role may read the history,
            # whatever default privileges the database grants.
            revoke_others(c, "lapras.statement_history")
            c.execute("INSERT INTO lapras.meta (key, value) VALUES ('schema_version', %s) ON CONFLICT (key) DO "
                      "UPDATE SET value = EXCLUDED.value, updated_at = clock_timestamp()",
                      (json.dumps(SCHEMA_VERSION),))

    @contextmanager
    def _stored_settings(self) -> Iterator[StoredSettings]:
        """Stored with the ledger (lapras.meta 'privacy_settings') by the first process; later ones compare
        theirs under the schema lock, held in one transaction (see :meth:`Ledger.agree_settings`)."""
        with self._tx() as c:
            c.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK,))
            row = c.execute("SELECT value FROM lapras.meta WHERE key = 'privacy_settings'").fetchone()

            def store(settings: dict[str, Any]) -> None:
                c.execute("INSERT INTO lapras.meta (key, value) VALUES ('privacy_settings', %s) ON CONFLICT (key) "
                          "DO UPDATE SET value = EXCLUDED.value, updated_at = clock_timestamp()", (json.dumps(settings),))

            yield (row[0] if row is not None else None), store

    @contextmanager
    def _tx(self) -> Iterator[psycopg.Connection[Any]]:
        """One transaction on a pooled connection: committed on success, rolled back on any exception
        (a broken connection is discarded by the pool and replaced)."""
        with self._pool.connection() as conn:
            yield conn

    def close(self) -> None:
        self._pool.close()

    def pool_usage(self) -> tuple[int, int, int, int]:
        """(max connections, in use, idle, requests waiting) of the ledger's pool (SHOW SERVERS)."""
        st = self._pool.get_stats()
        size, idle = int(st.get("pool_size", 0)), int(st.get("pool_available", 0))
        return self._pool.max_size, size - idle, idle, int(st.get("requests_waiting", 0))

    def current_epoch(self) -> EpochRecord | None:
        with self._tx() as c:
            row = c.execute(f"SELECT {_EPOCH_COLS} FROM lapras.epochs e WHERE ended_at IS NULL").fetchone()
        return _epoch(row) if row else None

    def begin_epoch(self, spec: EpochSpec, mm: ReleaseRecord | None, expected_current: int | None) -> EpochRecord:
        with self._tx() as c:
            c.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK,))
            cur = c.execute(f"SELECT {_EPOCH_COLS} FROM lapras.epochs e WHERE ended_at IS NULL FOR UPDATE").fetchone()
            if cur is not None and int(cur[0]) != expected_current:
                return _epoch(cur)  # another process rolled the epoch first
            if cur is not None:
                c.execute("UPDATE lapras.epochs SET ended_at = clock_timestamp() WHERE id = %s", (cur[0],))
            row = c.execute(
                "INSERT INTO lapras.epochs (spec, state) VALUES (%s, %s) RETURNING id",
                (json.dumps(spec.to_json()), json.dumps(AllocState().to_json()))).fetchone()
            assert row is not None
            eid = int(row[0])
            for part, frac, units in iter_parts(spec):
                c.execute("INSERT INTO lapras.parts VALUES (%s, %s, %s, %s)", (eid, part, frac, units))
            new = c.execute(f"SELECT {_EPOCH_COLS} FROM lapras.epochs e WHERE id = %s", (eid,)).fetchone()
            assert new is not None
            ep = _epoch(new)
            if mm is not None:
                _insert_release(c, ep, mm)
                c.execute("UPDATE lapras.epochs SET spent_units = %s WHERE id = %s", (mm.units, eid))
                ep.spent_units = mm.units
        return ep

    def attach_mm(self, epoch_id: int, mm: ReleaseRecord) -> bool:
        with self._tx() as c:
            row = c.execute(f"SELECT {_EPOCH_COLS} FROM lapras.epochs e WHERE id = %s FOR UPDATE",
                            (epoch_id,)).fetchone()
            if row is None:
                raise LedgerError(f"epoch {epoch_id} is not in the ledger")
            ep = _epoch(row)
            check_reserved(ep.spec, mm)
            if ep.ended_at is not None or c.execute(
                    "SELECT 1 FROM lapras.releases WHERE epoch_id = %s AND kind = 'mm'", (epoch_id,)).fetchone():
                return False
            _insert_release(c, ep, mm)
            c.execute("UPDATE lapras.epochs SET spent_units = spent_units + %s WHERE id = %s", (mm.units, epoch_id))
            return True

    def mm_release(self, epoch_id: int) -> ReleaseRecord | None:
        with self._tx() as c:
            row = c.execute(f"SELECT {_RELEASE_COLS}, payload FROM lapras.releases"
                            " WHERE epoch_id = %s AND kind = 'mm'", (epoch_id,)).fetchone()
        if row is None:
            return None
        return _release(row, bytes(row[-1]) if row[-1] is not None else None)

    def answers(self, epoch_id: int) -> dict[str, StoredAnswer]:
        with self._tx() as c:
            rows = c.execute("SELECT key, value, stderr, outcome, position FROM lapras.answers WHERE epoch_id = %s",
                             (epoch_id,)).fetchall()
        return {r[0]: StoredAnswer(r[0], r[1], r[2], r[3], r[4]) for r in rows}

    @contextmanager
    def locked(self, epoch_id: int) -> Iterator[EpochTxn]:
        with self._tx() as c:
            ep = _lock_open_epoch(c, epoch_id)
            yield _PgTxn(c, ep)

    def epochs(self) -> list[EpochRecord]:
        with self._tx() as c:
            rows = c.execute(f"SELECT {_EPOCH_COLS} FROM lapras.epochs e ORDER BY id").fetchall()
        return [_epoch(r) for r in rows]

    def value_lists(self, epoch_id: int) -> dict[str, tuple[str, ...]]:
        with self._tx() as c:
            row = c.execute("SELECT spec->'value_lists' FROM lapras.epochs WHERE id = %s", (epoch_id,)).fetchone()
        return {k: tuple(v) for k, v in (row[0] or {}).items()} if row is not None else {}

    def releases(self, epoch_id: int) -> list[ReleaseRecord]:
        with self._tx() as c:
            rows = c.execute(f"SELECT {_RELEASE_COLS} FROM lapras.releases WHERE epoch_id = %s ORDER BY id",
                             (epoch_id,)).fetchall()
        return [_release(r) for r in rows]

    def user_activity(self, epoch_id: int, user: str) -> dict[str, float]:
        with self._tx() as c:
            row = c.execute(
                "SELECT count(*), count(*) FILTER (WHERE outcome = 'fresh'),"
                " (SELECT coalesce(sum(r.units), 0) FROM lapras.releases r WHERE r.epoch_id = %s AND r.id IN"
                "   (SELECT release_id FROM lapras.answers WHERE epoch_id = %s AND username = %s))"
                " FROM lapras.answers WHERE epoch_id = %s AND username = %s",
                (epoch_id, epoch_id, user, epoch_id, user)).fetchone()
        assert row is not None
        return {"answers": float(row[0]), "fresh": float(row[1]), "units": float(row[2])}

    def regression_answer(self, epoch_id: int, key: str) -> list[list[Any]] | None:
        with self._tx() as c:
            row = c.execute("SELECT rows FROM lapras.regression_answers WHERE epoch_id = %s AND call_key = %s",
                            (epoch_id, key)).fetchone()
        return row[0] if row is not None else None

    def commit_regression(self, epoch_id: int, key: str, epsilon: float, delta: float, rows: list[list[Any]],
                          note: str = "") -> tuple[list[list[Any]], bool]:
        with self._tx() as c:
            ep = _lock_open_epoch(c, epoch_id)
            stored = c.execute("SELECT rows FROM lapras.regression_answers WHERE epoch_id = %s AND call_key = %s",
                               (epoch_id, key)).fetchone()
            if stored is not None:
                return stored[0], False  # an identical call committed first: its release is the answer
            check_regression(ep, epsilon, delta)
            c.execute("UPDATE lapras.epochs SET regression_epsilon_spent = regression_epsilon_spent + %s,"
                      " regression_delta_spent = regression_delta_spent + %s WHERE id = %s", (epsilon, delta, epoch_id))
            c.execute("INSERT INTO lapras.spends (epoch_id, part, units, epsilon, delta) VALUES (%s, %s, 0, %s, %s)",
                      (epoch_id, "regression" + (f":{note}" if note else ""), epsilon, delta))
            c.execute("INSERT INTO lapras.regression_answers (epoch_id, call_key, rows) VALUES (%s, %s, %s)",
                      (epoch_id, key, json.dumps(rows)))
        return rows, True

    def partition(self, epoch_id: int, key: str) -> PartitionRecord | None:
        with self._tx() as c:
            row = c.execute("SELECT key, keys, cost, mechanism, params FROM lapras.partitions"
                            " WHERE epoch_id = %s AND key = %s", (epoch_id, key)).fetchone()
        return _partition(row) if row is not None else None

    def commit_partition(self, epoch_id: int, record: PartitionRecord) -> tuple[PartitionRecord, bool]:
        with self._tx() as c:
            ep = _lock_open_epoch(c, epoch_id)
            stored = c.execute("SELECT key, keys, cost, mechanism, params FROM lapras.partitions"
                               " WHERE epoch_id = %s AND key = %s", (epoch_id, record.key)).fetchone()
            if stored is not None:
                return _partition(stored), False  # selected meanwhile: that set is the answer
            check_partition(ep, record.cost)
            rho, delta = record.cost.rho or 0.0, record.cost.delta or 0.0
            c.execute("UPDATE lapras.epochs SET partition_rho_spent = partition_rho_spent + %s,"
                      " partition_delta_spent = partition_delta_spent + %s WHERE id = %s", (rho, delta, epoch_id))
            c.execute("INSERT INTO lapras.spends (epoch_id, part, units, epsilon, delta) VALUES (%s, %s, %s, NULL, %s)",
                      (epoch_id, "partition", rho, delta))
            c.execute("INSERT INTO lapras.partitions (epoch_id, key, keys, cost, mechanism, params)"
                      " VALUES (%s, %s, %s, %s, %s, %s)",
                      (epoch_id, record.key, json.dumps(record.keys), json.dumps(record.cost.to_json()),
                       record.mechanism, json.dumps(dict(record.params))))
        return record, True

    def record_history(self, rows: Sequence[HistoryRow]) -> None:
        if not rows:
            return
        with self._tx() as c, c.cursor().copy(
                "COPY lapras.statement_history (epoch_id, at, sql, params, outcome, zone) FROM STDIN") as copy:
            for r in rows:
                copy.write_row((r.epoch_id, _ts(r.at), r.sql,
                                json.dumps(list(r.params), default=str) if r.params is not None else None, r.outcome,
                                r.zone))

    def history(self, last_epochs: int) -> tuple[list[EpochSpan], list[HistoryRow]]:
        with self._tx() as c:
            spans = [EpochSpan(int(r[0]), float(r[1]), float(r[2]) if r[2] is not None else None)
                     for r in c.execute("SELECT id, extract(epoch from started_at), extract(epoch from ended_at) "
                                        "FROM lapras.epochs ORDER BY id DESC LIMIT %s", (last_epochs,)).fetchall()]
            spans.reverse()
            if not spans:
                return [], []
            rows = c.execute("SELECT epoch_id, extract(epoch from at), sql, params, outcome, zone"
                             " FROM lapras.statement_history WHERE epoch_id >= %s ORDER BY id",
                             (spans[0].id,)).fetchall()
        return spans, [HistoryRow(int(r[0]), float(r[1]), r[2], tuple(r[3]) if r[3] is not None else None, r[4],
                                  r[5]) for r in rows]

    def prune_history(self, keep_epochs: int) -> None:
        with self._tx() as c:
            c.execute("DELETE FROM lapras.statement_history WHERE epoch_id < (SELECT min(id) FROM "
                      "(SELECT id FROM lapras.epochs ORDER BY id DESC LIMIT %s) AS newest)", (keep_epochs,))


def _partition(row: Sequence[Any]) -> PartitionRecord:
    return PartitionRecord(row[0], row[1], Cost.from_json(row[2]), row[3], dict(row[4]))


def _ts(at: float) -> Any:
    return datetime.fromtimestamp(at, UTC)
