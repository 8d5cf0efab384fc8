"""Wire the product together: upstream (embedded or DSN) -> tables -> catalog -> engine -> server.

`serve` is what `lapras-proxy serve` runs. It owns process-level concerns only: start-up order, the
ready line, signals, worker processes, and stopping the embedded database on the way out.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict

from lapras.errors import LedgerError, SettingsDiffer
from parser.model.schema import Catalog
from pgcore.identifiers import display_ident

from ..config import Config, parse_listen
from ..config.stored import HINT, agree_with_ledger
from ..upstream.demo_data import ensure_table, table_exists
from ..upstream.embedded import EmbeddedPostgres
from ..upstream.events_data import ensure_events_table

log = logging.getLogger("lapras.app")

CATALOG_DB_SUFFIX = "_lapras_catalog"
WORKER_STOP_GRACE_S = 10.0
"""A stopping worker's time to close its sessions before it exits regardless (the supervisor waits longer)."""
TASK_END_S = 5.0
"""How long a stopping server waits for its other tasks to end once cancelled."""


class StartupError(RuntimeError):
    """The proxy cannot start; the message tells the operator what to fix."""


@dataclass
class Upstream:
    """Where the protected data and the ledger live."""

    dsn: str                       # database holding the protected tables and the `lapras` schema
    admin_dsn: str                 # a database on the same cluster to create the catalog database from
    embedded: EmbeddedPostgres | None = None


def _ensure_database(admin_dsn: str, name: str) -> None:
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone() is None:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))


def open_upstream(cfg: Config, state_dir: Path, data: dict[str, Path] | None = None,
                  start: bool = True, reload_data: bool = False, serving: bool = False) -> Upstream:
    """Start (or reuse) the embedded PostgreSQL, or check the configured upstream.

    ``data``: CSV files for protected tables of the embedded database. A table that exists already is
    replaced by its file with ``reload_data``; without it the file is refused rather than silently
    ignored. A failure after the embedded cluster was started here stops it again (nothing is left
    running). ``serving``: for `serve`, whose catalog set-up needs the configured upstream role to be a
    superuser (operator commands such as whatif may read a replica as any role)."""
    if cfg.upstream_dsn:
        try:
            with psycopg.connect(cfg.upstream_dsn, connect_timeout=10) as conn:
                missing = [t.qualified_name for t in cfg.catalog.tables if not table_exists(conn, t)]
                role, superuser = conn.execute(
                    "SELECT current_user, rolsuper FROM pg_catalog.pg_roles WHERE rolname = current_user").fetchone() \
                    or ("", False)
        except psycopg.Error as exc:
            raise StartupError(f"cannot connect to upstream.dsn: {exc}".strip()) from None
        if serving and not superuser:
            # Checked here: the set-up would otherwise stop half-way on "permission denied for schema
            # information_schema", and a non-superuser's REVOKE on system functions only warns.
            raise StartupError(f"upstream.dsn connects as role {display_ident(role)}, which is not a superuser: the "
                               "proxy sets up its schema-only catalog database (information_schema's views "
                               "redefined there, statistics and file functions revoked from PUBLIC) and its "
                               "reader role, which PostgreSQL allows a superuser only; connect as a superuser "
                               f"role in {cfg.path}")
        if missing:
            raise StartupError(f"the upstream database has no table {', '.join(missing)}; "
                               f"create it or fix [tables] in {cfg.path}")
        _check_columns(cfg, cfg.upstream_dsn)
        return Upstream(dsn=cfg.upstream_dsn, admin_dsn=cfg.upstream_dsn)
    pg = EmbeddedPostgres(state_dir)
    try:
        if start:
            pg.start()
        elif not pg.is_running():
            raise StartupError(f"no embedded PostgreSQL is running under {state_dir} (start `lapras-proxy serve`)")
        else:
            pg.claim()
        _ensure_database(pg.dsn(), cfg.server.database)
        dsn = pg.dsn(cfg.server.database)
        _fill_tables(cfg, dsn, data or {}, reload_data)
        _check_columns(cfg, dsn)
    except BaseException:
        pg.release()
        raise
    return Upstream(dsn=dsn, admin_dsn=pg.dsn(), embedded=pg)


