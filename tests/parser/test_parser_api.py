"""The parser's public API: describe, parameters, post-processing of noisy values, LinearQuery, routing,
caching, limits and the generated SQL (no database needed except for the clipping test). Nothing here draws
noise or random values: the tests are deterministic (false-failure rate 0)."""

from __future__ import annotations

import dataclasses
from decimal import Decimal
from typing import Any

import numpy as np
import psycopg
import pytest

from parser import (
    Column,
    LinearQuery,
    Planner,
    QueryPlan,
    Refusal,
    describe,
    parse_params_shape,
    plan_query,
    references_protected,
)
from parser.model.schema import Attribute, Catalog, IntType, TableSchema, TextType
from parser.pushdown.histogram import to_dense
from parser.pushdown.sql import answers_sql, answers_sql_batches, marginal_sql
from tests.fixtures.parser_catalog import ADULT, CATALOG, MIXED, PEOPLE


def refusal(sql: str, params: Any = None, catalog: Catalog = CATALOG, **kw: Any) -> Refusal:
    with pytest.raises(Refusal) as info:
        plan_query(sql, catalog, params, **kw)
    return info.value


# -- describe -------------------------------------------------------------------------------------------


def test_describe_gives_types_without_params() -> None:
    d = describe("SELECT race, COUNT(*), SUM(age), AVG(age), SUM(age) / COUNT(*) AS r FROM adult "
                 "WHERE age > $1 AND sex = $2 GROUP BY race LIMIT $3", CATALOG)
    assert d.param_types == (23, 23, 20)
    assert d.columns == (Column("race", 23), Column("count", 20), Column("sum", 20), Column("avg", 701),
                         Column("r", 20))
    assert parse_params_shape("SELECT count(*) FROM hr.people WHERE city = $1", MIXED) == ((25,), (Column("count", 20),))


def test_describe_refuses_like_plan() -> None:
    with pytest.raises(Refusal) as info:
        describe("SELECT * FROM adult WHERE age = $1", CATALOG)
    assert info.value.sqlstate == "42501"


def test_plan_shape_is_known_before_answers() -> None:
    plan = plan_query("SELECT sex, race, count(*) FROM adult GROUP BY sex, race", CATALOG)
    assert plan.n_groups == 10 and len(plan.queries) == 10
    assert [c.name for c in plan.columns] == ["sex", "race", "count"]


# -- parameters -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("params", [[30, 1], ["30", "1"], [b"30", b"1"], [30.0, 1]])
def test_params_bind_like_literals(params: list[Any]) -> None:
    lit = plan_query("SELECT COUNT(*) FROM adult WHERE age > 30 AND sex = 1", CATALOG)
    par = plan_query("SELECT COUNT(*) FROM adult WHERE age > $1 AND sex = $2", CATALOG, params)
    assert lit.queries == par.queries


def test_param_errors() -> None:
    assert refusal("SELECT COUNT(*) FROM adult WHERE age > $1", []).sqlstate == "08P01"
    assert refusal("SELECT COUNT(*) FROM adult WHERE age > $1", ["old"]).sqlstate == "22P02"
    (q,) = plan_query("SELECT COUNT(*) FROM adult WHERE age > $1", CATALOG, [None]).queries
    assert q.is_zero  # age > NULL is never true


def test_limit_param_and_text_param() -> None:
    plan = plan_query("SELECT race, count(*) FROM adult GROUP BY race ORDER BY race LIMIT $1 OFFSET $2", CATALOG,
                      ["2", 1])
    assert plan.rows(np.arange(5.0)) == [(1, 1), (2, 2)]
    plan = plan_query("SELECT dept, count(*) FROM hr.people WHERE city = $1 GROUP BY dept", MIXED, ["Oslo"])
    assert {q.key for q in plan.queries} == {
        f"hr.people|count|city={{\"Oslo\"}}&dept={{\"{d}\"}}" for d in ("eng", "ops", "sales")}


# -- post-processing ------------------------------------------------------------------------------------


