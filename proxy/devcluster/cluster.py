"""Start and stop the dev cluster: a coordinator and N shards, `adult` and `events` partitioned over them.

Each protected table on the coordinator is LIST-partitioned by a hash bucket of its privacy unit
(``(hashint8(user_id) & 2147483647) % N`` for `events`; a hash of a few columns where there is no unit),
one postgres_fdw foreign partition per shard, with ``async_capable`` servers. Because the partition key is
an expression a query can name, a statement that groups by it as well (which the proxy's exact-answer SQL
does on such tables) is planned by the coordinator as one pushed-down aggregate per shard, run on all
shards at once, with only per-shard partial sums crossing the network. ``--shards 0`` gives one plain
PostgreSQL holding the same data, for side-by-side comparisons.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import secrets
import shutil
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import psycopg
from psycopg import sql

from parser.model.schema import TableSchema
from pgcore.identifiers import MAX_NAME_BYTES, quote_ident, truncate

from ..upstream.demo_data import create_table, generated_rows
from ..upstream.embedded import remove_tree
from ..upstream.events_data import COLUMNS as EVENT_COLUMNS
from ..upstream.events_data import EventsSpec, create_events_table, fill_events
from ..upstream.shop_data import ORDER_COLUMNS, create_dimensions, create_orders, fill_orders
from .instance import ClusterError, PgInstance, check_reachable, private_dir, service_account

log = logging.getLogger("lapras.devcluster")

DATABASE = "lapras"
COORDINATOR_PORT = 5432
STATE_FILE = "cluster.json"

_COMMON = (("jit", "off"), ("wal_level", "minimal"), ("max_wal_senders", "0"), ("fsync", "on"),
           ("synchronous_commit", "on"), ("shared_buffers", "128MB"), ("work_mem", "64MB"),
           ("max_connections", "400"), ("unix_socket_permissions", "0700"))
# Partitionwise aggregation pushes one aggregate per shard; async Append runs them all at once.
COORDINATOR_SETTINGS = (*_COMMON, ("enable_partitionwise_aggregate", "on"),
                        ("enable_partitionwise_join", "on"))
SHARD_SETTINGS = _COMMON


def shard_key(table: str, n_shards: int, unit: str | None, columns: Sequence[tuple[str, str]]) -> str:
    """The coordinator's partition key expression of ``table``: a hash bucket in 0..n_shards-1.

    By the privacy unit when there is one (all of a person's rows on one shard), otherwise by a hash of
    the first columns (rows spread evenly)."""
    if unit is not None:
        h = f"hashint8({quote_ident(unit)}::bigint)"
    else:
        # CASE, not COALESCE: postgres_fdw ships no COALESCE, and a key it cannot ship keeps the
        # per-shard aggregates on the coordinator.
        parts = []
        for name, typ in columns[:4]:
            if typ in ("integer", "bigint", "smallint"):
                parts.append(f"hashint8(CASE WHEN {quote_ident(name)} IS NULL THEN 0 ELSE {quote_ident(name)}::bigint END)")
            else:
                parts.append(f"hashtext(CASE WHEN {quote_ident(name)} IS NULL THEN '' ELSE {quote_ident(name)}::text END)")
        h = " # ".join(parts) if parts else "0"
    return f"(({h}) & 2147483647) % {n_shards}"


@dataclass(frozen=True)
class TableLoad:
    """How one table is made and filled: its columns, privacy unit and a filler on a connection."""

    name: str
    columns: tuple[tuple[str, str], ...]
    unit: str | None
    create: Callable[[psycopg.Connection], None]
    fill: Callable[[psycopg.Connection, str | None], None]   # (conn, keep-condition or None)
    fill_on_shards: bool                                     # generated where it lives, else via coordinator


class DevCluster:
    """The cluster under ``state_dir`` (its layout and settings live in ``state_dir/cluster.json``)."""

    def __init__(self, state_dir: Path) -> None:
        self.state_dir = Path(state_dir).resolve()
        self.state_path = self.state_dir / STATE_FILE
        self.password_file = self.state_dir / "password"

    # -- layout ---------------------------------------------------------------------------------------

    def _socket_dir(self) -> Path:
        # Unix socket paths are limited to ~107 bytes; deep state dirs use a short private /tmp directory.
        candidate = self.state_dir / "run"
        if len(str(candidate / ".s.PGSQL.65535")) < 100:
            return candidate
        digest = hashlib.sha256(str(self.state_dir).encode()).hexdigest()[:12]
        return Path("/tmp") / f"lapras-dc-{os.geteuid()}-{digest}"

    def state(self) -> dict | None:
        if not self.state_path.exists():
            return None
        state: dict = json.loads(self.state_path.read_text())
        return state

    def instances(self, state: dict | None = None) -> list[PgInstance]:
        """Coordinator first, then shard 1..N."""
        state = state or self.state()
        if state is None:
            raise ClusterError(f"no dev cluster in {self.state_dir} (run lapras-proxy dev-cluster start)")
        socket_dir = Path(state["socket_dir"])
        out = [PgInstance("coordinator", self.state_dir / "coordinator", socket_dir, COORDINATOR_PORT,
                          self.password_file, COORDINATOR_SETTINGS)]
        for i in range(1, state["shards"] + 1):
            out.append(PgInstance(f"shard{i}", self.state_dir / f"shard{i}", socket_dir,
                                  COORDINATOR_PORT + i, self.password_file, SHARD_SETTINGS))
        return out

    @property
    def coordinator(self) -> PgInstance:
        return self.instances()[0]

    def shards(self) -> list[PgInstance]:
        return self.instances()[1:]

    def dsn(self) -> str:
        """The coordinator's libpq connection string (database `lapras`)."""
        return self.coordinator.dsn(DATABASE)

    # -- start / stop ---------------------------------------------------------------------------------

    def start(self, shards: int, rows: int, tables: Sequence[TableSchema] = (), users: int = 0,
              end: datetime | None = None, shop: Sequence[str] = ()) -> str:
        """Start the cluster (creating and loading it the first time); returns the coordinator's DSN.
        ``shop``: the tables of ``tables`` filled as the shop demo's orders (their dimensions beside)."""
        if shards < 0:
            raise ClusterError("--shards must be 0 (one PostgreSQL) or more")
        state = self.state()
        if state is not None:
            if (state["shards"], state["rows"]) != (shards, rows):
                raise ClusterError(f"{self.state_dir} holds a cluster of {state['shards']} shard(s) and "
                                   f"{state['rows']} rows; stop it with --remove or choose another --state-dir")
            if not state.get("loaded"):
                raise ClusterError(f"a previous start in {self.state_dir} did not finish; run "
                                   "lapras-proxy dev-cluster stop --remove --state-dir with it and start again")
            self._parallel(lambda inst: inst.start(), self.instances(state))
            return self.dsn()
        check_reachable(self.state_dir)
        private_dir(self.state_dir)
        socket_dir = self._socket_dir()
        private_dir(socket_dir)
        self.password_file.write_text(secrets.token_urlsafe(24) + "\n")
        self.password_file.chmod(0o600)
        account = service_account()
        if account is not None:
            os.chown(self.password_file, account.pw_uid, account.pw_gid)
        spec = EventsSpec(rows=rows, users=users) if end is None else EventsSpec(rows=rows, users=users, end=end)
        state = {"version": 1, "shards": shards, "rows": rows, "users": spec.n_users,
                 "end": spec.span[1].isoformat(), "socket_dir": str(socket_dir), "loaded": False}
        self._write_state(state)
        insts = self.instances(state)
        self._parallel(_init_and_start, insts)
        loads = [*(_shop_load(t) if t.name in shop else _plain_table_load(t) for t in tables if t.name != "events"),
                 _events_load(spec)]
        self._load(insts, loads)
        if shop:  # the shop's public dimensions: plain tables on the coordinator
            with psycopg.connect(insts[0].dsn(DATABASE)) as conn:
                create_dimensions(conn, "public")
        state["loaded"] = True
        self._write_state(state)
        return self.dsn()

    def stop(self, remove: bool = False) -> None:
        """Stop every server; ``remove`` also deletes the state directory."""
        state = self.state()
        if state is not None:
            self._parallel(lambda inst: inst.stop(), self.instances(state))
            if remove and state["socket_dir"] != str(self.state_dir / "run"):
                shutil.rmtree(state["socket_dir"], ignore_errors=True)
        if remove and self.state_dir.exists():
            remove_tree(self.state_dir, ignore_errors=False)

    def _write_state(self, state: dict) -> None:
        tmp = self.state_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(state, indent=2) + "\n")
        tmp.chmod(0o600)
        tmp.replace(self.state_path)

    @staticmethod
    def _parallel(fn: Callable[[PgInstance], object], insts: Sequence[PgInstance]) -> None:
        with ThreadPoolExecutor(max_workers=max(1, len(insts))) as pool:
            for f in [pool.submit(fn, inst) for inst in insts]:
                f.result()

    # -- schema and data ------------------------------------------------------------------------------

    def _load(self, insts: Sequence[PgInstance], loads: Sequence[TableLoad]) -> None:
        coordinator, shards = insts[0], insts[1:]
        self._parallel(lambda inst: _create_database(inst.dsn()), insts)
        if not shards:
            with psycopg.connect(coordinator.dsn(DATABASE)) as conn:
                for load in loads:
                    with conn.transaction():
                        load.create(conn)
                        load.fill(conn, None)
                    conn.execute(sql.SQL("ANALYZE {}").format(sql.Identifier(load.name)))
            return
        n = len(shards)

        def on_shard(inst: PgInstance) -> None:
            index = int(inst.name.removeprefix("shard")) - 1
            with psycopg.connect(inst.dsn(DATABASE)) as conn:
                for load in loads:
                    # Created and filled in one transaction: with wal_level=minimal the rows skip the WAL.
                    with conn.transaction():
                        load.create(conn)
                        if load.fill_on_shards:
                            load.fill(conn, f"{shard_key(load.name, n, load.unit, load.columns)} = {index}")
                    conn.execute(sql.SQL("ANALYZE {}").format(sql.Identifier(load.name)))

        self._parallel(on_shard, shards)
        with psycopg.connect(coordinator.dsn(DATABASE), autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS postgres_fdw")
            password = self.password_file.read_text().strip()
            for inst in shards:
                server = sql.Identifier(inst.name)
                conn.execute(sql.SQL(
                    "CREATE SERVER {} FOREIGN DATA WRAPPER postgres_fdw OPTIONS (host {}, port {}, dbname {}, "
                    "async_capable 'true', fetch_size '10000', batch_size '1000')").format(
                        server, sql.Literal(str(inst.socket_dir)), sql.Literal(str(inst.port)),
                        sql.Literal(DATABASE)))
                conn.execute(sql.SQL("CREATE USER MAPPING FOR PUBLIC SERVER {} OPTIONS (user 'postgres', "
                                     "password {})").format(server, sql.Literal(password)))
            for load in loads:
                key = shard_key(load.name, n, load.unit, load.columns)
                cols = sql.SQL(", ").join(sql.SQL("{} {}").format(sql.Identifier(c), sql.SQL(t))
                                          for c, t in load.columns)
                conn.execute(sql.SQL("CREATE TABLE {} ({}) PARTITION BY LIST (({}))").format(
                    sql.Identifier(load.name), cols, sql.SQL(key)))
                for i, inst in enumerate(shards):
                    conn.execute(sql.SQL(
                        "CREATE FOREIGN TABLE {} PARTITION OF {} FOR VALUES IN ({}) SERVER {} "
                        "OPTIONS (schema_name 'public', table_name {})").format(
                            sql.Identifier(_partition_name(load.name, inst.name)), sql.Identifier(load.name),
                            sql.Literal(i), sql.Identifier(inst.name), sql.Literal(load.name)))
                if not load.fill_on_shards:
                    with conn.transaction():
                        load.fill(conn, None)
                conn.execute(sql.SQL("ANALYZE {}").format(sql.Identifier(load.name)))


def _partition_name(table: str, shard: str) -> str:
    """``table_shard``, the table's part cut so the whole fits 63 bytes (PostgreSQL would cut the shard's
    suffix off a long name, and every shard's partition would get the same name)."""
    suffix = f"_{shard}"
    return truncate(table, MAX_NAME_BYTES - len(suffix.encode("utf-8"))) + suffix


def _init_and_start(inst: PgInstance) -> None:
    inst.init()
    inst.start()


def _create_database(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (DATABASE,)).fetchone() is None:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(DATABASE)))


