"""`max_sum_per_group = { amount = "auto" }` through a real proxy: the bound is chosen once per epoch at the
first statement that clamps with it, charged as one partition selection (SHOW lapras.budget), shown in
EXPLAIN, replayed after a restart (same B, no new charge), chosen afresh in a new epoch, and it follows the
data's scale (a table with 10x the values gets 10x the bound, to one grid step).

The budget is large (epsilon = 1e4: the histogram's noise sigma is below 0.1 units against bins of hundreds
of units), so the assertions on B fail only if noise moves the 95% point across a grid edge: 2,160 of the 3,000
users lie below the edge under it (176.8, against the 2,850 the 95% point needs) and none above the edge at
it (250): a false-failure rate far below 1e-4 (B = 250 and 2,500 here)."""

from __future__ import annotations

import re
from typing import Any

import psycopg
import pytest

from tests.fixtures.notices import stated_stderrs

_TABLE = """
[tables.{t}]
privacy_unit = "user_id"
max_rows_per_unit = 5
max_rows_per_group = 2
max_sum_per_group = {{ amount = "auto" }}
[tables.{t}.columns]
day = {{ type = "int", min = 0, max = 9 }}
amount = {{ type = "numeric", min = 0, max = {hi}, bins = 10 }}
"""
TABLES = _TABLE.format(t="spend", hi=1000) + _TABLE.format(t="spend10", hi=10000)
SQL = "SELECT day, sum(amount) FROM {t} GROUP BY day ORDER BY 1"
SQL2 = "SELECT day, count(*), sum(amount) FROM spend WHERE day < 5 GROUP BY day ORDER BY 1"


