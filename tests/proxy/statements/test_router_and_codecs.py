"""Statement routing, SQL splitting and the type codecs, without a server."""

from __future__ import annotations

import struct
from datetime import UTC, date, datetime
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from proxy.config import load_config
from proxy.protocol import types
from proxy.protocol.errors import PgError
from proxy.statements.router import Kind, Router
from proxy.statements.sqltext import is_blank, leading_words, split_statements


@pytest.fixture(scope="module")
def router() -> Router:
    from pathlib import Path

    return Router(load_config(Path(__file__).resolve().parents[3] / "config.toml").catalog)


@pytest.mark.parametrize("sql,kind,state", [
    ("SELECT COUNT(*) FROM adult", Kind.DP, None),
    ("select count(*) from public.adult where age > $1", Kind.DP, None),
    ("WITH t AS (SELECT * FROM adult) SELECT count(*) FROM t", Kind.DP, None),
    ("SELECT * FROM lapras.linear_regression('adult', 'age', 'sex', 'ihm')", Kind.DP, None),
    ("SHOW lapras.budget", Kind.DP, None),
    ("SELECT version()", Kind.CATALOG, None),
    ("SELECT relname FROM pg_class WHERE relname = 'adult'", Kind.CATALOG, None),
    ("SELECT * FROM information_schema.columns WHERE table_name = 'adult'", Kind.CATALOG, None),
    ("SELECT c.oid FROM pg_catalog.pg_class c WHERE c.relname OPERATOR(pg_catalog.~) '^(adult)$'",
     Kind.CATALOG, None),
    ("SET search_path = public", Kind.SESSION, None),
    ("show DateStyle", Kind.SESSION, None),
    ("BEGIN", Kind.SESSION, None),
    ("DECLARE c CURSOR FOR SELECT 1", Kind.SESSION, None),
    ("  -- only a comment", Kind.EMPTY, None),
    ("INSERT INTO adult VALUES (1)", Kind.REFUSED, "25006"),
    ("create table x (a int)", Kind.REFUSED, "25006"),
    ("COPY adult FROM '/tmp/x'", Kind.REFUSED, "25006"),
    ("COPY adult TO STDOUT", Kind.REFUSED, "42501"),
    ("COPY (SELECT 1) TO PROGRAM 'sh'", Kind.REFUSED, "42501"),
    ("SELECT * FROM pg_stats WHERE tablename = 'adult'", Kind.REFUSED, "42501"),
    ("select most_common_vals from pg_stats", Kind.REFUSED, "42501"),
    ("SELECT reltuples::bigint FROM pg_class WHERE relname = 'adult'", Kind.REFUSED, "42501"),
    ("SELECT pg_read_binary_file('x')", Kind.REFUSED, "42501"),
    ("EXPLAIN (COSTS) SELECT * FROM adult", Kind.REFUSED, "42501"),
    ("EXPLAIN ANALYZE SELECT count(*) FROM adult", Kind.REFUSED, "42501"),
    ("EXPLAIN SELECT count(*) FROM adult", Kind.DP, None),  # the DP service states what it would measure
    ("EXPLAIN SELECT 1", Kind.CATALOG, None),
    ("SELECT * FROM adult FOR UPDATE", Kind.REFUSED, "25006"),
    ("PREPARE p AS SELECT 1", Kind.SESSION, None),
    ("PREPARE TRANSACTION 'x'", Kind.REFUSED, "25006"),
    ("COMMIT PREPARED 'x'", Kind.REFUSED, "25006"),
    ("SELECT sql FROM lapras.statement_history", Kind.REFUSED, "42501"),  # the operator's data, by name
    ('SELECT count(*) FROM lapras.U&"statement\\005fhistory"', Kind.REFUSED, "42501"),  # in any spelling
    ("SELECT * FROM LAPRAS.Epochs", Kind.REFUSED, "42501"),
    ("SELECT 'lapras.statement_history' AS t", Kind.CATALOG, None),  # a string naming it reads nothing
])
def test_routes(router: Router, sql: str, kind: Kind, state: str | None) -> None:
    r = router.route(sql)
    assert r.kind is kind, (sql, r)
    if state:
        assert r.error is not None and r.error.sqlstate == state


