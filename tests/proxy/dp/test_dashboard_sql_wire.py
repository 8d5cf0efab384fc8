"""Dashboard SQL of the second round (issue 25) through the real proxy process over a real socket: value
lists and counts over text expressions that once broke with XX000 (``REPLACE(trim(LOWER(col), ' \\t'),
',', '')``, ``trim(split_part(col, ' ', 1), ...)``, escape strings), a ``time`` column grouped by hour and
filtered on cell boundaries, and sums of per-row expressions over measures. Each answer's keys equal
PostgreSQL's and its values are within 5 reported standard errors (+1 for rounding) of PostgreSQL's exact
answer over the clamped values: a false failure has probability below 1e-6 per value (Gaussian tails)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import time
from typing import Any

import psycopg
import pytest

from tests.fixtures.databases import fill_table
from tests.fixtures.notices import notice_stderrs, noticed

CITIES = ["Paris Nord", " lyon,sud ", "\tMarseille\t", "Nice", "Saint-Étienne", "a,b,,c"]
EXTRA = f"""
[tables.visits]
[tables.visits.columns]
city = {{ type = "text", values = {json.dumps(CITIES)} }}
t = {{ type = "time", resolution = "hour" }}
amount = {{ type = "numeric", min = -50, max = 200 }}
cost = {{ type = "numeric", min = 0, max = 80 }}
zip = {{ type = "int", min = 0, max = 99999, bins = 10000 }}

[tables.detail]
[tables.detail.columns]
""" + "".join(f'"D{i}" = {{ type = "text", values = {json.dumps([f"v{j}" for j in range(40)])} }}\n' for i in range(5))


def _stderrs(notices: list[str]) -> list[float]:
    return notice_stderrs(notices)


@pytest.fixture(scope="module")
def visits_proxy(embedded_pg: Any, default_config: Any, tmp_path_factory: Any, harness: Any) -> Iterator[Any]:
    dsn = harness.demo_database(embedded_pg, default_config, "visits")
    seconds = [(i * 7919) % 86400 for i in range(4000)]
    visits = [(CITIES[(i * 5) % len(CITIES)], time(s // 3600, (s // 60) % 60, s % 60), (i * 37) % 300 - 80,
               (i * 13) % 100, (i * 7919) % 100000) for i, s in enumerate(seconds)]
    # 20 of the 40^5 combinations, 300 rows each
    detail = [tuple(f"v{(combo * (i + 3) + i) % 40}" for i in range(5)) for combo in range(20) for _ in range(300)]
    with psycopg.connect(dsn, autocommit=True) as conn:
        fill_table(conn, "visits (city text, t time, amount numeric, cost numeric, zip integer)", visits)
        fill_table(conn, "detail (" + ", ".join(f'"D{i}" text' for i in range(5)) + ")", detail)
    port = harness.free_port()
    root = tmp_path_factory.mktemp("visits")
    # A budget where partition selection releases keys of a few hundred units (two selections per epoch).
    yield from harness.serve_config(root, harness.make_test_config(dsn, port, epsilon=20.0, delta=1e-5,
                                                                   stream_length=1000, extra=EXTRA,
                                                                   privacy_extra="partition_selections = 2"),
                                    port, dsn)


def _both(proxy: Any, sql: str, exact_sql: str | None = None) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]], float]:
    with psycopg.connect(proxy.upstream_dsn) as direct:
        exact = [tuple(r) for r in direct.execute(exact_sql or sql).fetchall()]
    with noticed(proxy.dsn()) as (conn, notices):
        got = [tuple(r) for r in conn.execute(sql).fetchall()]
    return got, exact, max(_stderrs(notices), default=0.0)


def _close(got: list[tuple[Any, ...]], exact: list[tuple[Any, ...]], sd: float) -> None:
    ours = {r[:-1]: float(r[-1]) for r in got}
    theirs = {r[:-1]: float(r[-1]) for r in exact}
    assert set(theirs) <= set(ours), (got, exact)
    for k, v in ours.items():
        assert abs(v - theirs.get(k, 0.0)) <= 5 * sd + 1, (k, v, theirs.get(k), sd)


@pytest.mark.parametrize("sql", [
    "SELECT REPLACE(trim(LOWER(city), ' \\t'), ',', '') AS k FROM visits GROUP BY 1 ORDER BY 1",
    "SELECT trim(split_part(city, ' ', 1), E' \\t') AS k FROM visits GROUP BY 1 ORDER BY 1",
    "SELECT DISTINCT translate(initcap(trim(city, E'\\t ')), ',', ';') AS k FROM visits ORDER BY 1",
])
def test_value_lists_over_text_expressions(visits_proxy: Any, sql: str) -> None:
    """Value lists are the declared values mapped through the expression (free); PostgreSQL's rows, which
    hold every declared value here, are the same list."""
    got, exact, _ = _both(visits_proxy, sql)
    assert got == exact


@pytest.mark.parametrize("sql", [
    "SELECT REPLACE(trim(LOWER(city), ' \\t'), ',', '') AS k, count(*) FROM visits GROUP BY 1",
    "SELECT split_part(city, ' ', -1) AS k, count(*) FROM visits WHERE lpad(city, 3, '*') <> 'Nic' GROUP BY 1",
    "SELECT concat_ws('/', left(city, 2), length(city)) AS k, count(*) FROM visits GROUP BY 1",
])
def test_counts_over_text_expressions(visits_proxy: Any, sql: str) -> None:
    got, exact, sd = _both(visits_proxy, sql)
    _close(got, exact, sd)


@pytest.mark.parametrize("sql, exact_sql", [
    ("SELECT t, count(*) FROM visits WHERE t >= '09:00' AND t < '12:00' GROUP BY 1",
     "SELECT date_trunc('hour', t::interval)::time, count(*) FROM visits WHERE t >= '09:00' AND t < '12:00' GROUP BY 1"),
    ("SELECT count(*) FROM visits WHERE t BETWEEN TIME '22:00' AND '23:59:59.999999'", None),
])
def test_time_column(visits_proxy: Any, sql: str, exact_sql: str | None) -> None:
    got, exact, sd = _both(visits_proxy, sql, exact_sql)
    _close(got, exact, sd)
    assert all(isinstance(r[0], time) for r in got if len(r) > 1)


def _stderr_of(proxy: Any, sql: str) -> tuple[float, float]:
    with noticed(proxy.dsn()) as (conn, notices):
        (value,) = conn.execute(sql).fetchone()  # type: ignore[misc]
    return float(value), max(_stderrs(notices))


@pytest.mark.parametrize("agg, clamped, bound", [
    ("SUM(ABS(amount))", "abs(a)", 200), ("SUM(amount * amount)", "a * a", 40000),
    ("SUM(amount - cost)", "a - c", 200), ("SUM(CAST(amount AS DOUBLE PRECISION) / NULLIF(2, 0))", "a / 2", 100),
    ("SUM(CASE WHEN amount > 100 THEN amount - 100 ELSE 0 END)", "CASE WHEN a > 100 THEN a - 100 ELSE 0 END", 150),  # conditions unused: [-150, 100]
])
def test_sums_of_measure_expressions(visits_proxy: Any, agg: str, clamped: str, bound: float) -> None:
    """The noise of a sum of a per-row expression is calibrated to its interval bound: its standard error
    is that of SUM(amount) (bound 200, the same budget per fresh statement) times bound / 200; its value is
    PostgreSQL's over the clamped values."""
    _, base = _stderr_of(visits_proxy, "SELECT SUM(amount) FROM visits")
    got, sd = _stderr_of(visits_proxy, f"SELECT {agg} FROM visits")
    assert sd == pytest.approx(base * bound / 200, rel=2e-3)  # NOTICEs print 4 digits
    with psycopg.connect(visits_proxy.upstream_dsn) as direct:
        exact = direct.execute(f"SELECT SUM({clamped}) FROM (SELECT LEAST(GREATEST(amount, -50), 200) AS a, "
                               "LEAST(GREATEST(cost, 0), 80) AS c FROM visits) v").fetchone()[0]  # type: ignore[index]
    assert abs(got - float(exact)) <= 5 * sd + 1


