"""Regular-expression matches evaluated by the proxy (parser.semantics.regex) equal PostgreSQL's on random patterns of
the supported grammar and random strings (``~``, ``~*``, ``SIMILAR TO``), patterns outside it are refused
naming the part, and filters / keys over a text column plan to PostgreSQL's exact rows."""

from __future__ import annotations

import random
from typing import Any

import psycopg
import pytest

from parser import plan_query
from parser.model.schema import Attribute, Catalog, TableSchema, TextType
from parser.semantics.regex import Unsupported, matches, similar_to_are, translate
from tests.fixtures.databases import table_fixture
from tests.fixtures.refusals import refused

ALPHABET = "aAbBc1 -.\n_%"


def _atom(rng: random.Random, depth: int) -> str:
    r = rng.random()
    if r < 0.35:
        c = rng.choice("aAbBc1 -")
        return c
    if r < 0.45:
        return rng.choice(["\\.", "\\-", "\\%", "\\_", "\\(", "\\|", "\\*", "\\\\"])
    if r < 0.55:
        return "."
    if r < 0.7:
        return rng.choice(["[ab]", "[^a]", "[a-c]", "[A-Ca]", "[-a]", "[a-]", "[]a]", "[^]b]", "[.%]", "[\\d]",
                           "[a\\-c]", "[1-9_]"])
    if r < 0.8:
        return rng.choice(["\\d", "\\w", "\\s", "\\D", "\\W", "\\S", "\\n"])
    if depth < 2:
        return "(" + ("?:" if rng.random() < 0.3 else "") + _alt(rng, depth + 1) + ")"
    return "a"


def _seq(rng: random.Random, depth: int) -> str:
    out = []
    for _ in range(rng.randint(0, 4)):
        a = _atom(rng, depth)
        if rng.random() < 0.35:
            a += rng.choice(["*", "+", "?", "{2}", "{1,}", "{0,2}", "{1,3}", "*?", "+?", "??"])
        out.append(a)
    return "".join(out)


def _alt(rng: random.Random, depth: int) -> str:
    return "|".join(_seq(rng, depth) for _ in range(rng.choice([1, 1, 1, 2, 3])))


def _pattern(rng: random.Random) -> str:
    p = _alt(rng, 0)
    if rng.random() < 0.3:
        p = "^" + p
    if rng.random() < 0.3:
        p += "$"
    return p


def _similar(rng: random.Random) -> str:
    parts = [rng.choice(["a", "b", "A", "%", "_", ".", "(a|b)", "[ab]", "[^a]", "a*", "b+", "(ab)?", "\\%", "\\_",
                         "-", "1", "(a|%)", "c{2}",
                         # escapes go to the regex as written: \S any non-space, \d a digit, \. a dot
                         "\\S", "\\s", "\\d", "\\w", "\\D", "\\W", "\\.", "\\-", "[\\d_]", "[^\\s]",
                         "\\S+", "#", "#%", "#_", "#S"])
             for _ in range(rng.randint(0, 5))]
    return "".join(parts)


def _strings(rng: random.Random) -> list[str]:
    out = ["", "a", "ab", "A.b", "aa-bb", "a\nb", "1_2%", "abc", "B"]
    out += ["".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 6))) for _ in range(30)]
    return out


@pytest.fixture(scope="module")
def pg(embedded_pg: Any) -> Any:
    with psycopg.connect(embedded_pg.dsn(), autocommit=True) as conn:
        yield conn


def test_matches_equal_postgresql_on_random_patterns(pg: Any) -> None:
    rng = random.Random(18)
    patterns = list(dict.fromkeys(_pattern(rng) for _ in range(500)))
    strings = _strings(rng)
    rows = pg.execute("SELECT p, s, s ~ p, s ~* p FROM unnest(%s::text[]) WITH ORDINALITY AS a(p, i), "
                      "unnest(%s::text[]) AS s ORDER BY i, s", (patterns, strings)).fetchall()
    assert len(rows) == len(patterns) * len(strings)
    bad = [(p, s, m, mi) for p, s, m, mi in rows if (matches(s, p, False), matches(s, p, True)) != (m, mi)]
    assert not bad, bad[:10]


def test_similar_to_equals_postgresql_on_random_patterns(pg: Any) -> None:
    rng = random.Random(5)
    patterns = list(dict.fromkeys(_similar(rng) for _ in range(300)))
    strings = _strings(rng)
    rows = pg.execute("SELECT p, s, s SIMILAR TO p FROM unnest(%s::text[]) AS p, unnest(%s::text[]) AS s",
                      (patterns, strings)).fetchall()
    bad = [(p, s, m) for p, s, m in rows if matches(s, similar_to_are(p), False) != m]
    assert not bad, bad[:10]


