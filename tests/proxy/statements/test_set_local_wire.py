"""SET LOCAL through the real proxy, as PostgreSQL does it: inside a transaction block it lasts until the
block ends (COMMIT or ROLLBACK), then the session's value is back; outside a block it changes nothing and
warns (25P01). It was a plain SET: `SET LOCAL statement_timeout` (or lapras.show_stderr) in one block stayed
for the rest of the session. A plain SET in the block outlives it on COMMIT, as in PostgreSQL."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

pytestmark = pytest.mark.process


def _show(conn: psycopg.Connection[Any], name: str) -> str:
    row = conn.execute(f"SHOW {name}").fetchone()
    assert row is not None
    return str(row[0])


def test_set_local_lasts_until_the_block_ends(proxy: Any, adult_db: str) -> None:
    for dsn in (proxy.dsn(), adult_db):   # the proxy, then PostgreSQL itself: the same answers
        with psycopg.connect(dsn, autocommit=True) as conn:
            warnings: list[tuple[str | None, str | None]] = []
            conn.add_notice_handler(lambda d, seen=warnings: seen.append((d.sqlstate, d.message_primary)))
            conn.execute("SET statement_timeout = '5s'")
            conn.execute("SET LOCAL statement_timeout = '1s'")
            assert _show(conn, "statement_timeout") == "5s"
            assert warnings == [("25P01", "SET LOCAL can only be used in transaction blocks")]
            for end in ("COMMIT", "ROLLBACK"):
                conn.execute("BEGIN")
                conn.execute("SET LOCAL statement_timeout = '2s'")
                assert _show(conn, "statement_timeout") == "2s"
                conn.execute(end)
                assert _show(conn, "statement_timeout") == "5s", end
            conn.execute("BEGIN")
            conn.execute("SET LOCAL statement_timeout = '2s'")
            conn.execute("SET statement_timeout = '7s'")
            conn.execute("COMMIT")
            assert _show(conn, "statement_timeout") == "7s"
    with psycopg.connect(proxy.dsn(), autocommit=True) as conn:
        conn.execute("BEGIN")
        conn.execute("SET LOCAL lapras.show_stderr = on")
        assert _show(conn, "lapras.show_stderr") == "on"
        conn.execute("COMMIT")
        assert _show(conn, "lapras.show_stderr") == "off"
