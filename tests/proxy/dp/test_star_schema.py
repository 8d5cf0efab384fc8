"""The `shop` star schema through a real proxy: public dimension tables served as they are, joins of the
protected `orders` to them in each BI tool's own spelling answered within the stated error of PostgreSQL's
exact answer, and the joins that could multiply or smuggle a person's rows refused with nothing charged.

The exact answers are PostgreSQL's on the same text over the bounded rows: the test database's `orders`
is cut to the rows the proxy's bounding keeps (at most k = 10 per customer, parser.pushdown.bounding), so the
statement runs upstream verbatim."""

from __future__ import annotations

import math
import shutil
import subprocess
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from parser.pushdown.bounding import bounded_rows_sql
from proxy.config import load_config
from tests.fixtures.notices import notice_columns, notice_stderrs


def _bound_orders(dsn: str, cfg: Any) -> None:
    """Keep only the rows of `orders` that the proxy's per-customer bounding keeps."""
    table = cfg.catalog.table("orders")
    cols = ["customer_id", "order_date", "product_id", "store_id", "quantity", "channel"]
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"CREATE TABLE kept AS {bounded_rows_sql(table, cols)}")  # type: ignore[call-overload]
        conn.execute("TRUNCATE orders")
        conn.execute("INSERT INTO orders SELECT * FROM kept")
        conn.execute("DROP TABLE kept")


def _start(harness: Any, embedded_pg: Any, default_config: Any, tmp_path_factory: Any, prefix: str,
           prepare: Any = None) -> tuple[Any, str]:
    dsn = harness.demo_database(embedded_pg, default_config, prefix)
    _bound_orders(dsn, default_config)
    if prepare is not None:
        with psycopg.connect(dsn, autocommit=True) as conn:
            prepare(conn)
    root = tmp_path_factory.mktemp(prefix)
    port = harness.free_port()
    cfg = root / "config.toml"
    cfg.write_text(harness.make_test_config(dsn, port, epsilon=500.0, delta=1e-3, stream_length=200))
    p = harness.ProxyProcess(cfg, root / "state", port)
    p.start()
    return p, dsn


@pytest.fixture(scope="module")
def shop(harness, embedded_pg, default_config, tmp_path_factory) -> Iterator[tuple[Any, str]]:
    p, dsn = _start(harness, embedded_pg, default_config, tmp_path_factory, "shop")
    try:
        yield p, dsn
    finally:
        p.stop()


def _budget(conn: psycopg.Connection) -> dict[str, str]:
    return dict(conn.execute("SHOW lapras.budget").fetchall())  # type: ignore[arg-type]


def _spent(conn: psycopg.Connection) -> dict[str, str]:
    return {k: v for k, v in _budget(conn).items() if k.startswith("spent")}


BI_JOINS = {
    "metabase": 'SELECT "Products"."category" AS "Products__category", SUM("public"."orders"."quantity") AS "sum" '
                'FROM "public"."orders" LEFT JOIN "public"."products" "Products" ON "public"."orders"."product_id" '
                '= "Products"."id" GROUP BY "Products"."category" ORDER BY "Products"."category" ASC',
    "superset": 'SELECT region AS region, count(*) AS count FROM (SELECT o.quantity, o.channel, s.region FROM orders o '
                'JOIN stores s ON o.store_id = s.id) AS virtual_table GROUP BY region ORDER BY count DESC LIMIT 10000',
    "superset_star": 'SELECT category AS category, sum(quantity) AS "SUM(quantity)" FROM (SELECT * FROM orders o '
                     'JOIN products p ON o.product_id = p.id) AS virtual_table GROUP BY category LIMIT 10000',
    "powerbi": 'select "_"."month_name", "_"."a0" from (select "rows"."month_name" as "month_name", count(1) as "a0" '
               'from (select "$Table"."month_name" as "month_name" from (select "c"."month_name", "o"."quantity" '
               'from "public"."orders" "o" inner join "public"."calendar" "c" on ("o"."order_date" = "c"."day")) '
               '"$Table") "rows" group by "month_name") "_" where not "_"."a0" is null limit 1000001',
    "tableau": 'SELECT "products"."category" AS "category", SUM(CAST("orders"."quantity" AS BIGINT)) AS '
               '"sum:quantity:ok" FROM "public"."orders" "orders" INNER JOIN "public"."products" "products" ON '
               '("orders"."product_id" = "products"."id") WHERE ("orders"."channel" = \'web\') GROUP BY 1',
    "revenue": "SELECT s.region, SUM(o.quantity * p.unit_price) AS revenue FROM orders o "
               "JOIN products p ON o.product_id = p.id JOIN stores s ON o.store_id = s.id "
               "WHERE p.category IN ('toys', 'books') GROUP BY s.region",
    "weekend": "SELECT c.is_weekend, p.category, COUNT(*) FROM orders o JOIN calendar c ON o.order_date = c.day "
               "LEFT JOIN products p ON o.product_id = p.id WHERE c.quarter = 4 GROUP BY 1, 2",
}


