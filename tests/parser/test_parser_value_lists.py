"""Value lists (filter pickers, dimension lists) return the declared public domain without reading data;
groups the WHERE clause excludes by its own text are omitted (known zeros); a value list filtered on another
column is refused."""

from __future__ import annotations

import numpy as np
import psycopg
import pytest
from test_parser_differential import exact_values, run_pg

from parser import Refusal, plan_query
from tests.fixtures.exact_rows import Histograms, leading_keys, rows_match
from tests.fixtures.parser_catalog import ADULT, MIXED, PEOPLE

VALUE_LISTS = [
    # Superset's filter picker, Metabase's field values, Tableau's dimension list, Grafana's variable query
    ("SELECT DISTINCT race FROM adult ORDER BY race LIMIT 1000", [(v,) for v in range(5)]),
    ('SELECT "public"."adult"."sex" AS "sex" FROM "public"."adult" GROUP BY "public"."adult"."sex" '
     'ORDER BY "public"."adult"."sex" ASC LIMIT 1000', [(0,), (1,)]),
    ('SELECT "adult"."race" AS "race" FROM "public"."adult" "adult" GROUP BY 1', [(v,) for v in range(5)]),
    ("SELECT DISTINCT race AS __text, race AS __value FROM adult WHERE race IN (1, 3)", [(1, 1), (3, 3)]),
    ("SELECT DISTINCT race FROM (SELECT * FROM adult) AS virtual_table WHERE race <> 0 LIMIT 1000",
     [(v,) for v in range(1, 5)]),
    ("SELECT DISTINCT sex, race FROM adult WHERE race = 4 ORDER BY 1", [(0, 4), (1, 4)]),
    ("SELECT age / 10 * 10 AS decade FROM adult GROUP BY 1 ORDER BY 1 DESC LIMIT 3", [(90,), (80,), (70,)]),
]


@pytest.mark.parametrize("sql,expected", VALUE_LISTS, ids=lambda s: str(s)[:60])
def test_value_list_is_the_public_domain(sql: str, expected: list[tuple[object, ...]],
                                         adult_conn: psycopg.Connection) -> None:
    plan = plan_query(sql, MIXED)
    assert plan.queries == ()  # nothing to measure, nothing to spend
    ours = plan.rows([])
    assert ours == expected
    theirs = [tuple(r) for r in run_pg(adult_conn, sql, [])]
    if "LIMIT 3" not in sql:
        assert set(theirs) <= set(ours)  # the data's values are among the declared ones


def test_text_domain_value_list() -> None:
    plan = plan_query("SELECT DISTINCT city FROM hr.people WHERE city IS NOT NULL", MIXED)
    city = PEOPLE.attribute("city")
    assert city is not None
    assert plan.rows([]) == [(v,) for v in city.domain if v is not None]


REFUSED = [
    "SELECT DISTINCT race FROM adult WHERE sex = 1",
    'SELECT "race" FROM "adult" WHERE "age" > 60 GROUP BY "race"',
    "SELECT DISTINCT race FROM (SELECT * FROM adult WHERE sex = 1) AS virtual_table LIMIT 1000",
]


@pytest.mark.parametrize("sql", REFUSED, ids=lambda s: s[:60])
def test_filtered_value_list_is_refused(sql: str) -> None:
    with pytest.raises(Refusal) as info:
        plan_query(sql, MIXED)
    assert info.value.sqlstate == "42501"
    assert "would reveal which values occur" in info.value.message and info.value.hint


OMITTED = [
    # a pie filtered with IN shows only its slices
    ("SELECT race AS race, COUNT(*) AS count FROM adult WHERE race IN (1, 2) GROUP BY race ORDER BY count DESC",
     {1, 2}),
    ("SELECT education_num, sum(hours_per_week) FROM adult WHERE education_num >= 13 AND sex = 1 "
     "GROUP BY education_num", {13, 14, 15}),
    ("SELECT race, sex, count(*) FROM adult WHERE race = 1 OR sex = 1 GROUP BY race, sex",
     {(r, s) for r in range(5) for s in range(2) if r == 1 or s == 1}),
    # might be empty (a filter on another column) is not excluded: every group is still there
    ("SELECT race, count(*) FROM adult WHERE age > 85 GROUP BY race", set(range(5))),
    ("SELECT race, count(*) FROM adult WHERE race = 9 GROUP BY race", set()),
]


@pytest.mark.parametrize("sql,keys", OMITTED, ids=lambda s: str(s)[:60])
def test_groups_excluded_by_where_are_omitted(sql: str, keys: set[object], adult_conn: psycopg.Connection,
                                              adult_hist: Histograms) -> None:
    plan = plan_query(sql, MIXED)
    n = leading_keys(plan)
    ours = plan.rows(exact_values(plan, ADULT, adult_hist))
    got = {r[0] if n == 1 else r[:n] for r in ours}
    assert got == keys
    theirs = run_pg(adult_conn, sql, [])
    assert rows_match(ours, theirs, n, False) is None
    noisy = plan.rows(np.zeros(len(plan.queries)))
    assert len(noisy) == len(keys)
