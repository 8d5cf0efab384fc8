"""GROUP BY over many columns whose combined public domains are too large to list (issue 25): the statement
needs DP partition selection over the cell combinations present under its WHERE (a "cells" request, the
same selection a filtered value list uses; 54000 naming the count where no selection runs), then plans over
the released combinations only, each a group, in key order, minus those the WHERE excludes by its text.
Few combinations stay enumerated (empty groups shown). The engine's sensitivity bound for such statements
(too many grid cells for the exact computation) is never below the exact one."""

from __future__ import annotations

import numpy as np
import pytest

from lapras.mechanisms import sensitivity as SENS
from parser import Refusal
from parser.bind.partition import NeedsPartition
from parser.coltypes import from_config
from parser.model.schema import Attribute, Catalog, TableSchema
from parser.planner import Planner

COLS = tuple(Attribute(f"c{i}", from_config({"type": "text", "values": [f"v{j}" for j in range(30)]}))
             for i in range(6))
WIDE = TableSchema("wide", COLS + (Attribute("amount", from_config({"type": "numeric", "min": 0, "max": 100})),))
SQL = ("SELECT c0, c1, c2, c3, c4, c5, COUNT(*) AS n, SUM(amount) AS s FROM wide WHERE c0 <> 'v1' "
       "GROUP BY 1, 2, 3, 4, 5, 6 ORDER BY 1, 2")


def test_too_many_combinations_need_a_cells_selection() -> None:
    with pytest.raises(NeedsPartition) as err:
        Planner(Catalog((WIDE,))).plan(SQL)
    req = err.value.request
    assert req.kind == "cells" and req.columns == ("c0", "c1", "c2", "c3", "c4", "c5")
    assert err.value.sqlstate == "54000" and "729000000 groups" in err.value.message
    assert "partition_fraction" in (err.value.hint or "")
    # the same selection as the value list of those columns under that filter
    with pytest.raises(NeedsPartition) as vl:
        Planner(Catalog((WIDE,))).plan("SELECT c0, c1, c2, c3, c4, c5 FROM wide WHERE c0 <> 'v1' GROUP BY 1, 2, 3, 4, 5, 6")
    assert vl.value.request.key == req.key


def test_plan_over_the_released_combinations() -> None:
    released = frozenset({(2, 3, 4, 5, 6, 7), (0, 0, 0, 0, 0, 0), (1, 1, 1, 1, 1, 1), (0, 0, 0, 0, 0, 1)})
    plan = Planner(Catalog((WIDE,))).plan_selected(SQL, None, released)
    assert plan.group_keys == (("v0",) * 6, ("v0",) * 5 + ("v1",), ("v2", "v3", "v4", "v5", "v6", "v7"))
    assert len(plan.queries) == 6  # a COUNT and a SUM per group; c0 = 'v1' excluded by the WHERE's text
    rows = plan.rows(np.ones(len(plan.queries)))
    assert [r[:6] for r in rows] == list(plan.group_keys)


def test_few_combinations_stay_enumerated() -> None:
    plan = Planner(Catalog((WIDE,))).plan("SELECT c0, c1, COUNT(*) FROM wide GROUP BY 1, 2")
    assert len(plan.group_keys) == 900


def test_expressions_over_many_columns_are_still_refused() -> None:
    with pytest.raises(Refusal) as err:
        Planner(Catalog((WIDE,))).plan("SELECT lower(c0), c1, c2, c3, c4, c5, COUNT(*) FROM wide GROUP BY 1, 2, 3, 4, 5, 6")
    assert err.value.sqlstate == "54000" and not isinstance(err.value, NeedsPartition)


