"""Numeric identifier keys (issue 25): an int, bigint or numeric column declared ``keys = "private"`` (a ZIP
code, an NPI number) is grouped through DP partition selection over its stored values, as a text column
with private keys is, never filtered or summed; over the released keys it plans with its own type (numbers
in numeric order, the column's type oid) and queries that name values. Planning only: no selection is run
and no noise drawn, so the tests are deterministic (false-failure rate 0)."""

from __future__ import annotations

from decimal import Decimal

import pytest

from parser import Planner, Refusal
from parser.bind.partition import NeedsPartition, selected_catalog, selected_table
from parser.coltypes import DeclarationError, from_config
from parser.coltypes.idkeys import BigIntKeysType, IntKeysType, NumericKeysType
from parser.coltypes.integer import IntType
from parser.coltypes.text import TextType
from parser.model.schema import Attribute, Catalog, TableSchema
from pgcore import pgtypes as T

CLAIMS = TableSchema("claims", (
    Attribute("zip", from_config({"type": "int", "keys": "private"})),
    Attribute("npi", from_config({"type": "bigint", "keys": "private"})),
    Attribute("rate", from_config({"type": "numeric", "keys": "private"})),
    Attribute("state", TextType(values=("WA", "OR"))),
    Attribute("amount", IntType(lo=0, hi=100)),
), privacy_unit="patient_id", max_rows_per_unit=4, max_groups_per_unit=2)
CATALOG = Catalog((CLAIMS,))


def test_declarations() -> None:
    assert isinstance(CLAIMS.attribute("zip").domain, IntKeysType)  # type: ignore[union-attr]
    assert isinstance(CLAIMS.attribute("npi").domain, BigIntKeysType)  # type: ignore[union-attr]
    assert isinstance(CLAIMS.attribute("rate").domain, NumericKeysType)  # type: ignore[union-attr]
    for bad in ({"type": "int", "keys": "private", "min": 0}, {"type": "bigint", "keys": "private", "bins": 10},
                {"type": "int", "keys": "public"}, {"type": "float", "keys": "private"},
                {"type": "numeric", "keys": "yes"}):
        with pytest.raises(DeclarationError):
            from_config(bad)


@pytest.mark.parametrize("col", ["zip", "npi", "rate"])
def test_group_by_an_identifier_asks_for_a_selection(col: str) -> None:
    with pytest.raises(NeedsPartition) as info:
        Planner(CATALOG).plan(f"SELECT {col}, COUNT(*) FROM claims WHERE state = 'WA' GROUP BY 1")
    r = info.value.request
    assert r.kind == "private" and r.columns == (col,) and f'"{col}"::text' in r.sql
    assert r.key.startswith(f"public.claims|keys({col})|where:")


@pytest.mark.parametrize("sql", ["SELECT COUNT(*) FROM claims WHERE zip = 98101",
                                 "SELECT SUM(zip) FROM claims", "SELECT COUNT(*) FROM claims WHERE npi > 5"])
def test_identifiers_are_never_filtered_or_summed(sql: str) -> None:
    with pytest.raises(Refusal) as info:
        Planner(CATALOG).plan(sql)
    assert not isinstance(info.value, NeedsPartition) and info.value.sqlstate == "0A000"


def test_plans_over_released_keys_as_numbers_in_numeric_order() -> None:
    sql = 'SELECT zip AS "Zip", COUNT(*) FROM claims WHERE amount > 10 GROUP BY 1 ORDER BY 1'
    table = selected_table(CLAIMS, ["zip"], [["98101"], ["9801"], ["10001"]])
    plan = Planner(selected_catalog(CATALOG, table)).plan(sql)
    assert [k for k, in plan.group_keys] == [9801, 10001, 98101]
    assert plan.columns[0].type_oid == T.INT4
    assert "zip={98101}" in plan.queries[-1].key
    # The same group's query in another selection is the same query (stored answers stay valid).
    other = selected_table(CLAIMS, ["zip"], [["98101"], ["55555"]])
    again = Planner(selected_catalog(CATALOG, other)).plan(sql)
    assert again.queries[-1].key == plan.queries[-1].key


def test_numeric_keys_keep_their_scale() -> None:
    table = selected_table(CLAIMS, ["rate"], [["10.50"], ["9.25"], ["9.3"]])
    plan = Planner(selected_catalog(CATALOG, table)).plan("SELECT rate, COUNT(*) FROM claims GROUP BY rate")
    assert [k for k, in plan.group_keys] == [Decimal("9.25"), Decimal("9.3"), Decimal("10.50")]
    assert plan.columns[0].type_oid == T.NUMERIC
