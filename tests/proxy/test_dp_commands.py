"""One trip per statement: the router hands the DP service a typed command with the trees it parsed, the
planner analyses those trees (never the text again), and partition selection and the series limit are
steps a plan returns, not exceptions."""

from __future__ import annotations

from pathlib import Path

import pytest

from parser import Planner, Refusal, references_protected
from parser.bind.partition import NeedsPartition
from parser.coltypes.integer import IntType
from parser.coltypes.text import TextType
from parser.model.schema import Attribute, Catalog, TableSchema
from parser.planner import Selection, SeriesStep
from parser.syntax.parse import parse_statements
from proxy.config import load_config
from proxy.dp.commands import (
    NOT_PARSED,
    ExplainCommand,
    NewEpochCommand,
    QueryCommand,
    RegressionCommand,
    ShowCommand,
)
from proxy.statements.router import Kind, Router

SHOPS = TableSchema("shops", (
    Attribute("city", TextType(keys="private")),
    Attribute("state", TextType(values=("WA", "OR"))),
    Attribute("amount", IntType(lo=0, hi=100)),
), privacy_unit="user_id", max_rows_per_unit=4, max_groups_per_unit=2)
SHOPS_CATALOG = Catalog((SHOPS,))


@pytest.fixture(scope="module")
def router() -> Router:
    return Router(load_config(Path(__file__).resolve().parents[2] / "config.toml").catalog)


@pytest.mark.parametrize("sql,kind", [
    ("SELECT count(*) FROM adult WHERE age > 30", QueryCommand),
    ("SHOW lapras.budget", ShowCommand),
    ("SELECT lapras.new_epoch()", NewEpochCommand),
    ("EXPLAIN SELECT count(*) FROM adult", ExplainCommand),
    ("SELECT * FROM lapras.linear_regression('adult', 'age', 'sex')", RegressionCommand),
])
def test_the_router_hands_a_typed_command(router: Router, sql: str, kind: type) -> None:
    route = router.route(sql)
    assert route.kind is Kind.DP and route.dp is not None and isinstance(route.dp, kind)
    assert route.dp.sql == sql


def test_the_router_parses_once_and_the_trees_go_to_one_planning(router: Router) -> None:
    sql = "SELECT sex, count(*) FROM adult WHERE age BETWEEN 20 AND 40 GROUP BY sex"
    first = router.route(sql)
    assert isinstance(first.dp, QueryCommand)
    trees = first.dp.parsed.take()
    assert trees is not None and len(trees) == 1
    assert first.dp.parsed.take() is None  # the analysis rewrites them: never handed out twice
    # The cached route keeps the text only; a repeat is planned from the planner's caches.
    again = router.route(sql)
    assert isinstance(again.dp, QueryCommand) and again.dp.parsed is NOT_PARSED and again.dp == first.dp
    planner = Planner(router.catalog)
    from_trees = planner.plan(sql, trees=trees)
    assert from_trees.queries == Planner(router.catalog).plan(sql).queries
    assert planner.plan(sql) is from_trees  # cached under the text, as a plan from the text is

    explain = router.route("EXPLAIN SELECT count(*) FROM adult WHERE sex = 1")
    assert isinstance(explain.dp, ExplainCommand) and explain.dp.statement == "SELECT count(*) FROM adult WHERE sex = 1"
    assert explain.dp.parsed.take() is not None


def test_a_folded_in_list_is_read_item_by_item_by_the_protected_check(router: Router) -> None:
    """Long IN lists are folded by the planner's parser; a protected name among the items of one inside a
    function call still counts, as it does when sqlglot reads the text (the router parses a statement only
    when a protected name occurs outside its strings; the parser's check stands on its own)."""
    items = ", ".join(f"'t{i}'" for i in range(100))
    for sql, expected in ((f"SELECT coalesce(relname IN ('adult', {items})) FROM pg_class", True),
                          (f"SELECT coalesce(relname IN ('other', {items})) FROM pg_class", False)):
        trees = tuple(parse_statements(sql))
        assert references_protected(trees, router.catalog) is expected
        assert references_protected(sql, router.catalog) is expected


def test_partition_selection_is_a_step_of_the_plan() -> None:
    planner = Planner(SHOPS_CATALOG)
    private = planner.prepare("SELECT city, COUNT(*) FROM shops WHERE state = 'WA' GROUP BY city")
    assert isinstance(private, Selection) and private.request.kind == "private"
    assert isinstance(private.refusal, NeedsPartition) and private.refusal.sqlstate == "0A000"
    sql = "SELECT state FROM shops WHERE amount > 50 GROUP BY state"
    cells = planner.prepare(sql)
    assert isinstance(cells, Selection) and cells.request.kind == "cells"
    # Completed from the step's template over the released cells: as planned from the text over them.
    done = planner.complete(cells, frozenset({(1,)}))
    assert done.rows([]) == [("OR",)] == planner.plan_selected(sql, None, frozenset({(1,)})).rows([])


def test_the_series_limit_is_a_step_of_the_plan(router: Router) -> None:
    sql = ("SELECT sex AS sex, race AS race, COUNT(*) AS count FROM public.adult JOIN (SELECT race AS race__, "
           "COUNT(*) AS mme_inner__ FROM public.adult GROUP BY race ORDER BY mme_inner__ DESC LIMIT 2) AS "
           "series_limit ON race = race__ WHERE age > 20 GROUP BY sex, race LIMIT 10000")
    planner = Planner(router.catalog)
    step = planner.prepare(sql)
    assert isinstance(step, SeriesStep) and step.split.n_keys == 1 and isinstance(step.refusal, Refusal)
    again = planner.prepare(sql)
    assert isinstance(again, SeriesStep) and again.split is step.split  # split once per text, kept with the templates
    with pytest.raises(Refusal):
        planner.prepare(sql, series=False)
    with pytest.raises(Refusal):
        planner.prepare(sql, [1])  # with parameters it stays refused, as before
