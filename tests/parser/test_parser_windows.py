"""Window functions over an aggregate statement's groups (Metabase's cumulative count and sum, running
totals, ranks, shares of a partition) against PostgreSQL: on exact (noise-free) values the plan's rows equal
PostgreSQL's for the same SQL (every group here holds rows, so both list the same groups); windows over
rows, inside other expressions, or with frames other than UNBOUNDED PRECEDING to the current row or the
end are refused with 0A000 (deterministic: false-failure rate 0)."""

from __future__ import annotations

import psycopg
import pytest
from test_parser_differential import exact_values

from parser import Refusal, plan_query
from tests.fixtures.exact_rows import Histograms, norm, rows_match
from tests.fixtures.parser_catalog import ADULT, MIXED, PEOPLE
from tests.fixtures.parser_corpus import LOOKER_PIVOT
from tests.fixtures.refusals import refused

ANSWERED = [
    # Metabase (v50+) cumulative count / sum: the window over the grouped rows, ordered by the breakout.
    'SELECT "public"."adult"."race" AS "race", count(*) AS "count", sum(count(*)) OVER (ORDER BY '
    '"public"."adult"."race" ASC ROWS UNBOUNDED PRECEDING) AS "cum" FROM "public"."adult" GROUP BY '
    '"public"."adult"."race" ORDER BY "public"."adult"."race" ASC',
    "SELECT race, sum(sum(hours_per_week)) OVER (ORDER BY race ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) "
    "FROM adult WHERE age >= 40 GROUP BY race ORDER BY race",
    # per-partition totals and running totals (RANGE: peers together), shares of a partition
    "SELECT sex, race, count(*), sum(count(*)) OVER (PARTITION BY sex ORDER BY race), "
    "sum(count(*)) OVER (PARTITION BY sex) FROM adult GROUP BY sex, race ORDER BY 1, 2",
    "SELECT sex, income_gt_50k, count(*) AS n, count(*) OVER (PARTITION BY income_gt_50k) "
    "FROM adult GROUP BY 1, 2 ORDER BY 1, 2",
    # ranks of released values and of keys
    "SELECT race, sum(hours_per_week), rank() OVER (ORDER BY sum(hours_per_week) DESC), "
    "row_number() OVER (ORDER BY race DESC), dense_rank() OVER (ORDER BY count(*) > 5000) FROM adult "
    "GROUP BY race ORDER BY race",
    # whole-partition aggregates, HAVING first (the window sees the groups HAVING keeps)
    "SELECT race, avg(count(*)) OVER (), max(sum(age)) OVER (), min(count(*)) OVER (ORDER BY race RANGE "
    "BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING), count(*) OVER () FROM adult GROUP BY race ORDER BY 1",
    "SELECT race, count(*), sum(count(*)) OVER (ORDER BY race) FROM adult GROUP BY race HAVING count(*) > 1000 "
    "ORDER BY race",
    "SELECT race, count(*), sum(count(*)) OVER (ORDER BY count(*) DESC) AS running FROM adult WHERE race IN (1, 2, 4) "
    "GROUP BY race ORDER BY running",
    # Metabase's cumulative sum over a nested question, and ranks over an aggregate subquery filtered outside
    'SELECT "source"."race" AS "race", "source"."sum" AS "sum", SUM("source"."sum") OVER (ORDER BY "source"."race" '
    'ASC ROWS UNBOUNDED PRECEDING) AS "sum_2" FROM (SELECT "public"."adult"."race" AS "race", '
    'sum("public"."adult"."hours_per_week") AS "sum" FROM "public"."adult" GROUP BY "public"."adult"."race" '
    'ORDER BY "public"."adult"."race" ASC) AS "source" ORDER BY "source"."race" ASC',
    "SELECT s.r, s.n, rank() OVER (ORDER BY s.n DESC) AS k FROM (SELECT race AS r, count(*) AS n FROM adult "
    "WHERE sex = 0 GROUP BY race) s WHERE s.n > 100 ORDER BY k",
    # Metabase's Offset() (previous period): LAG / LEAD over the ordered groups, defaults included
    "SELECT sex, race, count(*), lag(count(*)) OVER (PARTITION BY sex ORDER BY race), lead(sum(age), 2, 0) "
    "OVER (PARTITION BY sex ORDER BY race DESC) FROM adult GROUP BY sex, race ORDER BY 1, 2",
    "SELECT race, lag(count(*), 1, '7') OVER (ORDER BY race), lead(count(*), 3, NULL) OVER (ORDER BY race) "
    "FROM adult GROUP BY race ORDER BY race",
    # a window in ORDER BY (over the same groups as the target list's)
    "SELECT race, count(*) FROM adult GROUP BY race ORDER BY rank() OVER (ORDER BY count(*) DESC), race",
]