def test_excluded_groups_are_omitted_and_contradictions_are_zero() -> None:
    plan = plan_query("SELECT race, COUNT(*) FROM adult WHERE race = 1 GROUP BY race", CATALOG)
    assert len(plan.queries) == 1  # the 4 groups WHERE excludes are omitted, not measured
    assert plan.rows([123.4]) == [(1, 123)]
    plan = plan_query("SELECT race, COUNT(*) FILTER (WHERE race = 1) FROM adult GROUP BY race", CATALOG)
    zero = [q for q in plan.queries if q.is_zero]
    assert len(plan.queries) == 2 and len(zero) == 1  # the 4 other groups share one zero query
    assert zero[0].sensitivity == 0
    rows = plan.rows([123.4 if not q.is_zero else 99.0 for q in plan.queries])
    assert rows == [(0, 0), (1, 123), (2, 0), (3, 0), (4, 0)]


def test_having_order_limit_on_noisy_values() -> None:
    plan = plan_query("SELECT race AS r, COUNT(*) AS n FROM adult GROUP BY r HAVING COUNT(*) > 10 "
                      "ORDER BY n DESC, r LIMIT 2 OFFSET 1", CATALOG)
    noisy = {q.key: v for q, v in zip(plan.queries, [5.2, 40.6, 12.0, 40.4, 3.0], strict=True)}
    values = [noisy[q.key] for q in plan.queries]
    assert plan.rows(values) == [(3, 40), (2, 12)]


def test_avg_of_nonpositive_noisy_count_is_null_and_avg_is_clamped() -> None:
    plan = plan_query("SELECT sex, AVG(age) FROM adult GROUP BY sex", CATALOG)
    kinds = [q.kind for q in plan.queries]
    values = []
    for q, k in zip(plan.queries, kinds, strict=True):
        sex = dict(q.boxes[0])["sex"][0][0]
        if k == "count":
            values.append(-3.0 if sex == 0 else 2.0)
        else:
            values.append(500.0)
    assert plan.rows(values) == [(0, None), (1, 90.0)]


def test_noisy_counts_are_clamped_at_zero_and_avg_divides_by_the_shown_count() -> None:
    """Post-processing: a noisy count is shown rounded and never negative; AVG divides the noisy sum by
    that count (NULL when it is 0), and SUM over a signed weighting may stay negative."""
    plan = plan_query("SELECT race, COUNT(*), AVG(age) FROM adult WHERE race < 3 GROUP BY race", CATALOG)
    values = []
    for q in plan.queries:
        race = dict(q.boxes[0])["race"][0][0]
        if q.kind == "count":
            values.append({0: -2.4, 1: 0.4, 2: 1.6}[race])
        else:
            values.append(100.0)
    assert plan.rows(values) == [(0, 0, None), (1, 0, None), (2, 2, 50.0)]


def test_counts_round_and_stderr_columns() -> None:
    plan = plan_query("SELECT COUNT(*), SUM(1), SUM(2), AVG(age) FROM adult", CATALOG)
    counts = [i for i, q in enumerate(plan.queries) if q.kind == "count"]
    assert len(counts) == 1  # COUNT(*), SUM(1), SUM(2) and AVG's count share one measurement
    values = np.zeros(len(plan.queries))
    values[counts[0]] = 10.6
    values[[i for i in range(len(values)) if i not in counts]] = 400.0
    errs = np.full(len(values), 2.0)
    (row,) = plan.rows(values, errs, with_stderr=True)
    assert row[:4] == (11, 11, 22, pytest.approx(400.0 / 11))  # AVG divides by the count shown
    assert row[4:] == (2.0, 2.0, 4.0, None)
    assert [c.name for c in plan.stderr_columns()] == ["count_stderr", "sum_stderr", "sum_stderr", "avg_stderr"]


