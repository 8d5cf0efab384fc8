"""A write refused by the read-only proxy names its command as PostgreSQL does in a read-only transaction,
through the real proxy and against PostgreSQL itself: "cannot execute CREATE TABLE in a read-only
transaction". The refusal once named the first two words of the statement, upper-cased: "VACUUM ADULT",
"UPDATE ADULT", "CREATE TEMP", "INSERT INTO", as if the table were a command (or called ADULT)."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

pytestmark = pytest.mark.process

WRITES = ["INSERT INTO adult (age) VALUES (1)", "UPDATE adult SET age = 1", "DELETE FROM adult",
          "CREATE TABLE x (a int)", "CREATE TEMP TABLE t (x int)", "CREATE OR REPLACE VIEW v AS SELECT 1",
          "DROP TABLE adult", "TRUNCATE adult", "GRANT SELECT ON adult TO public",
          "ALTER TABLE adult ADD COLUMN z int", "CREATE UNIQUE INDEX i ON adult (age)",
          "COMMENT ON TABLE adult IS 'x'", "REFRESH MATERIALIZED VIEW v"]


def _refusal(conn: psycopg.Connection[Any], sql: str) -> tuple[str | None, str]:
    with pytest.raises(psycopg.Error) as err:
        conn.execute(sql)
    return err.value.sqlstate, err.value.diag.message_primary or ""


def test_refused_writes_are_named_as_postgresql_names_them(proxy: Any, adult_db: str) -> None:
    with psycopg.connect(proxy.dsn(), autocommit=True) as conn, psycopg.connect(adult_db) as direct:
        for sql in WRITES:
            direct.execute("BEGIN READ ONLY")
            theirs = _refusal(direct, sql)
            direct.rollback()
            assert _refusal(conn, sql) == theirs == ("25006", theirs[1]), sql
        # PostgreSQL runs VACUUM in a read-only transaction; the proxy refuses it, named the same way.
        assert _refusal(conn, "VACUUM adult") == ("25006", "cannot execute VACUUM in a read-only transaction")
        assert _refusal(conn, "analyze adult") == ("25006", "cannot execute ANALYZE in a read-only transaction")