# Windows inside expressions (Looker's percent_of_total measure; a CASE whose branches see some groups only):
# values as PostgreSQL's, types aside (arithmetic on noisy values with numeric is float8: a known deviation).
IN_EXPRESSIONS = [
    "SELECT race, count(*), 1.0 * count(*) / NULLIF(sum(count(*)) OVER (), 0) AS pct FROM adult GROUP BY race "
    "ORDER BY race",
    "SELECT sex, race, CASE WHEN race > 0 THEN sum(count(*)) OVER (PARTITION BY sex ORDER BY race) ELSE -1 "
    "END AS r, CASE WHEN race < 3 THEN -1 ELSE sum(count(*)) OVER () END FROM adult GROUP BY sex, race ORDER BY 1, 2",
    "SELECT race, 100 * rank() OVER (ORDER BY sum(age) DESC) + row_number() OVER (ORDER BY race) FROM adult "
    "WHERE sex = 1 GROUP BY race HAVING count(*) > 200 ORDER BY race",
    "SELECT s.r, s.n * 100.0 / sum(s.n) OVER () AS share FROM (SELECT race AS r, count(*) AS n FROM adult "
    "GROUP BY race) s ORDER BY 1",
]


@pytest.mark.parametrize("sql", ANSWERED + IN_EXPRESSIONS, ids=lambda s: s[:70])
def test_windows_over_groups_match_postgresql(sql: str, adult_conn: psycopg.Connection,
                                              adult_hist: Histograms) -> None:
    plan = plan_query(sql, MIXED)
    ours = [tuple(norm(v) for v in r) for r in plan.rows(exact_values(plan, ADULT, adult_hist))]
    theirs = adult_conn.execute(sql).fetchall()  # type: ignore[call-overload]
    problem = rows_match(ours, theirs, 0, ordered=True)
    assert problem is None, f"{sql}\n{problem}"
    if sql in IN_EXPRESSIONS:
        return
    described = [c.type_oid for c in plan.columns]
    cur = adult_conn.execute(sql)  # type: ignore[call-overload]
    assert described == [d.type_code for d in cur.description or []], sql


@pytest.mark.parametrize("sql", [
    "SELECT dept, city, min(city) OVER (PARTITION BY dept ORDER BY city NULLS FIRST ROWS UNBOUNDED PRECEDING), "
    "max(dept) OVER (ORDER BY count(*)), sum(sum(score)) OVER (PARTITION BY dept) FROM hr.people GROUP BY 1, 2 "
    "ORDER BY 1, 2 NULLS FIRST",
])
def test_windows_over_text_keys_match_postgresql(sql: str, people_conn: psycopg.Connection,
                                                 people_hist: Histograms) -> None:
    """MIN / MAX of text over the groups in the database's collation; NULL keys placed as PostgreSQL does."""
    plan = plan_query(sql, MIXED)
    ours = [tuple(norm(v) for v in r) for r in plan.rows(exact_values(plan, PEOPLE, people_hist))]
    problem = rows_match(ours, people_conn.execute(sql).fetchall(), 0, ordered=True)  # type: ignore[call-overload]
    assert problem is None, f"{sql}\n{problem}"


