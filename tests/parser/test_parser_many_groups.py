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
