"""Issue 18's per-row expression shapes end to end: psycopg over a real socket to the real proxy on the
embedded PostgreSQL (the session's `adult` and `events` demo tables). Each answer is within 5 of its stated
standard errors (lapras.show_stderr) of the exact figure: PostgreSQL's own answer on `adult` (one row a
person), the engine's bounded exact answer on `events` (each user's rows bounded to k, computed by
PostgreSQL). Shapes: GROUP BY an expression of several columns (CASE over two columns, concat of two text
columns, a + b), regular-expression filters and keys (~, ~*, !~, SIMILAR TO, regexp_like), to_char keys and
filters (month and day names, quarters, ISO weeks), and COUNT(DISTINCT) grouped in either order (one query
set: the second is a free repeat)."""

from __future__ import annotations

import re
from typing import Any

import psycopg
import pytest

from parser import plan_query
from proxy.replay.runner import parse_provenance
from tests.fixtures.exact_rows import exact_plan_rows
from tests.fixtures.notices import noticed
from tests.fixtures.refusals import wire_refusal

ADULT = [
    "SELECT CASE WHEN age < 30 AND sex = 1 THEN 'young m' WHEN age < 30 THEN 'young f' ELSE 'other' END AS g, "
    "count(*) FROM adult GROUP BY 1",
    "SELECT race + sex AS k, count(*), sum(hours_per_week) FROM adult GROUP BY race + sex ORDER BY 1",
    "SELECT concat(race, '/', sex) AS k, avg(age) FROM adult WHERE income_gt_50k = 1 GROUP BY 1",
]
EVENTS = [
    "SELECT concat(category, '-', country) AS k, count(*) FROM events WHERE country IN ('DE', 'FR') GROUP BY 1",
    "SELECT CASE WHEN category = 'purchase' AND country ~ '^(US|CA|MX)$' THEN 'na buy' ELSE 'other' END AS g, "
    "count(*) FROM events GROUP BY 1",
    "SELECT CASE WHEN category = 'purchase' AND extract(hour FROM ts) < 12 THEN 'am buy' ELSE 'other' END AS g, "
    "count(*) FROM events GROUP BY 1",
    "SELECT concat(category, ' ', to_char(ts, 'YYYY-MM')) AS k, COUNT(DISTINCT user_id) FROM events "
    "WHERE category IN ('refund', 'signup') GROUP BY 1",
    "SELECT count(*) FROM events WHERE country ~ '^[A-F]'",
    "SELECT count(*) FROM events WHERE category ~* 'CART|VIEW' AND country !~ 'S'",
    "SELECT category SIMILAR TO '%(_up|support)' AS k, count(*) FROM events GROUP BY 1",
    "SELECT sum(duration_s) FROM events WHERE regexp_like(category, '^P', 'i')",
    "SELECT to_char(ts, 'Month') AS m, count(*) FROM events GROUP BY 1",
    "SELECT to_char(ts, 'YYYY \"Q\"Q') AS q, count(*) FROM events GROUP BY 1",
    "SELECT to_char(ts, 'FMDay') AS d, count(*) FROM events WHERE to_char(ts, 'Mon') IN ('Jan', 'Feb') GROUP BY 1",
    "SELECT to_char(ts, 'IYYY-IW') AS w, count(*) FROM events WHERE ts < '2026-02-01' GROUP BY 1",
]


def _ask(proxy: Any, sql: str) -> tuple[list[tuple[Any, ...]], list[str]]:
    with noticed(proxy.dsn()) as (conn, notices):
        return conn.execute(sql).fetchall(), notices


def _compare(got: list[tuple[Any, ...]], exact: list[tuple[Any, ...]], n_aggs: int, sd: float) -> None:
    k = len(exact[0]) - n_aggs if exact else 0
    want = {r[:k]: r[k:] for r in exact}
    assert {r[:k] for r in got} == set(want)
    for row in got:
        for g, w in zip(row[k:], want[row[:k]], strict=True):
            w = 0 if w is None else float(w)
            assert g is not None and abs(float(g) - w) <= 5 * sd + 1, (row, want[row[:k]], sd)


@pytest.mark.parametrize("sql", ADULT)
def test_adult_shapes_within_stated_error_of_postgresql(sql: str, proxy: Any, adult_db: str,
                                                        default_config: Any) -> None:
    plan = plan_query(sql, default_config.catalog)
    k = len(plan.template.groups)
    n_aggs = len(plan.columns) - k
    got, notices = _ask(proxy, sql)
    with psycopg.connect(adult_db) as conn:
        theirs = {r[:k]: r[k:] for r in conn.execute(sql).fetchall()}
    sd = max(parse_provenance(notices)[1])
    assert 0 < sd < float("inf")
    # The proxy lists every group of the public domain; PostgreSQL omits empty ones (their count is 0).
    assert set(theirs) <= {r[:k] for r in got}
    _compare(got, [r[:k] + theirs.get(r[:k], (0,) * n_aggs) for r in got], n_aggs, sd)


@pytest.mark.parametrize("sql", EVENTS)
def test_events_shapes_within_stated_error_of_the_bounded_exact_answer(sql: str, proxy: Any, adult_db: str,
                                                                       default_config: Any) -> None:
    plan, exact = exact_plan_rows(sql, default_config.catalog, adult_db)
    got, notices = _ask(proxy, sql)
    sd = max(parse_provenance(notices)[1])
    assert 0 < sd < float("inf")
    _compare(got, [tuple(r) for r in exact], 1, sd)
    with psycopg.connect(adult_db) as conn:
        theirs = conn.execute(sql).fetchall()
    # The keys PostgreSQL computes itself (to_char's padding, regex matches) are the proxy's.
    k = len(plan.template.groups)
    assert {r[:k] for r in theirs} <= {r[:k] for r in got}


def test_count_distinct_in_either_group_order_is_one_release(proxy: Any) -> None:
    first = ("SELECT category, country, COUNT(DISTINCT user_id) FROM events WHERE country IN ('JP', 'KR') "
             "GROUP BY category, country")
    second = ("SELECT country, category, COUNT(DISTINCT user_id) FROM events WHERE country IN ('JP', 'KR') "
              "GROUP BY country, category")
    with noticed(proxy.dsn()) as (conn, notices):
        a = conn.execute(first).fetchall()
        b = conn.execute(second).fetchall()
    outcomes = [m.group(1) for n in notices for m in re.finditer(r"outcome=(\w+)", n)]
    assert outcomes[-1] == "repeat", notices
    assert {(r[0], r[1]): r[2] for r in a} == {(r[1], r[0]): r[2] for r in b}


@pytest.mark.parametrize("sql, words", [
    ("SELECT regexp_replace(country, 'A', 'x') AS k, count(*) FROM events GROUP BY 1", "regexp_replace"),
    ("SELECT count(*) FROM events WHERE country ~ '[[:upper:]]'", "[:"),
    ("SELECT to_char(ts, 'HH24 TZ') AS k, count(*) FROM events GROUP BY 1", "time zone"),
    ("SELECT to_char(ts, 'HH24:MI') AS k, count(*) FROM events GROUP BY 1", "cuts the cells"),
])
def test_refusals_name_the_part_and_the_connection_serves_on(sql: str, words: str, proxy: Any) -> None:
    with wire_refusal(proxy.dsn(), sql) as (conn, err):
        assert words in str(err)
        assert conn.execute("SELECT count(*) FROM events WHERE country ~ 'U'").fetchone() is not None
