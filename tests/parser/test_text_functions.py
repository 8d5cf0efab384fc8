"""Every text function the planner accepts equals PostgreSQL's own over declared values: each expression
below is compiled by the planner's scalar compiler and evaluated on a list of awkward values (spaces, tabs,
commas, mixed case, non-ASCII, the empty string), and the same expression is evaluated by PostgreSQL over
the same values; results match value by value, and where PostgreSQL raises, the planner refuses with the
same SQLSTATE. Escape strings (``E'...'``) are read as PostgreSQL reads them. Functions PostgreSQL has and
the planner does not evaluate are refused with 0A000 naming them, and the statements that once broke with
an internal error (Tableau's value lists over ``REPLACE(trim(LOWER(col), ' \\t'), ...)``) plan to
PostgreSQL's rows."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from sqlglot import exp

from parser import Refusal, plan_query
from parser import scalar as S
from parser.analysis.scalars import compile_scalar
from parser.model.limits import Budget, Limits
from parser.model.schema import Attribute, Catalog, TableSchema, TextType
from parser.semantics.collation import C_LOCALE, using
from parser.syntax.parse import parse_statements
from pgcore.pgtypes import TEXT
from tests.fixtures.databases import table_fixture
from tests.fixtures.refusals import refused

# Case functions (lower, upper, initcap, ILIKE) follow the database's LC_CTYPE: the test cluster's is C
# (ASCII letters only), told to the planner as the catalog's collation (parser.semantics.collation.C_LOCALE).
ASCII = ("Alpha Beta", " x,y ", "\tpadded\t ", "Zed", "", "a,b,,c", "hello world foo", "MiXeD cAsE-word_2x",
         "  ", "x", "o'brien", "path\\to", "100%", "ab ab ab")
VALUES = ASCII + ("Köln", "Zürich Straße", "日本 語", "ÉCOLE élève")

EXPRESSIONS = [
    # trim and its character sets (sqlglot reads btrim/ltrim/rtrim as TRIM)
    "trim(col)", "btrim(col)", "ltrim(col)", "rtrim(col)", "trim(col, ' \\t')", "trim(col, E' \\t,')",
    "btrim(col, 'xZ ')", "ltrim(col, E'\\t ')", "rtrim(col, ' ,y')", "trim(both 'x' from col)",
    "trim(leading ' ' from col)", "trim(trailing from col)", "trim(col, '')", "btrim(col, NULL)",
    # split_part, including negative fields and empty delimiters
    "split_part(col, ' ', 1)", "split_part(col, ' ', 2)", "split_part(col, ' ', -1)", "split_part(col, ',', -2)",
    "split_part(col, ',', 3)", "split_part(col, '', 1)", "split_part(col, '', -1)", "split_part(col, 'ab', 2)",
    "split_part(col, ' ', 5)", "split_part(col, ' ', -5)",
    # replace, translate
    "replace(col, ',', '')", "replace(col, ' ', '_')", "replace(col, '', 'x')", "replace(col, 'ab', 'AB')",
    "translate(col, 'abc', 'xy')", "translate(col, ' ,', '_')", "translate(col, 'aa', 'xy')", "translate(col, '', 'x')",
    "translate(col, 'öü', 'ou')",
    # left, right, substring
    "left(col, 3)", "left(col, -2)", "left(col, 0)", "right(col, 2)", "right(col, -3)", "right(col, 0)",
    "substring(col, 2)", "substring(col, 2, 3)", "substr(col, 0, 2)", "substring(col from -1 for 3)",
    "substring(col, 5, 0)",
    # padding, repetition, reversal
    "lpad(col, 6)", "lpad(col, 6, '*')", "lpad(col, 3, 'xy')", "rpad(col, 8, 'ab')", "rpad(col, 2)",
    "lpad(col, 6, '')", "rpad(col, 0, 'x')", "lpad(col, -1, 'x')", "repeat(col, 2)", "repeat(col, 0)",
    "repeat(col, -3)", "reverse(col)",
    # lengths and positions
    "length(col)", "char_length(col)", "character_length(col)", "octet_length(col)", "bit_length(col)",
    "position('a' in col)", "strpos(col, ' ')", "strpos(col, '')", "strpos(col, 'ö')",
    # hashes and code points
    "md5(col)", "ascii(col)", "chr(ascii(col) + 1)",
    # concatenation
    "concat(col, '-', 1, NULL)", "concat_ws(', ', col, 'x', NULL, 2)", "concat_ws(NULL, col)", "col || '!'",
    "col || 1", "concat_ws('', col, col)",
    # escape strings
    "col || E'\\t\\n'", "replace(col, E'\\t', E'\\\\t')", "col = E'\\tpadded\\t '", "col || E'\\x41\\101\\u00e9\\q'",
    # compositions Tableau sends
    "trim(split_part(col, ' ', 1), E' \\t\\n')", "length(trim(col)) > 3",
    "starts_with(col, 'Al')", "col LIKE '%a%'", "col NOT LIKE '_b%'",
]
CASE_EXPRESSIONS = ["lower(col)", "upper(col)", "initcap(col)", "initcap(replace(col, '_', ' '))",
                    "lower(trim(col))", "REPLACE(trim(LOWER(col), ' \\t'), ',', '')",
                    "upper(left(trim(col), 1)) || lower(substring(trim(col), 2))", "col ILIKE 'A%'"]


def _compile(expr: str) -> S.Expr:
    node = parse_statements(f"SELECT {expr}")[0].selects[0]  # type: ignore[attr-defined]
    leaf = lambda n: S.Cell("col", TEXT) if isinstance(n, exp.Column) else None  # noqa: E731
    return compile_scalar(node, leaf, Budget(Limits(), None), exact=True)


def _theirs(pg: Any, expr: str, values: tuple[str, ...]) -> tuple[str, list[Any]]:
    """PostgreSQL's values of ``expr`` over ``values`` (in order), or ('error', sqlstate)."""
    try:
        rows = pg.execute(f"SELECT {expr.replace('%', '%%')} FROM unnest(%s::text[]) WITH ORDINALITY AS t(col, i) ORDER BY i",
                          (list(values),)).fetchall()
    except psycopg.Error as e:
        return "error", [e.sqlstate]
    return "ok", [r[0] for r in rows]


