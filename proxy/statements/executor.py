"""Run routed statements for one session and describe them, producing wire-ready results."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Sequence
from typing import Any

from ..catalog.relay import CatalogDB, catalog_error
from ..dp.commands import DPCommand
from ..dp.service_api import QueryResult, QueryService
from ..observability.metrics import ProxyMetrics
from ..observability.querylog import finish_statement
from ..observability.stats import Stats
from ..protocol import backend, types
from ..protocol.backend import Field, data_row_values
from ..protocol.errors import PgError
from .admin import AdminControl, admin_columns, run_admin
from .commands import run_command, show_columns
from .prepare import parse_declare, parse_execute, parse_prepare
from .results import ResultSet, command, encode_rows, format_for, rezoned, session_zone
from .router import Kind, Route, Router
from .session import PreparedStatement, Session
from .session_funcs import with_client_user


def decode_params(oids: Sequence[int], formats: Sequence[int], raw: Sequence[bytes | None]) -> list[Any]:
    """Bound parameter bytes -> Python values, per format code and type oid."""
    out: list[Any] = []
    for i, value in enumerate(raw):
        if value is None:
            out.append(None)
            continue
        oid = oids[i] if i < len(oids) else 0
        if format_for(formats, i) == 0:
            out.append(types.decode_text(oid, value))
        else:
            out.append(types.decode_binary(oid, value))
    return out


_OWNERS = itertools.count(1)


class Executor:
    """Statement execution for one session: session state, DP service, or the catalog database."""

    def __init__(self, session: Session, router: Router, service: QueryService, catalog: CatalogDB,
                 metrics: ProxyMetrics | None = None, admin: AdminControl | None = None,
                 gate: Any = None, stats: Stats | None = None) -> None:
        self.session = session
        self.router = router
        self.service = service
        self.catalog = catalog
        self.metrics = metrics
        self.admin = admin
        # The server's PAUSE gate: `async with gate:` around every statement that reaches the DP service or
        # the catalog database (waits while paused, counted while running). None: never paused.
        self.gate = gate
        self.stats = stats
        self.statements = 0   # statements this session ran (SHOW CLIENTS)
        self._last_dp: QueryResult | None = None
        # Pooled catalog backends remember which session used them last (reset before another one does).
        self.catalog_owner = next(_OWNERS)

    # -- describe (never runs a DP query, never spends budget) ---------------------------------------

    async def describe_statement(self, stmt: PreparedStatement) -> tuple[list[int], list[Field] | None]:
        if stmt.described is not None:
            return stmt.described
        route = stmt.route
        if route.kind is Kind.REFUSED:
            assert route.error is not None
            raise route.error
        if route.kind is Kind.DP:
            assert route.dp is not None
            oids, cols = self.service.describe(route.dp, stmt.param_oids, self.session.settings)
            out: tuple[list[int], list[Field] | None] = (
                list(oids), [backend.field(c.name, c.type_oid) for c in cols] or None)
        elif route.kind is Kind.CATALOG:
            try:
                oids, fields = await self.catalog.describe(self._catalog_sql(route.sql), stmt.param_oids,
                                                           self.catalog_owner, self.session.user or "")
            except PgError as exc:
                raise catalog_error(exc) from None
            out = (oids, fields)
        elif route.kind is Kind.ADMIN:
            out = (list(stmt.param_oids), admin_columns(self.admin, self.session.user or "", route.command))
        elif route.kind is Kind.SESSION:
            if route.command == "EXECUTE":
                target = self.session.statements.get(parse_execute(route.sql)[0])
                if target is None:
                    raise PgError("26000", "prepared statement does not exist")
                return list(stmt.param_oids), (await self.describe_statement(target))[1]
            out = (list(stmt.param_oids), show_columns(self.session, route.sql))
            if route.command == "FETCH":
                return out   # depends on the cursor, which may change
        else:
            out = (list(stmt.param_oids), None)
        stmt.described = out
        return out

    def _catalog_sql(self, sql: str) -> str:
        """The statement as the catalog database runs it: the client's own user name in a SELECT of session
        functions among others (``session_funcs.with_client_user``; the relay writes the database's)."""
        return with_client_user(sql, self.session.user or "")

    async def param_oids(self, stmt: PreparedStatement, nparams: int) -> list[int]:
        """Parameter types for decoding: the client's, completed by Describe when it left some unknown."""
        oids = stmt.param_oids
        if len(oids) >= nparams and all(oids[:nparams]):
            return oids
        if stmt.route.kind is Kind.DP:
            described, _ = await self.describe_statement(stmt)
            return described
        return oids

    # -- execute ---------------------------------------------------------------------------------------

    async def run(self, route: Route, *, param_oids: Sequence[int] = (), param_formats: Sequence[int] = (),
                  params: Sequence[bytes | None] = (), result_formats: Sequence[int] = (),
                  decoded: Sequence[Any] | None = None, with_description: bool = True) -> ResultSet:
        """Execute one statement; `with_description` asks the catalog for the RowDescription too.

        Every statement ends in exactly one query-log line and one metrics observation."""
        started = time.perf_counter()
        self._last_dp = None
        try:
            res = await self._run(route, param_oids=param_oids, param_formats=param_formats, params=params,
                                  result_formats=result_formats, decoded=decoded,
                                  with_description=with_description)
        except asyncio.CancelledError:
            self._finish(route, started, "cancelled", "57014")
            raise
        except Exception as exc:
            state = getattr(exc, "sqlstate", None) or "XX000"
            self._finish(route, started, "error" if state == "XX000" else "refused", state)
            raise
        self._finish(route, started, None, None)
        return res

    def _finish(self, route: Route, started: float, outcome: str | None, sqlstate: str | None) -> None:
        dp = self._last_dp
        cost = (dp.cost if dp is not None else None) or {}
        if outcome is None:
            outcome = (dp.outcome or "answered") if dp is not None else "metadata"
        self.statements += 1
        if self.stats is not None:
            self.stats.record(self.session.user or "", route.kind.value, outcome, time.perf_counter() - started)
        finish_statement(self.metrics, self.session.user or "", outcome, started,
                         query_keys=dp.query_keys if dp is not None else (), sqlstate=sqlstate,
                         mu=cost.get("mu"), epsilon=cost.get("eps"), delta=cost.get("delta"),
                         kind=route.kind.value)

    async def _run(self, route: Route, *, param_oids: Sequence[int] = (), param_formats: Sequence[int] = (),
                   params: Sequence[bytes | None] = (), result_formats: Sequence[int] = (),
                   decoded: Sequence[Any] | None = None, with_description: bool = True) -> ResultSet:
        self.session.check_aborted(route)
        kind = route.kind
        if kind is Kind.ADMIN:
            return await run_admin(self.admin, self.session.user or "", route.command, list(result_formats))
        gate = self.gate
        if gate is not None and (kind is Kind.DP or kind is Kind.CATALOG):
            if gate.paused:
                async with gate:
                    return await self._run_gated(route, param_oids=param_oids, param_formats=param_formats,
                                                 params=params, result_formats=result_formats, decoded=decoded,
                                                 with_description=with_description)
            gate.enter()   # not paused: no await (this runs for every relayed catalog statement)
            try:
                return await self._run_gated(route, param_oids=param_oids, param_formats=param_formats,
                                             params=params, result_formats=result_formats, decoded=decoded,
                                             with_description=with_description)
            finally:
                gate.leave()
        return await self._run_gated(route, param_oids=param_oids, param_formats=param_formats, params=params,
                                     result_formats=result_formats, decoded=decoded,
                                     with_description=with_description)

    async def _run_gated(self, route: Route, *, param_oids: Sequence[int] = (), param_formats: Sequence[int] = (),
                         params: Sequence[bytes | None] = (), result_formats: Sequence[int] = (),
                         decoded: Sequence[Any] | None = None, with_description: bool = True) -> ResultSet:
        kind = route.kind
        if kind is Kind.DP:
            values = decoded if decoded is not None else decode_params(param_oids, param_formats, params)
            assert route.dp is not None
            return await self._dp(route.dp, values, result_formats, param_oids)
        if kind is Kind.CATALOG:
            try:
                res = await self.catalog.execute(self._catalog_sql(route.sql), param_oids, param_formats, params,
                                                 result_formats,
                                                 describe=with_description, owner=self.catalog_owner,
                                                 user=self.session.user or "")
            except PgError as exc:
                raise catalog_error(exc) from None
            rows = res.rows
            if self.session.settings.get("timezone", "UTC") != "UTC":  # the catalog's backends print UTC
                rows = rezoned(res.fields, rows, result_formats, session_zone(self.session.get("timezone")))
            return ResultSet(res.fields, rows, res.tag, list(result_formats), res.notices)
        if kind is Kind.SESSION:
            if route.command == "DECLARE":
                return await self._declare(route, param_oids, param_formats, params)
            if route.command == "PREPARE":
                return self._prepare(route)
            if route.command in ("EXECUTE", "EXPLAIN EXECUTE"):
                return await self._execute_prepared(route, result_formats)
            done = run_command(self.session, route, list(result_formats))
            if route.command == "FETCH" and done.fields and result_formats and any(
                    format_for(result_formats, i) != format_for(done.formats, i) for i in range(len(done.fields))):
                return await self._reencode(done, result_formats)
            return done
        if kind is Kind.EMPTY:
            return command("")
        assert route.error is not None
        raise route.error

    async def _reencode(self, res: ResultSet, formats: Sequence[int]) -> ResultSet:
        """A FETCH from a catalog cursor in the formats its Bind asks for (psycopg's binary named cursors):
        the DECLARE's rows (the values it saw) re-encoded by the catalog database, in their own types."""
        fields = res.fields or []
        cols = [i for i in range(len(fields)) if format_for(formats, i) != format_for(res.formats, i)]
        rows = [data_row_values(r) for r in res.rows]
        try:
            converted = await self.catalog.reencode(
                [fields[i][3] for i in cols], [[row[i] for i in cols] for row in rows],
                [format_for(res.formats, i) for i in cols], [format_for(formats, i) for i in cols],
                self.catalog_owner, self.session.user or "")
        except PgError as exc:
            raise catalog_error(exc) from None
        for row, new in zip(rows, converted, strict=True):
            for i, v in zip(cols, new, strict=True):
                row[i] = v
        out = [format_for(formats, i) for i in range(len(fields))]
        return ResultSet(res.fields, [backend.data_row(r) for r in rows], res.tag, out, res.notices)

    async def _dp(self, dp: DPCommand, values: Sequence[Any], result_formats: Sequence[int],
                  param_oids: Sequence[int] = ()) -> ResultSet:
        s = self.session
        result = await self.service.execute(dp, values, s.user, s.settings, param_oids)
        self._last_dp = result
        fields = [backend.field(c.name, c.type_oid) for c in result.columns]
        rows = encode_rows(fields, result.rows, result_formats, session_zone(s.get("timezone")))
        notices = [backend.notice_response(n) for n in result.notices]
        return ResultSet(fields or None, rows, result.command_tag, list(result_formats), notices)

    def _prepare(self, route: Route) -> ResultSet:
        name, oids, body = parse_prepare(route.sql)
        if name in self.session.statements:
            raise PgError("42P05", f"prepared statement \"{name}\" already exists")
        inner = self.router.route(body)
        if inner.kind is Kind.REFUSED:
            assert inner.error is not None
            raise inner.error
        if inner.kind is not Kind.DP and inner.kind is not Kind.CATALOG:
            raise PgError("0A000", "PREPARE supports SELECT statements only")
        self.session.statements[name] = PreparedStatement(name, body, inner, oids)
        return command("PREPARE")

    async def _execute_prepared(self, route: Route, result_formats: Sequence[int]) -> ResultSet:
        name, args = parse_execute(route.sql)
        stmt = self.session.statements.get(name)
        if stmt is None:
            raise PgError("26000", f"prepared statement \"{name}\" does not exist")
        raw = [None if a is None else a.encode("utf-8") for a in args]
        decoded = None
        if stmt.route.kind is Kind.DP:
            oids = await self.param_oids(stmt, len(raw))
            decoded = decode_params(oids, [], raw)
        # EXPLAIN EXECUTE name(args): EXPLAIN of the statement's text with its arguments bound, as PostgreSQL.
        target = self.router.route("EXPLAIN " + stmt.sql) if route.command == "EXPLAIN EXECUTE" else stmt.route
        return await self._run(target, param_oids=stmt.param_oids, params=raw, decoded=decoded,
                               result_formats=result_formats)

    async def _declare(self, route: Route, param_oids: Sequence[int] = (), param_formats: Sequence[int] = (),
                       params: Sequence[bytes | None] = ()) -> ResultSet:
        """DECLARE runs its query at once (bound with the DECLARE's own parameters: psycopg's named cursors
        send them so) and keeps the rows for FETCH."""
        name, binary, hold, query = parse_declare(route.sql)
        inner = self.router.route(query)
        if inner.kind not in (Kind.DP, Kind.CATALOG, Kind.REFUSED):
            raise PgError("42601", "DECLARE CURSOR needs a SELECT or VALUES query")
        if name in self.session.cursors:
            raise PgError("42P03", f"cursor \"{name}\" already exists")
        if not hold and self.session.tx == "I":
            raise PgError("25P01", "DECLARE CURSOR can only be used in transaction blocks")
        decoded = None
        if inner.kind is Kind.DP and params:
            oids = await self.param_oids(PreparedStatement("", query, inner, list(param_oids)), len(params))
            decoded = decode_params(oids, param_formats, params)
        result = await self._run(inner, param_oids=param_oids, param_formats=param_formats, params=params,
                                 decoded=decoded, result_formats=[1] if binary else [])
        answer = self._last_dp if inner.kind is Kind.DP else None
        self.session.add_cursor(name, result, hold, values=None if answer is None else list(answer.rows))
        return command("DECLARE CURSOR")
