"""Planning on a 300-column table (issue 25): every Tableau-style statement of tests/fixtures/wide_planning_config.py
plans (or asks for its partition selection); one attribute's index sets combine as sets (the numpy path
for IN lists); an IN list of 10,000 values names its query by a bounded, spelling-independent key and is
pushed down as one IN (...). Timings are measured by benchmarks/wide_planning.py, not here."""

from __future__ import annotations

import random

import numpy as np
import pytest

import parser as sqlparser
from parser.bind.partition import NeedsPartition
from parser.model.predicate import Space
from parser.pushdown.sql import answers_sql
from proxy.config import load_config
from tests.fixtures import wide_planning_config as wide


@pytest.fixture(scope="module")
def catalog(tmp_path_factory: pytest.TempPathFactory) -> sqlparser.Catalog:
    path = tmp_path_factory.mktemp("wide") / "wide.toml"
    path.write_text(wide.config_text("host=/nonexistent dbname=wide", 6999))
    return load_config(path).catalog


def test_every_statement_plans(catalog: sqlparser.Catalog) -> None:
    planner = sqlparser.Planner(catalog)
    asked = []
    for label, make in wide.statements().items():
        try:
            assert planner.plan(make(1)).queries, label
        except NeedsPartition as e:
            asked.append(e.request.columns[-1])
    assert sorted(asked) == ["Customer Name", "NPI", "Zip"]  # 8 text columns beyond the list limit; two IDs


def _mask(n: int, ranges: list[tuple[int, int]]) -> np.ndarray:
    m = np.zeros(n, dtype=bool)
    for lo, hi in ranges:
        m[lo:hi + 1] = True
    return m


def test_index_sets_of_one_attribute_combine_as_sets() -> None:
    sp = Space(["a", "b"], [500, 3]).with_budget(None)
    rng = random.Random(25)
    for _ in range(200):
        sets = []
        for _ in range(2):
            picks = sorted(rng.sample(range(500), rng.randrange(0, 60)))
            sets.append([(p, p + rng.randrange(0, 3)) for p in picks])
        u, v = sp.cells("a", sets[0]), sp.cells("a", sets[1])
        mu, mv = _mask(500, sets[0]), _mask(500, sets[1])
        for got, want in ((sp.and_(u, v), mu & mv), (sp.or_(u, v), mu | mv), (sp.diff(u, v), mu & ~mv),
                          (sp.not_(u), ~mu)):
            expected = sp.cells("a", [(i, i) for i in np.flatnonzero(want).tolist()])
            assert got == expected


def test_an_in_list_of_10000_values_has_a_bounded_key_and_one_in(catalog: sqlparser.Catalog) -> None:
    ids = [(k * 7) % 100000 for k in range(10_000)]
    sql = 'SELECT COUNT(*) FROM "Extract" WHERE "Row ID" IN ({}) AND "Quantity" > 2'
    one = sqlparser.Planner(catalog).plan(sql.format(", ".join(map(str, ids))))
    other = sqlparser.Planner(catalog).plan(sql.format(", ".join(map(str, reversed(ids)))))
    (q,) = one.queries
    assert q.key == other.queries[0].key and len(q.key.encode()) < 2200 and "|#" in q.key
    table = catalog.table("Extract", "public")
    assert table is not None
    pushed = answers_sql(table, one.queries)
    # In the measured expression and the row filter: one IN (...) each, not 10,000 OR'd ranges.
    assert pushed.count('"Row ID" IN (7, 14, 21,') == 2 and pushed.count('"Row ID" >=') == 0
