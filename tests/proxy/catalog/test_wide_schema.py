"""Wide schemas (issue 18): a generated 150-table config (50 to 300 columns a table, every column type) loads
and a statement plans on its widest and its narrowest table with the same linear queries; the catalog
database is rebuilt only for tables whose DDL changed (restarts skip the rest). Timings are measured by
benchmarks/wide_schema.py, not here."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import psycopg

import parser as sqlparser
from proxy.config import load_config
from tests.fixtures import wide_schema_config as wide

SQL = ('SELECT "Col 3 (text)", COUNT(*), SUM("Col 1 (num)") FROM "{t}" WHERE "Col 0 (int)" BETWEEN 10 AND 50 '
       "GROUP BY 1")


def test_150_table_config_loads_and_plans(tmp_path: Path) -> None:
    widths = wide.widths()
    path = tmp_path / "wide.toml"
    path.write_text(wide.config_text("host=/nonexistent dbname=wide", 6999, widths))
    catalog = load_config(path).catalog
    assert len(catalog.tables) == 151 and sum(len(t.attributes) for t in catalog.tables) == sum(widths.values())
    assert min(widths.values()) == 5 and max(widths.values()) == 300
    planner = sqlparser.Planner(catalog)
    plans = {t: planner.plan(SQL.format(t=t)) for t in ("Wide_0", "Narrow")}
    # The statement touches three columns: the same marginal and queries whatever the table's width.
    assert [q.marginal for q in plans["Wide_0"].queries] == [q.marginal for q in plans["Narrow"].queries]
    assert len(plans["Wide_0"].queries) == len(plans["Narrow"].queries) > 0


def test_catalog_database_rebuilds_only_changed_tables(embedded_pg: Any, harness: Any, tmp_path: Path) -> None:
    from proxy.catalog.relay import MARK_PREFIX, ensure_shadow

    dsn = harness.create_database(embedded_pg, "wideshadow")
    tables = {"Wide_1": 12, "Wide_2": 9, "Narrow": 5}
    shadow = f"wideshadow_{tmp_path.name[-8:]}_cat".lower()

    def build(widths: dict[str, int]) -> None:
        path = tmp_path / "w.toml"
        path.write_text(wide.config_text(dsn, 6999, widths))
        asyncio.run(ensure_shadow(embedded_pg.dsn(), shadow, load_config(path).catalog))

    def table_oids() -> dict[str, int]:
        with psycopg.connect(embedded_pg.dsn(shadow)) as conn:
            rows = conn.execute("SELECT relname, oid FROM pg_class WHERE relnamespace = 'public'::regnamespace "
                                "AND relkind = 'r'").fetchall()
            return {str(r[0]): int(r[1]) for r in rows}

    build(tables)
    first = table_oids()
    assert set(first) == set(tables)
    build(tables)  # a restart: nothing rebuilt
    assert table_oids() == first
    build({**tables, "Wide_2": 10})  # one table gained a column: only it is rebuilt
    again = table_oids()
    assert again["Wide_1"] == first["Wide_1"] and again["Narrow"] == first["Narrow"]
    assert again["Wide_2"] != first["Wide_2"]
    with psycopg.connect(embedded_pg.dsn(shadow)) as conn:
        cols = conn.execute("SELECT count(*) FROM information_schema.columns WHERE table_name = 'Wide_2'").fetchone()
        mark = conn.execute("SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = %s",
                            (shadow,)).fetchone()
    assert cols == (10,) and mark is not None and str(mark[0]).startswith(MARK_PREFIX)
