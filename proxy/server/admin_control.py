"""The server's side of the admin console and of reloads: figures of this process, the PAUSE gate, RELOAD
(also run by SIGHUP) and SHUTDOWN. The console itself (commands, role check, rows) is
`proxy.statements.admin`; what each configuration key's change means is `proxy.config.reload`.

With `--workers N` SHOW STATS, CLIENTS and SERVERS gather every worker's rows (`worker_figures`; the
`worker` column says whose) and PAUSE/RESUME reach every worker the same way; RELOAD and SHUTDOWN reach the
supervisor, which passes them to every worker.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import ssl
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from psycopg.conninfo import conninfo_to_dict

from lapras.report import epoch_report

from ..config import Config, ConfigError, load_config
from ..config import reload as reloading
from ..config.keys import KEYS
from ..config.stored import LAPRAS_KEYS, PRIVACY_KEYS, privacy_settings
from ..dp.budget_view import timestamp
from ..dp.engine_factory import engine_settings
from ..observability import querylog
from ..observability.stats import Stats, summed
from ..observability.version import version_line
from ..protocol.errors import PgError
from .state import ServerState
from .worker_figures import FIGURES, WorkerFigures

log = logging.getLogger("lapras.admin")

RUNNING_CONFIG = "running-config.json"
"""In the state dir: the configuration text the proxy runs with, so `check-config --state-dir` can say
what a changed file would change."""


class PauseGate:
    """PAUSE holds new statements (DP and catalog) until RESUME and waits for running ones to finish; a
    held statement still ends at its statement timeout (57014) or on cancel."""

    def __init__(self) -> None:
        self._open = asyncio.Event()
        self._open.set()
        self._idle = asyncio.Event()
        self._idle.set()
        self.running = 0

    @property
    def paused(self) -> bool:
        return not self._open.is_set()

    async def __aenter__(self) -> None:
        await self._open.wait()
        self.enter()

    async def __aexit__(self, *exc: object) -> None:
        self.leave()

    def enter(self) -> None:
        """Count a statement in without waiting (callers check `paused` first: the hot path)."""
        self.running += 1
        self._idle.clear()

    def leave(self) -> None:
        self.running -= 1
        if self.running == 0:
            self._idle.set()

    def pause(self) -> None:
        self._open.clear()

    async def drained(self) -> None:
        await self._idle.wait()

    def resume(self) -> None:
        self._open.set()


def save_running_config(state_dir: Path | None, cfg: Config) -> None:
    """Record the configuration text in force (0600: it holds password hashes)."""
    if state_dir is None or cfg.path == "<config>":
        return
    try:
        text = Path(cfg.path).read_text(encoding="utf-8")
        state_dir.mkdir(parents=True, exist_ok=True)
        target = state_dir / RUNNING_CONFIG
        tmp = target.with_suffix(f".{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump({"path": str(Path(cfg.path).resolve()), "text": text, "pid": os.getpid()}, fh)
        tmp.replace(target)
    except OSError as exc:
        log.warning("could not record the running configuration in %s: %s", state_dir, exc)


class ServerAdmin:
    """The admin console's view of one proxy process (implements `proxy.statements.admin.AdminControl`)."""

    def __init__(self, server: ServerState, *, worker: int = 0, is_worker: bool = False,
                 stop: Callable[[], None] | None = None, state_dir: Path | None = None,
                 file_listen: str | None = None) -> None:
        self.server = server
        self.file_listen = file_listen   # the file's address when `serve --listen` overrode it at start
        self.worker = worker
        self.is_worker = is_worker
        self._stop = stop
        self.state_dir = state_dir
        self.stats = Stats()
        self.gate = PauseGate()
        self.pending: dict[str, str] = {}   # key -> what waits (next epoch / restart), from the last reload
        self._pending_epoch: int | None = None   # the epoch in force at that reload
        self._reloading = asyncio.Lock()
        # With workers: the other workers' figures, so that SHOW STATS/CLIENTS/SERVERS cover the whole proxy.
        self.peers: WorkerFigures | None = None
        self._resumes: set[asyncio.Task[list[int]]] = set()

    # -- role ------------------------------------------------------------------------------------------

    def is_admin(self, user: str) -> bool:
        u = self.server.config.user(user)
        return bool(u is not None and u.admin)

    # -- SHOW ------------------------------------------------------------------------------------------

    async def show(self, what: str) -> list[tuple[object, ...]]:
        if self.peers is not None and what in FIGURES:
            return await self._across_workers(what)
        return await self.show_own(what)

    async def _across_workers(self, what: str) -> list[tuple[object, ...]]:
        """This worker's rows and every other worker's (each row names its worker), in worker order; for
        STATS also the sums over the workers (worker `*`)."""
        assert self.peers is not None
        rows = await self.show_own(what)
        for theirs in await self.peers.gather(what):
            rows.extend(tuple(r) for r in theirs)
        rows.sort(key=lambda r: int(str(r[0])))   # stable: each worker's rows keep their order
        if what == "STATS":
            rows.extend(("*", *r) for r in summed([r[1:] for r in rows]))
        return rows

    async def show_own(self, what: str) -> list[tuple[object, ...]]:
        """SHOW ``what`` for this process only (what a worker answers its peers)."""
        if what == "STATS":
            return [(self.worker, *row) for row in self.stats.rows()]
        if what == "CLIENTS":
            return self._clients()
        if what == "SERVERS":
            return self._servers()
        if what == "CONFIG":
            return self._config_rows()
        if what == "VERSION":
            return [(version_line(),)]
        if what == "EPOCHS":
            return await asyncio.to_thread(self._epochs)
        raise PgError("42601", f"unknown admin command SHOW {what}")

    def _clients(self) -> list[tuple[object, ...]]:
        rows: list[tuple[object, ...]] = []
        for pid, c in sorted(self.server.sessions.items()):
            s = c.session
            state = ("active" if c.running else
                     {"T": "idle in transaction", "E": "idle in transaction (aborted)"}.get(c.conn.transaction_status, "idle"))
            host, port = c.peer
            rows.append((self.worker, pid, c.user, s.database if s else "", host, port, "on" if c.tls else "off",
                         state, timestamp(c.connected_at), timestamp(c.last_request_at) if c.last_request_at else "",
                         c.statements, (s.get("application_name") or "") if s else ""))
        return rows

    def _servers(self) -> list[tuple[object, ...]]:
        rows: list[tuple[object, ...]] = []
        cat = self.server.catalog
        in_use, idle, waiting = cat.pool.usage()
        info = cat.pool.info
        rows.append((self.worker, "catalog", info.get("dbname", ""), info.get("host", ""), cat.pool.size,
                     in_use, idle, waiting))
        ledger = getattr(getattr(self.server.service, "engine", None), "ledger", None)
        usage = getattr(ledger, "pool_usage", None)
        if usage is not None:
            size, used, free, wait = usage()
            parts = conninfo_to_dict(ledger.conninfo)  # type: ignore[union-attr]
            rows.append((self.worker, "ledger", parts.get("dbname", ""), parts.get("host", ""), size, used, free,
                         wait))
        return rows

    def _current_epoch(self) -> int | None:
        ep = getattr(getattr(self.server.service, "engine", None), "_epoch", None)
        return None if ep is None else int(ep.id)

    def _config_rows(self) -> list[tuple[object, ...]]:
        cfg = self.server.config
        if self._pending_epoch is not None and self._current_epoch() != self._pending_epoch:
            # The next epoch began: what waited for it is in force.
            self.pending = {k: v for k, v in self.pending.items() if not v.endswith("at the next epoch")}
        rows: list[tuple[object, ...]] = []
        for k in KEYS:
            if k.section not in ("server", "tls", "upstream", "privacy", "lapras"):
                continue
            value = reloading.shown(reloading.value_of(cfg, k.section, k.name))
            if k.path == "server.listen":
                value = f"{cfg.server.host}:{self.server.port}"   # the bound port (listen may ask for port 0)
            rows.append((k.path, value,
                         reloading.when_applied(k.section, k.name), self.pending.get(k.path, "")))
        for u in cfg.users:
            rows.append((f"users.{u.name}", f"auth={u.auth}" + (" admin" if u.admin else ""), reloading.LIVE,
                         self.pending.get(f"users.{u.name}", "")))
        rows.append(("tables", ", ".join(t.qualified_name for t in cfg.catalog.tables), reloading.RESTART,
                     self.pending.get("tables", "")))
        rows.append(("config_file", str(Path(cfg.path).resolve()), "", ""))
        return rows

    def _epochs(self) -> list[tuple[object, ...]]:
        ledger = getattr(getattr(self.server.service, "engine", None), "ledger", None)
        if ledger is None:
            return []
        out: list[tuple[object, ...]] = []
        for ep in ledger.epochs():
            r = epoch_report(ep)
            out.append((r["epoch"], timestamp(r["started_at"]), timestamp(r["ended_at"]), r["accounting"],
                        _num(r["budget"]["epsilon"]), _num(r["budget"]["delta"]), _num(r["spent"]["epsilon"]),
                        _num(r["spent"]["delta"]), _num(r["remaining"]["epsilon"]), r["answers_served"],
                        "yes" if r["stopped"] else "no"))
        return out

    # -- RELOAD ----------------------------------------------------------------------------------------

    def next_epoch_text(self) -> str:
        engine = getattr(self.server.service, "engine", None)
        ep = getattr(engine, "_epoch", None)
        when = engine.next_epoch_at() if engine is not None and hasattr(engine, "next_epoch_at") else None
        if ep is None:
            return ""
        if when is None:
            return (f" (epoch {ep.id + 1}; epochs are manual: `lapras-proxy epoch --new` or SELECT "
                    "lapras.new_epoch() starts it)")
        return f" (epoch {ep.id + 1}, due {timestamp(when)})"

    async def reload(self) -> tuple[list[tuple[object, ...]], list[str]]:
        """Re-read the config file and apply it; a bad file changes nothing (SQLSTATE F0000)."""
        async with self._reloading:
            changes, notes = await self._reload()
        if self.is_worker and changes:
            os.kill(os.getppid(), signal.SIGHUP)   # the supervisor passes it to every worker
        return [(c.key, c.old, c.new, c.when) for c in changes], notes

    async def reload_on_signal(self) -> None:
        try:
            async with self._reloading:
                await self._reload()
        except PgError:
            pass  # logged by _reload

    async def _reload(self) -> tuple[list[reloading.Change], list[str]]:
        running = self.server.config
        try:
            new = await asyncio.to_thread(load_config, running.path)
        except ConfigError as exc:
            log.warning("reload of %s refused, the running configuration is unchanged: %s", running.path,
                        "; ".join(exc.problems))
            raise PgError("F0000", f"{running.path}: not reloaded, the running configuration is unchanged: "
                                   + "; ".join(exc.problems)) from None
        if self.file_listen is not None and new.server.listen == self.file_listen:
            # serve --listen wins over the file's address at a reload as at start: unchanged, not pending.
            new = replace(new, server=replace(new.server, listen=running.server.listen))
        tls_context = None
        live = reloading.live_config(running, new)
        if live.tls.enabled:
            try:
                tls_context = await asyncio.to_thread(_tls_context, live)
            except (OSError, ssl.SSLError) as exc:
                raise PgError("F0000", f"{running.path}: not reloaded, the running configuration is unchanged: "
                                       f"tls: cannot load the certificate and key: {exc}") from None
        changes = reloading.diff(running, new)
        self._apply(running, live, changes, tls_context)
        stored = await asyncio.to_thread(self._store_shared_settings, live, changes)
        nxt = self.next_epoch_text()
        lines = reloading.summary(changes, nxt) + stored
        for line in lines:
            log.info("reload of %s: %s", running.path, line)
        now = sum(c.when == reloading.LIVE for c in changes)
        later = sum(c.when == reloading.NEXT_EPOCH for c in changes)
        restart = sum(c.when == reloading.RESTART for c in changes)
        notes = [f"lapras: reloaded {running.path}: {len(changes)} change(s): {now} applied now, {later} at the "
                 f"next epoch{nxt if later else ''}, {restart} need a restart"]
        return changes, notes

    def _store_shared_settings(self, live: Config, changes: list[reloading.Change]) -> list[str]:
        """A reload that changes the privacy settings proxies on one ledger must agree on stores them with
        the ledger (as ``serve --replace-stored``): the operator asked for them, and the next start or another
        proxy then compares with them instead of refusing the file this proxy now runs."""
        shared = {f"privacy.{k}" for k in PRIVACY_KEYS} | {f"lapras.{k}" for k in LAPRAS_KEYS}
        ledger = getattr(getattr(self.server.service, "engine", None), "ledger", None)
        if ledger is None or not any(c.key in shared for c in changes):
            return []
        ledger.agree_settings(privacy_settings(live), "replace")
        return ["privacy settings stored with the ledger: other proxies on it keep theirs until they reload or "
                "restart, and then must agree with these"]

    def _apply(self, running: Config, live: Config, changes: list[reloading.Change],
               tls_context: ssl.SSLContext | None) -> None:
        server = self.server
        server.apply_config(live, tls_context)
        service = server.service
        if hasattr(service, "config"):
            service.config = live
        engine_keys = {k.path for k in KEYS if k.engine}
        engine = getattr(service, "engine", None)
        if engine is not None and hasattr(engine, "update_settings") and any(c.key in engine_keys for c in changes):
            engine.update_settings(engine_settings(live))
        if live.server.query_log != running.server.query_log:
            querylog.reconfigure(live.server.query_log)
        self._pending_epoch = self._current_epoch()
        for c in changes:
            if c.when == reloading.NEXT_EPOCH:
                self.pending[c.key] = f"{c.new} at the next epoch"
            elif c.when == reloading.RESTART:
                self.pending[c.key] = f"{c.new} after a restart"
            else:
                self.pending.pop(c.key, None)
        save_running_config(self.state_dir, live)

    # -- PAUSE / RESUME / SHUTDOWN ---------------------------------------------------------------------

    async def pause(self) -> None:
        """PAUSE: this worker and, with workers, every other one (each confirms once it is drained)."""
        self.gate.pause()
        log.info("PAUSE: new statements wait; %d running", self.gate.running)
        if self.peers is not None:
            # A running statement ends by itself or at its statement timeout: wait that long for the others.
            missing = await self.peers.tell("PAUSE", self.server.config.server.statement_timeout_s + 5)
            if missing:
                log.warning("PAUSE: worker(s) %s did not confirm", ", ".join(map(str, missing)))
        await self.gate.drained()

    def resume(self) -> None:
        self.gate.resume()
        log.info("RESUME")
        if self.peers is not None:
            task = asyncio.get_running_loop().create_task(self.peers.tell("RESUME", 5.0))
            self._resumes.add(task)
            task.add_done_callback(self._resumes.discard)

    async def act_own(self, what: str) -> None:
        """A peer's PAUSE or RESUME, for this worker only."""
        if what == "PAUSE":
            self.gate.pause()
            log.info("PAUSE (from another worker): new statements wait; %d running", self.gate.running)
            await self.gate.drained()
        else:
            self.gate.resume()
            log.info("RESUME (from another worker)")

    def shutdown(self) -> None:
        log.info("SHUTDOWN requested through the admin console")
        if self.is_worker:
            os.kill(os.getppid(), signal.SIGTERM)   # the supervisor stops every worker
        elif self._stop is not None:
            # After this command's reply is sent: the stop closes every session.
            asyncio.get_running_loop().call_later(0.05, self._stop)


def _tls_context(cfg: Config) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(cfg.tls.cert, cfg.tls.key)
    return ctx


def _num(v: Any) -> str:
    return f"{v:.6g}" if isinstance(v, float) else str(v)