@pytest.mark.parametrize("sql", [
    "SELECT sum(age) OVER () FROM adult",                                   # a window over rows
    "SELECT race, count(*) FROM adult GROUP BY race HAVING sum(count(*)) OVER () > 0",  # in HAVING
    "SELECT race, first_value(count(*)) OVER (ORDER BY race) FROM adult GROUP BY race",
    "SELECT race, lag(count(*), race) OVER (ORDER BY race) FROM adult GROUP BY race",
    "SELECT race, sum(count(*)) OVER (ORDER BY race ROWS 2 PRECEDING) FROM adult GROUP BY race",
    "SELECT race, sum(count(*)) OVER w FROM adult GROUP BY race WINDOW w AS (ORDER BY race)",
    "SELECT DISTINCT race, row_number() OVER () FROM adult",
    # over an aggregate subquery: windows only, over all its groups (not a LIMIT's, not inside expressions)
    "SELECT s.r, rank() OVER (ORDER BY s.n DESC) FROM (SELECT race r, count(*) n FROM adult GROUP BY 1 LIMIT 3) s",
    "SELECT s.r, sum(sum(s.n)) OVER () FROM (SELECT race r, count(*) n FROM adult GROUP BY 1) s",
])
def test_other_windows_are_refused(sql: str) -> None:
    r = refused(sql, MIXED)
    assert r.sqlstate == "0A000", r.message
    assert "window" in r.message.lower() or "subquery" in r.message


@pytest.mark.parametrize(("sql", "state"), [
    ("SELECT race, lag(count(*), 1, 'x') OVER (ORDER BY race) FROM adult GROUP BY race", "22P02"),
    ("SELECT race, lag(count(*), 1, count(*)) OVER (ORDER BY race) FROM adult GROUP BY race", "0A000"),
    ("SELECT race, sum(count(*) > 5) OVER () FROM adult GROUP BY race", "42883"),
    ("SELECT race, avg(race::text) OVER () FROM adult GROUP BY race", "42883"),
])
def test_window_arguments_of_the_wrong_type_are_refused(sql: str, state: str,
                                                                   adult_conn: psycopg.Connection) -> None:
    """As upstream: a LAG default that does not read as the value's type, SUM / AVG of a non-number; a
    non-constant default is not computed (PostgreSQL answers it; the proxy refuses with a hint)."""
    r = refused(sql, MIXED)
    assert r.sqlstate == state, r.message
    if state != "0A000":  # PostgreSQL refuses them too, with the same SQLSTATE
        with pytest.raises(psycopg.Error) as pg:
            adult_conn.execute(sql)  # type: ignore[call-overload]
        assert pg.value.sqlstate == state


NESTED = [
    LOOKER_PIVOT,
    # a level's WHERE over ranks, then windows over the rows it keeps (computed over fewer groups)
    "SELECT *, rank() OVER (ORDER BY n) AS k2, sum(n) OVER () AS tot FROM (SELECT *, rank() OVER (ORDER BY n DESC) "
    "AS k FROM (SELECT race, sex, count(*) AS n FROM adult GROUP BY 1, 2) a) b WHERE k <= 4 ORDER BY k2, race, sex",
    # two-level nested question (Metabase / Superset): a filter on a window column, LIMIT outside
    "SELECT q.race, q.tot FROM (SELECT s.race, sum(s.n) OVER (ORDER BY s.race) AS tot, row_number() OVER "
    "(ORDER BY s.n DESC) AS pos FROM (SELECT race, count(*) AS n FROM adult GROUP BY race) s) q WHERE q.pos <= 3 "
    "ORDER BY q.pos LIMIT 2",
    # Superset's virtual dataset filtered on a rank (one level)
    "SELECT * FROM (SELECT race, count(*) AS n, rank() OVER (ORDER BY count(*) DESC) AS r FROM adult GROUP BY race) "
    "AS virtual_table WHERE r <= 3 LIMIT 1000",
    # a filter on a rank and on a key, then LAG over the rows it keeps
    "SELECT sex, race, n, lag(n) OVER (PARTITION BY sex ORDER BY race) AS prev FROM (SELECT *, dense_rank() OVER "
    "(PARTITION BY sex ORDER BY n DESC) AS d FROM (SELECT sex, race, count(*) AS n FROM adult GROUP BY 1, 2) a) b "
    "WHERE d <= 3 AND race > 0 ORDER BY 1, 2",
    # a filter at every level, each over the rows the previous one kept
    "SELECT x.race, x.c FROM (SELECT y.race, y.c, sum(y.c) OVER (ORDER BY y.race) AS run FROM (SELECT race, c, "
    "row_number() OVER (ORDER BY race) AS rn FROM (SELECT race, sum(age) AS c FROM adult GROUP BY race) z WHERE "
    "race <> 2) y WHERE y.rn > 1) x WHERE x.run > 0 ORDER BY x.race DESC",
    # HAVING below, CASE over a rank
    "SELECT race, n, CASE WHEN k = 1 THEN 'top' ELSE 'rest' END AS tag, max(n) OVER () AS m FROM (SELECT race, "
    "count(*) n, rank() OVER (ORDER BY count(*) DESC) k FROM adult GROUP BY race HAVING count(*) > 100) s "
    "WHERE k <= 4 ORDER BY n DESC",
]


