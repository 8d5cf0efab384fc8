"""Shape probes over a protected table (Tableau/Power BI `WHERE 1 = 0`, Superset's virtual dataset
`SELECT * FROM (...) AS virtual_table LIMIT 1`, `LIMIT 0`) list the columns the proxy's catalog lists, no more
and no fewer: the privacy unit (user_id) is in neither, since the catalog (information_schema, pg_attribute:
what `\\d` and SQLAlchemy's inspector read) does not show it and a unit value is never returned. The other
columns have PostgreSQL's names and types, in its order; no row is returned. Through the real proxy and its
PostgreSQL over sockets with psycopg (simple and extended protocol); false-failure rate 0."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from tests.fixtures.databases import demo_database
from tests.fixtures.proxy_process import start_test_proxy

pytestmark = pytest.mark.process

PROBES = ["SELECT * FROM events WHERE 1 = 0",
          "SELECT * FROM (SELECT * FROM events) AS virtual_table LIMIT 1",
          "SELECT * FROM events LIMIT 0"]
CATALOG_COLUMNS = {
    "information_schema": "SELECT column_name FROM information_schema.columns WHERE table_name = 'events' "
                          "ORDER BY ordinal_position",
    "pg_attribute": "SELECT attname FROM pg_attribute WHERE attrelid = 'events'::regclass AND attnum > 0 "
                    "AND NOT attisdropped ORDER BY attnum"}


@pytest.fixture(scope="module")
def both(embedded_pg: Any, default_config: Any, tmp_path_factory: Any) -> Iterator[tuple[str, str]]:
    """(the proxy's dsn, its PostgreSQL database's)."""
    dsn = demo_database(embedded_pg, default_config, "probecols")
    p = start_test_proxy(tmp_path_factory.mktemp("probecols"), dsn)
    try:
        yield p.dsn(), dsn
    finally:
        p.stop()


@pytest.mark.parametrize("prepare", [False, True])
@pytest.mark.parametrize("sql", PROBES)
def test_a_probe_lists_the_catalog_columns(sql: str, prepare: bool, both: tuple[str, str]) -> None:
    proxy_dsn, pg_dsn = both
    with psycopg.connect(proxy_dsn, autocommit=True) as proxy, psycopg.connect(pg_dsn, autocommit=True) as pg:
        cur = proxy.execute(sql, prepare=prepare)
        assert cur.fetchall() == []
        got = [(d.name, d.type_code) for d in cur.description or ()]
        listed = {name: [r[0] for r in proxy.execute(q)] for name, q in CATALOG_COLUMNS.items()}
        upstream = [(d.name, d.type_code) for d in pg.execute(sql).description or ()]
    assert listed["information_schema"] == listed["pg_attribute"] == [n for n, _ in got]
    assert "user_id" not in listed["pg_attribute"]
    assert got == [c for c in upstream if c[0] != "user_id"] and len(upstream) == len(got) + 1


def test_the_unit_column_is_unknown_to_a_probe_as_to_the_catalog(both: tuple[str, str]) -> None:
    with psycopg.connect(both[0], autocommit=True) as proxy:
        with pytest.raises(psycopg.errors.UndefinedColumn):
            proxy.execute("SELECT user_id FROM events WHERE 1 = 0").fetchall()
