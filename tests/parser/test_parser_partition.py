"""Partition selection's parser side: a GROUP BY over private keys or a filtered value list asks for a
selection (one per filter, however spelled), anything else reading private keys is refused, and a
statement plans over the released keys with queries that name values, not positions. Planning only: no
selection is run and no noise drawn, so the tests are deterministic (false-failure rate 0)."""

from __future__ import annotations

import pytest

from parser import Planner, Refusal
from parser.bind.partition import NeedsPartition, selected_catalog, selected_table
from parser.coltypes.integer import IntType
from parser.coltypes.text import TextType
from parser.model.schema import Attribute, Catalog, TableSchema

SHOPS = TableSchema("shops", (
    Attribute("city", TextType(keys="private")),
    Attribute("product", TextType(keys="private")),
    Attribute("state", TextType(values=("WA", "OR"))),
    Attribute("amount", IntType(lo=0, hi=100)),
), privacy_unit="user_id", max_rows_per_unit=4, max_groups_per_unit=2)
CATALOG = Catalog((SHOPS,))


def _request(sql: str) -> NeedsPartition:
    with pytest.raises(NeedsPartition) as info:
        Planner(CATALOG).plan(sql)
    return info.value


def test_group_by_private_keys_asks_for_a_selection() -> None:
    need = _request("SELECT city, COUNT(*) FROM shops WHERE state = 'WA' GROUP BY city")
    r = need.request
    assert need.sqlstate == "0A000" and r.kind == "private" and r.columns == ("city",) and r.max_keys == 2
    assert r.key.startswith("public.shops|keys(city)|where:")
    # Per-key unit counts are grouped by PostgreSQL, units bounded to 2 keys, NULL never a key.
    assert "GROUP BY" in r.sql and "count(*)" in r.sql and "lapras_unit_cell <= 2" in r.sql
    assert '"city" IS NOT NULL' in r.sql
    # Spellings of one filter are one selection; another filter is another.
    for same in ("SELECT city FROM shops WHERE state IN ('WA') GROUP BY city",
                 "SELECT DISTINCT city FROM shops WHERE NOT state <> 'WA'"):
        assert _request(same).request.key == r.key
    assert _request("SELECT city FROM shops GROUP BY 1").request.key != r.key


@pytest.mark.parametrize("sql", [
    "SELECT COUNT(*) FROM shops WHERE city = 'Seattle'",
    "SELECT COUNT(*) FROM shops WHERE lower(city) = 'seattle'",
    "SELECT COUNT(city) FROM shops",
    "SELECT city, product, COUNT(*) FROM shops GROUP BY city, product",  # refused before any selection
])
def test_private_keys_are_never_filtered_or_aggregated(sql: str) -> None:
    with pytest.raises(Refusal) as info:
        Planner(CATALOG).plan(sql)
    assert not isinstance(info.value, NeedsPartition) and info.value.sqlstate == "0A000"
    assert "private keys" in info.value.message


def test_count_distinct_counts_a_private_columns_stored_values() -> None:
    """COUNT(DISTINCT city) reads no cell of city (parser.bind.distinct counts its stored values): planned
    without a selection, one derived query per group."""
    plan = Planner(CATALOG).plan("SELECT state, COUNT(DISTINCT city) FROM shops GROUP BY state")
    assert plan.queries and all(q.source is not None for q in plan.queries)


def test_statements_plan_over_the_released_keys() -> None:
    sql = "SELECT city, COUNT(*) FROM shops WHERE state = 'WA' GROUP BY city ORDER BY city"
    one = Planner(selected_catalog(CATALOG, selected_table(SHOPS, ["city"], [["Tacoma"], ["Seattle"]]))).plan(sql)
    assert [k for k, in one.group_keys] == ["Seattle", "Tacoma"]
    other = Planner(selected_catalog(CATALOG, selected_table(SHOPS, ["city"], [["Seattle"], ["Yakima"]]))).plan(sql)
    # A group's query names its value: the same in every selection holding it (stored answers stay valid).
    assert one.queries[0].key == other.queries[0].key and "Seattle" in one.queries[0].key


def test_filtered_value_list_of_public_columns_asks_for_cells() -> None:
    need = _request("SELECT state FROM shops WHERE amount > 50 GROUP BY state")
    assert need.sqlstate == "42501" and need.request.kind == "cells"
    assert need.request.encode([("OR",), ("WA",), ("elsewhere",)]) == [[1], [0]]
    plan = Planner(CATALOG).plan_selected("SELECT state FROM shops WHERE amount > 50 GROUP BY state", None,
                                          frozenset({(1,)}))
    assert plan.rows([]) == [("OR",)] and plan.queries == ()
    # Filtered on its own column only, a value list stays the public domain.
    assert Planner(CATALOG).plan("SELECT state FROM shops WHERE state <> 'OR' GROUP BY state").rows([]) == [("WA",)]
