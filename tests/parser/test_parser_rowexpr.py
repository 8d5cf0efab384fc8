"""General per-row expressions (issue 18) against PostgreSQL: any deterministic expression over declared
columns, in WHERE, GROUP BY, SELECT keys or inside an aggregate, is evaluated over the declared cells; the
plan's exact linear answers (computed by PostgreSQL through the pushed-down SQL) equal PostgreSQL's own
answer to the same SQL on the same rows. Refusals carry their SQLSTATE and name the part refused."""

from __future__ import annotations

import random
from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import Any

import numpy as np
import psycopg
import pytest

from parser import Refusal, plan_query
from parser.coltypes import BoolType, DateType, IntType, NumericType, TextType
from parser.model.schema import Attribute, Catalog, TableSchema
from parser.pushdown.sql import answers_sql_batches
from tests.fixtures.databases import table_fixture
from tests.fixtures.exact_rows import leading_keys, norm, rows_match
from tests.fixtures.refusals import refusal_test

CITIES = ("Berlin", "Lyon", "Oslo", "new york", "São Paulo", "O'Hare")
SHOP = TableSchema("shop", (
    Attribute("n", IntType(0, 100, nullable=True)),
    Attribute("k", IntType(1, 4)),
    Attribute("city", TextType(values=CITIES, nullable=True)),
    Attribute("d", DateType(datetime(2008, 1, 1), datetime(2012, 12, 31))),
    Attribute("amount", NumericType(0.0, 500.0, nullable=True)),
    Attribute("paid", BoolType(nullable=True)),
    Attribute("s", IntType(0, 3599)),
))
CATALOG = Catalog((SHOP,))


def shop_rows(n: int = 3000, seed: int = 18) -> list[tuple[Any, ...]]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        out.append((
            None if rng.random() < 0.1 else rng.randint(0, 100),
            rng.randint(1, 4),
            rng.choice([*CITIES, None]),
            date(2008, 1, 1) + timedelta(days=rng.randrange(0, 1827)),
            None if rng.random() < 0.1 else Decimal(rng.randrange(0, 50_000)) / 100,
            rng.choice([True, False, None]),
            rng.randrange(0, 3600),
        ))
    return out


shop_conn = table_fixture("parser_rowexpr", "shop (n integer, k integer, city text, d date, amount numeric(10,2), "
                          "paid boolean, s integer)", shop_rows)


def exact_rows(sql: str, conn: psycopg.Connection) -> tuple[list[tuple[Any, ...]], Any]:
    """The plan's rows with every linear query answered exactly by PostgreSQL (the pushed-down SQL)."""
    plan = plan_query(sql, CATALOG)
    values: list[float] = []
    for batch in answers_sql_batches(SHOP, list(plan.queries)):
        values.extend(float(v) for v in conn.execute(batch).fetchone() or ())
    return [tuple(norm(v) for v in r) for r in plan.rows(np.array(values))], plan


IN_LIST = ", ".join(str(i) for i in range(0, 3600, 7))  # 515 values
IN_TEXT = ", ".join(f"'{i}'" for i in range(0, 3600, 3))  # 1200 values