def test_integer_arithmetic_like_postgresql() -> None:
    plan = plan_query("SELECT -COUNT(*) / 3, COUNT(*) * 1.5, COUNT(*) / 0, -COUNT(*) FROM adult", CATALOG)
    assert plan.rows([7.0]) == [(-2, 10.5, None, -7)]  # integer division truncates toward zero
    assert plan.rows([-7.0]) == [(0, 0.0, None, 0)]  # a noisy count is clamped at 0 first
    assert [c.type_oid for c in plan.columns] == [20, 701, 20, 20]


def test_rows_checks_value_count() -> None:
    plan = plan_query("SELECT COUNT(*) FROM adult", CATALOG)
    with pytest.raises(ValueError):
        plan.rows([1.0, 2.0])


# -- LinearQuery ----------------------------------------------------------------------------------------


def _one(sql: str, catalog: Catalog = CATALOG) -> LinearQuery:
    (q,) = plan_query(sql, catalog).queries
    return q


def test_vector_factors_and_sensitivity() -> None:
    q = _one("SELECT SUM(age) FROM adult WHERE (age < 30 AND sex = 1) OR race IN (2, 3)")
    assert q.marginal == ("age", "race", "sex")
    v = q.vector(ADULT)
    assert v.shape == (74, 5, 2)
    kron = sum(w * np.einsum("i,j,k->ijk", *vs) for w, vs in q.factors(ADULT))
    assert np.allclose(v, kron)
    ages = np.arange(17, 91)
    expect = ages[:, None, None] * (((ages < 30)[:, None, None] & (np.arange(2) == 1)[None, None, :])
                                    | np.isin(np.arange(5), [2, 3])[None, :, None])
    assert np.array_equal(v, expect)
    assert q.sensitivity == 90
    assert _one("SELECT SUM(age) FROM adult WHERE age < 30").sensitivity == 29
    assert _one("SELECT COUNT(*) FROM adult WHERE age < 30").sensitivity == 1


def test_linear_query_is_frozen_and_hashable() -> None:
    q = _one("SELECT COUNT(*) FROM adult WHERE age < 30")
    with pytest.raises(dataclasses.FrozenInstanceError):
        q.value = "age"  # type: ignore[misc]
    assert {q: 1}[_one("SELECT COUNT(1) FROM adult WHERE 30 > age")] == 1


def test_wide_marginals_are_never_dense_over_the_table() -> None:
    q = _one("SELECT COUNT(*) FROM adult WHERE native_country = 3 AND fnlwgt < 50 AND capital_gain > 10 "
             "AND capital_loss < 5 AND hours_per_week BETWEEN 30 AND 50")
    assert len(q.boxes) == 1 and len(q.marginal) == 5
    ((w, vecs),) = q.factors(ADULT)  # 4e9 cells in the marginal, five short vectors in the Kronecker form
    assert w == 1 and [len(v) for v in vecs] == [100, 100, 100, 99, 42]
    assert [int(v.sum()) for v in vecs] == [89, 5, 50, 21, 1]


def test_nullable_count_col_and_sum() -> None:
    a = _one("SELECT COUNT(score) FROM hr.people", MIXED)
    b = _one("SELECT COUNT(*) FROM hr.people WHERE score IS NOT NULL", MIXED)
    assert a == b and a.key == b.key
    s = _one("SELECT SUM(score) FROM hr.people", MIXED)
    assert s.sensitivity == 10 and s.vector(PEOPLE).tolist() == [-5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9,
                                                                  10, 0]


# -- refusals -------------------------------------------------------------------------------------------


def test_refusal_fields() -> None:
    r = refusal("SELECT COUNT(*) FROM adult WHERE salary > 3")
    assert (r.sqlstate, r.position) == ("42703", 34)
    assert "age" in (r.hint or "")
    r = refusal("SELECT STDDEV(age) FROM adult")
    assert r.sqlstate == "0A000" and "STDDEV" in r.message and r.position == 8 and "COUNT" in (r.hint or "")
    r = refusal("SELECT COUNT(*) FROM adult JOIN other ON true")
    assert r.sqlstate == "0A000" and "JOIN" in r.message
    r = refusal("SELECT COUNT(*) FROM nosuch")
    assert r.sqlstate == "42P01"
    assert refusal("SELECT 1").sqlstate == "0A000"
    assert refusal("").sqlstate == "42601"
    assert refusal("SELECT COUNT(*) FROM adult; SELECT 1").sqlstate == "0A000"