@pytest.mark.parametrize("tool", sorted(BI_JOINS))
def test_bi_tool_joins_match_postgresql_within_the_stated_error(shop, tool: str) -> None:
    """Each output within 5 stated standard errors (root sum of squares of the statement's stated
    per-query errors, at least each output's own) of PostgreSQL's exact answer: per value the
    false-failure probability is below 6e-7, and the seven statements have at most 60 values, so below
    4e-5 per run."""
    px, dsn = shop
    sql = BI_JOINS[tool]
    notices: list[str] = []
    with psycopg.connect(px.dsn(), autocommit=True) as conn, psycopg.connect(dsn, autocommit=True) as exact:
        conn.execute("SET lapras.show_stderr = on")
        conn.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
        rows = conn.execute(sql).fetchall()  # type: ignore[call-overload]
        truth = exact.execute(sql).fetchall()  # type: ignore[call-overload]
    errs = notice_stderrs(notices)
    assert errs, notices
    tol = 5.0 * math.sqrt(sum(e * e for e in errs))
    got = {tuple(r[:-1]): float(r[-1]) for r in rows}
    want = {tuple(r[:-1]): float(r[-1]) for r in truth}
    assert set(want) <= set(got), (sorted(set(want) - set(got), key=str), tool)  # empty groups: PostgreSQL omits them
    misses = {k: (got[k], want.get(k, 0.0)) for k in got if abs(got[k] - want.get(k, 0.0)) > tol}
    assert not misses, (tool, tol, misses)
    # The answers carry information: each value's stated error is small against the groups' sizes here.
    own = [e for n in notices if "stderr=[" in n for e in list(notice_columns(n).values())[-1] if e is not None]
    assert own and max(own) < 0.1 * max(abs(v) for v in want.values()), (own, want)