RELOAD_FLAG = "--reload-data"


def _fill_tables(cfg: Config, dsn: str, data: dict[str, Path], reload_data: bool) -> None:
    """Create missing protected tables of the embedded database (from --data, else generated rows); with
    ``reload_data`` replace those given a file. A file for a table that exists is refused otherwise: the
    user would measure the old rows believing they measure the file."""
    from ..upstream.demo_data import DataLoadError

    with psycopg.connect(dsn) as conn:
        present = {t.name for t in cfg.catalog.tables if table_exists(conn, t)}
    stale = [t for t in cfg.catalog.tables if t.name in data and t.name in present]
    if stale and not reload_data:
        names = ", ".join(t.qualified_name for t in stale)
        files = " ".join(f"--data {t.name}={data[t.name]}" for t in stale)
        raise StartupError(f"table {names} already exists in the embedded database, so {files} would not be "
                           f"loaded; add {RELOAD_FLAG} to replace the table with the file's rows, or leave "
                           "out --data to keep the rows it has")
    for table in cfg.catalog.tables:
        source = data.get(table.name)
        load = cfg.loads.get(table.name, _no_load())
        if source is None and load.generator == "events":
            if ensure_events_table(dsn, schema=table.schema, name=table.name):
                print(f"created table {table.qualified_name} with a generated event log", file=sys.stderr)
            continue
        replace_it = reload_data and source is not None and table.name in present
        try:
            created = ensure_table(dsn, table, load, source, replace=replace_it)
        except DataLoadError as exc:
            raise StartupError(str(exc)) from None
        except psycopg.errors.DependentObjectsStillExist as exc:
            raise StartupError(f"cannot replace table {table.qualified_name}: other objects depend on it "
                               f"({str(exc).strip().splitlines()[-1]}); drop them first") from None
        if created:
            what = f"from {source}" if source else "with generated demo rows"
            print(f"{'replaced' if replace_it else 'created'} table {table.qualified_name} {what}", file=sys.stderr)
    if reload_data and any(t.name in present for t in cfg.catalog.tables if t.name in data):
        print("lapras-proxy: answers already released in the current epoch keep their values (replayed); "
              "`lapras-proxy epoch --new` starts an epoch answered from the new rows", file=sys.stderr)


def _check_columns(cfg: Config, dsn: str) -> None:
    """Every declared column and privacy unit exists in its table, with a type of the declared kind, or the
    proxy does not start: a misspelt or mistyped column would otherwise fail every statement over it with
    XX000, the reason only in the log.
    Names are compared as stored (bound values)."""
    problems = []
    with psycopg.connect(dsn, connect_timeout=10) as conn:
        for t in cfg.catalog.tables:
            # The stored type's category (of a domain's base type): N numeric, S string, D date/time...
            stored = {r[0]: (r[1], r[2]) for r in conn.execute(
                "SELECT a.attname, format_type(a.atttypid, a.atttypmod), COALESCE(bt.typcategory, ty.typcategory) "
                "FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_class c ON c.oid = a.attrelid "
                "JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
                "JOIN pg_catalog.pg_type ty ON ty.oid = a.atttypid "
                "LEFT JOIN pg_catalog.pg_type bt ON ty.typtype = 'd' AND bt.oid = ty.typbasetype "
                "WHERE n.nspname = %s AND c.relname = %s AND a.attnum > 0 AND NOT a.attisdropped",
                (t.schema, t.name)).fetchall()}
            declared = [a.name for a in t.attributes] + ([t.privacy_unit] if t.privacy_unit else [])
            absent = [n for n in declared if n not in stored]
            if absent:
                names = ", ".join(display_ident(n) for n in absent)
                have = sorted(display_ident(n) for n in stored)
                more = f" and {len(have) - 20} more" if len(have) > 20 else ""
                problems.append(f"table {t.qualified_name} has no column {names} (it has "
                                f"{', '.join(have[:20]) or 'no columns'}{more})")
            problems += _type_mismatches(conn, t, stored)
    if problems:
        raise StartupError("; ".join(problems) + f"; fix [tables] in {cfg.path} (names as stored: "
                           "case and spaces count) or the table")