def test_route_cache_is_bounded_and_hit(router: Router) -> None:
    small = Router(router.catalog, cache_size=3)
    first = small.route("SELECT 1")
    assert small.route("SELECT 1") is first
    for i in range(10):
        small.route(f"SELECT {i + 2}")
    assert len(small._cache) == 3


def test_split_statements() -> None:
    sql = ("SELECT ';'; SELECT \"a;b\" FROM t; SELECT $$x;y$$; SELECT $tag$ ; $tag$; /* ; /* nested ; */ */"
           " SELECT 1 -- ; \n; SELECT E'\\';'")
    parts = split_statements(sql)
    assert parts == ["SELECT ';'", 'SELECT "a;b" FROM t', "SELECT $$x;y$$", "SELECT $tag$ ; $tag$",
                     "/* ; /* nested ; */ */ SELECT 1 -- ;", "SELECT E'\\';'"]
    assert split_statements(";;  ; -- x") == []
    assert is_blank("/* a */ -- b\n ;")
    assert leading_words("/*x*/ ( select a from", 2) == ["SELECT", "A"]


@given(st.lists(st.sampled_from(["SELECT 1", "SELECT ';'", "SELECT $$;$$", "SHOW x", "SELECT 'a''b;'"]),
                min_size=1, max_size=6))
def test_split_roundtrip(stmts: list[str]) -> None:
    assert split_statements(";".join(stmts)) == stmts


@pytest.mark.parametrize("oid,text,value", [
    (types.INT8, b"42", 42), (types.INT4, b"-7", -7), (types.FLOAT8, b"1.5", 1.5),
    (types.NUMERIC, b"3.14", Decimal("3.14")), (types.BOOL, b"t", True), (types.BOOL, b"off", False),
    (types.TEXT, "héllo".encode(), "héllo"), (0, b"30", "30"),
])
def test_decode_text(oid: int, text: bytes, value: object) -> None:
    assert types.decode_text(oid, text) == value


def test_decode_binary() -> None:
    assert types.decode_binary(types.INT8, struct.pack("!q", -5)) == -5
    assert types.decode_binary(types.INT2, struct.pack("!h", 3)) == 3
    assert types.decode_binary(types.FLOAT8, struct.pack("!d", 2.5)) == 2.5
    assert types.decode_binary(types.BOOL, b"\x01") is True
    with pytest.raises(PgError) as e:
        types.decode_binary(types.INT4, b"\x00")
    assert e.value.sqlstate in ("22P02", "22P03")
    with pytest.raises(PgError):
        types.decode_text(types.INT8, b"abc")


@given(st.decimals(allow_nan=False, allow_infinity=False, places=6, min_value=-10**12, max_value=10**12))
def test_numeric_binary_roundtrip(d: Decimal) -> None:
    enc = types.encoder(types.NUMERIC, 1)(d)
    assert types.decode_binary(types.NUMERIC, enc) == d


def test_text_encoders() -> None:
    assert types.encoder(types.FLOAT8, 0)(3.0) == b"3"
    assert types.encoder(types.FLOAT8, 0)(0.1) == b"0.1"
    assert types.encoder(types.FLOAT8, 0)(float("nan")) == b"NaN"
    assert types.encoder(types.BOOL, 0)(True) == b"t"
    assert types.encoder(types.NUMERIC, 0)(Decimal("1.50")) == b"1.50"
    assert types.encoder(types.INT8, 1)(7) == struct.pack("!q", 7)
    with pytest.raises(PgError):
        types.encoder(1186, 1)  # interval: no binary output
    assert types.encoder(1184, 0)(datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)) == b"2026-01-02 03:04:05+00"
    assert types.encoder(1082, 1)(date(2000, 1, 3)) == struct.pack("!i", 2)
    assert types.decode_binary(1114, struct.pack("!q", 86_400_000_000)) == datetime(2000, 1, 2)
