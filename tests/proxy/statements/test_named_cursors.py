"""Server-side cursors through the real proxy: psycopg's named cursors (DECLARE, FETCH FORWARD n, CLOSE
in a transaction) return every row of a DP answer, charged once (the DECLARE's release; the FETCHes page
through its stored rows)."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

pytestmark = pytest.mark.process

SQL = "SELECT age, COUNT(*) FROM adult WHERE sex = 1 GROUP BY age ORDER BY age"


def _spends(dsn: str) -> int:
    with psycopg.connect(dsn, autocommit=True) as up:
        return int(up.execute("SELECT count(*) FROM lapras.spends").fetchone()[0])  # type: ignore[index]


def test_psycopg_named_cursor_returns_every_row_charged_once(proxy_factory: Any) -> None:
    px = proxy_factory(epsilon=1.0, stream_length=50)
    with psycopg.connect(px.dsn()) as conn:
        with conn.cursor(name="pages") as cur:
            cur.itersize = 7  # FETCH FORWARD 7 at a time
            cur.execute(SQL)
            rows = list(cur)
        conn.commit()
    assert [r[0] for r in rows] == list(range(17, 91))  # every age of the public domain
    assert _spends(px.upstream_dsn) == 1
    with psycopg.connect(px.dsn()) as conn:
        with conn.cursor(name="again") as cur:
            cur.execute(SQL)
            assert cur.fetchmany(10) == rows[:10] and cur.fetchall() == rows[10:]  # the stored answer
        with conn.cursor(name="scroll", scrollable=True) as cur:
            cur.execute(SQL)
            cur.scroll(5)
            assert cur.fetchone() == rows[5]
    assert _spends(px.upstream_dsn) == 1  # repeats are free


def _text_and_binary(conn: psycopg.Connection, sql: str, first: int,
                     types: list[int] | None = None) -> tuple[list[Any], list[Any]]:
    """The rows of ``sql`` through a text named cursor and through a binary one (fetched ``first`` rows, then
    the rest: two FETCHes), the binary cursor's column types checked against ``types`` when given."""
    with conn.cursor(name="text") as cur:
        cur.execute(sql)
        text_rows = cur.fetchall()
    with conn.cursor(name="bin", binary=True) as cur:
        cur.execute(sql)
        binary_rows = cur.fetchmany(first) + cur.fetchall()
        if types is not None:
            assert [d.type_code for d in cur.description] == types
    return text_rows, binary_rows


def test_binary_named_cursor_fetches_in_binary(proxy: Any) -> None:
    """psycopg's named cursor with binary=True binds each FETCH for binary results: the rows come in binary,
    the same values as the text cursor's (a repeat: the stored answer). They were the DECLARE's text bytes
    under a binary description, read as garbage (age 17 as 825688165)."""
    sql = ("SELECT date_trunc('month', ts) AS m, category, COUNT(*), SUM(amount), AVG(duration_s) FROM events "
           "GROUP BY 1, 2 ORDER BY 1, 2")
    with psycopg.connect(proxy.dsn()) as conn:
        text_rows, binary_rows = _text_and_binary(conn, sql, 5)
        with conn.cursor(name="ages", binary=True) as cur:
            cur.execute(SQL)
            ages = [r[0] for r in cur.fetchall()]
    assert len(text_rows) == 12 * 8 and binary_rows == text_rows
    with psycopg.connect(proxy.dsn()) as conn:   # the DECLARE's parameters reach its query
        with conn.cursor(name="param") as cur:
            cur.execute(SQL.replace("sex = 1", "sex = %s"), (1,))
            assert [r[0] for r in cur.fetchall()] == ages
    assert ages == list(range(17, 91))


def test_binary_named_cursor_over_a_catalog_query(proxy: Any) -> None:
    """A binary named cursor over a catalog query: each FETCH's rows come in the formats its Bind asks for,
    of the catalog's own types, the same values as a text cursor's. The DECLARE's text bytes under a binary
    description read oid 16 as 825622528."""
    sql = "SELECT oid, typname, typlen, typbyval, typarray FROM pg_type WHERE oid IN (16, 20, 25) ORDER BY oid"
    with psycopg.connect(proxy.dsn()) as conn:
        text_rows, binary_rows = _text_and_binary(conn, sql, 1, [26, 19, 21, 16, 26])
        with conn.cursor(name="one", binary=True) as cur:
            cur.execute("SELECT oid, typname FROM pg_type WHERE oid = 16")
            assert cur.fetchall() == [(16, "bool")]
        with conn.cursor(name="odd", binary=True) as cur:  # types the proxy's own codecs do not know, a NULL
            cur.execute("SELECT typinput::text, typcategory, ARRAY[typname, NULL]::name[], typdefault "
                        "FROM pg_type WHERE oid = 16")
            assert cur.fetchall() == [("boolin", "B", ["bool", None], None)]
        with conn.cursor(name="param", binary=True) as cur:
            cur.execute("SELECT typname FROM pg_type WHERE oid = %s", (20,))
            assert cur.fetchall() == [("int8",)]
    assert text_rows == binary_rows == [(16, "bool", 1, True, 1000), (20, "int8", 8, True, 1016),
                                        (25, "text", -1, False, 1009)]
