"""Precision before spending, and SUMs that are never negative where the measure cannot be (issue 23),
through the real proxy process over real PostgreSQL.

- `EXPLAIN` of a statement states, per output column, the standard error it would be answered with now
  (then "free: already released"), equal to what the answer's NOTICE states, and nothing that depends on
  the data (the same text over an emptied table).
- `SHOW lapras.budget` states `remaining.fresh_statements`: exactly that many more fresh statements are
  answered, the next one is refused; repeats do not count.
- A SUM of a measure whose declared domain is non-negative is clamped at 0 (post-processing), and AVG is
  the clamped SUM over the clamped count.
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any

import psycopg
import pytest

from tests.fixtures.notices import notice_columns, noticed

STATEMENT = "SELECT category, count(*), sum(amount), avg(amount) FROM events GROUP BY 1"


def _explain(conn: psycopg.Connection, sql: str) -> list[str]:
    return [str(r[0]) for r in conn.execute("EXPLAIN " + sql).fetchall()]


def _budget(conn: psycopg.Connection) -> dict[str, str]:
    return {str(k): str(v) for k, v in conn.execute("SHOW lapras.budget").fetchall()}


def test_explain_states_each_columns_standard_error_before_spending(proxy_factory: Any) -> None:
    """The standard errors EXPLAIN states are the ones the answer is released with; EXPLAIN charges nothing;
    afterwards the statement is stated free; the lines are the same over an emptied table (no data in them)."""
    px = proxy_factory(epsilon=1.0, delta=1e-3, stream_length=200)
    with noticed(px.dsn(), show_stderr=False) as (conn, notices):
        before = _budget(conn)
        lines = _explain(conn, STATEMENT)
        assert _budget(conn) == before  # nothing charged
        text = "\n".join(lines)
        assert "precision (fresh now)" in text, text
        assert "relative" not in text and not re.search(r"\d%", text.replace("95% interval", ""))  # no relative error
        cols = {ln.split(":")[0].strip(): ln for ln in lines if ln.startswith("    ")}
        assert set(cols) == {"count", "sum", "avg"}, lines
        stated = {c: float(cols[c].split("standard error ")[1].split()[0]) for c in ("count", "sum")}
        conn.execute("SET lapras.show_stderr = on")
        conn.execute(STATEMENT).fetchall()
        released = notice_columns(next(n for n in notices if "stderr=[" in n))  # first row of each column
        assert released["count"][0] == pytest.approx(stated["count"], rel=1e-3)
        assert released["sum"][0] == pytest.approx(stated["sum"], rel=1e-3)
        after = _explain(conn, STATEMENT)
        assert any("precision (free: already released)" in ln for ln in after), after
    empty = proxy_factory(epsilon=1.0, delta=1e-3, stream_length=200)
    with psycopg.connect(empty.upstream_dsn, autocommit=True) as up:  # type: ignore[attr-defined]
        up.execute("TRUNCATE events")
    with psycopg.connect(empty.dsn(), autocommit=True) as conn:
        assert _explain(conn, STATEMENT) == lines


def test_show_budget_counts_the_fresh_statements_left(proxy_factory: Any) -> None:
    """remaining.fresh_statements = n: n distinct fresh statements are answered (the count going down by
    one each, not by a repeat), the (n + 1)-th is refused with 53400."""
    px = proxy_factory(epsilon=1.0, delta=1e-3, stream_length=12)
    with psycopg.connect(px.dsn(), autocommit=True) as conn:
        left = int(_budget(conn)["remaining.fresh_statements"])
        assert 5 <= left <= 40, left
        for i in range(left):
            conn.execute(f"SELECT count(*) FROM adult WHERE age > {20 + i}").fetchall()
            now = int(_budget(conn)["remaining.fresh_statements"])
            assert now == left - i - 1, (i, now)
            conn.execute(f"SELECT count(*) FROM adult WHERE age > {20 + i}").fetchall()  # a repeat: free
            assert int(_budget(conn)["remaining.fresh_statements"]) == now
        with pytest.raises(psycopg.Error) as info:
            conn.execute("SELECT count(*) FROM adult WHERE age > 50 AND sex = 1").fetchall()
        assert info.value.sqlstate == "53400"


def test_sum_of_a_non_negative_measure_is_never_negative(proxy_factory: Any) -> None:
    """Over 5 epochs at the shipped budget: every SUM(amount) (amount is declared 0..500; 3 of 8 categories
    carry no money, so an unclamped noisy sum is negative about half the time) is >= 0, and every AVG is that
    clamped SUM over the count, within the declared domain."""
    px = proxy_factory(epsilon=1.0, delta=1e-3, stream_length=200)
    sums = []
    with psycopg.connect(px.dsn(user="dba", password="dbapass"), autocommit=True) as conn:
        for _ in range(5):
            conn.execute("SELECT lapras.new_epoch()")
            for cat, count, total, avg in conn.execute(STATEMENT).fetchall():
                sums.append(total)
                assert total >= 0, (cat, total)
                if count > 0:
                    expected = min(max(total / count, Decimal(0)), Decimal(500))
                    assert avg is not None and abs(float(avg) - float(expected)) <= 1e-6 * max(1.0, float(expected))
    assert sum(1 for s in sums if s == 0) >= 5  # the clamp was needed (zero-money categories)
