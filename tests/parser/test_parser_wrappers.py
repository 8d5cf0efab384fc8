"""Wrappers (CTEs and FROM subqueries that filter, rename, cast or compute per row) are inlined: their
answers agree with PostgreSQL's on the same text; what still needs rows is refused; shape probes are
answered with typed columns and no row, with no linear query (nothing to spend)."""

from __future__ import annotations

import psycopg
import pytest
from test_parser_differential import exact_values, run_pg

from parser import Column, Refusal, describe, plan_query
from tests.fixtures.exact_rows import Histograms, leading_keys, rows_match
from tests.fixtures.parser_catalog import ADULT, MIXED

# Each shape below is what a tool sends (structure from the tools' public sources: Superset's
# `get_from_clause` wraps a virtual dataset as `(...) AS virtual_table`; Metabase nests a model's query
# as `(...) AS "source"`; Power BI's PostgreSQL DirectQuery folds a visual into
# `select ... from (select ... group by ...) "_" where not "_"."a0" is null limit 1000001`).
WRAPPED = [
    # Superset virtual datasets
    "SELECT race AS race, COUNT(*) AS count FROM (SELECT * FROM adult WHERE sex = 1) AS virtual_table "
    "GROUP BY race ORDER BY count DESC LIMIT 10000",
    "SELECT SUM(hours_per_week) AS \"SUM(hours_per_week)\" FROM (SELECT age, hours_per_week, sex FROM public.adult) "
    "AS virtual_table WHERE age >= 30 AND sex IN (0) LIMIT 50000",
    "SELECT decade AS decade, AVG(hours) AS avg FROM (SELECT age / 10 * 10 AS decade, hours_per_week AS hours "
    "FROM adult WHERE race = 1) AS virtual_table GROUP BY decade ORDER BY decade",
    "SELECT COUNT(*) AS count FROM (SELECT CAST(age AS BIGINT) AS age_b, education_num FROM adult) AS virtual_table "
    "WHERE age_b BETWEEN 20 AND 29 AND education_num > 9",
    # CTEs
    "WITH young AS (SELECT age, sex FROM adult WHERE age < 30) SELECT sex, count(*) FROM young GROUP BY sex",
    "WITH a AS (SELECT * FROM adult WHERE race = 1), b AS (SELECT age AS years, income_gt_50k FROM a) "
    "SELECT income_gt_50k, avg(years) FROM b WHERE years > 40 GROUP BY income_gt_50k ORDER BY 1",
    # Metabase models
    'SELECT "source"."sex" AS "sex", count(*) AS "count" FROM (SELECT "public"."adult"."sex" AS "sex", '
    '"public"."adult"."age" AS "age" FROM "public"."adult" WHERE "public"."adult"."race" = 1) AS "source" '
    'WHERE "source"."age" > 50 GROUP BY "source"."sex" ORDER BY "source"."sex" ASC',
    'SELECT sum("source"."hours_per_week") AS "sum" FROM (SELECT "public"."adult"."hours_per_week" AS '
    '"hours_per_week", "public"."adult"."age" * 2 AS "double_age" FROM "public"."adult") AS "source" '
    'WHERE "source"."double_age" >= 80',
    # Power BI DirectQuery (aggregate inside, filter and row limit outside)
    'select "_"."race", "_"."a0" from (select "race", count(1) as "a0" from (select "$Table"."race" as "race", '
    '"$Table"."age" as "age" from "public"."adult" "$Table") "_" where "age" >= 40 group by "race") "_" '
    'where not "_"."a0" is null limit 1000001',
    'select "_"."sex", "_"."a0", "_"."a1" from (select "sex", sum("hours_per_week") as "a0", count(1) as "a1" '
    'from "public"."adult" group by "sex") "_" where not "_"."a0" is null order by "_"."a0" desc limit 1000001',
    # aggregate inside, HAVING-like outer filter on a released value, renamed keys
    "SELECT t.k AS edu, t.n FROM (SELECT education_num AS k, count(*) AS n FROM adult GROUP BY 1) t "
    "WHERE t.n > 1000 ORDER BY t.n DESC",
    # nested three levels
    "SELECT count(*) FROM (SELECT * FROM (SELECT age, race FROM adult WHERE race = 2) x WHERE age > 30) y",
]