def _events_load(spec: EventsSpec) -> TableLoad:
    return TableLoad(
        name="events", columns=EVENT_COLUMNS, unit="user_id",
        create=lambda conn: create_events_table(conn, "public", "events"),
        fill=lambda conn, keep: _discard(fill_events(conn, spec, "public", "events", keep=keep)),
        fill_on_shards=True)


def _discard(_count: int) -> None:
    return None


def _shop_load(table: TableSchema) -> TableLoad:
    """The shop's orders (``generator = "shop"``), sharded by customer, filled through the coordinator."""
    return TableLoad(name=table.name, columns=ORDER_COLUMNS, unit="customer_id",
                     create=lambda conn: create_orders(conn, "public", table.name),
                     fill=lambda conn, keep: fill_orders(conn, "public", table.name), fill_on_shards=False)


def _plain_table_load(table: TableSchema) -> TableLoad:
    """A declared table filled with the demo generator's rows, routed to the shards by the coordinator."""
    columns = tuple((a.name, a.domain.sql_type) for a in table.attributes)

    def fill(conn: psycopg.Connection, keep: str | None) -> None:
        names = sql.SQL(", ").join(sql.Identifier(a.name) for a in table.attributes)
        stmt = sql.SQL("COPY {}.{} ({}) FROM STDIN").format(
            sql.Identifier(table.schema), sql.Identifier(table.name), names)
        with conn.cursor().copy(stmt) as copy:
            for row in generated_rows(table):
                copy.write_row(row)

    return TableLoad(name=table.name, columns=columns, unit=None,
                     create=lambda conn: create_table(conn, table), fill=fill, fill_on_shards=False)
