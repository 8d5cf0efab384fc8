"""A bound parameter standing alone in the target list (`SELECT COUNT(*), $1 AS label FROM t`: a dashboard's
series label) is text, as PostgreSQL resolves an untyped parameter there, through the real proxy. It was
typed float8, so a label such as 'total' was refused with 22P02 (invalid input syntax for type double
precision) and node-postgres, which sends every parameter untyped, could not label a series at all."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

pytestmark = pytest.mark.process


def test_a_parameter_in_the_target_list_is_text(proxy: Any) -> None:
    with psycopg.connect(proxy.dsn(), autocommit=True) as conn:
        for prepare in (False, True):
            cur = conn.execute("SELECT COUNT(*) AS n, %s AS label FROM adult WHERE age > %s", ("total", 30),
                               prepare=prepare)
            row = cur.fetchone()
            assert row is not None and row[1] == "total" and isinstance(row[0], int), row
            assert [d.type_code for d in cur.description] == [20, 25]
            assert cur.description[1].name == "label"
        # Grouped: the label on every row; a NULL label is NULL; a cast parameter keeps its cast's type.
        rows = conn.execute("SELECT sex, %s, COUNT(*) FROM adult GROUP BY sex ORDER BY sex", ("by sex",)).fetchall()
        assert [r[1] for r in rows] == ["by sex", "by sex"]
        assert conn.execute("SELECT COUNT(*), %s AS label FROM adult", (None,)).fetchone()[1] is None
        cur = conn.execute("SELECT COUNT(*), %s::int AS k FROM adult", ("7",))
        assert cur.fetchone()[1] == 7 and cur.description[1].type_code == 23
