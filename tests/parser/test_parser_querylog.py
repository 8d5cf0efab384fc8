"""Real BI traffic: every distinct statement of the 21-day Adult query log plans, and a sample of them agrees
with PostgreSQL on the data."""

from __future__ import annotations

import csv
import os
from pathlib import Path
from random import Random

import psycopg
import pytest
from conftest import Histograms, leading_keys, rows_match
from parser_catalog import ADULT, CATALOG
from test_parser_differential import exact_values, run_pg

from parser import plan_query

# The log is project data beside the repository (not shipped with it): without it these tests skip.
SHARED_DATA = Path(os.environ.get("LAPRAS_SHARED_DATA", Path(__file__).resolve().parents[2].parent / "shared" / "data"))
CSVLOG = SHARED_DATA / "querylogs" / "adult_bi_21d.csv"


def log_statements() -> list[str]:
    if not CSVLOG.exists():
        pytest.skip("../shared/data is not present")
    out: dict[str, None] = {}
    with CSVLOG.open(newline="") as fh:
        for rec in csv.reader(fh):
            msg = rec[13] if len(rec) > 13 else ""
            if msg.startswith("statement: "):
                out[msg[len("statement: "):]] = None
    return list(out)


def test_every_logged_statement_plans() -> None:
    stmts = log_statements()
    assert len(stmts) > 500
    for sql in stmts:
        plan = plan_query(sql, CATALOG)
        assert plan.queries and plan.columns


def test_logged_statements_match_postgresql(adult_conn: psycopg.Connection, adult_hist: Histograms) -> None:
    stmts = log_statements()
    for sql in Random(21).sample(stmts, 150):
        plan = plan_query(sql, CATALOG)
        ours = plan.rows(exact_values(plan, ADULT, adult_hist))
        problem = rows_match(ours, run_pg(adult_conn, sql, []), leading_keys(plan), ordered=False)
        assert problem is None, f"{sql}\n{problem}"