@pytest.mark.parametrize("sql", WRAPPED, ids=lambda s: s[:60])
def test_wrapped_matches_postgres(sql: str, adult_conn: psycopg.Connection, adult_hist: Histograms) -> None:
    plan = plan_query(sql, MIXED)
    ours = plan.rows(exact_values(plan, ADULT, adult_hist))
    theirs = run_pg(adult_conn, sql, [])
    ordered = "ORDER BY" in sql.upper() and len(ours) == len(theirs)
    problem = rows_match(ours, theirs, leading_keys(plan), ordered)
    assert problem is None, problem


def test_wrapper_shares_the_flat_statements_queries() -> None:
    flat = plan_query("SELECT race, count(*) FROM adult WHERE sex = 1 GROUP BY race", MIXED)
    wrapped = plan_query("SELECT race, count(*) FROM (SELECT * FROM adult WHERE sex = 1) AS virtual_table "
                         "GROUP BY race", MIXED)
    assert [q.key for q in wrapped.queries] == [q.key for q in flat.queries]
    assert [c.name for c in wrapped.columns] == ["race", "count"]


REFUSED = [
    # still needs rows: a row LIMIT / DISTINCT inside, an aggregate over an aggregate's rows
    ("SELECT count(*) FROM (SELECT age FROM adult LIMIT 100) t", "0A000"),
    ("SELECT count(*) FROM (SELECT DISTINCT age FROM adult) t", "0A000"),
    ("SELECT count(*) FROM (SELECT race, count(*) AS n FROM adult GROUP BY race) t", "0A000"),
    ("SELECT avg(n) FROM (SELECT race, count(*) AS n FROM adult GROUP BY race) t", "0A000"),
    # row-level reads through a wrapper stay row-level reads
    ("SELECT age FROM (SELECT * FROM adult) t", "42501"),
    ("SELECT * FROM (SELECT age, sex FROM adult WHERE race = 1) AS virtual_table LIMIT 100", "42501"),
    # names as PostgreSQL resolves them
    ("SELECT sum(hours_per_week) FROM (SELECT age FROM adult) t", "42703"),
    ("SELECT count(*) FROM (SELECT age FROM adult) t WHERE adult.age > 3", "42P01"),
    ("SELECT count(*) FROM (SELECT age, age FROM adult) t WHERE age > 3", "42702"),
    # joins of wrappers are not inlined
    ("SELECT count(*) FROM (SELECT age FROM adult) a JOIN (SELECT age FROM adult) b ON a.age = b.age", "0A000"),
    ("WITH RECURSIVE r AS (SELECT 1) SELECT count(*) FROM adult", "0A000"),
]


@pytest.mark.parametrize("sql,state", REFUSED, ids=lambda s: str(s)[:60])
def test_wrapped_refusals(sql: str, state: str, adult_conn: psycopg.Connection) -> None:
    with pytest.raises(Refusal) as info:
        plan_query(sql, MIXED)
    assert info.value.sqlstate == state, info.value.message
    if state in ("42703", "42P01", "42702"):
        with pytest.raises(psycopg.Error) as pg:
            adult_conn.execute(sql)  # type: ignore[call-overload]
        assert pg.value.sqlstate == state


PROBES = [
    ("SELECT * FROM adult WHERE sex = 1 LIMIT 1", None),
    ("SELECT age, race AS r, age + 1 AS next, CAST(age AS TEXT) AS t FROM adult LIMIT 0", None),
    ("SELECT * FROM (SELECT age AS a, sex FROM adult WHERE race = 1) AS virtual_table LIMIT 1", None),
    ("SELECT * FROM (SELECT age, count(*) FROM adult GROUP BY age) AS virtual_table LIMIT 0", "agg"),
    # Tableau's and Power BI's metadata queries: a WHERE clause false by its text, no LIMIT.
    ('SELECT * FROM "public"."adult" "adult" WHERE (1 = 0)', None),
    ('SELECT "adult"."age" AS "age", "adult"."race" AS "race" FROM "public"."adult" "adult" WHERE 1=0', None),
    ('SELECT * FROM (SELECT age, sex FROM adult WHERE race = 1) "Custom SQL Query" WHERE (0 <> 0)', None),
    ("SELECT age FROM adult WHERE false AND sex = 1 ORDER BY age", None),
]