_SAME_KIND = {"E": "S"}
"""Stored categories read as another: an enum column compares with text literals as a text column does."""


def _type_mismatches(conn: psycopg.Connection[Any], table: Any, stored: dict[str, tuple[str, str]]) -> list[str]:
    """Declared columns whose type is of another kind than the stored one (an int declared over a text
    column): every statement over them would fail upstream with XX000, the reason only in the log."""
    out = []
    for a in table.attributes:
        if a.name not in stored:
            continue
        stored_type, category = stored[a.name]
        row = conn.execute("SELECT typcategory FROM pg_catalog.pg_type WHERE oid = %s::regtype",
                           (a.sql_type,)).fetchone()
        if row is None or _SAME_KIND.get(category, category) == _SAME_KIND.get(row[0], row[0]):
            continue
        out.append(f"column {display_ident(a.name)} of table {table.qualified_name} is {stored_type} upstream "
                   f"but declared {a.domain.type_name}: declare a type of its kind "
                   "(docs/config.md, [tables.NAME.columns])")
    return out


def _no_load() -> Any:
    from ..config import LoadSettings

    return LoadSettings()


def shadow_name(upstream_dsn: str) -> str:
    """The catalog database's name, one per upstream database (proxies of other databases on the same
    cluster keep their own); short enough for its reader role name to fit PostgreSQL's 63 bytes."""
    db = str(conninfo_to_dict(upstream_dsn).get("dbname") or "postgres")
    name = db + CATALOG_DB_SUFFIX
    if len(name) > 50:
        name = db[:30] + "_" + hashlib.sha256(db.encode()).hexdigest()[:8] + CATALOG_DB_SUFFIX
    return name


def _dbname(dsn: str) -> str:
    return str(conninfo_to_dict(dsn).get("dbname") or "postgres")


def _psql_line(cfg: Config, host: str, port: int | str) -> str:
    user = cfg.users[0].name if cfg.users else "analyst"
    return f'psql "host={host} port={port} user={user} dbname={cfg.server.database}"'


async def _start_observability(cfg: Config, service: Any, worker: int) -> Any:
    """Query log and Prometheus endpoint, as configured; returns the metrics (None when off)."""
    from ..observability import querylog
    from ..observability.metrics import ProxyMetrics, start_metrics_server

    if cfg.server.query_log:
        querylog.configure(None if cfg.server.query_log == "stderr" else cfg.server.query_log)
    if not cfg.server.metrics_listen:
        return None
    metrics = ProxyMetrics()
    host, port = parse_listen(cfg.server.metrics_listen)
    # Each worker serves its own figures: a shared port would scatter scrapes across processes.
    await start_metrics_server(metrics.registry, host, port + worker)
    return metrics


