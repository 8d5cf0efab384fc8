"""The protocol conversation driven with bytes alone: frontend bytes in, backend bytes out, no socket.

The conversation runs on the real router, session and executor with the in-test QueryService; only the
catalog relay is absent (no statement here reaches it), so these tests need neither PostgreSQL nor a port.
"""

from __future__ import annotations

import asyncio
import struct

import pytest

from proxy.catalog.relay import CatalogDB
from proxy.conversation.core import Conversation
from proxy.protocol.connection import NEED_DATA, ServerConnection
from proxy.protocol.errors import PgError
from proxy.protocol.frontend import StartupReceived
from proxy.statements.executor import Executor
from proxy.statements.results import ResultSet
from proxy.statements.router import Router
from proxy.statements.session import Session
from tests.fixtures import pgwire_frames as wire
from tests.fixtures.local_proxy import proxy_test_config
from tests.fixtures.proxy_stub_service import StubService


class Talk:
    """A conversation plus the byte plumbing a driver would do, minus the socket."""

    def __init__(self, **hooks: object) -> None:
        config = proxy_test_config()
        self.conn = ServerConnection()
        self.conn.receive_data(wire.startup())
        ev = self.conn.next_event()
        assert isinstance(ev, StartupReceived)
        self.conn.authenticated()
        self.service = StubService()
        self.session = Session.start(self.conn, "analyst", "adult", ev.params, "16.0", False)
        router = Router(config.catalog)
        # Never opened: a statement that reached the catalog relay would fail, and none should.
        executor = Executor(self.session, router, self.service, CatalogDB("host=/nonexistent"), None)
        self.conversation = Conversation(self.conn, self.session, executor, router, **hooks)  # type: ignore[arg-type]
        self.open = True

    def send(self, data: bytes) -> list[tuple[str, bytes]]:
        """Feed client bytes; answer every complete message; return the backend messages produced."""
        self.conn.receive_data(data)

        async def drive() -> None:
            while self.open:
                ev = self.conn.next_event()
                if ev is NEED_DATA:
                    return
                self.open = await self.conversation.handle(ev)

        asyncio.run(drive())
        out = b"".join(self.conversation.out)
        self.conversation.out.clear()
        return wire.split_backend(out)


def kinds(msgs: list[tuple[str, bytes]]) -> str:
    return "".join(k for k, _ in msgs)


def sqlstates(msgs: list[tuple[str, bytes]]) -> list[str]:
    return [wire.error_fields(b)["C"] for k, b in msgs if k == "E"]


def test_extended_pipeline_in_one_write() -> None:
    t = Talk()
    m = t.send(wire.parse("SELECT count(*) FROM adult WHERE age > $1", "st", (0,)) + wire.describe("S", "st")
               + wire.bind([struct.pack("!q", 30)], stmt="st", pformats=(1,), rformats=(1,))
               + wire.describe("P") + wire.execute() + wire.SYNC)
    assert kinds(m) == "1tT2TDCZ"
    assert t.service.executed == [("SELECT count(*) FROM adult WHERE age > $1", [30])]
    assert m[5] == ("D", struct.pack("!hi", 1, 8) + struct.pack("!q", 48842))
    assert m[-1] == ("Z", b"I")


def test_describe_never_executes() -> None:
    t = Talk()
    m = t.send(wire.parse("SELECT avg(age) FROM adult WHERE sex = $1", "d1") + wire.describe("S", "d1")
               + wire.bind([b"1"], stmt="d1") + wire.describe("P") + wire.SYNC)
    assert kinds(m) == "1tT2TZ" and t.service.executed == []


def test_error_discards_the_pipeline_until_sync() -> None:
    t = Talk()
    m = t.send(wire.parse("INSERT INTO adult VALUES (1)") + wire.bind() + wire.describe("P") + wire.execute()
               + wire.SYNC + wire.parse("SELECT count(*) FROM adult") + wire.bind() + wire.execute() + wire.SYNC)
    assert kinds(m) == "EZ12DCZ"
    assert sqlstates(m) == ["25006"] and len(t.service.executed) == 1


def test_portal_suspends_at_the_row_limit() -> None:
    t = Talk()
    m = t.send(wire.parse("SELECT sex, count(*) FROM adult GROUP BY sex") + wire.bind()
               + wire.execute("", 1) + wire.execute("", 1) + wire.SYNC)
    assert kinds(m) == "12DsDCZ"
    assert [b for k, b in m if k == "C"] == [b"SELECT 1\0"]   # the second Execute sent the last row


def test_unknown_statement_and_portal() -> None:
    t = Talk()
    assert sqlstates(t.send(wire.bind(stmt="nope") + wire.SYNC)) == ["26000"]
    assert sqlstates(t.send(wire.execute("nope") + wire.SYNC)) == ["34000"]
    m = t.send(wire.parse("SELECT count(*) FROM adult", "dup") + wire.parse("SELECT 2", "dup") + wire.SYNC)
    assert kinds(m) == "1EZ" and sqlstates(m) == ["42P05"]


def test_simple_query_runs_statements_in_order_and_keeps_session_state() -> None:
    t = Talk()
    m = t.send(wire.query("SET application_name = 'talk'; SHOW application_name; SELECT count(*) FROM adult"))
    assert kinds(m) == "SCTDCTDCZ"   # ParameterStatus for application_name, then each statement
    assert ("D", struct.pack("!hi", 1, 4) + b"talk") in m
    m = t.send(wire.query("BEGIN"))
    assert m[-1] == ("Z", b"T")
    m = t.send(wire.query("SELECT * FROM adult"))
    assert sqlstates(m) == ["42501"] and m[-1] == ("Z", b"E")    # failed transaction block
    assert sqlstates(t.send(wire.query("SELECT count(*) FROM adult"))) == ["25P02"]
    assert t.send(wire.query("ROLLBACK"))[-1] == ("Z", b"I")


def test_hooks_guard_every_statement_and_admit_only_non_session_ones() -> None:
    guarded: list[str] = []
    admitted: list[int] = []

    async def guard(coro: object) -> ResultSet:
        guarded.append("run")
        return await coro  # type: ignore[misc, no-any-return]

    def admit() -> None:
        admitted.append(1)
        if len(admitted) > 1:
            raise PgError("53400", "rate limit exceeded")

    t = Talk(guard=guard, admit=admit)
    t.send(wire.query("SET application_name = 'x'"))
    assert (len(guarded), len(admitted)) == (1, 0)
    assert kinds(t.send(wire.query("SELECT count(*) FROM adult"))) == "TDCZ"
    m = t.send(wire.parse("SELECT count(*) FROM adult") + wire.bind() + wire.execute() + wire.SYNC)
    assert kinds(m) == "12EZ" and sqlstates(m) == ["53400"] and len(t.service.executed) == 1


@pytest.mark.parametrize("data,ends,sqlstate", [
    (wire.TERMINATE, True, None),
    (wire.msg(b"F", b"\0\0\0\0\0\0\0\0\0\0"), False, "0A000"),   # fast-path function call
    (wire.FLUSH, False, None),
])
def test_terminate_function_call_and_flush(data: bytes, ends: bool, sqlstate: str | None) -> None:
    t = Talk()
    m = t.send(data)
    assert t.open is not ends
    assert sqlstates(m) == ([sqlstate] if sqlstate else [])
