"""An epoch fixes its public value lists (``values_from``): read fresh from the public table when the epoch
is prepared, stored in its spec, P's release measured over them, and adopted by every engine on the ledger;
a statement planned over another epoch's lists is refused unanswered (StalePlan). Real PostgreSQL ledger
and exact answers."""

from __future__ import annotations

import psycopg
import pytest

import parser as sqlparser
from lapras import Engine, EngineSettings, PostgresLedger, Prediction
from lapras.engine import StalePlan
from lapras.exact import PostgresExactSource
from lapras.ledger.base import EpochSpec
from parser.model.schema import Attribute, Catalog, TableSchema, TextType, listed_values
from proxy.upstream.value_lists import read_value_lists

SOURCE = "lookup.plans.name"
CATALOG = Catalog((TableSchema("visits", (
    Attribute("plan", TextType(values=("free", "pro"), values_from=SOURCE)),
)),))
BY_PLAN = "SELECT plan, count(*) FROM visits GROUP BY plan"
TRUE_COUNTS = {"basic": 200, "free": 300, "pro": 500}


def _engine(dsn: str) -> Engine:
    def predictions(catalog: Catalog) -> Prediction:
        return Prediction(tuple(q for q in sqlparser.plan_query(BY_PLAN, catalog).queries if not q.is_zero), 10, 1.0)

    return Engine(CATALOG, PostgresLedger(dsn), PostgresExactSource(dsn),
                  EngineSettings(epsilon=100.0, delta=1e-6, epoch="manual", joint_max_cells=0),
                  predictions=predictions, value_lists=lambda: read_value_lists(CATALOG, dsn))


def test_epoch_fixes_its_value_lists_and_every_engine_adopts_them(fresh_db: str) -> None:
    with psycopg.connect(fresh_db, autocommit=True) as conn:
        conn.execute("CREATE SCHEMA lookup")
        conn.execute("CREATE TABLE lookup.plans (name text)")
        conn.execute("INSERT INTO lookup.plans VALUES ('free'), ('pro')")
        conn.execute("CREATE TABLE visits (plan text)")
        for value, n in TRUE_COUNTS.items():
            conn.execute("INSERT INTO visits SELECT %s FROM generate_series(1, %s)", (value, n))
    first = _engine(fresh_db)
    try:
        ep = first.ledger.current_epoch()
        assert ep is not None and first.ledger.value_lists(ep.id) == {SOURCE: ("free", "pro")}
        old = sqlparser.plan_query(BY_PLAN, first.catalog)
        # 'basic' sorts first: every cell index of the column shifts in the next epoch.
        with psycopg.connect(fresh_db, autocommit=True) as conn:
            conn.execute("INSERT INTO lookup.plans VALUES ('basic')")
        first.new_epoch()
        ep = first.ledger.current_epoch()
        assert ep is not None and first.ledger.value_lists(ep.id) == {SOURCE: ("basic", "free", "pro")}
        table = first.catalog.table("visits")
        assert table is not None and listed_values(table) == (("basic", "free", "pro"),)
        with pytest.raises(StalePlan):
            first.answer(old, "u")  # planned over the old list: refused before anything is read or charged
        assert first.ledger.current_epoch().state.n == 0  # type: ignore[union-attr]
        new = sqlparser.plan_query(BY_PLAN, first.catalog)
        answer = first.answer(new, "u")
        # Predicted: answered from P's release, measured over the new cells (each value's own count).
        assert answer.outcome == "good"
        keys = [k[0] for k in new.group_keys]
        assert keys == ["basic", "free", "pro"]
        for value, v, se in zip(keys, answer.values, answer.stderrs, strict=True):
            assert se > 0 and abs(v - TRUE_COUNTS[value]) < 5 * se, (value, v, se)
        # Another process on the same ledger, configured with the start-up list, adopts the epoch's.
        second = Engine(CATALOG, PostgresLedger(fresh_db), PostgresExactSource(fresh_db),
                        EngineSettings(epsilon=100.0, delta=1e-6, epoch="manual", joint_max_cells=0))
        try:
            assert second.catalog == first.catalog
            again = second.answer(sqlparser.plan_query(BY_PLAN, second.catalog), "u")
            assert again.outcome == "repeat" and list(again.values) == list(answer.values)
        finally:
            second.close()
    finally:
        first.close()


def test_specs_stored_before_value_lists_still_load() -> None:
    spec = EpochSpec("rho", 1.0, 1e-6, 1.0, 1e-6, 0.0, 0.0, {"pool": 1.0}, "uniform", 10, 1, 0.5,
                     value_lists={SOURCE: ("a", "b")})
    d = spec.to_json()
    assert d["value_lists"] == {SOURCE: ["a", "b"]}
    d.pop("value_lists")
    assert EpochSpec.from_json(d).value_lists == {}


def test_catalog_of_an_epoch_not_yet_adopted_is_the_ledgers(fresh_db: str) -> None:
    """What the regression endpoint plans over: the catalog of the epoch it charges, even when another
    process began that epoch and this engine has not adopted it yet (not the start-up list)."""
    with psycopg.connect(fresh_db, autocommit=True) as conn:
        conn.execute("CREATE SCHEMA lookup")
        conn.execute("CREATE TABLE lookup.plans (name text)")
        conn.execute("INSERT INTO lookup.plans VALUES ('free'), ('pro')")
        conn.execute("CREATE TABLE visits (plan text)")
    first, second = _engine(fresh_db), None
    try:
        old = first.ledger.current_epoch()
        assert old is not None and first.catalog_of_epoch(old.id) is first.catalog
        with psycopg.connect(fresh_db, autocommit=True) as conn:
            conn.execute("INSERT INTO lookup.plans VALUES ('basic')")
        second = _engine(fresh_db)
        second.new_epoch()
        ep = second.ledger.current_epoch()
        assert ep is not None and ep.id != old.id
        behind = first.catalog.table("visits")
        assert behind is not None and listed_values(behind) == (("free", "pro"),)  # not adopted yet
        table = first.catalog_of_epoch(ep.id).table("visits")
        assert table is not None and listed_values(table) == (("basic", "free", "pro"),)
        assert first.catalog_of_epoch(ep.id) == second.catalog
    finally:
        first.close()
        if second is not None:
            second.close()
