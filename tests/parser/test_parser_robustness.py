"""Whatever the text, plan_query returns a plan or raises Refusal (never another exception: the proxy would
turn it into XX000), and references_protected answers a bool."""

from __future__ import annotations

import os
import re
from random import Random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from parser import QueryPlan, Refusal, describe, plan_query, references_protected
from tests.fixtures.parser_catalog import MIXED
from tests.fixtures.parser_corpus import CORPUS
from tests.fixtures.parser_strategies import random_cases

EXAMPLES = int(os.environ.get("PARSER_FUZZ_EXAMPLES", "1000"))
TOKENS = sorted({t for sql, _, _ in CORPUS for t in re.findall(r'"[^"]*"|\'[^\']*\'|\$\d|\w+|[^\s\w]', sql)})
EXTRA = ["(", ")", ",", "SELECT", "FROM", "WHERE", "GROUP BY", "ORDER BY", "HAVING", "LIMIT", "NULL", "NOT", "AND",
         "OR", "IN", "BETWEEN", "CASE", "WHEN", "THEN", "ELSE", "END", "OVER", "::", "$1", "'x'", "-1", "1.5", ";"]


def mutate(r: Random, sql: str) -> str:
    toks = re.findall(r'"[^"]*"|\'[^\']*\'|\$\d|\w+|[^\s\w]', sql)
    for _ in range(r.randint(1, 4)):
        op = r.randint(0, 2)
        i = r.randrange(len(toks) + 1)
        if op == 0 and toks:
            del toks[min(i, len(toks) - 1)]
        elif op == 1:
            toks.insert(i, r.choice(TOKENS + EXTRA))
        elif toks:
            j = r.randrange(len(toks))
            toks[min(i, len(toks) - 1)], toks[j] = toks[j], toks[min(i, len(toks) - 1)]
    return " ".join(toks)


def check(sql: str, params: list[object]) -> None:
    try:
        plan = plan_query(sql, MIXED, params)
    except Refusal as r:
        assert r.sqlstate and len(r.sqlstate) == 5 and r.message
        assert r.position is None or 1 <= r.position <= len(sql) + 1
    else:
        assert isinstance(plan, QueryPlan)
        rows = plan.rows([1.0] * len(plan.queries))
        assert all(len(row) == len(plan.columns) for row in rows)
    try:
        describe(sql, MIXED)
    except Refusal:
        pass
    assert isinstance(references_protected(sql, MIXED), bool)


@pytest.mark.slow
@random_cases(EXAMPLES, seed=st.integers(0, 2**63))
def test_mutated_corpus_statements_refuse_cleanly(seed: int) -> None:
    r = Random(seed)
    sql, _, params = r.choice(CORPUS)
    check(mutate(r, sql), list(params) or [r.choice([1, "2", None, "x"]) for _ in range(3)])


@pytest.mark.slow
@settings(max_examples=EXAMPLES // 3, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(text=st.text(max_size=80))
def test_arbitrary_text(text: str) -> None:
    check("SELECT COUNT(*) FROM adult WHERE " + text, [])
    check(text, [])
