"""Session functions answered as PostgreSQL answers them, through the real proxy: the client's own user and
database (not the catalog database's reader role), settings read and set by SELECT, and asyncpg's type
introspection (which sets jit with set_config) so that array parameters (`col = ANY($1)`) work."""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg
import pytest


def test_who_and_where_are_the_clients_own(proxy: Any) -> None:
    with psycopg.connect(proxy.dsn(), autocommit=True) as conn:
        row = conn.execute("SELECT current_database(), current_user, session_user, current_catalog, user, "
                           "current_role").fetchone()
        assert row == ("adult", "analyst", "analyst", "adult", "analyst", "analyst")
        cur = conn.execute("SELECT current_database() AS db, CURRENT_USER AS who")
        assert [d.name for d in cur.description or []] == ["db", "who"] and cur.fetchone() == ("adult", "analyst")
        # Prepared (extended protocol, Describe before Execute) alike.
        assert conn.execute("SELECT current_database()", prepare=True).fetchone() == ("adult",)
        # Other shapes still reach the catalog database.
        assert conn.execute("SELECT current_database() = current_database(), version() LIKE 'PostgreSQL%'"
                            ).fetchone() == (True, True)


@pytest.mark.parametrize("sql, want, names", [
    ("SELECT current_schema(),session_user", ("public", "analyst"), ["current_schema", "session_user"]),
    ("SELECT current_database(), current_user, current_schema()", ("adult", "analyst", "public"),
     ["current_database", "current_user", "current_schema"]),
    ("SELECT current_user, pg_backend_pid() > 0 AS live", ("analyst", True), ["current_user", "live"]),
    ("SELECT upper(current_database()) AS db, length(version()) > 0", ("ADULT", True), ["db", "?column?"]),
])
def test_session_names_among_other_functions(proxy: Any, sql: str, want: tuple[Any, ...], names: list[str]) -> None:
    """DBeaver's first statement (``current_schema(),session_user``) and its kin mix session functions
    with others, so the catalog database runs them: with the client's own user and database in them, as
    PostgreSQL would answer, never the catalog's reader role or database; simple and extended protocol."""
    with psycopg.connect(proxy.dsn(), autocommit=True) as conn:
        for prepare in (False, True):
            cur = conn.execute(sql, prepare=prepare)
            assert cur.fetchone() == want and [d.name for d in cur.description or []] == names


def test_settings_through_select(proxy: Any) -> None:
    with psycopg.connect(proxy.dsn(), autocommit=True) as conn:
        assert conn.execute("SELECT current_setting('jit') AS cur, set_config('jit', 'off', false) AS new"
                            ).fetchone() == ("off", "off")
        assert conn.execute("SELECT set_config('application_name', 'my report', false)").fetchone() == ("my report",)
        assert conn.execute("SHOW application_name").fetchone() == ("my report",)
        assert conn.execute("SELECT current_setting('no.such', true)").fetchone() == (None,)
        with pytest.raises(psycopg.errors.UndefinedObject):
            conn.execute("SELECT current_setting('no_such_setting')")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):  # not a session function call: refused
            conn.execute("SELECT set_config(name, 'x', false) FROM pg_settings")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):  # settings drivers do not set: SET them
            conn.execute("SELECT set_config('statement_timeout', '1', false)")
        assert conn.execute("SELECT 1").fetchone() == (1,)


def test_asyncpg_introspects_array_types_and_binds_lists(proxy: Any) -> None:
    import asyncpg

    async def run() -> tuple[int, int, int]:
        conn = await asyncpg.connect(host=proxy.host, port=proxy.port, user="analyst", password="lapras",
                                     database="adult", ssl=False)
        try:
            some = await conn.fetchval("SELECT count(*) FROM adult WHERE race = ANY($1)", [0, 1])
            every = await conn.fetchval("SELECT count(*) FROM adult WHERE race = ANY($1)", [0, 1, 2, 3, 4])
            none = await conn.fetchval("SELECT count(*) FROM adult WHERE race = ANY($1)", [])
            return some, every, none
        finally:
            await conn.close()

    some, every, none = asyncio.run(run())
    assert 0 < some < every and none == 0


def test_set_config_is_local_as_in_postgresql(proxy: Any, adult_db: str) -> None:
    """``set_config(name, value, true)`` is SET LOCAL's function form: outside a block it returns the value
    and changes nothing after the statement; in a block it lasts until COMMIT or ROLLBACK. The proxy's
    answers are PostgreSQL's own."""
    seen = []
    for dsn in (proxy.dsn(), adult_db):
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("SET application_name = 'base'")
            out = [conn.execute("SELECT set_config('application_name', 'once', true)").fetchone(),
                   conn.execute("SHOW application_name").fetchone()]
            for end in ("COMMIT", "ROLLBACK"):
                conn.execute("BEGIN")
                out.append(conn.execute("SELECT set_config('application_name', 'block', true)").fetchone())
                out.append(conn.execute("SHOW application_name").fetchone())
                conn.execute(end)
                out.append(conn.execute("SHOW application_name").fetchone())
            seen.append(out)
    assert seen[0] == seen[1] == [("once",), ("base",), ("block",), ("block",), ("base",), ("block",), ("block",),
                                  ("base",)]
