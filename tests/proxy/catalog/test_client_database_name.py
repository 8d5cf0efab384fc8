"""The database name clients see in catalog queries is the one they connected to, through the real proxy
over real sockets: current_database() in a statement with FROM, pg_database (psql's \\l) and every
information_schema view's *_catalog column name it, never the schema-only catalog database's internal name
(``adult_lapras_catalog``): tools filtering ``table_catalog = 'adult'`` (DBeaver, Power BI, Tableau) saw no
tables."""

from __future__ import annotations

import subprocess
from typing import Any

import psycopg
import pytest

from tests.fixtures.psql import bundled_psql

pytestmark = pytest.mark.process


def _rows(conn: psycopg.Connection[Any], sql: str, params: Any = None) -> list[tuple[Any, ...]]:
    return conn.execute(sql, params).fetchall()


def test_catalog_queries_name_the_clients_database(proxy: Any) -> None:
    with psycopg.connect(proxy.dsn(), autocommit=True) as conn:
        assert _rows(conn, "SELECT datname FROM pg_database WHERE datname = current_database()") == [("adult",)]
        cur = conn.execute("SELECT current_database(), current_catalog, pg_catalog.current_database() AS db "
                           "FROM pg_catalog.pg_class LIMIT 1")
        assert cur.fetchall() == [("adult", "adult", "adult")]
        assert [d.name for d in cur.description or ()] == ["current_database", "current_catalog", "db"]
        assert _rows(conn, "SELECT DISTINCT table_catalog FROM information_schema.tables") == [("adult",)]
        assert _rows(conn, "SELECT count(*) FROM information_schema.tables WHERE table_catalog = %s "
                           "AND table_name = 'adult'", ("adult",)) == [(1,)]
        cols = _rows(conn, "SELECT DISTINCT table_catalog, udt_catalog FROM information_schema.columns "
                           "WHERE table_catalog = 'adult' AND table_name = 'adult'")
        assert cols == [("adult", "adult")]
        assert _rows(conn, "SELECT catalog_name FROM information_schema.information_schema_catalog_name") == [
            ("adult",)]
        names = [r[0] for r in _rows(conn, "SELECT datname FROM pg_catalog.pg_database d ORDER BY 1")]
        assert names == ["adult"]
        # Functions asking about the database by name keep asking about the catalog database (whose size and
        # privileges the client's database has there).
        assert _rows(conn, "SELECT has_database_privilege(current_database(), 'CONNECT'), "
                           "pg_database_size(current_database()) > 0 FROM pg_class LIMIT 1") == [(True, True)]
        # A name inside a string or a quoted identifier is left alone.
        assert _rows(conn, "SELECT 'current_database()' AS \"current_database()\" FROM pg_class LIMIT 1") == [
            ("current_database()",)]


def test_psql_lists_the_clients_database(proxy: Any) -> None:
    """psql's \\l lists one database, the one the client connected to."""
    psql = bundled_psql()
    if psql is None:
        pytest.skip("no psql binary")
    run = subprocess.run([psql, "-X", "-A", "-t", proxy.dsn(), "-c", "\\l"], capture_output=True, text=True,
                         timeout=60)
    assert run.returncode == 0 and not run.stderr, run.stderr
    assert [line.split("|")[0] for line in run.stdout.splitlines() if line.count("|") >= 6] == ["adult"], run.stdout


@pytest.mark.parametrize(("sql", "rewritten"), [
    ('SELECT "pg_catalog".current_database()', True),
    ('SELECT "pg_catalog" . "current_database" ( )', True),
    ('SELECT "current_database"()', True),
    ("SELECT pg_catalog.current_database(), current_catalog", True),
    ('SELECT "PG_CATALOG".current_database()', False),      # another schema: quoted names keep their case
    ('SELECT "Current_Database"()', False),
    ("SELECT x.current_database()", False),
    ("SELECT 'current_database()', /* current_database() */ 1", False),
    ('SELECT "current_catalog" FROM t', False),              # a column, not the function
    ("SELECT pg_database_size(current_database())", False),  # asks about the catalog database by name
])
def test_quoted_spellings_of_current_database(sql: str, rewritten: bool) -> None:
    """Unit test of the relay's rewrite (no process): every spelling PostgreSQL resolves to
    pg_catalog.current_database() names the client's database, nothing else is touched."""
    from proxy.catalog.client_names import with_client_database

    out = with_client_database(sql, "adult")
    assert ("'adult'::pg_catalog.name" in out) == rewritten, out
    if rewritten:  # no call is left: each became the name, under the function's column name
        assert "current_database" not in out.replace("AS current_database", ""), out