def test_group_limit() -> None:
    r = refusal("SELECT native_country, education_num, hours_per_week, COUNT(*) FROM adult GROUP BY 1, 2, 3")
    assert r.sqlstate == "54000" and "66528 groups" in r.message
    plan = plan_query("SELECT native_country, education_num, COUNT(*) FROM adult GROUP BY 1, 2", CATALOG)
    assert plan.n_groups == 672
    assert refusal("SELECT race, sex, COUNT(*) FROM adult GROUP BY 1, 2", max_groups=5).sqlstate == "54000"


def test_refusals_are_cached_but_fresh() -> None:
    planner = Planner(CATALOG)
    errors = []
    for _ in range(2):
        with pytest.raises(Refusal) as info:
            planner.plan("SELECT * FROM adult")
        errors.append(info.value)
    a, b = errors
    assert a is not b and (a.sqlstate, a.message) == (b.sqlstate, b.message)
    assert len(planner.templates) == 1


def test_plan_cache_hits() -> None:
    planner = Planner(CATALOG)
    sql = "SELECT race, COUNT(*) FROM adult WHERE age BETWEEN $1 AND 39 GROUP BY race"
    p1 = planner.plan(sql, [30])
    assert planner.plan(sql, [30]) is p1 and planner.cached_plan(sql, [30]) is p1
    assert planner.plan(sql, ["30"]) is not p1  # a text parameter is another binding (same answer)
    fixed = "SELECT COUNT(*) FROM adult"
    assert planner.plan(fixed, [[1]]) is planner.plan(fixed, [[1]])  # unhashable values are keyed by their text
    assert Planner(CATALOG).plan(sql, [30]) is not p1  # caches belong to their planner
    assert plan_query(sql, CATALOG, [30]) is not plan_query(sql, CATALOG, [30])  # the one-off helper keeps none
    assert len(planner.templates) == 2


def test_planner_caches_are_keyed_by_digest_and_bounded_in_bytes() -> None:
    planner = Planner(CATALOG, cache_bytes=1 << 20)
    for i in range(200):
        planner.plan(f"SELECT COUNT(*) FROM adult WHERE age > {i % 70} /* {'x' * 5000} {i} */")
    assert planner.templates.bytes <= 1 << 19 and planner.plans.bytes <= 1 << 19
    assert all(isinstance(k, bytes) and len(k) == 16 for k in planner.templates.keys())


# -- routing --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("sql,expected", [
    ("SELECT COUNT(*) FROM adult", True),
    ("select * from PUBLIC.ADULT", True),
    ('SELECT * FROM "adult"', True),
    ('SELECT * FROM "Adult"', False),
    ("SELECT * FROM other.adult", False),
    ("SELECT 1", False),
    ("SELECT * FROM pg_catalog.pg_class", False),
    ("SELECT * FROM t WHERE x IN (SELECT age FROM adult)", True),
    ("WITH x AS (SELECT * FROM adult) SELECT 1", True),
    ("SELECT * FROM t JOIN adult ON true", True),
    ("SELECT 1 UNION SELECT age FROM adult", True),
    ("SELECT query_to_xml('select * from adult', true, true, '')", True),
    ("SELECT * FROM logs WHERE msg = 'adult'", False),
    ("SELECT COUNT(* FROM adult", True),
    ("SELECT COUNT(* FROM other", False),
    ("SELECT count(*) FROM hr.people", True),
    ("COPY adult TO STDOUT", True),
    ("SELECT count(*) FROM people", True),
    ("EXPLAIN ANALYZE SELECT * FROM adult", True),
    ("PREPARE p AS SELECT * FROM adult", True),
    ("DO $$BEGIN PERFORM * FROM adult; END$$", True),
    ("DECLARE c CURSOR FOR SELECT age FROM adult", True),
    ("EXPLAIN SELECT * FROM other", False),
    ("SELECT query_to_xml($q$select * from adult$q$, true, true, '')", True),
])
def test_references_protected(sql: str, expected: bool) -> None:
    assert references_protected(sql, MIXED) is expected


