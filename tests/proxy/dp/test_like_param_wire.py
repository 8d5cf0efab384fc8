"""``col LIKE $1`` / ``ILIKE $1`` / ``NOT LIKE $1`` with the pattern bound, through the real proxy: a BI
tool's "contains" filter sends its pattern as a parameter (psycopg's server-side binding, JDBC's ``?``).
It was refused with 0A000 ("expression '$1' in WHERE is not supported") although the same pattern written
as a literal is answered. A value list filtered on itself (the declared domain, exact and free) keeps the
values PostgreSQL keeps from the same rows, and a parameterised count is the same linear query as the
literal one, so it is answered from the ledger with the literal's released value (no noise involved)."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

pytestmark = pytest.mark.process

PATTERNS = ["%a%", "p%", "P%", "%_%", "s_a%", "%ch", "x%", "%"]


def test_bound_like_patterns_keep_the_values_postgresql_keeps(proxy: Any, adult_db: str) -> None:
    with psycopg.connect(proxy.dsn(), autocommit=True) as conn, psycopg.connect(adult_db, autocommit=True) as direct:
        for op in ("LIKE", "ILIKE", "NOT LIKE", "NOT ILIKE"):
            sql = f"SELECT category FROM events WHERE category {op} %s GROUP BY category"
            for pattern in PATTERNS:
                for prepare in (False, True):   # the unnamed statement, then a named server-side one
                    ours = {r[0] for r in conn.execute(sql, (pattern,), prepare=prepare)}
                    theirs = {r[0] for r in direct.execute(sql, (pattern,))}
                    assert ours == theirs, (op, pattern, sorted(ours), sorted(theirs))


def test_bound_like_count_is_the_literal_statement(proxy: Any) -> None:
    with psycopg.connect(proxy.dsn(), autocommit=True) as conn:
        literal = conn.execute("SELECT COUNT(*) FROM events WHERE category LIKE 'p%' AND country ILIKE 'u%'"
                               ).fetchone()
        for prepare in (False, True):
            bound = conn.execute("SELECT COUNT(*) FROM events WHERE category LIKE %s AND country ILIKE %s",
                                 ("p%", "u%"), prepare=prepare).fetchone()
            assert bound == literal
        assert conn.execute("SELECT COUNT(*) FROM events WHERE category LIKE %s", (None,)).fetchone() == (0,)
        # A bound pattern over a non-text column gets the literal pattern's error (42883, cast hint).
        for sql, args in (("SELECT COUNT(*) FROM events WHERE duration_s LIKE %s", ("1%",)),
                          ("SELECT COUNT(*) FROM events WHERE duration_s LIKE '1%%'", ())):
            with pytest.raises(psycopg.errors.UndefinedFunction, match=r"like\(integer, text\) does not exist"):
                conn.execute(sql, args)