async def _run_server(cfg: Config, upstream: Upstream, ready_line: str | None,
                      reuse_port: bool, worker: int = 0, cancel_dir: Path | None = None,
                      state_dir: Path | None = None, t0: float | None = None,
                      stop_grace: float | None = None, file_listen: str | None = None) -> None:
    from ..catalog.hardening import SetupLockTimeout
    from ..catalog.relay import ensure_shadow
    from ..dp.service import DPService
    from ..server.listener import ProxyServer
    from ..upstream.value_lists import ValueListError, resolve_value_lists
    from .public_tables import follow_public_tables, public_table_warnings, with_public_tables

    try:
        # Value lists declared with values_from are read from their public tables before anything plans.
        cfg = await asyncio.to_thread(resolve_value_lists, cfg, upstream.dsn)
    except ValueListError as exc:
        raise StartupError(str(exc)) from None
    # Public tables are read whole before anything plans (joins) or the shadow copies them (SELECT, \d).
    cfg = replace(cfg, catalog=await asyncio.to_thread(with_public_tables, cfg.catalog, upstream.dsn))
    for warning in public_table_warnings(cfg.catalog):
        log.warning("%s", warning)
    from .collation import attach_collation

    try:  # text order as the database sorts (parser.semantics.collation)
        cfg = await asyncio.to_thread(attach_collation, cfg, upstream.dsn)
    except psycopg.Error as exc:
        raise StartupError(f"cannot read the upstream database's collation: {str(exc).strip()}") from None
    try:
        catalog_dsn = await ensure_shadow(upstream.admin_dsn, shadow_name(upstream.dsn), cfg.catalog,
                                          protected_db=_dbname(upstream.dsn))
    except SetupLockTimeout as exc:
        raise StartupError(str(exc)) from None
    service = await asyncio.to_thread(DPService.open, cfg, upstream.dsn, state_dir)
    metrics = await _start_observability(cfg, service, worker)
    from ..server.admin_control import ServerAdmin, save_running_config
    from ..server.cancel_relay import CancelRelay

    relay = CancelRelay(worker, cancel_dir) if cancel_dir is not None else None
    server = ProxyServer(cfg, service, catalog_dsn, reuse_port=reuse_port, metrics=metrics, cancel_relay=relay)
    stop = asyncio.Event()
    server.admin = ServerAdmin(server, worker=worker, is_worker=reuse_port, stop=stop.set, state_dir=state_dir,
                               file_listen=file_listen)
    await server.start()
    figures = None
    if cancel_dir is not None:   # workers: SHOW STATS/CLIENTS/SERVERS gather every worker's rows
        from ..server.worker_figures import WorkerFigures

        figures = WorkerFigures(worker, cancel_dir)
        await figures.start(server.admin.show_own, server.admin.act_own)
        server.admin.peers = figures
    if worker == 0:
        save_running_config(state_dir, cfg)

    async def show_catalog(catalog: Catalog) -> None:
        # The shadow catalog's CHECK lists are the current epoch's values_from lists (psql's \d shows them):
        # only tables whose DDL changed are rebuilt.
        await ensure_shadow(upstream.admin_dsn, shadow_name(upstream.dsn), catalog, protected_db=_dbname(upstream.dsn))

    sync = asyncio.create_task(service.sync_forever(metrics=metrics, on_catalog=show_catalog))
    refresh = asyncio.create_task(follow_public_tables(service.engine, upstream.dsn)) if cfg.catalog.public else None
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    admin = server.admin
    reloads: set[asyncio.Task[None]] = set()

    def on_sighup() -> None:
        # SIGHUP re-reads config.toml as the console's RELOAD does (the result goes to the log).
        task = loop.create_task(admin.reload_on_signal())
        reloads.add(task)
        task.add_done_callback(reloads.discard)

    loop.add_signal_handler(signal.SIGHUP, on_sighup)
    if ready_line:
        # The real time to accepting connections; P's release may still be on its way (it does not block).
        report = await asyncio.to_thread(service.engine.budget_report)
        from ..config.reload import epoch_difference_lines

        # Privacy settings are fixed per epoch in the ledger: say which of the file's wait for the next one.
        for line in epoch_difference_lines(report.get("current") or {}, cfg, admin.next_epoch_text()):
            print(f"lapras-proxy: note: {line}", file=sys.stderr, flush=True)
        pending = (report.get("current") or {}).get("matrix_mechanism") == "pending"
        elapsed = time.monotonic() - t0 if t0 is not None else 0.0
        print(ready_line.format(elapsed=elapsed, port=server.port,
                                mm=" (preparing the release of P in the background)" if pending else ""),
              flush=True)
    try:
        await stop.wait()
        if stop_grace is not None:
            _exit_after(stop_grace)
    finally:
        sync.cancel()
        if refresh is not None:
            refresh.cancel()
        if figures is not None:
            await figures.close()
        await server.close()
        await asyncio.to_thread(service.close)
        if not await _end_other_tasks(TASK_END_S):
            _exit_now(None if reuse_port else upstream.embedded)  # a worker leaves the cluster to its supervisor