FORMS = [
    # expressions over a measure (the shop's amounts lie inside its clamp range [0, 500])
    "SELECT SUM(amount * amount) FROM shop", "SELECT SUM(CAST(amount AS INT)) FROM shop",
    "SELECT k, SUM(amount * n) FROM shop GROUP BY 1", "SELECT AVG(ABS(amount - 250)) FROM shop",
    # casts (Tableau wraps every column; Power BI and Looker cast keys to text)
    'SELECT SUM(CAST("n" AS BIGINT)) FROM shop',
    "SELECT CAST(k AS TEXT) AS kt, COUNT(*) FROM shop GROUP BY 1",
    "SELECT CAST(n AS VARCHAR) AS nt, SUM(k) FROM shop GROUP BY CAST(n AS VARCHAR)",
    "SELECT COUNT(*) FROM shop WHERE CAST(EXTRACT(YEAR FROM d) AS BIGINT) >= 2010",
    "SELECT CAST(EXTRACT(YEAR FROM d) AS BIGINT) AS y, COUNT(*) FROM shop GROUP BY 1",
    "SELECT CAST(EXTRACT(YEAR FROM d) AS BIGINT) AS y, SUM(amount) FROM shop "
    "WHERE CAST(EXTRACT(YEAR FROM d) AS BIGINT) BETWEEN 2009 AND 2011 GROUP BY 1",
    "SELECT CAST(d AS TEXT) LIKE '2010-03%' AS march, COUNT(*) FROM shop GROUP BY 1",
    # Looker's date keys and relative filters
    "SELECT TO_CHAR(DATE_TRUNC('month', d), 'YYYY-MM') AS m, COUNT(*) FROM shop WHERE d >= DATE '2010-01-01' "
    "AND d < DATE '2011-01-01' GROUP BY 1 ORDER BY 1 DESC",
    "SELECT TO_CHAR(DATE_TRUNC('quarter', d), 'YYYY-MM') AS q, SUM(amount) FROM shop GROUP BY 1",
    "SELECT TO_CHAR(d, 'YYYY/FMMM/FMDD') AS t, COUNT(*) FROM shop WHERE d < DATE '2008-03-01' GROUP BY 1",
    "SELECT DATE(d) AS dd, COUNT(*) FROM shop WHERE d < DATE '2008-02-01' GROUP BY 1",
    "SELECT COUNT(*) FROM shop WHERE d >= DATE '2012-06-30' + (-1 || ' year')::INTERVAL",
    # NULL tests over nullable columns and expressions
    "SELECT COUNT(*) FROM shop WHERE city IS NULL",
    "SELECT COUNT(*) FROM shop WHERE lower(city) IS NOT NULL AND n IS NULL",
    "SELECT COUNT(*) FROM shop WHERE (n + 1) IS NULL",
    # IN lists of hundreds of values, on columns and on expressions
    f"SELECT COUNT(*) FROM shop WHERE s IN ({IN_LIST})",
    f"SELECT COUNT(*) FROM shop WHERE s + 0 NOT IN ({IN_LIST})",
    f"SELECT k, COUNT(*) FROM shop WHERE CAST(s AS TEXT) IN ({IN_TEXT}) GROUP BY k",
    "SELECT COUNT(*) FROM shop WHERE lower(city) IN ('oslo', 'lyon', NULL)",
    "SELECT COUNT(*) FROM shop WHERE lower(city) NOT IN ('oslo', NULL)",
    # text functions
    "SELECT COUNT(*) FROM shop WHERE strpos(city, 'o') > 0",
    "SELECT COUNT(*) FROM shop WHERE position('o' in lower(city)) = 0",
    "SELECT COUNT(*) FROM shop WHERE city LIKE '%o%'",
    "SELECT COUNT(*) FROM shop WHERE city NOT LIKE 'B%'",
    "SELECT COUNT(*) FROM shop WHERE city ILIKE '%O%' AND k = 2",
    "SELECT COUNT(*) FROM shop WHERE city LIKE 'O''%' OR city LIKE '_yon'",
    "SELECT COUNT(*) FROM shop WHERE replace(city, ' ', '_') LIKE 'new!_%' ESCAPE '!'",
    "SELECT COUNT(*) FROM shop WHERE upper(city) = 'OSLO'",
    "SELECT lower(city) AS c, COUNT(*), SUM(n) FROM shop GROUP BY 1",
    "SELECT lower(substring(city from 1 for 3)) AS c3, COUNT(*) FROM shop GROUP BY 1",
    "SELECT upper(city) AS c, COUNT(*) FROM shop WHERE city NOT LIKE 'S%' GROUP BY 1",
    "SELECT substring(city, 2) AS tail, COUNT(*) FROM shop GROUP BY 1",
    "SELECT left(city, 2) AS l, right(city, 2) AS r, COUNT(*) FROM shop GROUP BY 1, 2",
    "SELECT city || '-' || k AS ck, COUNT(*) FROM shop GROUP BY city, k",
    "SELECT COUNT(*) FROM shop WHERE city || 'x' = 'Oslox'",
    "SELECT concat(city, '/', 1) AS c, COUNT(*) FROM shop GROUP BY 1",
    "SELECT length(city) AS len, COUNT(*) FROM shop GROUP BY 1",
    "SELECT COUNT(*) FROM shop WHERE trim(replace(city, 'o', ' ')) = 'Osl'",
    "SELECT split_part(city, ' ', 1) AS w, COUNT(*) FROM shop GROUP BY 1",
    "SELECT COUNT(*) FROM shop WHERE starts_with(city, 'Ly')",
    # CASE buckets: keys, filters, inside aggregates
    "SELECT CASE WHEN n < 10 THEN 'a' WHEN n < 50 THEN 'b' ELSE 'c' END AS band, COUNT(*) FROM shop GROUP BY 1",
    "SELECT CASE WHEN s < 60 THEN 'minute' WHEN s < 600 THEN 'ten' WHEN s < 1800 THEN 'half' ELSE 'long' END "
    "AS b, COUNT(*), SUM(k) FROM shop GROUP BY 1",
    "SELECT COUNT(*) FROM shop WHERE CASE WHEN city LIKE 'O%' THEN 1 ELSE 0 END = 1",
    "SELECT SUM(CASE WHEN k = 1 THEN amount ELSE 0 END) FROM shop",
    "SELECT SUM(CASE WHEN city ILIKE 'o%' THEN amount ELSE 0 END) AS o, COUNT(*) FROM shop",
    # arithmetic on keys
    "SELECT k * 10 + 1 AS kk, COUNT(*) FROM shop GROUP BY 1",
    "SELECT (s / 60) % 10 AS m, COUNT(*) FROM shop GROUP BY 1",
    "SELECT COUNT(*) FROM shop WHERE s % 7 = 3",
    "SELECT sign(n - 50) AS sg, COUNT(*) FROM shop GROUP BY 1",
    # COALESCE
    "SELECT COALESCE(city, 'none') AS c, COUNT(*) FROM shop GROUP BY 1",
    "SELECT COUNT(*) FROM shop WHERE COALESCE(n, -1) < 0",
    # booleans: filters, keys
    "SELECT COUNT(*) FROM shop WHERE paid",
    "SELECT COUNT(*) FROM shop WHERE NOT paid",
    "SELECT COUNT(*) FROM shop WHERE paid IS NULL",
    "SELECT COUNT(*) FROM shop WHERE paid IS TRUE",
    "SELECT COUNT(*) FROM shop WHERE paid IS NOT FALSE",
    "SELECT COUNT(*) FROM shop WHERE paid IS NOT TRUE AND k = 3",
    "SELECT paid, COUNT(*) FROM shop GROUP BY paid",
    "SELECT CAST(paid AS TEXT) AS p, COUNT(*) FROM shop GROUP BY 1",
    "SELECT SUM(CASE WHEN paid THEN 1 ELSE 0 END) FROM shop",
    "SELECT COUNT(*) FROM shop WHERE CAST(paid AS INT) = 1",
    # per-row values inside aggregates: per-cell weights, and affine forms of a measure
    "SELECT SUM(n * 2), SUM(n + 1), AVG(n * 2), COUNT(n + 1) FROM shop",
    "SELECT SUM(COALESCE(n, 0)), SUM(COALESCE(n, 5)), AVG(COALESCE(n, 5)) FROM shop WHERE k < 3",
    "SELECT SUM(s * s), SUM(s / 60), SUM(s % 60) FROM shop",
    "SELECT SUM(CAST(paid AS INT)), AVG(CAST(paid AS INT)), COUNT(CAST(paid AS INT)) FROM shop",
    "SELECT SUM(CASE WHEN n > 50 THEN n * 2 ELSE 0 END), SUM(CASE WHEN paid THEN s - 100 END) FROM shop",
    "SELECT SUM(amount * 2), SUM(amount * 2 + 1), SUM(-amount), AVG(amount / 100) FROM shop",
    "SELECT SUM(COALESCE(amount, 10)), COUNT(COALESCE(amount, 0)), AVG(COALESCE(amount, 10) - 5) FROM shop",
    "SELECT k, SUM(n * k), AVG(n + k) FROM shop GROUP BY k",
    "SELECT SUM(n * k) AS nk, SUM(length(city) * k) AS lk FROM shop WHERE paid",
    "SELECT lower(city) AS c, SUM(n * 2), SUM(amount * 3), COUNT(lower(city)) FROM shop GROUP BY 1",
    "SELECT SUM(CASE WHEN city LIKE 'O%' THEN amount * 2 ELSE 0 END) AS o FROM shop",
    "SELECT SUM(length(city)), AVG(strpos(city, 'o')), SUM(CAST(k AS NUMERIC) / 3) FROM shop",
    "SELECT CAST(EXTRACT(YEAR FROM d) AS BIGINT) AS y, SUM(CASE WHEN k = 1 THEN 1 ELSE 0 END) AS k1 FROM shop "
    "GROUP BY 1 ORDER BY 1",
    # predicates over several columns: evaluated on the product of their cells
    "SELECT COUNT(*) FROM shop WHERE n + k > 10",
    "SELECT k, COUNT(*) FROM shop WHERE n > k * 20 OR city = 'Oslo' GROUP BY k",
    "SELECT COUNT(*) FROM shop WHERE (n + k > 60) IS NULL",
    "SELECT COUNT(*) FROM shop WHERE NOT (n < k * 25) AND paid IS NOT NULL",
    "SELECT SUM(CASE WHEN n > k * 10 THEN amount ELSE 0 END), COUNT(*) FILTER (WHERE length(city) > k + 2) FROM shop",
    "SELECT COUNT(*) FROM shop WHERE n > s",
    # HAVING and ORDER BY over aggregates of expressions
    "SELECT lower(city) AS c, COUNT(*) FROM shop GROUP BY 1 HAVING COUNT(*) > 400 ORDER BY 2 DESC",
]


