"""Answer one session's frontend messages (simple Query, Parse/Bind/Describe/Execute/Close/Sync).

The conversation turns each event from `proxy.protocol.connection.ServerConnection` into reply bytes
appended to `out`; it never touches a socket, so a test drives it with bytes alone. The connection driver
(`proxy.server.listener`) owns everything that needs the event loop or the network: reading, writing and
back-pressure, idle and authentication timeouts, cancel requests. It hands the conversation two hooks:
`guard`, which runs a statement under the statement timeout and cancel, and `admit`, the per-user rate
limit. This is the split asyncpg makes between its core protocol and its driver.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from ..protocol import backend
from ..protocol.connection import ServerConnection
from ..protocol.errors import PgError, error_fields
from ..protocol.frontend import (
    Bind,
    Close,
    ConnectionFailed,
    Describe,
    Execute,
    Flush,
    FunctionCall,
    Parse,
    Query,
    Sync,
    Terminate,
)
from ..statements.executor import Executor, decode_params
from ..statements.results import ResultSet
from ..statements.router import Kind, Router
from ..statements.session import Portal, PreparedStatement, Session
from ..statements.sqltext import split_statements

log = logging.getLogger("lapras.server")

Guard = Callable[[Awaitable[ResultSet]], Awaitable[ResultSet]]


async def _unguarded(coro: Awaitable[ResultSet]) -> ResultSet:
    return await coro


def _admit_all() -> None:
    return None


class Conversation:
    """The message handling of one session after authentication; replies accumulate in `out`."""

    def __init__(self, conn: ServerConnection, session: Session, executor: Executor, router: Router, *,
                 out: list[bytes] | None = None, guard: Guard = _unguarded,
                 admit: Callable[[], None] = _admit_all) -> None:
        self.conn = conn
        self.session = session
        self.executor = executor
        self.router = router
        self.out: list[bytes] = out if out is not None else []
        self._guard = guard
        self._admit = admit

    async def handle(self, ev: object) -> bool:
        """Answer one event; False when the connection must end (Terminate, a fatal error)."""
        conn = self.conn
        try:
            if isinstance(ev, Execute):
                await self._execute(ev)
            elif isinstance(ev, Bind):
                await self._bind(ev)
            elif isinstance(ev, Sync):
                self._sync()
            elif isinstance(ev, Parse):
                self._parse(ev)
            elif isinstance(ev, Describe):
                await self._describe(ev)
            elif isinstance(ev, Query):
                await self._simple_query(ev.sql)
            elif isinstance(ev, Close):
                self._close(ev)
            elif isinstance(ev, Flush):
                pass   # the driver sends what is buffered; nothing to answer
            elif isinstance(ev, FunctionCall):
                self.out.append(conn.error(PgError(
                    "0A000", "the fast-path function call interface is not supported")))
                self.out.append(conn.ready_for_query())
            elif isinstance(ev, ConnectionFailed):
                self.out.append(conn.fatal(ev.sqlstate, ev.message))
                return False
            elif isinstance(ev, Terminate):
                return False
            else:
                self.out.append(conn.fatal("08P01", "unexpected message"))
                return False
        except PgError as exc:
            self._report()
            self.out.append(conn.error(exc))
            if conn.closed:
                return False
        except Exception as exc:
            err = error_fields(exc)
            if err.sqlstate == "XX000":
                log.exception("statement failed")
            self.out.append(conn.error(err))
        return True

    def _send_result(self, res: ResultSet, with_description: bool) -> None:
        out = self.out
        if res.notices:
            out.extend(res.notices)
        if with_description and res.fields is not None:
            out.append(res.row_description())
        if res.rows:
            out.extend(res.rows)
        out.append(backend.command_complete(res.tag))

    def _report(self) -> None:
        s = self.session
        if s.reported:
            self.out.extend(s.reported)
            s.reported.clear()

    async def _simple_query(self, sql: str) -> None:
        router = self.router
        try:
            statements = split_statements(sql)
            if not statements:
                self.out.append(backend.EMPTY_QUERY)
            for text in statements:
                route = router.route(text)
                if route.kind is not Kind.SESSION and route.kind is not Kind.ADMIN:
                    self._admit()
                res = await self._guard(self.executor.run(route))
                self._report()
                self._send_result(res, True)
                self.session.implicit_commit()
        except PgError as exc:
            self._report()
            self.out.append(self.conn.error(exc))
        except Exception as exc:
            err = error_fields(exc)
            if err.sqlstate == "XX000":
                log.exception("statement failed")
            self.out.append(self.conn.error(err))
        self.out.append(self.conn.ready_for_query())

    def _parse(self, ev: Parse) -> None:
        s = self.session
        if ev.name and ev.name in s.statements:
            raise PgError("42P05", f"prepared statement \"{ev.name}\" already exists")
        parts = split_statements(ev.sql)
        if len(parts) > 1:
            raise PgError("42601", "cannot insert multiple commands into a prepared statement")
        route = self.router.route(parts[0] if parts else "")
        if route.kind is Kind.REFUSED:
            assert route.error is not None
            raise route.error
        s.check_aborted(route)
        s.statements[ev.name] = PreparedStatement(ev.name, ev.sql, route, list(ev.param_oids))
        self.out.append(backend.PARSE_COMPLETE)

    async def _bind(self, ev: Bind) -> None:
        s = self.session
        stmt = s.statements.get(ev.statement)
        if stmt is None:
            raise PgError("26000", f"prepared statement \"{ev.statement}\" does not exist")
        if ev.portal and ev.portal in s.portals:
            raise PgError("42P03", f"cursor \"{ev.portal}\" already exists")
        s.check_aborted(stmt.route)
        portal = Portal(ev.portal, stmt, ev.params, ev.param_formats, ev.result_formats)
        if stmt.route.kind is Kind.DP:
            # Decode now so that a bad parameter fails at Bind, as PostgreSQL does.
            oids = await self.executor.param_oids(stmt, len(ev.params))
            portal.decoded = decode_params(oids, ev.param_formats, ev.params)
        s.portals[ev.portal] = portal
        self.out.append(backend.BIND_COMPLETE)

    async def _describe(self, ev: Describe) -> None:
        s = self.session
        if ev.kind == "S":
            stmt = s.statements.get(ev.name)
            if stmt is None:
                raise PgError("26000", f"prepared statement \"{ev.name}\" does not exist")
            oids, fields = await self.executor.describe_statement(stmt)
            self.out.append(backend.parameter_description(oids))
            self.out.append(backend.NO_DATA if fields is None else backend.row_description(fields))
            return
        portal = s.portals.get(ev.name)
        if portal is None:
            cursor = s.cursors.get(ev.name)
            if cursor is not None:
                # A cursor from DECLARE is a portal too (psycopg's named cursors Describe it by name).
                self.out.append(backend.NO_DATA if cursor.result.fields is None else cursor.result.row_description())
                return
            raise PgError("34000", f"portal \"{ev.name}\" does not exist")
        if portal.result is not None:
            fields = portal.result.fields
        else:
            _, fields = await self.executor.describe_statement(portal.statement)
        self.out.append(backend.NO_DATA if fields is None
                        else backend.row_description(fields, portal.result_formats))

    async def _execute(self, ev: Execute) -> None:
        s = self.session
        portal = s.portals.get(ev.portal)
        if portal is None:
            raise PgError("34000", f"portal \"{ev.portal}\" does not exist")
        if portal.result is None:
            stmt = portal.statement
            route = stmt.route
            if route.kind is Kind.EMPTY:
                self.out.append(backend.EMPTY_QUERY)
                return
            if route.kind is not Kind.SESSION and route.kind is not Kind.ADMIN:
                self._admit()
            portal.result = await self._guard(self.executor.run(
                route, param_oids=stmt.param_oids, param_formats=portal.param_formats, params=portal.params,
                result_formats=portal.result_formats, decoded=portal.decoded, with_description=False))
            self._report()
        res = portal.result
        rows = res.rows
        start = portal.position
        if res.notices and start == 0:
            self.out.extend(res.notices)
        if ev.max_rows and start + ev.max_rows < len(rows):
            self.out.extend(rows[start:start + ev.max_rows])
            portal.position = start + ev.max_rows
            self.out.append(backend.PORTAL_SUSPENDED)
            return
        self.out.extend(rows[start:] if start else rows)
        portal.position = len(rows)
        tag = res.tag
        if start and tag.startswith("SELECT "):
            tag = f"SELECT {len(rows) - start}"
        self.out.append(backend.command_complete(tag))

    def _close(self, ev: Close) -> None:
        s = self.session
        if ev.kind == "S":
            s.statements.pop(ev.name, None)
        else:
            s.portals.pop(ev.name, None)
        self.out.append(backend.CLOSE_COMPLETE)

    def _sync(self) -> None:
        s = self.session
        if s.tx == "I":
            # Outside a transaction block, Sync ends the implicit transaction: portals go away.
            if s.portals:
                s.portals.clear()
            s.implicit_commit()
        self._report()
        self.out.append(self.conn.ready_for_query())


