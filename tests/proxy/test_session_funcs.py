"""Session functions answered as PostgreSQL answers them, through the real proxy: the client's own user and
database (not the catalog database's reader role), settings read and set by SELECT (asyncpg's type
introspection sets jit with set_config)."""

from __future__ import annotations

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
        assert conn.execute("SELECT 1").fetchone() == (1,)