def _ours(expr: str, values: tuple[str, ...]) -> tuple[str, list[Any]]:
    try:
        e = _compile(expr)
        return "ok", e.ev(S.Env(len(values), {"col": list(values)}))
    except Refusal as r:
        return "error", [r.sqlstate]


@pytest.fixture(scope="module")
def pg(embedded_pg: Any) -> Any:
    with psycopg.connect(embedded_pg.dsn(), autocommit=True) as conn:
        yield conn


@pytest.mark.parametrize("expr", EXPRESSIONS)
def test_text_function_equals_postgresql_on_declared_values(expr: str, pg: Any) -> None:
    assert _ours(expr, VALUES) == _theirs(pg, expr, VALUES)


@pytest.mark.parametrize("expr", CASE_EXPRESSIONS)
def test_case_functions_equal_postgresql_under_its_ctype(expr: str, pg: Any) -> None:
    assert pg.execute("SELECT datctype FROM pg_database WHERE datname = current_database()").fetchone()[0] == "C"
    with using(C_LOCALE):
        assert _ours(expr, VALUES) == _theirs(pg, expr, VALUES)
    assert _ours(expr, ASCII) == _theirs(pg, expr, ASCII)  # Unicode rules agree on ASCII


@pytest.mark.parametrize("expr", ["repeat(col, 1000000)", "lpad(col, 2000000)", "chr(0)", "split_part(col, ',', 0)",
                                  "E'\\0'", "E'\\303'", "E'\\u12'", "substring(col, 1, -1)"])
def test_errors_carry_postgresqls_sqlstate(expr: str, pg: Any) -> None:
    """What PostgreSQL refuses is refused with its SQLSTATE; what is too long to evaluate on every declared
    value (a million characters a value) is refused with 54000."""
    ours = _ours(expr, ("abc",))
    assert ours[0] == "error"
    theirs = _theirs(pg, expr, ("abc",))
    assert theirs == ours or (theirs[0] == "ok" and ours == ("error", ["54000"]))


