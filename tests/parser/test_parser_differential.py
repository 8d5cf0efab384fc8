"""Differential tests against PostgreSQL: the plan's linear queries on exact marginal histograms, then the
plan's post-processing, give PostgreSQL's own answer to the original SQL (hundreds of random queries per run)."""

from __future__ import annotations

import os
from decimal import Decimal
from typing import Any

import numpy as np
import psycopg
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from parser import QueryPlan, plan_query
from parser.model.schema import TableSchema
from parser.pushdown.sql import answers_sql
from tests.fixtures.exact_rows import Histograms, rows_match
from tests.fixtures.parser_catalog import ADULT, CATALOG, MIXED, PEOPLE
from tests.fixtures.parser_strategies import Case, adult_queries, people_queries, random_cases
from tests.fixtures.simulated import as_answered

EXAMPLES = int(os.environ.get("PARSER_DIFF_EXAMPLES", "600"))
"""Random Adult statements per run (1,200 until 2026-12: a run of 400 reached the same 510 parser functions
as a run of 1,200, and with database=None every run draws new ones; set PARSER_DIFF_EXAMPLES for more)."""
_INT_OIDS = {20, 21, 23}
_FLOAT_OIDS = {700, 701, 1700}
_PY_TYPES: dict[int, type] = {20: int, 23: int, 701: float, 1700: Decimal, 25: str, 16: bool}


def run_pg(conn: psycopg.Connection, sql: str, params: list[Any]) -> list[tuple[Any, ...]]:
    """Run ``sql`` with $n parameters sent as text, exactly as an extended-protocol client would (MIN and
    MAX as the proxy answers them: :func:`as_answered`)."""
    sql = as_answered(sql)
    values = [None if p is None else str(p).encode() for p in params]
    res = conn.pgconn.exec_params(sql.encode(), values)
    if res.status not in (2,):  # PGRES_TUPLES_OK
        raise AssertionError(f"PostgreSQL failed on {sql!r} {params}: {res.error_message.decode()}")
    out = []
    for r in range(res.ntuples):
        row: list[Any] = []
        for c in range(res.nfields):
            raw = res.get_value(r, c)
            oid = res.ftype(c)
            if raw is None:
                row.append(None)
            elif oid in _INT_OIDS:
                row.append(int(raw))
            elif oid in _FLOAT_OIDS:
                row.append(float(raw))
            else:
                row.append(raw.decode())
        out.append(tuple(row))
    return out


def exact_values(plan: QueryPlan, table: TableSchema, hist: Histograms) -> np.ndarray:
    return np.array([hist.answer(q) for q in plan.queries])


def check(case: Case, conn: psycopg.Connection, hist: Histograms, table: TableSchema, catalog: Any) -> None:
    plan = plan_query(case.sql, catalog, case.params)
    ours = plan.rows(exact_values(plan, table, hist))
    for row in ours:
        for value, col in zip(row, plan.columns, strict=True):
            assert value is None or isinstance(value, _PY_TYPES[col.type_oid]), (case.sql, col, value)
    theirs = run_pg(conn, case.sql, case.params)
    problem = rows_match(ours, theirs, case.n_keys, case.ordered)
    assert problem is None, f"{case.sql} params={case.params}\n{problem}"


@random_cases(EXAMPLES, case=adult_queries())
def test_random_adult_queries_match_postgresql(case: Case, adult_conn: psycopg.Connection,
                                               adult_hist: Histograms) -> None:
    check(case, adult_conn, adult_hist, ADULT, CATALOG)


@settings(max_examples=max(EXAMPLES * 2 // 5, 50), deadline=None, suppress_health_check=list(HealthCheck),
          database=None)
@given(case=people_queries())
def test_random_nullable_and_text_queries_match_postgresql(case: Case, people_conn: psycopg.Connection,
                                                           people_hist: Histograms) -> None:
    check(case, people_conn, people_hist, PEOPLE, MIXED)


@settings(max_examples=max(EXAMPLES // 200, 8), deadline=None, suppress_health_check=list(HealthCheck),
          database=None)
@given(cases=st.lists(adult_queries(), min_size=3, max_size=8))
def test_answers_sql_matches_histograms(cases: list[Case], adult_conn: psycopg.Connection,
                                        adult_hist: Histograms) -> None:
    """PostgreSQL's exact answers from answers_sql (one round trip for many queries) equal vector . histogram."""
    queries: list[Any] = []
    for case in cases:
        queries.extend(plan_query(case.sql, CATALOG, case.params).queries)
    queries = list(dict.fromkeys(queries))[:300]
    row = adult_conn.execute(answers_sql(ADULT, queries)).fetchone()
    assert row is not None
    for q, got in zip(queries, row, strict=True):
        assert abs(float(got) - q.answer(ADULT, adult_hist[q.marginal])) < 1e-6, q.key


def test_people_answers_sql(people_conn: psycopg.Connection, people_hist: Histograms) -> None:
    plan = plan_query("SELECT city, dept, COUNT(*), SUM(score), COUNT(score) FROM hr.people GROUP BY 1, 2", MIXED)
    row = people_conn.execute(answers_sql(PEOPLE, plan.queries)).fetchone()
    assert row is not None
    for q, got in zip(plan.queries, row, strict=True):
        assert abs(float(got) - q.answer(PEOPLE, people_hist[q.marginal])) < 1e-6, q.key
    assert float(np.sum(people_hist[()])) == 3000