# -- generated SQL --------------------------------------------------------------------------------------


def test_answers_sql_batches_and_shape() -> None:
    plan = plan_query("SELECT native_country, education_num, COUNT(*) FROM adult GROUP BY 1, 2", CATALOG)
    batches = answers_sql_batches(ADULT, plan.queries, max_columns=500)
    assert len(batches) == 2
    with pytest.raises(ValueError):
        answers_sql(ADULT, plan.queries * 3)
    assert marginal_sql(ADULT, ()) == 'SELECT count(*) FROM "public"."adult"'


def test_clipping_in_exact_answers(people_conn: psycopg.Connection) -> None:
    """Values outside the declared domain are clipped by the generated SQL (so one row moves one cell)."""
    table = TableSchema("clip", (Attribute("x", IntType(0, 10)), Attribute("c", TextType(values=("a", "b"), nullable=True))), schema="pg_temp")
    catalog = Catalog((table,))
    people_conn.execute("DROP TABLE IF EXISTS pg_temp.clip")
    people_conn.execute("CREATE TEMP TABLE clip (x int, c text)")
    people_conn.execute("INSERT INTO clip VALUES (-10, 'a'), (0, 'b'), (5, 'zzz'), (100, NULL), (NULL, 'a')")
    plan = plan_query("SELECT SUM(x), COUNT(*), COUNT(c) FROM pg_temp.clip WHERE x >= 10", catalog)
    row = people_conn.execute(answers_sql(table, plan.queries)).fetchone()
    assert row is not None
    assert plan.rows(list(row)) == [(10, 1, 0)]  # 100 -> 10; 'zzz' and NULL are the NULL cell of c
    hist = to_dense(table, ("x", "c"), people_conn.execute(marginal_sql(table, ("x", "c"))).fetchall())
    assert hist.sum() == 5 and hist[0, 0] == 2 and hist[10, 2] == 1 and hist[5, 2] == 1


def test_plan_is_a_queryplan() -> None:
    plan = plan_query("SELECT COUNT(*) FROM hr.people", MIXED)
    assert isinstance(plan, QueryPlan)
    assert (plan.table, plan.schema, plan.table_schema) == ("people", "hr", PEOPLE)


def test_long_or_chains_and_in_lists() -> None:
    ors = " OR ".join(f"fnlwgt = {i % 100}" for i in range(3000))
    (q,) = plan_query(f"SELECT COUNT(*) FROM adult WHERE {ors}", CATALOG).queries
    assert q.marginal == ()  # every fnlwgt value listed: a tautology
    ins = ", ".join(str(i) for i in range(0, 5000, 2))
    (q,) = plan_query(f"SELECT COUNT(*) FROM adult WHERE capital_gain IN ({ins})", CATALOG).queries
    assert q.boxes == ((("capital_gain", tuple((i, i) for i in range(0, 100, 2))),),)


def test_digest_lru_is_bounded_in_entries_and_bytes() -> None:
    from parser.syntax.cache import DigestLRU, digest

    lru = DigestLRU(10, max_bytes=8000)
    for i in range(10):
        lru.put(digest(str(i)), str(i), 700)  # 900 bytes with the slot: 8 fit
    assert lru.get(digest("1")) is None and lru.get(digest("2")) == "2" and 7000 < lru.bytes <= 8000
    lru.put(digest("huge"), "x", 5000)  # more than an eighth of the budget: not kept
    assert lru.get(digest("huge")) is None
    for i in range(20):
        lru.put(digest("k", str(i)), i, 10)
    assert len(lru) == 10
    assert digest("ab", "c") != digest("a", "bc")