@pytest.mark.parametrize("sql", FORMS, ids=lambda s: s[:70])
def test_form_matches_postgresql(sql: str, shop_conn: psycopg.Connection) -> None:
    ours, plan = exact_rows(sql, shop_conn)
    theirs = shop_conn.execute(sql).fetchall()
    problem = rows_match(ours, theirs, leading_keys(plan), ordered="ORDER BY" in sql)
    assert problem is None, f"{sql}\n{problem}"


test_refusal_names_the_part = refusal_test(CATALOG, [
    ("SELECT COUNT(*) FROM shop WHERE random() > 0.5", "0A000", "random() is not deterministic"),
    ("SELECT SUM(CASE WHEN random() < 0.5 THEN n END) FROM shop", "0A000", "not deterministic"),
    ("SELECT clock_timestamp() > d, COUNT(*) FROM shop GROUP BY 1", "0A000", "clock_timestamp() is not"),
    ("SELECT COUNT(*) FROM shop WHERE gen_random_uuid() IS NULL", "0A000", "not deterministic"),
    ("SELECT COUNT(*) FROM shop WHERE foo(k) = 1", "42883", "foo(integer) does not exist"),
    ("SELECT COUNT(*) FROM shop WHERE lower(k) = '1'", "42883", "lower(integer) does not exist"),
    ("SELECT COUNT(*) FROM shop WHERE k LIKE '1%'", "42883", "like(integer, text) does not exist"),
    ("SELECT COUNT(*) FROM shop WHERE substring(city, 'x') = 'a'", "0A000", "substring(... from pattern)"),  # regex
    ("SELECT COUNT(*) FROM shop WHERE CAST(amount AS BOOLEAN)", "42846", "cannot cast type numeric to boolean"),
    ("SELECT COUNT(*) FROM shop WHERE CAST(paid AS BIGINT) = 1", "42846", "cannot cast type boolean to bigint"),
    ("SELECT COUNT(*) FROM shop WHERE CAST(city AS BOOLEAN)", "22P02", "invalid input syntax for type boolean"),
    ("SELECT COUNT(*) FROM shop WHERE substring(city from 1 for -1) = ''", "22011", "negative substring length"),
    ("SELECT COUNT(*) FROM shop WHERE city LIKE 'a!' ESCAPE '!'", "22025", "escape character"),
    ("SELECT COUNT(*) FROM shop WHERE 10 / (k - 2) > 1", "22012", "division by zero"),
    ("SELECT COUNT(*) FROM shop WHERE city ~ '[[:upper:]]'", "0A000", "the bracket element [:"),
    ("SELECT COUNT(*) FROM shop WHERE s + n * k > 5", "54000", "1,468,800 combinations"),
    ("SELECT TO_CHAR(d, 'YYYY-MM TZ') AS m, COUNT(*) FROM shop GROUP BY 1", "0A000", "time zone"),
    ("SELECT TO_CHAR(k, '999') AS m, COUNT(*) FROM shop GROUP BY 1", "42883", "to_char(integer, text)"),
])


