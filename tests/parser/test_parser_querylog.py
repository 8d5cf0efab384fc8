"""BI traffic: every distinct statement of a generated 21-day Adult query log (csvlog format, as the
server writes it) plans, and a sample of them agrees with PostgreSQL on the data."""

from __future__ import annotations

import csv
from pathlib import Path
from random import Random

import psycopg
from test_parser_differential import exact_values, run_pg

from parser import plan_query
from tests.fixtures.exact_rows import Histograms, leading_keys, rows_match
from tests.fixtures.parser_catalog import ADULT, CATALOG


def log_statements(bi_log: dict[str, Path]) -> list[str]:
    out: dict[str, None] = {}
    with bi_log["csvlog"].open(newline="") as fh:
        for rec in csv.reader(fh):
            msg = rec[13] if len(rec) > 13 else ""
            if msg.startswith("statement: "):
                out[msg[len("statement: "):]] = None
    return list(out)


def test_every_logged_statement_plans(bi_log: dict[str, Path]) -> None:
    stmts = log_statements(bi_log)
    assert len(stmts) > 300
    for sql in stmts:
        plan = plan_query(sql, CATALOG)
        # Value lists (no aggregate) are the public domain, and WHERE may exclude every group by its own
        # text: then there is no query to measure.
        assert plan.columns and (plan.queries or not plan.template.aggs or plan.n_groups == 0)


def test_logged_statements_match_postgresql(adult_conn: psycopg.Connection, adult_hist: Histograms,
                                            bi_log: dict[str, Path]) -> None:
    stmts = log_statements(bi_log)
    for sql in Random(21).sample(stmts, 150):
        plan = plan_query(sql, CATALOG)
        ours = plan.rows(exact_values(plan, ADULT, adult_hist))
        problem = rows_match(ours, run_pg(adult_conn, sql, []), leading_keys(plan), ordered=False)
        assert problem is None, f"{sql}\n{problem}"
