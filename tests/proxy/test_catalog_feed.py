"""The catalog relay's reading of PostgreSQL's replies (proxy.catalog.pgclient), over a real socket pair.

The reader is woken when the received bytes end like a ReadyForQuery; these check the cases that wake-up
rule must not get wrong: a DataRow whose bytes end like a ReadyForQuery with the reply still incomplete,
a reply arriving a byte at a time, and the database closing the connection mid-reply.
"""

from __future__ import annotations

import asyncio
import socket
import struct

import pytest

from proxy.catalog.pgclient import BackendConnection, _Feed
from proxy.protocol.errors import PgError


def msg(kind: bytes, body: bytes) -> bytes:
    return kind + struct.pack("!i", len(body) + 4) + body


def data_row(*values: bytes) -> bytes:
    return msg(b"D", struct.pack("!h", len(values)) + b"".join(struct.pack("!i", len(v)) + v for v in values))


async def pair() -> tuple[BackendConnection, socket.socket]:
    ours, theirs = socket.socketpair()
    feed = _Feed()
    transport, _ = await asyncio.get_running_loop().create_unix_connection(lambda: feed, sock=ours)
    return BackendConnection(feed, transport, ("unix", "")), theirs


def test_a_row_ending_like_ready_for_query_does_not_end_the_reply() -> None:
    tricky = data_row(b"Z\0\0\0\x05I")          # ends with the bytes of ReadyForQuery (idle)
    reply = [msg(b"2", b""), tricky, msg(b"C", b"SELECT 1\0"), msg(b"Z", b"I")]

    async def run() -> tuple[list[bytes], str]:
        conn, db = await pair()
        db.setblocking(False)
        loop = asyncio.get_running_loop()
        collect = asyncio.create_task(conn._collect())
        await loop.sock_sendall(db, reply[0] + reply[1])
        await asyncio.sleep(0.05)
        assert not collect.done(), "the reply ended at a DataRow"
        await loop.sock_sendall(db, reply[2] + reply[3])
        out = await asyncio.wait_for(collect, 5)
        conn.close()
        db.close()
        return out.rows, out.tag

    rows, tag = asyncio.run(run())
    assert rows == [tricky] and tag == "SELECT 1"


def test_a_reply_a_byte_at_a_time() -> None:
    reply = msg(b"2", b"") + data_row(b"a", b"bc") + data_row(b"") + msg(b"C", b"SELECT 2\0") + msg(b"Z", b"I")

    async def run() -> tuple[int, str]:
        conn, db = await pair()
        db.setblocking(False)
        loop = asyncio.get_running_loop()
        collect = asyncio.create_task(conn._collect())
        for i in range(len(reply)):
            await loop.sock_sendall(db, reply[i:i + 1])
            await asyncio.sleep(0)
        out = await asyncio.wait_for(collect, 5)
        conn.close()
        db.close()
        return len(out.rows), out.tag

    assert asyncio.run(run()) == (2, "SELECT 2")


def test_the_database_closing_mid_reply_breaks_the_connection() -> None:
    async def run() -> BackendConnection:
        conn, db = await pair()
        db.setblocking(False)
        await asyncio.get_running_loop().sock_sendall(db, msg(b"2", b"") + data_row(b"x")[:6])
        db.close()
        with pytest.raises(PgError) as err:
            await asyncio.wait_for(conn._collect(), 5)
        assert err.value.sqlstate == "08006"
        conn.close()
        return conn

    assert asyncio.run(run()).broken
