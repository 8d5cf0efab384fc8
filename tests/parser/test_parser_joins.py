"""Fact-to-dimension joins (parser/analysis/joins.py) over a hand-built catalog: a protected ``orders``
and public ``products`` / ``categories`` / ``stores`` whose rows are given (as the proxy reads them)."""

from __future__ import annotations

import dataclasses

import pytest

from parser import Refusal, plan_query
from parser.coltypes import IntType, TextType
from parser.model.public import PublicColumn, PublicTable
from parser.model.schema import Attribute, Catalog, TableSchema

ORDERS = TableSchema("orders", (Attribute("product_id", IntType(1, 5)), Attribute("quantity", IntType(1, 10)),
                                Attribute("store", TextType(("s1", "s2", "s3")))),
                     privacy_unit="customer_id", max_rows_per_unit=5)
PRODUCTS = PublicTable("products", columns=(PublicColumn("id", "integer"), PublicColumn("category", "text"),
                                            PublicColumn("unit_price", "numeric(10,2)"),
                                            PublicColumn("category_id", "integer")),
                       unique=frozenset({"id"}),
                       rows=(("1", "toys", "2.50", "10"), ("2", "toys", "10.00", "10"), ("3", "books", "7.25", "20"),
                             ("4", None, "1.00", None)), loaded=True)
CATEGORIES = PublicTable("categories", columns=(PublicColumn("id", "integer"), PublicColumn("dept", "text")),
                         unique=frozenset({"id"}), rows=(("10", "leisure"), ("20", "culture")), loaded=True)
STORES = PublicTable("stores", columns=(PublicColumn("code", "text"), PublicColumn("region", "text")),
                     unique=frozenset({"code"}), rows=(("s1", "West"), ("s2", "East"), ("s3", "West")), loaded=True)
CATALOG = Catalog((ORDERS,), (PRODUCTS, CATEGORIES, STORES))


def keys(sql: str, catalog: Catalog = CATALOG) -> list[str]:
    return sorted(q.key for q in plan_query(sql, catalog).queries)


def refusal(sql: str, catalog: Catalog = CATALOG) -> Refusal:
    with pytest.raises(Refusal) as info:
        plan_query(sql, catalog)
    return info.value


def test_inner_join_groups_by_a_dimension_column_over_the_fact_key():
    plan = plan_query("SELECT p.category, COUNT(*) FROM orders o JOIN products p ON o.product_id = p.id "
                      "GROUP BY p.category ORDER BY 1", CATALOG)
    assert [c.name for c in plan.columns] == ["category", "count"]
    # product 5 has no dimension row: an INNER join drops its orders; product 4's category is NULL.
    assert sorted(q.key for q in plan.queries) == [
        "public.orders|count|product_id={1..2}", "public.orders|count|product_id={3}",
        "public.orders|count|product_id={4}"]
    assert all(q.sensitivity == 1.0 for q in plan.queries)  # the join changes no sensitivity


def test_left_join_keeps_unmatched_fact_rows_under_null():
    assert keys("SELECT p.category, COUNT(*) FROM orders o LEFT JOIN products p ON o.product_id = p.id GROUP BY 1") == [
        "public.orders|count|product_id={1..2}", "public.orders|count|product_id={3}",
        "public.orders|count|product_id={4..5}"]


def test_condition_on_either_side_and_a_where_on_a_dimension():
    a = keys("SELECT COUNT(*) FROM orders o JOIN products p ON p.id = o.product_id WHERE p.category = 'toys'")
    b = keys("SELECT COUNT(*) FROM orders WHERE product_id IN (1, 2)")
    assert a == b


def test_sum_of_quantity_times_a_public_price():
    plan = plan_query("SELECT SUM(o.quantity * p.unit_price) FROM orders o JOIN products p ON o.product_id = p.id",
                      CATALOG)
    # Sensitivity of each part: the part's price times the largest quantity (10); one row is in one part.
    sens = sorted(q.sensitivity for q in plan.queries if not q.is_zero)
    assert max(sens) == pytest.approx(100.0)
    assert sens == pytest.approx([10.0, 25.0, 72.5, 100.0])


def test_metabase_schema_qualified_left_join():
    plan = plan_query('SELECT "Products"."category" AS "Products__category", count(*) AS "count" FROM "public"."orders" '
                      'LEFT JOIN "public"."products" "Products" ON "public"."orders"."product_id" = "Products"."id" '
                      'GROUP BY "Products"."category" ORDER BY "Products"."category" ASC', CATALOG)
    assert [c.name for c in plan.columns] == ["Products__category", "count"]
    assert plan.n_groups == 3  # toys, books, NULL (product 4 has none, product 5 no row)


def test_superset_virtual_table_and_power_bi_nesting_plan_as_the_flat_join():
    flat = keys("SELECT p.category, COUNT(*) FROM orders o JOIN products p ON o.product_id = p.id GROUP BY 1")
    superset = keys("SELECT category, count(*) AS count FROM (SELECT o.quantity, p.category FROM orders o "
                    "JOIN products p ON o.product_id = p.id) AS virtual_table GROUP BY category LIMIT 1000")
    powerbi = keys('select "_"."category", "_"."a0" from (select "rows"."category" as "category", count(1) as "a0" '
                   'from (select "$Table"."category" as "category" from (select o.product_id, p.category from '
                   'orders o inner join products p on (o.product_id = p.id)) "$Table") "rows" group by "category") '
                   '"_" where not "_"."a0" is null limit 1000001')
    assert flat == superset == powerbi