def test_group_by_many_columns_selects_the_combinations_present(visits_proxy: Any) -> None:
    """GROUP BY five columns of 40 values (102,400,000 combinations, too many to list) is answered over the
    combinations DP partition selection releases (the default partition_fraction): a subset of PostgreSQL's
    groups (all of them here: 300 rows each, far above the selection's threshold, which EXPLAIN states in
    units), each count within its stated error; a GROUP BY
    of one column still lists its 40 public values, empty ones included."""
    sql = 'SELECT "D0", "D1", "D2", "D3", "D4", COUNT(*) AS n FROM detail GROUP BY 1, 2, 3, 4, 5'
    with psycopg.connect(visits_proxy.dsn(), autocommit=True) as conn:
        plan = "\n".join(r[0] for r in conn.execute(f"EXPLAIN {sql}").fetchall())
    threshold = float(re.search(r"threshold = (\d+) units", plan).group(1))  # type: ignore[union-attr]
    assert "DP partition selection: keys of (\"D0\", \"D1\", \"D2\", \"D3\", \"D4\")" in plan and threshold < 150, plan
    got, exact, sd = _both(visits_proxy, sql)
    assert {r[:-1] for r in got} <= {r[:-1] for r in exact} and len(exact) == 20
    assert len(got) == 20
    _close(got, exact, sd)
    one, _, _ = _both(visits_proxy, 'SELECT "D0", COUNT(*) FROM detail GROUP BY 1')
    assert len(one) == 40


def test_group_by_a_binned_integer_key(visits_proxy: Any) -> None:
    """GROUP BY a ZIP code declared with bins: one group a bin, keyed by its lower edge (as time cells)."""
    got, exact, sd = _both(visits_proxy, "SELECT zip, COUNT(*) FROM visits GROUP BY 1",
                           "SELECT zip / 10000 * 10000, COUNT(*) FROM visits GROUP BY 1")
    assert [r[0] for r in got] == list(range(0, 100000, 10000))
    _close(got, exact, sd)
