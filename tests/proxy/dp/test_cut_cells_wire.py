"""Literals that cut a cell, end to end (issue 25): psycopg over a real socket to the real proxy on the
embedded PostgreSQL (the session's `events` and `orders` demo tables: hourly timestamptz cells, amount in
bins of 50, days). Grafana's ``$__timeFilter`` (``"ts" BETWEEN '...T00:00:00Z' AND '...T23:59:59Z'``), an
inclusive end on a cell boundary and ``amount > 105`` are answered, not refused. For each statement the
engine's exact answer (noise-free: PostgreSQL through the pushed-down SQL over each user's bounded rows)
equals PostgreSQL's own answer to the analyst's SQL over those same bounded rows, and the proxy's noisy
answer lies within 5 of its stated standard errors (plus 1, the rounding of a count) of it: a Gaussian
beyond 5 standard deviations has probability 5.7e-7 per value, under 1e-4 over the values of this file. A literal cutting a cell in a GROUP BY key is refused as before."""

from __future__ import annotations

from typing import Any

import numpy as np
import psycopg
import pytest

from lapras.exact import PostgresExactSource
from parser import plan_query
from proxy.replay.runner import parse_provenance

STATEMENTS = [
    "SELECT count(*) FROM events WHERE \"ts\" BETWEEN '2026-01-01T00:00:00Z' AND '2026-01-31T23:59:59Z'",
    "SELECT count(*) FROM events WHERE ts BETWEEN '2026-04-01 00:00:00' AND '2026-05-01 00:00:00'",
    "SELECT count(*), sum(amount) FROM events WHERE amount > 105",
    "SELECT category, count(*) FROM events WHERE amount >= 105 AND amount <= 230 "
    "AND ts >= '2026-01-15 10:30:00+00' GROUP BY category ORDER BY category",
    "SELECT count(*) FROM orders WHERE order_date >= TIMESTAMP '2026-03-01 10:00' "
    "AND order_date <= TIMESTAMP '2026-06-30 23:59:59'",
]


def _ask(proxy: Any, sql: str) -> tuple[list[tuple[Any, ...]], list[str]]:
    notices: list[str] = []
    with psycopg.connect(proxy.dsn(), autocommit=True) as conn:
        conn.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
        conn.execute("SET lapras.show_stderr = on")
        return conn.execute(sql).fetchall(), notices


def _exact_and_postgres(sql: str, adult_db: str, catalog: Any) -> tuple[Any, list[tuple[Any, ...]],
                                                                         list[tuple[Any, ...]]]:
    """The plan, its exact rows (the engine's exact source) and PostgreSQL's rows for the analyst's SQL
    over the same bounded rows (the exact source's statement table)."""
    plan = plan_query(sql, catalog)
    src = PostgresExactSource(adult_db)
    try:
        table = plan.table_schema
        exact = plan.rows(src.answers(table, plan.queries), None)
        rows = src.statement_table(table, plan.queries)
    finally:
        src.close()
    name = plan.table
    frm = f"{rows.rows_from} AS {name}" if rows.rows_from is not None else name
    with psycopg.connect(adult_db) as conn:
        conn.execute("SET TimeZone = 'UTC'")
        theirs = conn.execute(sql.replace(f"FROM {name} ", f"FROM {frm} ", 1)).fetchall()
    return plan, [tuple(r) for r in exact], theirs


@pytest.mark.parametrize("sql", STATEMENTS)
def test_cut_cells_answered_as_postgresql_answers_the_bounded_rows(sql: str, proxy: Any, adult_db: str,
                                                                    default_config: Any) -> None:
    plan, exact, theirs = _exact_and_postgres(sql, adult_db, default_config.catalog)
    k = len(plan.template.groups)
    want = {r[:k]: r[k:] for r in theirs}
    ours = {r[:k]: r[k:] for r in exact}
    for key, vals in want.items():  # exact: equal up to float8's rounding of a numeric sum
        assert [float(v or 0) for v in ours[key]] == pytest.approx([float(v or 0) for v in vals], rel=1e-12), key
    assert all(float(v or 0) == 0 for r in exact if r[:k] not in want for v in r[k:])  # groups PG omits: empty
    assert any(float(v or 0) > 0 for r in exact for v in r[k:])  # the filter keeps rows: not vacuous
    got, notices = _ask(proxy, sql)
    sd = max(parse_provenance(notices)[1])
    assert 0 < sd < float("inf"), notices
    assert [r[:k] for r in got] == [r[:k] for r in exact]
    for g, e in zip(got, exact, strict=True):
        assert np.allclose([float(x) for x in g[k:]], [float(x or 0) for x in e[k:]], atol=5 * sd + 1, rtol=0), (g, e)


def test_explain_states_the_split_and_a_repeat_is_free(proxy: Any) -> None:
    sql = "SELECT count(*) FROM events WHERE amount > 105 AND ts <= '2026-05-01 00:00:00+00'"
    with psycopg.connect(proxy.dsn(), autocommit=True) as conn:
        text = "\n".join(r[0] for r in conn.execute(f"EXPLAIN {sql}").fetchall())
        assert "cells split at the statement's literals" in text and "amount: > 105" in text, text
        first = conn.execute(sql).fetchall()
        assert conn.execute(sql).fetchall() == first  # stored and replayed, never new noise


@pytest.mark.parametrize("sql", [
    "SELECT CASE WHEN amount > 105 THEN 'hi' ELSE 'lo' END AS k, count(*) FROM events GROUP BY 1",
    "SELECT date_trunc('minute', ts) AS k, count(*) FROM events GROUP BY 1",
])
def test_a_literal_cutting_a_group_key_is_refused_as_before(sql: str, proxy: Any) -> None:
    with psycopg.connect(proxy.dsn(), autocommit=True) as conn:
        with pytest.raises(psycopg.errors.FeatureNotSupported) as err:
            conn.execute(sql)
        assert "cuts the cells" in str(err.value)
        assert conn.execute("SELECT count(*) FROM events WHERE amount > 105").fetchone() is not None


def test_count_distinct_under_a_split_filter_is_within_its_error_of_the_exact_answer(
        proxy: Any, adult_db: str, default_config: Any) -> None:
    sql = ("SELECT category, COUNT(DISTINCT user_id) FROM events WHERE amount > 105 "
           "AND ts < '2026-03-01 12:30:00+00' GROUP BY category ORDER BY category")
    plan = plan_query(sql, default_config.catalog)
    src = PostgresExactSource(adult_db)
    try:
        exact = plan.rows(src.answers(plan.table_schema, plan.queries), None)
    finally:
        src.close()
    got, notices = _ask(proxy, sql)
    sd = max(parse_provenance(notices)[1])
    assert 0 < sd < float("inf") and [r[0] for r in got] == [r[0] for r in exact]
    assert any(e[1] > 0 for e in exact)
    for g, e in zip(got, exact, strict=True):
        assert abs(float(g[1]) - float(e[1])) <= 5 * sd + 1, (g, e, sd)