def test_similar_to_with_another_escape_equals_postgresql(pg: Any) -> None:
    """ESCAPE '#': `#S` is the class escape \\S, `#%` a literal %, and a backslash a literal backslash."""
    rng = random.Random(7)
    patterns = [p for p in dict.fromkeys(_similar(rng) for _ in range(200))
                if (len(p) - len(p.rstrip("#"))) % 2 == 0]  # ending in the escape: an error in both
    strings = [*_strings(rng), "a\\b", "\\", "#", "a#"]
    rows = pg.execute("SELECT p, s, s SIMILAR TO p ESCAPE '#' FROM unnest(%s::text[]) AS p, "
                      "unnest(%s::text[]) AS s", (patterns, strings)).fetchall()
    bad = [(p, s, m) for p, s, m in rows if matches(s, similar_to_are(p, "#"), False) != m]
    assert not bad, bad[:10]


@pytest.mark.parametrize("pattern,part", [
    ("[[:alpha:]]", "[:"), ("a\\b", "\\b"), ("(a)\\1", "\\1"), ("(?=a)", "(?="), ("\\ma", "\\m"),
    ("a**", "quantifier"), ("*a", "quantifier"), ("a{,2}", "{"), ("(a", "unbalanced"), ("a)", "unbalanced"),
    ("[a", "unterminated"), ("[z-a]", "range"), ("a{3,1}", "bound"), ("***:a", "quantifier"),
])
def test_patterns_outside_the_subset_are_refused_naming_the_part(pattern: str, part: str) -> None:
    with pytest.raises(Unsupported) as err:
        translate(pattern)
    assert part in str(err.value)


def test_locale_dependent_matches_on_non_ascii_values_are_refused() -> None:
    assert matches("Zürich", "ü", False)  # a literal character: the same in every locale
    with pytest.raises(Unsupported):
        matches("Zürich", "Ü", True)
    with pytest.raises(Unsupported):
        matches("Zürich", "\\w+", False)


CITIES = ("Aachen", "Berlin", "Bern", "Lyon", "Oslo", "Paris", "St. Gallen", "san jose", "ZZ-9")
TABLE = TableSchema("shop", (Attribute("city", TextType(values=CITIES, nullable=True)),))


def shop_rows() -> list[tuple[str | None]]:
    rng = random.Random(3)
    return [(rng.choice((*CITIES, None)),) for _ in range(1500)]


shop = table_fixture("regex", "shop (city text)", shop_rows)


@pytest.mark.parametrize("sql", [
    "SELECT count(*) FROM shop WHERE city ~ '^B'",
    "SELECT count(*) FROM shop WHERE city ~* 'EN$'",
    "SELECT count(*) FROM shop WHERE city !~ 'e'",
    "SELECT count(*) FROM shop WHERE city !~* '^(s|z)'",
    "SELECT count(*) FROM shop WHERE regexp_like(city, 'ER', 'i')",
    "SELECT count(*) FROM shop WHERE city SIMILAR TO '(B|L)%'",
    "SELECT count(*) FROM shop WHERE city NOT SIMILAR TO '%\\.%'",
    "SELECT count(*) FROM shop WHERE city SIMILAR TO '%#_%' ESCAPE '#'",
    "SELECT city ~ '[0-9]' AS has_digit, count(*) FROM shop GROUP BY 1",
    "SELECT CASE WHEN city ~* '^[a-m]' THEN 'A-M' ELSE 'N-Z' END AS half, count(*) FROM shop GROUP BY 1",
])
def test_regex_filters_and_keys_plan_to_postgresqls_rows(sql: str, shop: Any) -> None:
    from parser.pushdown.sql import answers_sql

    plan = plan_query(sql, Catalog((TABLE,)))
    row = shop.execute(answers_sql(TABLE, plan.queries)).fetchone()
    ours = {tuple(r[:-1]): r[-1] for r in plan.rows([float(v) for v in row]) if r[-1]}
    theirs = {tuple(r[:-1]): r[-1] for r in shop.execute(sql).fetchall() if r[-1]}
    assert ours == theirs


@pytest.mark.parametrize("sql,state,words", [
    ("SELECT count(*) FROM shop WHERE city ~ '[[:upper:]]'", "0A000", "[:"),
    ("SELECT regexp_replace(city, 'a', 'b') AS c, count(*) FROM shop GROUP BY 1", "0A000", "regexp_replace"),
    ("SELECT substring(city from 'B.') AS c, count(*) FROM shop GROUP BY 1", "0A000", "substring"),
    ("SELECT count(*) FROM shop WHERE city ~ $1", "0A000", "constant patterns"),
    ("SELECT count(*) FROM shop WHERE regexp_like(city, 'a', 'x')", "0A000", "flags"),
])
def test_regex_refusals_name_the_part(sql: str, state: str, words: str) -> None:
    r = refused(sql, Catalog((TABLE,)), ["B"])
    assert r.sqlstate == state and words in r.message
