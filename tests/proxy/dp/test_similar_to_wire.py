"""SIMILAR TO through the real proxy against PostgreSQL over the declared values: the values a pattern keeps
(`SELECT country ... WHERE country SIMILAR TO p GROUP BY country`, a value list filtered on itself: the
declared domain, exact and free) are those PostgreSQL keeps from the same rows. `%\\S` once kept the 3
countries ending in a literal S instead of every one (an escaped letter is the regex's class escape)."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

pytestmark = pytest.mark.process

PATTERNS = [
    ("%\\S", None), ("%S", None), ("\\S\\S", None), ("%\\s%", None), ("(U|I)%", None), ("_\\S", None),
    ("[A-M]%", None), ("%[^A-M]", None), ("\\w\\w", None), ("%\\d%", None), ("\\D%", None), ("%(S|N)", None),
    ("_{2}", None), ("(G|D)_", None), ("%#S", "#"), ("#S#S", "#"), ("%#%%", "#"), ("U_", "#"), ("%\\S", ""),
    ("%.%", None), ("%\\.%", None),
]


def _where(pattern: str, escape: str | None) -> str:
    esc = "" if escape is None else f" ESCAPE '{escape}'"
    return f"country SIMILAR TO '{pattern}'{esc}"


def test_similar_to_keeps_the_values_postgresql_keeps(proxy: Any, adult_db: str) -> None:
    with psycopg.connect(adult_db, autocommit=True) as direct:
        present = {r[0] for r in direct.execute("SELECT DISTINCT country FROM events")}
    assert len(present) == 20  # every declared country has rows: PostgreSQL's answer is the declared list's
    with psycopg.connect(proxy.dsn(), autocommit=True) as conn, psycopg.connect(adult_db, autocommit=True) as direct:
        for pattern, escape in PATTERNS:
            for neg in ("", "NOT "):
                where = _where(pattern, escape).replace("SIMILAR", neg + "SIMILAR")
                sql = f"SELECT country FROM events WHERE {where} GROUP BY country"
                ours = {r[0] for r in conn.execute(sql)}
                theirs = {r[0] for r in direct.execute(sql)}
                assert ours == theirs, (sql, sorted(ours), sorted(theirs))
        # the case: every one of the declared values ends in a non-space
        assert len({r[0] for r in conn.execute(
            "SELECT country FROM events WHERE country SIMILAR TO '%\\S' GROUP BY 1")}) == 20