async def _end_other_tasks(timeout: float) -> bool:
    """Cancel every task but this one and wait up to ``timeout`` for them; False if some would not end.

    asyncio.run cancels what is left too, but waits for it without a bound: a stop once hung there for
    good (seen once, a SIGINT 0.2 s after the ready line, at load 5), so the operator's stop needs
    its own bound and the stuck task's name in the log."""
    current = asyncio.current_task()
    rest = [t for t in asyncio.all_tasks() if t is not current and not t.done()]
    for task in rest:
        task.cancel()
    if not rest:
        return True
    _, pending = await asyncio.wait(rest, timeout=timeout)
    for task in pending:
        log.warning("shutdown: task %s did not end within %.0f s of its cancellation: %r",
                    task.get_name(), timeout, task.get_coro())
    return not pending


def _exit_now(embedded: EmbeddedPostgres | None) -> None:
    """End the process at once (every spend is durable before its answer leaves, so nothing is lost),
    stopping the embedded PostgreSQL first if this process started it."""
    if embedded is not None:
        embedded.release(last_out_stops=True)
    logging.shutdown()
    sys.stdout.flush()
    os._exit(1)


def _exit_after(seconds: float) -> None:
    """End this process after ``seconds`` whatever its shutdown still waits for (a statement's exact query
    on a slow upstream, an executor thread): every spend is durable before its answer leaves, so cutting a
    stopping worker short loses nothing, and the operator's stop never hangs."""
    def _exit() -> None:
        log.warning("shutdown took over %.0f s; exiting now", seconds)
        os._exit(1)

    timer = threading.Timer(seconds, _exit)
    timer.daemon = True
    timer.start()


def _install_loop() -> None:
    try:
        import uvloop  # optional: not on Windows (pyproject), where the default loop serves

        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    except ImportError:
        pass


class _StopRequested(SystemExit):
    """SIGTERM or SIGINT before the server's own handlers are installed: unwinds start-up through its
    clean-up (the embedded cluster started so far is stopped) instead of killing the process mid-way."""


def _stop_during_startup(signum: int, _frame: object) -> None:
    raise _StopRequested(128 + signum)


