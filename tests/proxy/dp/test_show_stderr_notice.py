"""The `lapras.show_stderr` NOTICE through the real proxy: one entry per aggregate column, in the result's
column order, each with the standard error of that column's value in each row (rows in result order),
scaled as the column is (docs/show_stderr.md documents every field)."""

from __future__ import annotations

import re
from typing import Any

import psycopg
import pytest

from lapras.mechanisms import Cost
from proxy.replay.runner import parse_provenance

pytestmark = pytest.mark.process


def _notice(conn: psycopg.Connection, sql: str) -> tuple[list[tuple[Any, ...]], str, dict[str, list[float]]]:
    """Rows, the outcome word and the stated errors by column name."""
    notices: list[str] = []
    conn.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
    conn.execute("SET lapras.show_stderr = on")
    rows = conn.execute(sql).fetchall()
    line = next(n for n in notices if "stderr=[" in n)
    m = re.fullmatch(r"lapras: outcome=(\w+) stderr=\[(.*)\] cost=(.*)", line)
    assert m is not None, line
    cols: dict[str, list[float]] = {}
    for part in m.group(2).split("; "):
        name, errs = part.split(": ", 1)
        cols[name] = [float(e) for e in errs.split(", ") if e != "..."]
    return rows, m.group(1), cols


def test_errors_follow_the_columns_and_rows(proxy: Any) -> None:
    """`race, COUNT(*), AVG(h), SUM(h)`: the count's errors under `count`, the average's under `avg` (its
    first-order error from the sum's and the count's), the sum's under `sum`, one per row in row order."""
    sql = ("SELECT race, COUNT(*), AVG(hours_per_week), SUM(hours_per_week) FROM adult "
           "WHERE age < 30 GROUP BY race ORDER BY race DESC")
    with psycopg.connect(proxy.dsn(), autocommit=True) as conn:
        rows, outcome, cols = _notice(conn, sql)
    assert list(cols) == ["count", "avg", "sum"]
    assert outcome in ("bad", "good", "repeat")
    assert all(len(v) == len(rows) == 5 for v in cols.values())
    for (_, count, avg, _), sc, sa, ss in zip(rows, cols["count"], cols["avg"], cols["sum"], strict=True):
        assert ss > 10 * sc  # a sum of hours (up to 98 a row) has a larger error than a count
        # AVG = S / C: first-order error sqrt(ss^2 + (avg sc)^2) / C
        want = (ss**2 + (float(avg) * sc) ** 2) ** 0.5 / count
        assert sa == pytest.approx(want, rel=0.02), (sa, want)


def test_scaled_sum_states_the_scaled_error(proxy: Any) -> None:
    """SUM(amount * 1000) is 1,000 times SUM(amount): so is its error."""
    with psycopg.connect(proxy.dsn(), autocommit=True) as conn:
        rows, _, cols = _notice(conn, "SELECT SUM(amount * 1000) AS k, SUM(amount) AS one, "
                                      "SUM(amount) / 10 AS tenth FROM events WHERE country = 'FR'")
    (k,), (one,), (tenth,) = cols["k"], cols["one"], cols["tenth"]
    assert k == pytest.approx(1000 * one, rel=1e-3)
    assert tenth == pytest.approx(one / 10, rel=1e-3)
    assert float(rows[0][0]) == pytest.approx(1000 * float(rows[0][1]), rel=1e-6)


def test_replay_reader_takes_the_numbers() -> None:
    outcomes, errs = parse_provenance(["lapras: outcome=bad stderr=[count: 25.7, 25.8; \"avg 2\": 0.31, ...] "
                                       "cost=mu=0.01"])
    assert outcomes == ["answered"] and errs == [25.7, 25.8, 0.31]


def test_selection_cost_is_stated_as_a_finite_epsilon() -> None:
    """rho = 0.0317 (a partition selection's cost) reads as a finite (epsilon, delta), and that pair is
    a valid conversion: zCDP's delta at epsilon plus e^epsilon delta_events within the stated delta."""
    import math

    from lapras.calibration import zcdp_eps

    c = Cost(rho=0.0317, delta=1e-6)
    eps, delta = c.eps_delta_view()
    assert math.isfinite(eps) and 0 < eps < 2 and delta < 1e-5
    assert zcdp_eps(0.0317, delta - math.exp(eps) * 1e-6) <= eps * (1 + 1e-9)
