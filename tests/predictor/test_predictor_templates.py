"""Canonical form and templates: same meaning -> same key; slot order independent of literal values."""

from __future__ import annotations

from datetime import date

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from parser.coltypes import DateType, IntType, TextType, TimestampType
from predictor.canonical import canonical_key
from predictor.templates import analyse, render

SAME = [
    "SELECT COUNT(*) FROM adult WHERE age >= 30 AND sex = 1",
    "select count(1) from ADULT where sex = 1 and age >= 30",
    "SELECT COUNT(*) AS n FROM adult a WHERE a.sex = 1 AND (30 <= a.age)",
    "SELECT COUNT(*) FROM adult WHERE sex = 1 AND age >= 30 AND sex = 1;",
]


def test_equivalent_texts_share_a_key() -> None:
    keys = {canonical_key(s) for s in SAME}
    assert len(keys) == 1 and None not in keys


def test_different_queries_differ() -> None:
    assert canonical_key("SELECT COUNT(*) FROM t WHERE a = 1") != canonical_key(
        "SELECT COUNT(*) FROM t WHERE a = 2"
    )
    assert canonical_key("SELECT SUM(a) FROM t") != canonical_key("SELECT AVG(a) FROM t")


def test_in_lists_are_sorted() -> None:
    assert canonical_key("SELECT COUNT(*) FROM t WHERE a IN (3, 1, 2, 1)") == canonical_key(
        "SELECT COUNT(*) FROM t WHERE a IN (1, 2, 3)"
    )


def test_slot_order_does_not_depend_on_values() -> None:
    a = analyse("SELECT COUNT(*) FROM adult WHERE education_num = 9 AND age = 63")
    b = analyse("SELECT COUNT(*) FROM adult WHERE age = 63 AND education_num = 10")
    assert a is not None and b is not None
    assert a.template == b.template
    assert a.values == (63, 9) and b.values == (63, 10)
    assert a.columns == ("age", "education_num")


def test_kinds_and_negative_numbers() -> None:
    sh = analyse(
        "SELECT SUM(x) FROM t WHERE d = '2026-10-01' AND ts < '2026-10-01 12:00:00' AND x > -5 AND r = 'n'"
    )
    assert sh is not None
    assert dict(zip(sh.columns, sh.kinds, strict=True)) == {
        "d": DateType,
        "ts": TimestampType,
        "x": IntType,
        "r": TextType,
    }
    assert date(2026, 10, 1) in sh.values and -5 in sh.values


def test_not_queries() -> None:
    for sql in [
        "SET search_path = x",
        "SELECT version()",
        "BEGIN",
        "SELECT COUNT(*) FROM pg_catalog.pg_class",
        "SELECT a FROM t",
    ]:
        sh = analyse(sql)
        assert sh is None or not sh.is_query, sql
    assert analyse("SELEC nonsense (") is None
    assert analyse("SELECT 1; SELECT 2") is None
    sh = analyse("SELECT COUNT(*) FROM t WHERE a = $1")
    assert sh is not None and not sh.concrete


@settings(max_examples=60, deadline=None)
@given(
    a=st.integers(-1000, 1000),
    b=st.integers(-1000, 1000),
    s=st.text(alphabet="abc' ;", max_size=6),
    swap=st.booleans(),
)
def test_render_round_trip(a: int, b: int, s: str, swap: bool) -> None:
    conj = [f"x BETWEEN {a} AND {b}", "name = '" + s.replace("'", "''") + "'"]
    if swap:
        conj.reverse()
    sql = "SELECT COUNT(*) FROM t WHERE " + " AND ".join(conj)
    sh = analyse(sql)
    assert sh is not None
    again = analyse(render(sh.template, sh.values, sh.kinds))
    assert again is not None and again.key == sh.key
    assert canonical_key(sql) == canonical_key(sql)  # pure


@pytest.mark.parametrize("sql", SAME)
def test_key_is_stable_across_calls(sql: str) -> None:
    analyse.cache_clear()
    first = canonical_key(sql)
    analyse.cache_clear()
    assert canonical_key(sql) == first
