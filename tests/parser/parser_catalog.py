"""The Adult table's public domain as the proxy's config would declare it (shared by the parser tests)."""

from __future__ import annotations

from parser.model.schema import Attribute, Catalog, IntType, TableSchema, TextType

ADULT_SIZES = {
    "workclass": 9, "fnlwgt": 100, "education_num": 16, "marital_status": 7, "occupation": 15,
    "relationship": 6, "race": 5, "sex": 2, "capital_gain": 100, "capital_loss": 100, "hours_per_week": 99,
    "native_country": 42, "income_gt_50k": 2,
}
ADULT_COLUMNS = ["age", *ADULT_SIZES]


def adult_table() -> TableSchema:
    attrs = [Attribute("age", IntType(17, 90))]
    attrs += [Attribute(n, IntType(0, s - 1)) for n, s in ADULT_SIZES.items()]
    return TableSchema("adult", tuple(attrs))


ADULT = adult_table()
CATALOG = Catalog((ADULT,))

# A second table with nullable and categorical domains, for the parts Adult does not exercise.
PEOPLE = TableSchema("people", (
    Attribute("city", TextType(values=("Berlin", "Lyon", "Oslo"), nullable=True)),
    Attribute("dept", TextType(values=("eng", "ops", "sales"))),
    Attribute("score", IntType(-5, 10, nullable=True)),
    Attribute("level", IntType(1, 4)),
), schema="hr")
MIXED = Catalog((ADULT, PEOPLE))