def test_two_dimensions_and_a_dimension_of_a_dimension():
    a = keys("SELECT c.dept, s.region, COUNT(*) FROM orders o JOIN products p ON o.product_id = p.id "
             "JOIN categories c ON p.category_id = c.id LEFT JOIN stores s ON o.store = s.code GROUP BY 1, 2")
    assert a == ['public.orders|count|product_id={1..2}&store={"s1","s3"}', 'public.orders|count|product_id={1..2}&store={"s2"}',
                 'public.orders|count|product_id={3}&store={"s1","s3"}', 'public.orders|count|product_id={3}&store={"s2"}']
    assert all("product_id={4" not in k and "product_id={5" not in k for k in a)


def test_unqualified_names_resolve_or_are_ambiguous():
    assert keys("SELECT region, COUNT(*) FROM orders JOIN stores ON store = code GROUP BY region") == keys(
        "SELECT s.region, COUNT(*) FROM orders o JOIN stores s ON o.store = s.code GROUP BY 1")
    amb = dataclasses.replace(STORES, columns=(PublicColumn("store", "text"), PublicColumn("region", "text")),
                              unique=frozenset({"store"}))
    cat = Catalog((ORDERS,), (amb,))
    assert refusal("SELECT store, COUNT(*) FROM orders o JOIN stores s ON o.store = s.store GROUP BY 1",
                   cat).sqlstate == "42702"


@pytest.mark.parametrize(("sql", "words"), [
    ("SELECT o.* FROM orders o JOIN products p ON o.product_id = p.id", "would read its rows"),
    ("SELECT * FROM orders o JOIN products p ON o.product_id = p.id", "would read its rows"),
    ("SELECT COUNT(*) FROM orders o JOIN orders x ON o.product_id = x.product_id", "with itself"),
    ("SELECT COUNT(*) FROM orders o JOIN products p ON o.product_id < p.id", "one equality"),
    ("SELECT COUNT(*) FROM orders o JOIN products p ON o.product_id = p.id AND p.category = 'toys'", "one equality"),
    ("SELECT COUNT(*) FROM orders o JOIN products p ON o.product_id = p.category_id", "not unique"),
    ("SELECT COUNT(*) FROM orders o RIGHT JOIN products p ON o.product_id = p.id", "RIGHT JOIN"),
    ("SELECT COUNT(*) FROM orders o FULL JOIN products p ON o.product_id = p.id", "FULL JOIN"),
    ("SELECT COUNT(*) FROM orders o CROSS JOIN products p", "CROSS JOIN"),
    ("SELECT COUNT(*) FROM orders o, products p WHERE o.product_id = p.id", "cross join"),
    ("SELECT COUNT(*) FROM products p JOIN orders o ON o.product_id = p.id", "must come first"),
    ("SELECT COUNT(*) FROM orders o JOIN products p ON o.customer_id = p.id", "privacy unit"),
    ("SELECT COUNT(*) FROM orders o JOIN (SELECT * FROM products) p ON o.product_id = p.id", "subquery"),
])
def test_refusals_name_the_reason(sql: str, words: str):
    r = refusal(sql)
    assert r.sqlstate == "0A000", (r.sqlstate, str(r))
    assert words in str(r)


def test_a_public_table_that_is_not_a_base_table_cannot_be_joined():
    view = dataclasses.replace(PRODUCTS, problem="it is a view upstream, not a base table")
    r = refusal("SELECT COUNT(*) FROM orders o JOIN products p ON o.product_id = p.id", Catalog((ORDERS,), (view,)))
    assert r.sqlstate == "0A000" and "view" in str(r)


def test_a_table_not_declared_public_cannot_be_joined():
    r = refusal("SELECT COUNT(*) FROM orders o JOIN secrets s ON o.product_id = s.id")
    assert r.sqlstate == "0A000" and "not declared public" in str(r)


def test_a_wrapped_join_may_select_star_and_the_rows_stay_unreadable():
    # Superset's virtual dataset written as SELECT * over the join: the wrapper aggregates it.
    flat = keys("SELECT p.category, COUNT(*), SUM(o.quantity) FROM orders o JOIN products p ON o.product_id = p.id "
                "GROUP BY 1")
    assert keys("SELECT category, count(*), sum(quantity) FROM (SELECT * FROM orders o JOIN products p "
                "ON o.product_id = p.id) AS virtual_table GROUP BY category") == flat
    assert keys("SELECT category, count(*), sum(quantity) FROM (SELECT o.*, p.category FROM orders o JOIN products p "
                "ON o.product_id = p.id) AS virtual_table GROUP BY category") == flat
    probe = plan_query("SELECT * FROM (SELECT * FROM orders o JOIN products p ON o.product_id = p.id) AS v LIMIT 1",
                       CATALOG)
    assert [c.name for c in probe.columns] == ["product_id", "quantity", "store", "id", "category", "unit_price",
                                               "category_id"] and not probe.queries
    assert refusal("SELECT * FROM (SELECT * FROM orders o JOIN products p ON o.product_id = p.id) AS v").sqlstate == "42501"


def test_a_text_key_whose_values_come_from_the_dimension_key():
    # store = { type = "text", values_from = "public.stores.code" }: the list the proxy read from stores.
    listed = dataclasses.replace(ORDERS, attributes=(
        *ORDERS.attributes[:2], Attribute("store", TextType(("s1", "s2", "s3"), values_from="public.stores.code"))),
        _by_name={})
    cat = Catalog((listed,), (STORES,))
    assert keys("SELECT s.region, COUNT(*) FROM orders o JOIN stores s ON o.store = s.code GROUP BY 1", cat) == [
        'public.orders|count|store={"s1","s3"}', 'public.orders|count|store={"s2"}']
