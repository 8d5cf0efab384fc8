"""The schema-only shadow database that answers catalog queries, and the relay to it.

The shadow database holds the protected tables' DDL (empty tables with the declared columns, types,
domains as CHECK constraints, and descriptions as comments) so that every tool's own introspection SQL
sees exactly the schema, and no statistics exist that could leak data. The proxy connects to it as an
unprivileged read-only role.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import struct
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from parser.model.schema import Attribute, Catalog, TableSchema
from parser.syntax.cache import DigestLRU, digest
from pgcore.identifiers import quote_ident

from ..protocol.backend import Field, data_row_values
from ..protocol.errors import PgError
from . import client_names
from .hardening import close_protected_database, harden_shadow, release_setup_lock, take_setup_lock
from .pgclient import BackendConnection, BackendPool, Relayed
from .public_copy import public_scripts
from .table_stats import COLUMNS_SQL, figure_free_sql, mentions, rewrite


def reader_role(shadow_dbname: str) -> str:
    return f"{shadow_dbname}_reader"


def _column_sql(a: Attribute) -> str:
    d = a.domain
    # Plain text (quote_ident quotes as psycopg does): composing 26,000 psycopg objects for a wide schema
    # took seconds at every start.
    null = "" if d.nullable else " NOT NULL"
    check = d.ddl_check(quote_ident(a.name))
    # A domain with no public bound on stored values (a clamped measure, private keys) has no constraint:
    # psql's \d would list "CHECK (true)" under an anonymous name.
    constraint = "" if check.strip().lower() == "true" else f" CHECK ({check})"
    return f"{quote_ident(a.name)} {d.sql_type}{null}{constraint}"


def _table_ddl(t: TableSchema) -> list[sql.Composable]:
    name = f"{quote_ident(t.schema)}.{quote_ident(t.name)}"
    stmts: list[sql.Composable] = [
        sql.SQL(f"CREATE SCHEMA IF NOT EXISTS {quote_ident(t.schema)}"),
        sql.SQL(f"DROP TABLE IF EXISTS {name}"),
        sql.SQL(f"CREATE TABLE {name} ({', '.join(_column_sql(a) for a in t.attributes)})"),
    ]
    desc = getattr(t, "description", "")
    if desc:
        stmts.append(sql.SQL("COMMENT ON TABLE {} IS {}").format(sql.SQL(name), sql.Literal(desc)))
    for a in t.attributes:
        if a.description:
            stmts.append(sql.SQL("COMMENT ON COLUMN {}.{} IS {}").format(sql.SQL(name), sql.Identifier(a.name),
                                                                         sql.Literal(a.description)))
    return stmts


def _shadow_scripts(catalog: Catalog, role: str) -> dict[str, str]:
    """Per table (keyed by its quoted name), one script of several statements sent in one round trip:
    its DDL and the reader's grants."""
    scripts = {}
    for t in catalog.tables:
        name = f"{quote_ident(t.schema)}.{quote_ident(t.name)}"
        grants = [f"GRANT USAGE ON SCHEMA {quote_ident(t.schema)} TO {quote_ident(role)}",
                  f"GRANT SELECT ON {name} TO {quote_ident(role)}"]
        scripts[name] = ";\n".join([s.as_string(None) for s in _table_ddl(t)] + grants)
    scripts.update(public_scripts(catalog, role))  # public tables: copies with their rows
    return scripts


MARK_PREFIX = "lapras-proxy shadow catalog "
TABLES_PER_TRANSACTION = 16
"""Tables rebuilt in one transaction: dropping and creating 150 wide tables at once runs out of lock slots
(max_locks_per_transaction)."""


def _digest(script: str) -> str:
    return hashlib.sha256(script.encode()).hexdigest()[:24]


def _read_mark(comment: str | None) -> dict[str, str]:
    """The per-table digests of the DDL the shadow database was last built with (its comment)."""
    if not comment or not comment.startswith(MARK_PREFIX):
        return {}
    try:
        built = json.loads(comment[len(MARK_PREFIX):])
    except ValueError:
        return {}
    return {str(k): str(v) for k, v in built.items()} if isinstance(built, dict) else {}