@pytest.mark.parametrize("sql", [
    "SELECT COUNT(*) FROM shop WHERE foo(k) = 1",
    "SELECT COUNT(*) FROM shop WHERE lower(k) = '1'",
    "SELECT COUNT(*) FROM shop WHERE k LIKE '1%'",
    "SELECT COUNT(*) FROM shop WHERE CAST(paid AS BIGINT) = 1",
    "SELECT COUNT(*) FROM shop WHERE CAST(amount AS BOOLEAN)",
    "SELECT COUNT(*) FROM shop WHERE substring(city from 1 for -1) = ''",
])
def test_refusals_postgresql_raises_have_its_sqlstate(sql: str, shop_conn: psycopg.Connection) -> None:
    with pytest.raises(Refusal) as ours:
        plan_query(sql, CATALOG)
    with pytest.raises(psycopg.Error) as theirs:
        shop_conn.execute(sql)
    assert ours.value.sqlstate == theirs.value.sqlstate, (sql, ours.value.message, str(theirs.value))


def _plan_sums(sql: str) -> list[tuple[str | None, float, float]]:
    plan = plan_query(sql, CATALOG)
    return [(q.value, q.scale, q.sensitivity) for q in plan.queries]


def test_sensitivity_of_a_per_row_value_is_computed_from_the_cells() -> None:
    # SUM(n * 2) is 2 * SUM(n): the same query as SUM(n), scaled (one key, sensitivity 2 * 100).
    assert _plan_sums("SELECT SUM(n * 2) FROM shop") == [("n", 2.0, 200.0)]
    assert plan_query("SELECT SUM(n * 2) FROM shop", CATALOG).queries[0].key == \
        plan_query("SELECT 2 * SUM(n) FROM shop", CATALOG).queries[0].key.replace("|sum(n)|", "|sum(n)*2|")
    # s * s over 0..3599: the largest |value| a cell takes, from the declared domain.
    assert _plan_sums("SELECT SUM(s * s) FROM shop") == [("s", 1.0, 3599.0 ** 2)]
    # Restricted by WHERE to the query's own cells: n <= 10 -> at most 20 a row.
    assert _plan_sums("SELECT SUM(n * 2) FROM shop WHERE n <= 10") == [("n", 2.0, 20.0)]
    # Negative values: |s - 4000| peaks at s = 0.
    assert _plan_sums("SELECT SUM(s - 4000) FROM shop")[0][2] == 4000.0
    # A measure's affine form reads SUM(amount) (sensitivity its clamp, 500) and the count; the factors 2
    # and 1 are post-processing of the noisy values.
    sums = _plan_sums("SELECT SUM(amount * 2 + 1) FROM shop")
    assert sorted(sums, key=lambda t: t[0] or "") == [(None, 1.0, 1.0), ("amount", 1.0, 500.0)]