def test_values_match_their_declared_types() -> None:
    """Every value rows() produces is of the Python type its column's oid promises (the proxy encodes it)."""
    plan = plan_query("SELECT race, round(count(*)), round(avg(age)), round(avg(age), 1), ceil(sum(age) / 7.0), "
                      "abs(-count(*)), coalesce(sum(age), 0), greatest(count(*), 5), count(*) % 7, race::text, "
                      "sum(CASE WHEN sex = 1 THEN 1 ELSE 0 END), avg(CASE WHEN sex = 1 THEN 1.0 ELSE 0.0 END) "
                      "FROM adult GROUP BY race", CATALOG)
    expected = {20: int, 23: int, 701: float, 25: str, 1700: Decimal}
    for row in plan.rows(np.linspace(3.3, 9999.7, len(plan.queries))):
        for value, col in zip(row, plan.columns, strict=True):
            assert value is None or isinstance(value, expected[col.type_oid]), (col, value)


def test_conditional_sum_measures_only_its_condition() -> None:
    """SUM(CASE WHEN p THEN 1 ELSE 0 END) releases (and pays for) p's count only, never its complement."""
    (q,) = plan_query("SELECT sum(CASE WHEN sex = 1 THEN 1 ELSE 0 END) FROM adult", CATALOG).queries
    assert q.key == "public.adult|count|sex={1}"
    (q,) = plan_query("SELECT sum(CASE WHEN sex = 1 THEN hours_per_week ELSE 0 END) FROM adult", CATALOG).queries
    assert q.key == "public.adult|sum(hours_per_week)|hours_per_week={1..98}&sex={1}"
    keys = {q.key for q in plan_query("SELECT count(CASE WHEN sex = 1 THEN 1 END), "
                                      "avg(CASE WHEN sex = 1 THEN 1.0 ELSE 0.0 END) FROM adult", CATALOG).queries}
    assert keys == {"public.adult|count|sex={1}", "public.adult|count|sex={0}"}  # AVG's denominator needs both


def test_where_form_is_frozen_and_hashable() -> None:
    from parser.analysis import condition as C

    t = Planner(CATALOG).template("SELECT count(*) FROM adult WHERE age BETWEEN $1 AND 39 AND sex IN (0, 1)")
    assert t.where == C.And((C.And((C.Compare("age", ">=", C.Param(1)), C.Compare("age", "<=", C.Lit(39)))),
                             C.In("sex", (C.Lit(0), C.Lit(1)))))
    assert hash(t.where) == hash(Planner(CATALOG).template(
        "SELECT count(*) FROM adult WHERE age BETWEEN $1 AND 39 AND sex IN (0, 1)").where)
    with pytest.raises(dataclasses.FrozenInstanceError):
        t.where.parts = ()  # type: ignore[attr-defined,misc]


def test_one_scalar_evaluator_over_cells_and_groups() -> None:
    """The same compiled expression kinds evaluate over domain cells (buckets, strict) and groups (noisy)."""
    from decimal import Decimal

    from parser.scalar import Arith, Call, Cell, Const, Env

    e = Call("floor", [Arith("/", Arith("-", Cell("age", 23), Const(Decimal("17.0"), 1700)),
                             Const(Decimal("10.0"), 1700))], 1700)
    assert e.ev(Env(3, {"age": [17, 26, 27]})) == [Decimal(0), Decimal(0), Decimal(1)]
    div = Arith("/", Cell("x", 20), Const(0, 23))
    assert div.ev(Env(1, {"x": [5]}, strict=False)) == [None]  # noisy values: NULL, never an error
    with pytest.raises(Refusal) as info:
        div.ev(Env(1, {"x": [5]}))  # public values: 22012, as PostgreSQL
    assert info.value.sqlstate == "22012"
    assert refusal("SELECT age / 0, count(*) FROM adult GROUP BY 1").sqlstate == "22012"