def test_pointwise_bound_is_never_below_the_exact_sensitivity() -> None:
    """On small GROUP BYs the exact (grid) computation runs; the bound used when it is too much work is
    at least as large, for COUNT, SUM and several aggregates a group."""
    small = TableSchema("small", tuple(Attribute(f"a{i}", from_config({"type": "int", "min": 0, "max": 3}))
                                       for i in range(3)) +
                        (Attribute("x", from_config({"type": "int", "min": -5, "max": 9})),))
    planner = Planner(Catalog((small,)))
    for sql in ["SELECT a0, a1, a2, COUNT(*) FROM small GROUP BY 1, 2, 3",
                "SELECT a0, a1, COUNT(*), SUM(x), AVG(x) FROM small GROUP BY 1, 2",
                "SELECT a0, a1, a2, SUM(x) FILTER (WHERE x > 0), COUNT(*) FROM small WHERE a0 < 2 GROUP BY 1, 2, 3"]:
        plan = planner.plan(sql)
        queries = [q for q in plan.queries if not q.is_zero]
        exact = SENS._row_sensitivity(small, queries, None)
        bound = SENS._pointwise_bound(queries)
        assert bound is not None and bound >= exact - 1e-12, (sql, bound, exact)


EVENTS = TableSchema("events", (
    Attribute("ts", from_config({"type": "timestamptz", "min": "2026-01-01T00:00:00Z",
                                 "max": "2026-12-31T23:59:59Z", "resolution": "hour"})),
    Attribute("category", from_config({"type": "text", "values": [f"c{j}" for j in range(8)]})),
    Attribute("amount", from_config({"type": "numeric", "min": 0, "max": 500})),
))


@pytest.mark.parametrize("sql, params", [
    ("SELECT date_trunc('hour', ts) AS time, category, count(*) FROM events "
     "WHERE ts >= '2026-02-01' AND ts < '2026-02-01 06:00' GROUP BY 1, 2 ORDER BY 1, 2", None),
    ("SELECT to_timestamp(floor(extract(epoch FROM ts) / 3600) * 3600) AS time, category AS metric, "
     "sum(amount) AS value FROM events WHERE ts BETWEEN '2026-02-01T00:00:00Z' AND '2026-02-01T05:59:59Z' "
     "GROUP BY 1, 2 ORDER BY 1", None),
    ("SELECT ts, category, count(*) FROM events WHERE ts BETWEEN $1 AND $2 GROUP BY 1, 2",
     ("2026-02-01T00:00:00Z", "2026-02-01T05:59:59Z")),
])
def test_the_limit_counts_the_groups_the_where_leaves(sql: str, params: tuple[str, ...] | None) -> None:
    """Hours by category over a year are 70,080 groups, over Grafana's six-hour range 48: listed (empty ones
    included), as the same statement without the limit would list them."""
    plan = Planner(Catalog((EVENTS,))).plan(sql, params)
    assert len(plan.group_keys) == 48
    hours = sorted({k[0] for k in plan.group_keys})
    assert len(hours) == 6 and hours[0].isoformat() == "2026-02-01T00:00:00+00:00"
    assert {k[1] for k in plan.group_keys} == {f"c{j}" for j in range(8)}


@pytest.mark.parametrize("where", ["", "WHERE ts >= '2026-02-01'", "WHERE category <> 'c1'"])
def test_too_many_groups_left_by_the_where_are_still_refused(where: str) -> None:
    with pytest.raises(Refusal) as err:
        Planner(Catalog((EVENTS,))).plan(f"SELECT date_trunc('hour', ts), category, count(*) FROM events {where} "
                                         "GROUP BY 1, 2")
    assert err.value.sqlstate == "54000" and "70080 groups" in err.value.message
    assert not isinstance(err.value, NeedsPartition) and err.value.position is not None


def test_a_filter_on_one_wide_key_lists_the_others_whole() -> None:
    """Six of 30 values on c0 by 30^2 on c1, c2: 5,400 groups listed, no partition selection."""
    plan = Planner(Catalog((WIDE,))).plan("SELECT c0, c1, c2, COUNT(*) FROM wide WHERE c0 IN ('v1', 'v2', 'v3', "
                                          "'v4', 'v5', 'v6') GROUP BY 1, 2, 3")
    assert len(plan.group_keys) == 5400
