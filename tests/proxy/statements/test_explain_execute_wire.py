"""EXPLAIN EXECUTE of an SQL-level prepared statement, through the real proxy: the statement's EXPLAIN with its
arguments bound, as in PostgreSQL (for a DP statement: what it measures and costs, nothing read or charged).
It was sent to the catalog database, which has no such statement: "prepared statement "q" does not exist"
right after PREPARE q had succeeded."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

pytestmark = pytest.mark.process


def _budget(conn: psycopg.Connection[Any]) -> dict[str, str]:
    return dict(conn.execute("SHOW lapras.budget").fetchall())


def test_explain_execute_explains_the_prepared_statement(proxy: Any) -> None:
    with psycopg.connect(proxy.dsn(), autocommit=True) as conn:
        conn.execute("PREPARE q (int) AS SELECT COUNT(*) FROM adult WHERE age > $1 AND sex = 1")
        before = _budget(conn)
        ours = [r[0] for r in conn.execute("EXPLAIN EXECUTE q(47)").fetchall()]
        direct = [r[0] for r in conn.execute("EXPLAIN SELECT COUNT(*) FROM adult WHERE age > 47 AND sex = 1")]
        assert ours == direct and ours[0].startswith("DP aggregate over public.adult"), ours
        assert _budget(conn)["you.answers_released"] == before["you.answers_released"]   # nothing answered
        # A catalog statement is explained by the catalog database, its argument bound.
        conn.execute("PREPARE c (int) AS SELECT typname FROM pg_type WHERE typlen > $1")
        plan = [r[0] for r in conn.execute("explain execute c (3)").fetchall()]
        assert plan and any("pg_type" in line for line in plan), plan
        with pytest.raises(psycopg.errors.InvalidSqlStatementName, match='prepared statement "nope"'):
            conn.execute("EXPLAIN EXECUTE nope(1)")
        assert conn.execute("EXECUTE q(47)").fetchone() is not None   # the statement itself still runs


def test_explain_execute_reads_the_declared_parameter_types(proxy: Any) -> None:
    """``PREPARE w (timestamptz) AS ... $1 - interval '7 days'``: the declared type makes ``$1 - interval`` a
    timestamptz's arithmetic (untyped, PostgreSQL reads interval - interval); EXPLAIN EXECUTE plans it with
    that type, as EXECUTE does, and explains what the literal statement would measure."""
    with psycopg.connect(proxy.dsn(), autocommit=True) as conn:
        conn.execute("PREPARE w (timestamptz) AS SELECT COUNT(*) FROM events "
                     "WHERE ts >= $1 - interval '7 days' AND ts < $1")
        ours = [r[0] for r in conn.execute("EXPLAIN EXECUTE w('2026-03-08 00:00:00+00')").fetchall()]
        direct = [r[0] for r in conn.execute(
            "EXPLAIN SELECT COUNT(*) FROM events WHERE ts >= timestamptz '2026-03-01 00:00:00+00' "
            "AND ts < timestamptz '2026-03-08 00:00:00+00'").fetchall()]
        assert ours == direct and ours[0].startswith("DP aggregate over public.events"), ours
        assert conn.execute("EXECUTE w('2026-03-08 00:00:00+00')").fetchone() is not None