def test_public_tables_read_as_they_are_and_shown_as_tables(shop) -> None:
    px, dsn = shop
    with psycopg.connect(px.dsn(), autocommit=True) as conn, psycopg.connect(dsn, autocommit=True) as direct:
        before = _spent(conn)
        for sql in ("SELECT * FROM products ORDER BY id", "SELECT DISTINCT region FROM stores ORDER BY 1",
                    "SELECT month_name, count(*) FROM calendar GROUP BY 1 ORDER BY 1",
                    'SELECT "id", "category" FROM "public"."products" WHERE unit_price > 50 ORDER BY 1'):
            assert conn.execute(sql).fetchall() == direct.execute(sql).fetchall(), sql  # type: ignore[call-overload]
        assert _spent(conn) == before
    psql = shutil.which("psql")
    if psql is None:
        pytest.skip("psql is not installed")
    done = subprocess.run([psql, px.dsn(), "-X", "-A", "-t", "-c", r"\d"], capture_output=True, text=True,
                          timeout=60, env={"PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    listed = {tuple(line.split("|")[1:3]) for line in done.stdout.splitlines()}
    assert {("products", "table"), ("stores", "table"), ("calendar", "table"), ("orders", "table")} <= listed
    done = subprocess.run([psql, px.dsn(), "-X", "-c", r"\d products"], capture_output=True, text=True,
                          timeout=60, env={"PATH": "/usr/bin:/bin"})
    assert done.returncode == 0 and "unit_price" in done.stdout and "UNIQUE" in done.stdout, done.stdout


REFUSED = {
    "SELECT o.* FROM orders o JOIN products p ON o.product_id = p.id": "would read its rows",
    "SELECT COUNT(*) FROM orders a JOIN orders b ON a.product_id = b.product_id": "with itself",
    "SELECT COUNT(*) FROM orders o JOIN products p ON o.product_id > p.id": "one equality",
    "SELECT COUNT(*) FROM orders o JOIN products p ON o.quantity = p.unit_price": "not unique",
    "SELECT p.category, COUNT(*) FROM products p RIGHT JOIN orders o ON o.product_id = p.id GROUP BY 1": "must come first",
}


def test_refused_joins_charge_nothing(shop) -> None:
    px, _ = shop
    with psycopg.connect(px.dsn(), autocommit=True) as conn:
        before = _spent(conn)
        for sql, words in REFUSED.items():
            with pytest.raises(psycopg.errors.FeatureNotSupported) as err:
                conn.execute(sql)  # type: ignore[call-overload]
            assert err.value.sqlstate == "0A000" and words in str(err.value), (sql, str(err.value))
        assert _spent(conn) == before
        conn.execute("SELECT COUNT(*) FROM orders o JOIN products p ON o.product_id = p.id")  # still serving


def _swap_and_duplicate(conn: psycopg.Connection) -> None:
    # products becomes a view over the protected table; stores loses its key and gets a duplicate id.
    conn.execute("ALTER TABLE products RENAME TO products_base")
    conn.execute("CREATE VIEW products AS SELECT customer_id::int AS id, channel AS category, "
                 "quantity::numeric AS unit_price FROM orders")
    conn.execute("ALTER TABLE stores DROP CONSTRAINT stores_pkey")
    conn.execute("INSERT INTO stores VALUES (1, 'Tacoma', 'West')")


def test_a_view_posing_as_public_and_a_duplicated_key_are_refused(harness, embedded_pg, default_config,
                                                                    tmp_path_factory) -> None:
    px, _ = _start(harness, embedded_pg, default_config, tmp_path_factory, "shopbad", _swap_and_duplicate)
    try:
        with psycopg.connect(px.dsn(), autocommit=True) as conn:
            before = _spent(conn)
            with pytest.raises(psycopg.errors.FeatureNotSupported) as err:
                conn.execute("SELECT p.category, COUNT(*) FROM orders o JOIN products p ON o.product_id = p.id "
                             "GROUP BY 1")
            assert "view" in str(err.value)
            with pytest.raises(psycopg.errors.FeatureNotSupported) as err:
                conn.execute("SELECT s.region, COUNT(*) FROM orders o JOIN stores s ON o.store_id = s.id GROUP BY 1")
            assert "not unique" in str(err.value) and "UNIQUE" in (err.value.diag.message_hint or "")
            with pytest.raises(psycopg.errors.UndefinedTable):
                conn.execute("SELECT * FROM products")  # never read upstream, never copied
            assert _spent(conn) == before
        assert any("not a base table" in line for line in px.output), "".join(px.output)
    finally:
        px.stop()


def test_check_config_refuses_a_table_both_public_and_protected(tmp_path) -> None:
    from proxy.config import ConfigError, parse_config

    tree = {"users": [{"name": "a", "auth": "trust"}],
            "tables": {"t": {"columns": {"x": {"type": "int", "min": 0, "max": 3}}}},
            "public_tables": {"t": {}}}
    with pytest.raises(ConfigError) as err:
        parse_config(tree)
    assert "either public or protected" in str(err.value)


def test_public_column_named_like_a_privacy_unit_warns() -> None:
    import dataclasses

    from parser.model.public import PublicColumn
    from proxy.ops.public_tables import public_table_warnings

    cfg = load_config("config.toml")
    pub = dataclasses.replace(cfg.catalog.public[0], columns=(PublicColumn("customer_id", "bigint"),), loaded=True)
    warnings = public_table_warnings(dataclasses.replace(cfg.catalog, public=(pub,)))
    assert len(warnings) == 1 and "customer_id" in warnings[0] and "privacy unit" in warnings[0]


def test_a_changed_public_table_is_read_again(harness, embedded_pg, default_config) -> None:
    """The serving proxy's poll (follow_public_tables) picks up a change upstream: the engine's catalog,
    which the DP service plans over, gets the new copy."""
    import asyncio
    import dataclasses
    import types

    from proxy.ops.public_tables import follow_public_tables, with_public_tables

    dsn = harness.demo_database(embedded_pg, default_config, "shoppoll")
    catalog = with_public_tables(default_config.catalog, dsn)
    engine = types.SimpleNamespace(base_catalog=catalog, catalog=catalog)

    async def run() -> None:
        task = asyncio.create_task(follow_public_tables(engine, dsn, every=0.05))
        await asyncio.sleep(0.2)
        assert engine.catalog is catalog  # unchanged upstream: the same copy
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("UPDATE products SET category = 'games' WHERE id = 1")
        for _ in range(100):
            if engine.catalog is not catalog:
                break
            await asyncio.sleep(0.05)
        task.cancel()

    asyncio.run(run())
    products = next(t for t in engine.catalog.public if t.name == "products")
    assert ("1", "toys-01", "games") == next(r for r in products.rows if r[0] == "1")[:3]
    assert engine.base_catalog.public == engine.catalog.public
    assert dataclasses.replace(engine.catalog, public=catalog.public) == catalog


def test_check_config_reads_the_public_tables_of_its_upstream(harness, embedded_pg, default_config,
                                                              tmp_path) -> None:
    from proxy.ops.cli import _public_table_checks

    dsn = harness.demo_database(embedded_pg, default_config, "shopcheck")
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("ALTER TABLE stores ADD COLUMN customer_id bigint")
        conn.execute("ALTER TABLE calendar RENAME TO calendar_base")
        conn.execute("CREATE VIEW calendar AS SELECT * FROM calendar_base")
    cfg = tmp_path / "config.toml"
    cfg.write_text(harness.make_test_config(dsn, harness.free_port()))
    warnings = _public_table_checks(load_config(cfg))
    assert any("calendar will not be served" in w and "view" in w for w in warnings), warnings
    assert any("stores" in w and "customer_id" in w and "privacy unit" in w for w in warnings), warnings