async def _ensure_database_and_role(conn: psycopg.AsyncConnection[Any], shadow_dbname: str, role: str,
                                   password: str) -> None:
    cur = await conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (shadow_dbname,))
    if await cur.fetchone() is None:
        try:
            await conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(shadow_dbname)))
        except psycopg.errors.DuplicateDatabase:
            pass
    cur = await conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,))
    if await cur.fetchone() is None:
        try:
            await conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
        except (psycopg.errors.DuplicateObject, psycopg.errors.UniqueViolation):
            pass
    await conn.execute(sql.SQL(
        "ALTER ROLE {} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION PASSWORD {}").format(
            sql.Identifier(role), sql.Literal(password)))


async def ensure_shadow(admin_dsn: str, shadow_dbname: str, catalog: Catalog,
                        descriptions: dict[str, str] | None = None, *, protected_db: str | None = None,
                        lock_timeout: float = 60.0) -> str:
    """Create (or refresh) the schema-only shadow database and its read-only role; returns its DSN.

    Tables are rebuilt only when their DDL changed since the last build (a digest per table is kept as
    the database's comment), at most TABLES_PER_TRANSACTION per transaction.

    Safe to call from several processes at once (creation races are tolerated; set-up runs under an
    advisory lock in the admin connection's database, which the reader role never reaches, given up after
    `lock_timeout` with an error naming the holder). `admin_dsn` must be a superuser connection to the same
    cluster (CREATEDB + CREATEROLE is not enough: information_schema and the revocations need a superuser).
    `protected_db`, the database holding the protected tables, is closed to PUBLIC (see
    hardening.close_protected_database).
    """
    role = reader_role(shadow_dbname)
    # Deterministic so that concurrent workers agree; it only opens an empty, read-only schema.
    password = hashlib.sha256(f"lapras-shadow:{admin_dsn}:{shadow_dbname}".encode()).hexdigest()[:32]
    async with await psycopg.AsyncConnection.connect(admin_dsn, autocommit=True) as lock_conn:
        # Workers and proxies starting together would race on CREATE/ALTER ROLE ("tuple concurrently
        # updated") and on the DDL: one at a time, cluster-wide.
        await take_setup_lock(lock_conn, lock_timeout)
        try:
            await _ensure_database_and_role(lock_conn, shadow_dbname, role, password)
            if protected_db:
                await close_protected_database(lock_conn, protected_db)
            shadow_admin = make_conninfo(admin_dsn, dbname=shadow_dbname)
            scripts = _shadow_scripts(catalog, role)
            cur = await lock_conn.execute("SELECT shobj_description(oid, 'pg_database') FROM pg_database "
                                          "WHERE datname = %s", (shadow_dbname,))
            row = await cur.fetchone()
            built = _read_mark(row[0] if row else None)
            # A restart (or another worker) finds the tables whose DDL did not change already built: with
            # 150 wide tables, rebuilding them all took most of the start-up. The mark is public DDL's digest.
            todo = [script for name, script in scripts.items() if built.get(name) != _digest(script)]
            async with await psycopg.AsyncConnection.connect(shadow_admin, autocommit=True) as conn:
                for i in range(0, len(todo), TABLES_PER_TRANSACTION):
                    async with conn.transaction():
                        for script in todo[i:i + TABLES_PER_TRANSACTION]:
                            await conn.execute(script.encode())
                async with conn.transaction():
                    mark = MARK_PREFIX + json.dumps({k: _digest(v) for k, v in scripts.items()}, sort_keys=True)
                    if todo or not built:
                        await conn.execute(sql.SQL("COMMENT ON DATABASE {} IS {}").format(
                            sql.Identifier(shadow_dbname), sql.Literal(mark)))
                    await harden_shadow(conn, shadow_dbname, role)
                    await client_names.localize_information_schema(conn)
        finally:
            await release_setup_lock(lock_conn)
    info = conninfo_to_dict(admin_dsn)
    info.update(dbname=shadow_dbname, user=role, password=password)
    return make_conninfo(**{k: str(v) for k, v in info.items() if v is not None})


DescribeResult = tuple[list[int], list[Field] | None]
ANSWERABLE_TEXT_LIMIT = 16 << 10
ANSWERABLE_CACHE_BYTES = 4 << 20