def serve(cfg: Config, state_dir: Path, listen: tuple[str, int] | None = None,
          data: dict[str, Path] | None = None, workers: int = 1, reload_data: bool = False,
          settings_mode: str = "check") -> int:
    """Run the proxy until SIGINT/SIGTERM (or the admin console's SHUTDOWN); returns the exit code.
    ``settings_mode``: how the config's privacy settings meet those stored with the ledger
    (proxy.config.stored)."""
    from ..server.cancel_relay import MAX_WORKERS

    if not 1 <= workers <= MAX_WORKERS:
        print(f"lapras-proxy: --workers must be between 1 and {MAX_WORKERS}", file=sys.stderr)
        return 2
    t0 = time.monotonic()
    file_listen = cfg.server.listen if listen is not None else None   # reloads keep the flag's address
    if listen is not None:
        host = f"[{listen[0]}]" if ":" in listen[0] else listen[0]   # an IPv6 host keeps its brackets
        cfg = replace(cfg, server=replace(cfg.server, listen=f"{host}:{listen[1]}"))
    signal.signal(signal.SIGTERM, _stop_during_startup)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)   # a reload before the server runs has nothing to reload
    try:
        upstream = open_upstream(cfg, state_dir, data, reload_data=reload_data, serving=True)
    except (StartupError, OSError, psycopg.Error) as exc:
        print(f"lapras-proxy: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:  # embedded start-up failures carry their own message
        print(f"lapras-proxy: cannot start the embedded PostgreSQL: {exc}", file=sys.stderr)
        return 1
    try:
        cfg = agree_with_ledger(cfg, upstream.dsn, settings_mode)
    except (LedgerError, psycopg.Error) as exc:
        print(f"lapras-proxy: {getattr(exc, 'message', exc)}", file=sys.stderr)
        if isinstance(exc, SettingsDiffer):
            print(f"lapras-proxy: {HINT}", file=sys.stderr)
        if upstream.embedded is not None:
            upstream.embedded.release(last_out_stops=True)
        return 1
    if settings_mode == "adopt":
        print("lapras-proxy: serving with the privacy settings stored with the ledger (--adopt-stored)",
              file=sys.stderr)
    # {port} is the bound port, filled once listening (port 0 in the config asks the OS for a free one).
    psql = _psql_line(cfg, cfg.server.host, "\0").replace("{", "{{").replace("}", "}}").replace("\0", "{port}")
    ready = "lapras-proxy ready in {elapsed:.1f} s{mm}; connect with:\n  " + psql
    _install_loop()
    try:
        if workers <= 1:
            asyncio.run(_run_server(cfg, upstream, ready, reuse_port=False, state_dir=state_dir, t0=t0,
                                    file_listen=file_listen))
        else:
            if _run_workers(cfg, upstream, ready, workers, state_dir, t0, file_listen) != 0:
                print("lapras-proxy: workers kept dying; stopped (see the log above)", file=sys.stderr)
                return 1
    except StartupError as exc:
        print(f"lapras-proxy: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"lapras-proxy: cannot listen on {cfg.server.host}:{cfg.server.port}: {exc.strerror or exc}",
              file=sys.stderr)
        return 1
    except psycopg.Error as exc:
        print(f"lapras-proxy: database error during start-up: {exc}", file=sys.stderr)
        return 1
    finally:
        if upstream.embedded is not None:
            upstream.embedded.release(last_out_stops=True)
    return 0


def _run_workers(cfg: Config, upstream: Upstream, ready: str, workers: int, state_dir: Path | None = None,
                 t0: float | None = None, file_listen: str | None = None) -> int:
    """N supervised servers sharing the port with SO_REUSEPORT and one ledger in the database."""
    from .supervisor import Supervisor

    def worker(index: int, directory: Path, first: bool) -> None:
        asyncio.run(_run_server(cfg, upstream, ready if index == 0 and first else None, reuse_port=True,
                                worker=index, cancel_dir=directory, state_dir=state_dir, t0=t0,
                                stop_grace=WORKER_STOP_GRACE_S, file_listen=file_listen))

    return Supervisor(workers, worker).run()


@contextmanager
def operator_upstream(cfg: Config, state_dir: Path, data: dict[str, Path] | None = None,
                      reload_data: bool = False) -> Iterator[Upstream]:
    """The upstream for an operator command: reuses a running embedded cluster, or starts one just for
    the command and stops it afterwards (``data``: CSV files for its tables, see ``open_upstream``)."""
    running = bool(cfg.upstream_dsn) or _embedded_running(state_dir)
    upstream = open_upstream(cfg, state_dir, data, start=not running, reload_data=reload_data)
    try:
        yield upstream
    finally:
        if upstream.embedded is not None:
            upstream.embedded.release()


def budget_report(cfg: Config, state_dir: Path) -> dict[str, Any]:
    """The ledger's view of the current epoch, for `lapras-proxy budget`."""
    from ..dp.service import open_ledger_report

    with operator_upstream(cfg, state_dir) as upstream:
        return open_ledger_report(cfg, upstream.dsn)


def new_epoch(cfg: Config, state_dir: Path) -> dict[str, Any]:
    """Close the current epoch and open a new one, for `lapras-proxy epoch`."""
    from ..dp.service import start_new_epoch

    with operator_upstream(cfg, state_dir) as upstream:
        # The new epoch follows the rules stored with the ledger, whatever this config file says.
        return start_new_epoch(agree_with_ledger(cfg, upstream.dsn, "adopt"), upstream.dsn, state_dir)


def _embedded_running(state_dir: Path) -> bool:
    return EmbeddedPostgres(state_dir).is_running()