@pytest.mark.parametrize("sql", NESTED, ids=lambda s: s[:60])
def test_levels_over_window_outputs_match_postgresql(sql: str, adult_conn: psycopg.Connection,
                                                    adult_hist: Histograms) -> None:
    """Looker's pivot (four levels of ranks, filters between them) and nested questions over windows: on exact
    values the rows, their order and the column names and types equal PostgreSQL's (false-failure rate 0)."""
    plan = plan_query(sql, MIXED)
    ours = [tuple(norm(v) for v in r) for r in plan.rows(exact_values(plan, ADULT, adult_hist))]
    cur = adult_conn.execute(sql)  # type: ignore[call-overload]
    theirs = cur.fetchall()
    assert ours and len(ours) == len(theirs), (ours, theirs)
    # Looker orders by the row rank only: rows tied on it may come in either order (as in PostgreSQL)
    problem = rows_match(ours, theirs, 0, ordered=sql != LOOKER_PIVOT)
    assert problem is None, f"{sql}\n{problem}"
    if sql == LOOKER_PIVOT:
        assert [r[6] for r in ours] == [r[6] for r in theirs]
    assert [(c.name, c.type_oid) for c in plan.columns] == [(d.name, d.type_code) for d in cur.description or []]


@pytest.mark.parametrize(("sql", "state"), [
    ("SELECT race, sum(rank() OVER (ORDER BY count(*))) OVER () FROM adult GROUP BY race", "42P20"),
    ("SELECT count(*) FROM (SELECT race, rank() OVER (ORDER BY count(*)) AS k FROM adult GROUP BY race) s", "0A000"),
    # the outer levels are post-processing: no subquery, no other table, no function outside the evaluator's
    ("SELECT q.race FROM (SELECT race, rank() OVER (ORDER BY count(*)) AS k FROM adult GROUP BY race) q "
     "WHERE q.k <= (SELECT max(age) FROM adult)", "0A000"),
    ("SELECT q.race FROM (SELECT race, rank() OVER (ORDER BY count(*)) AS k FROM adult GROUP BY race) q, adult a",
     "0A000"),
    ("SELECT q.race, pg_sleep(1) FROM (SELECT race, rank() OVER (ORDER BY count(*)) AS k FROM adult GROUP BY race) "
     "q", "0A000"),
])
def test_nested_windows_written_or_aggregated_are_refused(sql: str, state: str) -> None:
    """Windows nest only by merging levels (PostgreSQL refuses them written nested, 42P20); an aggregate over
    window outputs is not post-processing of one level (false-failure rate 0)."""
    with pytest.raises(Refusal) as err:
        plan_query(sql, MIXED)
    assert err.value.sqlstate == state, err.value.message