class CatalogDB:
    """Relays catalog statements to the shadow database; caches Describe results (the schema is fixed)."""

    def __init__(self, dsn: str, pool_size: int = 8, client_database: str = "") -> None:
        info = {k: str(v) for k, v in conninfo_to_dict(dsn).items() if v is not None}
        options = "-c default_transaction_read_only=on"
        if client_database:  # information_schema's *_catalog columns name it (client_names)
            options += " " + client_names.startup_option(client_database)
        startup = {"application_name": "lapras-proxy catalog", "client_encoding": "UTF8",
                   "DateStyle": "ISO, MDY", "TimeZone": "UTC", "options": options}
        self.client_database = client_database
        self.shadow_database = info.get("dbname", "")
        self.pool = BackendPool(info, startup, pool_size)
        # One user's sessions may hold at most half the pool at once, so however many slow catalog
        # statements one analyst runs, everyone else's catalog queries still find a backend.
        self.per_user = max(1, pool_size // 2)
        self._shares: dict[str, asyncio.Semaphore] = {}
        # Keyed by a digest of the text (not the text: statements reach 1 MB), bounded in bytes.
        self._describe_cache = DigestLRU(2048, 8 << 20)
        self.server_version = ""
        self._table_stats = ""  # pg_stat_user_tables without figures (table_stats), learned at open()
        self._databases = ""    # pg_database as clients see it (client_names), learned at open()
        self._answerable_texts: dict[str, str] = {}
        self._answerable_bytes = 0

    async def open(self) -> None:
        """Connect once to learn the server version (reported to clients) and fail early if unreachable."""
        conn = await self.pool.acquire()
        try:
            self.server_version = conn.params.get("server_version", "16.0").split()[0]
            res = await conn.relay(COLUMNS_SQL, [], [], [], [0], False)
            if res.error is None:
                self._table_stats = figure_free_sql([(_text(r, 0), _text(r, 1)) for r in res.rows])
            if self.client_database:
                res = await conn.relay(client_names.COLUMNS_SQL, [], [], [], [0], False)
                if res.error is None:
                    self._databases = client_names.database_row_sql(
                        [_text(r, 0) for r in res.rows], self.shadow_database, self.client_database)
        finally:
            self.pool.release(conn)

    async def close(self) -> None:
        await self.pool.close()

    async def describe(self, sql_text: str, param_oids: Sequence[int], owner: int | None = None,
                       user: str = "") -> DescribeResult:
        sql_text = self._answerable(sql_text)
        key = digest(sql_text, ",".join(map(str, param_oids)))
        hit: DescribeResult | None = self._describe_cache.get(key)
        if hit is not None:
            return hit
        res = await self._with_conn(lambda c: c.describe(sql_text, param_oids), owner, user)
        if res.error is not None:
            raise res.error
        out: DescribeResult = (res.param_oids, res.fields)
        self._describe_cache.put(key, out, 8 * len(out[0]) + sum(len(f[0]) + 120 for f in out[1] or ()))
        return out

    async def execute(self, sql_text: str, param_oids: Sequence[int], param_formats: Sequence[int],
                      params: Sequence[bytes | None], result_formats: Sequence[int],
                      describe: bool = True, owner: int | None = None, user: str = "") -> Relayed:
        """Run one statement for the client session `owner` of `user` (see BackendPool.acquire)."""
        sql_text = self._answerable(sql_text)
        share = self._shares.get(user)
        if share is None:
            share = self._shares[user] = asyncio.Semaphore(self.per_user)
        # The common case inline (no closure, no retry frame, no await before the backend's answer when the
        # user's share and the session's last backend are free): this runs for every relayed statement.
        if share._value > 0 and not share._waiters:  # noqa: SLF001 - Semaphore.acquire's own fast path
            share._value -= 1  # noqa: SLF001
        else:
            await share.acquire()
        try:
            conn = self.pool.try_acquire(owner) or await self.pool.acquire(owner)
            try:
                res = await conn.relay(sql_text, param_oids, param_formats, params, result_formats, describe)
            except PgError as exc:
                if exc.sqlstate != "08006":
                    raise
                self.pool.drop_idle()
                res = None
            finally:
                self.pool.release(conn)
            if res is None:   # the connection was lost before answering: once more, fresh (see _with_conn)
                res = await self._on_conn(lambda c: c.relay(sql_text, param_oids, param_formats, params,
                                                            result_formats, describe), owner, retries=0)
        finally:
            share.release()
        if res.error is not None:
            raise res.error
        return res

    async def reencode(self, type_oids: Sequence[int], rows: Sequence[Sequence[bytes | None]],
                       from_formats: Sequence[int], to_formats: Sequence[int], owner: int | None = None,
                       user: str = "") -> list[list[bytes | None]]:
        """Values of the given column types from one wire format to another (per column), by the catalog
        database itself: they go in as typed parameters of a VALUES list and come back as asked (every type
        the catalog returns has its input and output functions there; the proxy's codecs know a few)."""
        width = len(type_oids)
        if not rows or not width:
            return [[] for _ in rows]
        out: list[list[bytes | None]] = []
        per = max(1, REENCODE_PARAMS // width)
        for start in range(0, len(rows), per):
            chunk = rows[start:start + per]
            marks = ", ".join("(" + ", ".join(f"${r * width + c + 1}" for c in range(width)) + ")"
                              for r in range(len(chunk)))
            res = await self.execute(f"VALUES {marks}", list(type_oids) * len(chunk), list(from_formats) * len(chunk),
                                     [v for row in chunk for v in row], list(to_formats), describe=False,
                                     owner=owner, user=user)
            out.extend(data_row_values(r) for r in res.rows)
        return out

    def _answerable(self, sql_text: str) -> str:
        """The statement as the shadow database runs it: pg_stat_user_tables without figures, the client's
        database name for current_database() and in pg_database (client_names).

        Remembered per text (texts up to ANSWERABLE_TEXT_LIMIT, ANSWERABLE_CACHE_BYTES in all): a tool's
        introspection statement of a few KB is lower-cased on every run otherwise (about 3 us per KB), and
        a rewrite parses it with sqlglot (milliseconds)."""
        if not self._table_stats and not self.client_database:
            return sql_text
        known = self._answerable_texts.get(sql_text)
        if known is not None:
            return known
        out = client_names.with_client_database(sql_text, self.client_database)
        if self._table_stats and mentions(out):
            out = rewrite(out, self._table_stats)
        if self._databases and client_names.mentions_databases(out):
            out = rewrite(out, self._databases, client_names.TABLE)
        size = len(sql_text) + (len(out) if out is not sql_text else 0)
        if len(sql_text) <= ANSWERABLE_TEXT_LIMIT:
            if self._answerable_bytes + size > ANSWERABLE_CACHE_BYTES:
                self._answerable_texts.clear()
                self._answerable_bytes = 0
            self._answerable_texts[sql_text] = out
            self._answerable_bytes += size
        return out

    async def _with_conn(self, fn: Callable[[BackendConnection], Awaitable[Relayed]],
                         owner: int | None = None, user: str = "") -> Relayed:
        """Run fn on a pooled connection within the user's share; a connection lost before answering is
        retried once, fresh.

        After a restart of PostgreSQL every idle pooled connection is dead; catalog statements are
        read-only, so re-sending one on a new connection is safe.
        """
        share = self._shares.get(user)
        if share is None:
            share = self._shares[user] = asyncio.Semaphore(self.per_user)
        async with share:
            return await self._on_conn(fn, owner)

    async def _on_conn(self, fn: Callable[[BackendConnection], Awaitable[Relayed]], owner: int | None,
                       retries: int = 1) -> Relayed:
        for attempt in range(retries + 1):
            conn = await self.pool.acquire(owner)
            try:
                return await fn(conn)
            except PgError as exc:
                if exc.sqlstate != "08006" or attempt == retries:
                    raise
                self.pool.drop_idle()
            finally:
                self.pool.release(conn)
        raise AssertionError("unreachable")


REENCODE_PARAMS = 30000
"""Values re-encoded per catalog statement (the protocol allows 65535 parameters)."""


def _text(data_row: bytes, i: int) -> str:
    """Column i of a relayed DataRow message (text format, not NULL)."""
    pos = 7  # kind, length, column count
    for _ in range(i):
        (n,) = struct.unpack_from("!i", data_row, pos)
        pos += 4 + max(n, 0)
    (n,) = struct.unpack_from("!i", data_row, pos)
    return data_row[pos + 4 : pos + 4 + n].decode()


def catalog_error(exc: PgError) -> PgError:
    """Errors from the shadow database, as the client sees them (severity downgraded to ERROR)."""
    if exc.severity != "ERROR":
        return PgError(exc.sqlstate, exc.message, detail=exc.detail, hint=exc.hint, position=exc.position)
    return exc