def _fill(dsn: str) -> None:
    """3,000 users with 5 rows each, amounts 1..100 (spend) and 10 x that (spend10): a user's two largest
    amounts sum to at most 200, and 95% of users' to at most about 190."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        for t, f in (("spend", 1), ("spend10", 10)):
            conn.execute(f"CREATE TABLE {t} (user_id int, day int, amount numeric)")
            conn.execute(f"INSERT INTO {t} SELECT u, (u + i) % 10, {f} * (((u * 37 + i * 11) % 100) + 1) "
                         "FROM generate_series(1, 3000) AS u, generate_series(1, 5) AS i")


def _explain(p: Any, sql: str) -> str:
    with psycopg.connect(p.dsn(), autocommit=True) as conn:
        return "\n".join(r[0] for r in conn.execute("EXPLAIN " + sql).fetchall())


def _bound(text: str, table_col: str = "amount") -> float:
    m = re.search(rf"automatic bound: max_sum_per_group\.{table_col} = ([0-9.e+]+)", text)
    assert m is not None, text
    return float(m.group(1))


def _selections_left(p: Any) -> float:
    with psycopg.connect(p.dsn(), autocommit=True) as conn:
        rows: dict[str, str] = dict(conn.execute("SHOW lapras.budget").fetchall())
    return float(rows["partition.selections_left"])


def _run(p: Any, sql: str) -> None:
    with psycopg.connect(p.dsn(), autocommit=True) as conn:
        assert len(conn.execute(sql).fetchall()) >= 5


def test_auto_bound_chosen_once_charged_replayed_and_scaled(harness: Any, embedded_pg: Any,
                                                            default_config: Any, tmp_path: Any) -> None:
    dsn = harness.demo_database(embedded_pg, default_config, "autob")
    _fill(dsn)
    p = harness.start_test_proxy(tmp_path, dsn, epsilon=1e4, stream_length=1000, extra=TABLES)
    try:
        before = _explain(p, SQL.format(t="spend"))
        assert "automatic bound for SUM(amount): not chosen yet this epoch: charged once at first use" in before
        left0 = _selections_left(p)
        _run(p, SQL.format(t="spend"))
        left1 = _selections_left(p)
        assert left1 == left0 - 1  # one selection's share of the partition part
        b = _bound(_explain(p, SQL2))
        assert b == 250.0  # the grid point (2000 x 2^-j/2) above the 95th percentile (187) of the top-2 sums
        _run(p, SQL2)  # another statement clamping amount: the same B, no new charge
        assert _selections_left(p) == left1
        assert _bound(_explain(p, SQL.format(t="spend"))) == b
        p.stop()
        p.start()  # replayed from the ledger: same B, nothing charged
        assert _bound(_explain(p, SQL2)) == b
        _run(p, "SELECT day, sum(amount) FROM spend WHERE day > 2 GROUP BY day ORDER BY 1")
        assert _selections_left(p) == left1
        # 10x the values (and the declared domain): 10x the bound, to one grid step (a factor sqrt(2))
        _run(p, SQL.format(t="spend10"))
        b10 = _bound(_explain(p, SQL.format(t="spend10")))
        assert 10 / 2**0.5 <= b10 / b <= 10 * 2**0.5, (b, b10)
        assert _selections_left(p) == left1 - 1
        # A new epoch chooses afresh (charged again in its own partition part)
        with psycopg.connect(p.dsn("dba", "dbapass"), autocommit=True) as conn:
            conn.execute("SELECT lapras.new_epoch()").fetchall()
        assert "not chosen yet this epoch" in _explain(p, SQL.format(t="spend"))
        _run(p, SQL.format(t="spend"))
        assert _bound(_explain(p, SQL2)) > 0
    finally:
        p.stop()


def test_without_a_partition_budget_the_sum_keeps_its_row_bound(harness: Any, embedded_pg: Any,
                                                                default_config: Any, tmp_path: Any) -> None:
    dsn = harness.demo_database(embedded_pg, default_config, "autob0")
    _fill(dsn)
    p = harness.start_test_proxy(tmp_path, dsn, epsilon=1e4, stream_length=1000, extra=TABLES,
                                 privacy_extra="partition_fraction = 0.0")
    try:
        assert "cannot be chosen, the epoch's partition budget is off or spent" in _explain(p, SQL.format(t="spend"))
        _run(p, SQL.format(t="spend"))  # answered, unclamped (its noise at the row bound)
        assert "automatic bound: " not in _explain(p, SQL.format(t="spend"))
    finally:
        p.stop()


def test_the_chosen_bound_acts_as_the_same_bound_declared(harness: Any, embedded_pg: Any, default_config: Any,
                                                          tmp_path: Any) -> None:
    """The first statement's stated errors with "auto" (B = 250 here) equal those with B = 250 declared, and
    are 5.4x below the unclamped ones (docs/bounding.md's formulas): the same clamp and sensitivity."""
    errs = {}
    for name, spec in (("auto", '"auto"'), ("declared", "250.0"), ("row", None)):
        dsn = harness.demo_database(embedded_pg, default_config, f"autob_{name}")  # a ledger of its own
        _fill(dsn)
        port = harness.free_port()
        tables = TABLES.replace('max_sum_per_group = { amount = "auto" }',
                                f"max_sum_per_group = {{ amount = {spec} }}" if spec else "", 1)
        cfg = tmp_path / f"{name}.toml"
        cfg.write_text(harness.make_test_config(dsn, port, epsilon=1e4, stream_length=1000, extra=tables))
        p = harness.ProxyProcess(cfg, tmp_path / f"state_{name}", port)
        p.start()
        try:
            errs[name] = stated_stderrs(p.dsn(), SQL.format(t="spend"))
            if name == "auto":
                assert _bound(_explain(p, SQL.format(t="spend"))) == 250.0
        finally:
            p.stop()
    assert len(errs["auto"]) >= 5
    assert errs["auto"] == errs["declared"]
    # Unclamped: scale 1,000 x N(g c = 10, c=2, g=5) = 2 sqrt(5) (no total k on a GROUP BY); clamped: scale
    # 250 x sqrt(1 SUM x min(g, g c, 10 days) = 5)
    assert max(errs["row"]) / max(errs["auto"]) == pytest.approx(1000 * 2 * 5**0.5 / (250 * 5**0.5), rel=1e-2)
