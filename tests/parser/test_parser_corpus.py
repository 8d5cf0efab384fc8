"""The hand-written BI corpus: supported statements agree with PostgreSQL on the data; refusals carry the
expected SQLSTATE, and where PostgreSQL itself rejects the statement, its SQLSTATE (and syntax position)."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from test_parser_differential import exact_values, run_pg

from parser import Refusal, plan_query
from tests.fixtures.exact_rows import Histograms, leading_keys, rows_match
from tests.fixtures.parser_catalog import ADULT, MIXED, PEOPLE
from tests.fixtures.parser_corpus import CORPUS, OK

# SQLSTATEs PostgreSQL raises itself for these statements; the others are the proxy's own policy.
PG_RAISES = {"42601", "42703", "42P01", "42803", "42883", "22P02", "42P10", "2201W"}


def test_corpus_size() -> None:
    assert len(CORPUS) >= 150
    assert sum(1 for e in CORPUS if e[1] == OK) >= 100
    assert sum(1 for e in CORPUS if e[1] != OK) >= 50


def _is_people(sql: str) -> bool:
    return "hr.people" in sql


@pytest.mark.parametrize("sql,expected,params", [e for e in CORPUS if e[1] == OK], ids=lambda v: str(v)[:60])
def test_supported(sql: str, expected: str, params: list[Any], adult_conn: psycopg.Connection,
                   adult_hist: Histograms, people_conn: psycopg.Connection, people_hist: Histograms) -> None:
    people = _is_people(sql)
    table, conn, hist = (PEOPLE, people_conn, people_hist) if people else (ADULT, adult_conn, adult_hist)
    plan = plan_query(sql, MIXED, params)
    assert len(set(plan.queries)) == len(plan.queries)
    ours = plan.rows(exact_values(plan, table, hist))
    theirs = run_pg(conn, sql, params)
    n_keys = leading_keys(plan)
    ordered = "ORDER BY" in sql.upper() and len(ours) == len(theirs)
    problem = rows_match(ours, theirs, n_keys, ordered)
    assert problem is None, problem


@pytest.mark.parametrize("sql,expected,params", [e for e in CORPUS if e[1] != OK], ids=lambda v: str(v)[:60])
def test_refused(sql: str, expected: str, params: list[Any], adult_conn: psycopg.Connection,
                 people_conn: psycopg.Connection) -> None:
    with pytest.raises(Refusal) as info:
        plan_query(sql, MIXED, params)
    r = info.value
    assert r.sqlstate == expected, (r.sqlstate, r.message)
    assert r.message
    if r.sqlstate == "0A000":
        assert r.hint or "not supported" in r.message
    if expected not in PG_RAISES:
        return
    conn = people_conn if _is_people(sql) else adult_conn
    with pytest.raises(psycopg.Error) as pg:
        conn.execute(sql, prepare=False)  # type: ignore[call-overload]
    assert pg.value.sqlstate == expected, (pg.value.sqlstate, str(pg.value))
    if expected in ("42601", "42703") and pg.value.diag.statement_position is not None:
        assert r.position is not None and str(r.position) == pg.value.diag.statement_position, (
            r.position, pg.value.diag.statement_position, r.message, str(pg.value))