@pytest.mark.parametrize("sql,kind", PROBES, ids=lambda s: str(s)[:60])
def test_shape_probe_has_typed_columns_and_no_row(sql: str, kind: str | None,
                                                   adult_conn: psycopg.Connection) -> None:
    """A probe's columns are PostgreSQL's names and types, and it has no query and no row. Deterministic:
    false-failure rate 0."""
    cur = adult_conn.execute(sql)  # type: ignore[call-overload]
    assert cur.description is not None
    theirs = [Column(d.name, d.type_code) for d in cur.description]
    plan = plan_query(sql, MIXED)
    assert list(plan.columns) == theirs
    assert describe(sql, MIXED).columns == tuple(theirs)
    if kind is None:
        assert plan.queries == () and plan.rows([]) == []


def test_probe_still_checks_its_where() -> None:
    """A probe's WHERE is still resolved (an unknown column is 42703), a false-by-its-text WHERE included.
    Deterministic: false-failure rate 0."""
    with pytest.raises(Refusal) as info:
        plan_query("SELECT * FROM adult WHERE agee = 1 LIMIT 1", MIXED)
    assert info.value.sqlstate == "42703"
    with pytest.raises(Refusal) as info:
        plan_query("SELECT age FROM adult WHERE 1 = 0 AND agee = 1", MIXED)
    assert info.value.sqlstate == "42703"


@pytest.mark.parametrize("sql", ["SELECT age FROM adult WHERE 1 = 1", "SELECT age FROM adult WHERE 1 = 0 OR sex = 1",
                                 "SELECT age FROM adult WHERE NOT (1 = 0)", "SELECT age FROM adult WHERE '1' = '0'"])
def test_a_where_clause_that_may_hold_is_no_probe(sql: str) -> None:
    """Only a WHERE false by its text makes a probe; one that may hold is a row read, refused 42501.
    Deterministic: false-failure rate 0."""
    with pytest.raises(Refusal) as info:
        plan_query(sql, MIXED)
    assert info.value.sqlstate == "42501"


def test_series_limit_split() -> None:
    from parser.plan.series import series_limit

    sql = ("SELECT sex AS sex, race AS race, COUNT(*) AS count FROM public.adult JOIN (SELECT race AS race__, "
           "COUNT(*) AS mme_inner__ FROM public.adult GROUP BY race ORDER BY mme_inner__ DESC LIMIT 2) AS "
           "series_limit ON race = race__ WHERE age > 20 GROUP BY sex, race LIMIT 10000")
    with pytest.raises(Refusal):
        plan_query(sql, MIXED)  # one statement cannot answer it: its filter is the output of another
    split = series_limit(sql, MIXED)
    assert split is not None and split.n_keys == 1
    assert [c.name for c in plan_query(split.inner, MIXED).columns] == ["race__", "mme_inner__"]
    outer = plan_query(split.outer([(4,), (1,)]), MIXED)
    assert {r[1] for r in outer.rows([0.0] * len(outer.queries))} == {1, 4}
    assert plan_query(split.outer([]), MIXED).rows([]) == []
    assert series_limit("SELECT count(*) FROM adult a JOIN adult b ON a.age = b.age", MIXED) is None


def test_limit_zero_measures_nothing(adult_conn: psycopg.Connection) -> None:
    """Tableau reads a custom SQL query's columns with LIMIT 0: no row is shown, so nothing is measured."""
    sql = ('SELECT * FROM (SELECT race, count(*) AS n, sum(age) AS a FROM adult GROUP BY race) '
           '"Custom SQL Query" LIMIT 0')
    plan = plan_query(sql, MIXED)
    assert plan.queries == () and plan.rows([]) == []
    cur = adult_conn.execute(sql)  # type: ignore[call-overload]
    assert [(c.name, c.type_oid) for c in plan.columns] == [(d.name, d.type_code) for d in cur.description or []]
    assert plan_query("SELECT count(*) FROM adult LIMIT $1", MIXED, [0]).queries == ()
    assert len(plan_query("SELECT count(*) FROM adult LIMIT $1", MIXED, [1]).queries) == 1