@pytest.mark.parametrize("call, name", [
    ("quote_ident(col)", "quote_ident"), ("format('%s', col)", "format"), ("regexp_replace(col, 'a', 'b')", "regexp"),
    ("to_hex(length(col))", "hex"), ("overlay(col placing 'x' from 2)", "overlay"),
    ("string_to_array(col, ',')", "string_to_array"), ("sha256(col::bytea)", "sha256"),
])
def test_other_string_functions_are_refused_naming_them(call: str, name: str) -> None:
    table = TableSchema("t", (Attribute("col", TextType(ASCII)),))
    r = refused(f"SELECT {call} AS k, count(*) FROM t GROUP BY 1", Catalog((table,)))
    assert r.sqlstate == "0A000" and name in r.message.lower(), r.message


SHOP_VALUES = VALUES
SHOP = TableSchema("shop", (Attribute("col", TextType(SHOP_VALUES)), Attribute("n", TextType(("a", "b")))))


shop = table_fixture("textfns", "shop (col text, n text)",
                     lambda: ((SHOP_VALUES[(i * 7) % len(SHOP_VALUES)], "ab"[i % 2]) for i in range(600)))


@pytest.mark.parametrize("sql", [
    "SELECT REPLACE(trim(LOWER(col), ' \\t'), ',', '') AS k, count(*) FROM shop GROUP BY 1",
    "SELECT trim(split_part(col, ' ', 1), E' \\t\\n') AS k, count(*) FROM shop GROUP BY 1",
    "SELECT translate(col, ' ,', '__') AS k, count(*) FROM shop GROUP BY 1",
    "SELECT concat_ws('/', n, lpad(col, 4, '.')) AS k, count(*) FROM shop GROUP BY 1",
    "SELECT count(*) FROM shop WHERE trim(col, E' \\t') = 'padded'",
    "SELECT count(*) FROM shop WHERE split_part(col, ' ', -1) IN ('Beta', 'foo', 'Straße')",
])
def test_text_keys_and_filters_plan_to_postgresqls_rows(sql: str, shop: Any) -> None:
    from parser.pushdown.sql import answers_sql

    plan = plan_query(sql, Catalog((SHOP,), collation=C_LOCALE))
    row = shop.execute(answers_sql(SHOP, plan.queries)).fetchone() if plan.queries else ()
    ours = {tuple(r[:-1]): r[-1] for r in plan.rows([float(v) for v in row]) if r[-1]}
    theirs = {tuple(r[:-1]): r[-1] for r in shop.execute(sql).fetchall() if r[-1]}
    assert ours == theirs


def test_value_lists_over_text_expressions_plan() -> None:
    """Tableau's value lists (no aggregate) over the expressions that once broke with XX000."""
    cat = Catalog((SHOP,))
    for sql in ["SELECT REPLACE(trim(LOWER(col), ' \\t'), ',', '') AS k FROM shop GROUP BY 1",
                "SELECT trim(split_part(col, ' ', 1), ' \\t') AS k FROM shop GROUP BY 1"]:
        keys = {r[0] for r in plan_query(sql, cat).rows([])}
        assert "" in keys and len(keys) > 5


@pytest.mark.parametrize("sql", [
    "SELECT n, MIN(col) AS lo, MAX(col) AS hi FROM shop GROUP BY 1",
    "SELECT MIN(col), MAX(col) FROM shop WHERE col < 'Z'",
    "SELECT n, percentile_disc(0.5) WITHIN GROUP (ORDER BY col) AS m FROM shop GROUP BY 1",
    "SELECT percentile_disc(0.25) WITHIN GROUP (ORDER BY col DESC) FROM shop WHERE col >= 'M'",
])
def test_text_order_statistics_equal_postgresqls_on_exact_counts(sql: str, shop: Any) -> None:
    """MIN / MAX / percentile_disc of text read from exact node counts (no noise) are PostgreSQL's, in the
    database's collation (C here: code point order)."""
    from parser.pushdown.sql import answers_sql

    plan = plan_query(sql, Catalog((SHOP,), collation=C_LOCALE))
    row = shop.execute(answers_sql(SHOP, plan.queries)).fetchone()
    ours = sorted(tuple(r) for r in plan.rows([float(v) for v in row]))
    theirs = sorted(tuple(r) for r in shop.execute(sql).fetchall())
    assert ours == theirs