def test_statement_sensitivity_with_weights_matches_the_dense_matrix() -> None:
    """The engine's factored L2 sensitivity (families of explicit weights) equals the dense computation,
    scaled by the privacy unit's row bound k."""
    from lapras.mechanisms.sensitivity import l2_sensitivity, statement_sensitivity

    unit = TableSchema("shop", (*SHOP.attributes, Attribute("uid", IntType(0, 9))), privacy_unit="uid",
                       max_rows_per_unit=5)
    cat = Catalog((unit,))
    for sql in ("SELECT SUM(s * s), SUM(s), COUNT(*) FROM shop WHERE s < 100",
                "SELECT k, SUM(n * k), SUM(COALESCE(n, 7) - 3), COUNT(*) FROM shop GROUP BY k",
                "SELECT SUM(CASE WHEN k = 1 THEN n * n WHEN k = 2 THEN -n ELSE 0 END), SUM(n) FROM shop"):
        qs = [q for q in plan_query(sql, cat).queries if not q.is_zero]
        marginal = tuple(sorted({a for q in qs for a in q.marginal}))
        rows = []
        for q in qs:
            v = q.vector(unit)
            axes = [marginal.index(a) for a in q.marginal]
            full = np.expand_dims(v, [i for i in range(len(marginal)) if i not in axes])
            full = np.moveaxis(full, list(range(len(q.marginal))), axes) if len(q.marginal) > 1 else full
            rows.append((np.broadcast_to(full, unit.shape(marginal)) / q.sensitivity).reshape(-1))
        dense = 5 * l2_sensitivity(np.array(rows))
        assert statement_sensitivity(unit, qs) == pytest.approx(dense), sql


test_aggregate_refusals_name_the_part = refusal_test(CATALOG, [
    # Expressions over a measure are bounded by interval arithmetic (test_parser_measure_expr.py); refused
    # only when some value in the clamp range could raise an error.
    ("SELECT SUM(amount / n) FROM shop", "0A000", "division by a value that may be 0"),
    ("SELECT SUM(sqrt(amount - 1)) FROM shop", "0A000", "square root of a value that may be negative"),
    ("SELECT SUM(ln(amount)) FROM shop", "0A000", "ln() over a measure"),
    ("SELECT SUM(CAST(k AS TEXT)) FROM shop", "42883", "sum(text) does not exist"),
    ("SELECT AVG(city || 'x') FROM shop", "42883", "avg(text) does not exist"),
    ("SELECT SUM(paid) FROM shop", "42883", "sum(boolean)"),
    ("SELECT SUM(s * d) FROM shop", "42883", "operator does not exist"),
    ("SELECT SUM(CASE WHEN k = 1 THEN 'x' ELSE 0 END) FROM shop", "22P02", "invalid input syntax"),
    ("SELECT SUM(s * n * k) FROM shop", "54000", "spans 408 cells"),
    ("SELECT SUM(random() * n) FROM shop", "0A000", "random() is not deterministic"),
    ("SELECT SUM(n / (k - 2)) FROM shop", "22012", "division by zero"),
])
