"""A new user's own table, end to end: an event-log CSV (a timestamp, a repeating user id as the privacy unit,
text categories with values outside the declared list, money with decimals, NULLs, a boolean, a column
left undeclared) loaded by the embedded loader (`serve --data` / `whatif --data`), declared as the README
says, and queried through the real proxy over real sockets with psql-style SQL and typed parameters
(psycopg text and binary, asyncpg prepared)."""

from __future__ import annotations

import asyncio
import csv
import random
import tomllib
from collections.abc import Iterator
from datetime import date, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql as pgsql

from proxy.config import LoadSettings, parse_config
from proxy.upstream.demo_data import ensure_table

USERS = 400
DECLARATION = """
[tables.purchases]
schema = "public"
privacy_unit = "User ID"
max_rows_per_unit = 20

[tables.purchases.columns]
event_time = { type = "timestamp", resolution = "day", min = 2026-01-01T00:00:00, max = 2026-12-31T23:59:59, nullable = true }
category = { type = "text", values = ["Checkout Started", "checkout_done", "support"], nullable = true }
price = { type = "numeric", min = 0, max = 300, bins = 20, nullable = true }
is_mobile = { type = "boolean", nullable = true }
"""


def write_csv(path: Path) -> int:
    """Each user has 1..12 events (under max_rows_per_unit, so bounded answers equal PostgreSQL's)."""
    rng = random.Random(5)
    cats = ["Checkout Started", "checkout_done", "support", "Café visit", "O'Brien promo", ""]
    n = 0
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["event_time", "User ID", "category", "price", "is_mobile", "note"])
        for user in range(1, USERS + 1):
            for _ in range(1 + user % 12):
                t = datetime(2026, 1, 1) + timedelta(seconds=rng.randrange(330 * 86400))
                price = "" if rng.random() < 0.1 else f"{rng.uniform(0, 300):.2f}"
                w.writerow([t.isoformat(" "), user, rng.choice(cats), price, rng.choice(["true", "f", ""]),
                            rng.choice(["", "hello, world", 'quote "x"'])])
                n += 1
    return n


@pytest.fixture(scope="module")
def own(embedded_pg: Any, default_config: Any, tmp_path_factory: Any, harness: Any) -> Iterator[Any]:
    root = tmp_path_factory.mktemp("own")
    rows = write_csv(root / "purchases.csv")
    dsn = harness.demo_database(embedded_pg, default_config, "own")
    port = harness.free_port()
    text = harness.make_test_config(dsn, port, epsilon=1e4, stream_length=50, extra=DECLARATION)
    cfg = parse_config(tomllib.loads(text))
    table = cfg.catalog.table("purchases", "public")
    assert table is not None
    assert ensure_table(dsn, table, cfg.loads.get("purchases", LoadSettings()), root / "purchases.csv")
    (root / "config.toml").write_text(text)
    p = harness.ProxyProcess(root / "config.toml", root / "state", port)
    p.upstream_dsn, p.rows = dsn, rows  # type: ignore[attr-defined]
    p.start()
    try:
        yield p
    finally:
        p.stop()


def test_the_loader_keeps_the_privacy_unit_column(own: Any) -> None:
    """The unit is not a declared attribute (it is not queryable), but the rows must carry it: bounding
    and COUNT(DISTINCT) read it. Integer ids are stored as bigint, empty fields as NULL."""
    with psycopg.connect(own.upstream_dsn) as conn:
        cols = dict(conn.execute("SELECT column_name, data_type FROM information_schema.columns "
                                 "WHERE table_name = 'purchases'").fetchall())
        assert cols == {"User ID": "bigint", "event_time": "timestamp without time zone", "category": "text",
                        "price": "numeric", "is_mobile": "boolean"}
        n, users, no_price = conn.execute('SELECT count(*), count(DISTINCT "User ID"), count(*) - count(price) '
                                          "FROM purchases").fetchone()  # type: ignore[misc]
    assert (n, users) == (own.rows, USERS) and no_price > 0


def test_aggregates_over_the_own_table(own: Any) -> None:
    with psycopg.connect(own.upstream_dsn) as direct:
        exact = direct.execute("SELECT count(*), count(DISTINCT \"User ID\"), sum(price), "
                               "count(*) FILTER (WHERE is_mobile) FROM purchases").fetchone()
        assert exact is not None
    with psycopg.connect(own.dsn(), autocommit=True) as conn:
        n, users = conn.execute('SELECT count(*), count(DISTINCT "User ID") FROM purchases').fetchone()  # type: ignore[misc]
        assert abs(n - exact[0]) <= 5 and abs(users - exact[1]) <= 5
        (total,) = conn.execute("SELECT sum(price) FROM purchases").fetchone()  # type: ignore[misc]
        assert abs(float(total) - float(exact[2])) < 0.01 * float(exact[2])
        (mobile,) = conn.execute("SELECT count(*) FROM purchases WHERE is_mobile").fetchone()  # type: ignore[misc]
        assert abs(mobile - exact[3]) <= 5


def _exact(own: Any, sql: str, params: list[Any]) -> int:
    with psycopg.connect(own.upstream_dsn) as direct:
        row = direct.execute(sql, params).fetchone()  # type: ignore[arg-type]
        assert row is not None
        return int(row[0])


PARAMETERISED = [
    ("SELECT count(*) FROM purchases WHERE CAST(event_time AS date) >= %s", [date(2026, 6, 1)]),
    ("SELECT count(*) FROM purchases WHERE event_time::date BETWEEN %s AND %s", [date(2026, 3, 1), date(2026, 3, 31)]),
    ("SELECT count(*) FROM purchases WHERE date_trunc('month', event_time) = %s AND is_mobile = %s",
     [datetime(2026, 2, 1), True]),
    ("SELECT count(*) FROM purchases WHERE price >= %s AND category = %s", [Decimal("20.00"), "support"]),
    ("SELECT count(*) FROM purchases WHERE lower(category) IN (%s, %s)", ["support", "checkout_done"]),
    ("SELECT count(*) FROM purchases WHERE category = ANY(%s) AND is_mobile = ANY(%s)",
     [["support", "checkout_done"], [True]]),
]


@pytest.mark.parametrize("sql,params", PARAMETERISED)
def test_typed_parameters_over_psycopg_text_and_binary(own: Any, sql: str, params: list[Any]) -> None:
    exact = _exact(own, sql, params)
    with psycopg.connect(own.dsn(), autocommit=True) as conn:
        for binary in (False, True):
            (got,) = conn.execute(sql, params, binary=binary, prepare=True).fetchone()  # type: ignore[misc]
            assert abs(got - exact) <= 5, (binary, got, exact)


def test_typed_parameters_over_asyncpg(own: Any) -> None:
    import asyncpg

    async def run() -> list[int]:
        conn = await asyncpg.connect(host=own.host, port=own.port, user="analyst", password="lapras",
                                     database="adult", ssl=False)
        try:
            out = []
            for sql, params in PARAMETERISED:
                n = iter(range(1, 10))
                out.append((await conn.fetchrow(sql.replace("%s", "$%d") % tuple(next(n) for _ in params),
                                                *params))[0])
            return out
        finally:
            await conn.close()

    got = asyncio.run(run())
    for (sql, params), g in zip(PARAMETERISED, got, strict=True):
        assert abs(g - _exact(own, sql, params)) <= 5, (sql, g)


def test_generated_rows_of_a_table_with_a_unit_give_each_row_its_own(embedded_pg: Any, harness: Any) -> None:
    """Without a CSV the census generator fills a declared table; a declared unit column is filled too
    (each row its own unit), so the table can be queried instead of failing on a missing column."""
    cfg = parse_config(tomllib.loads(harness.make_test_config("", 1) + DECLARATION.replace("purchases", "gen")))
    table = cfg.catalog.table("gen", "public")
    assert table is not None
    dsn = harness.create_database(embedded_pg, "gen")
    assert ensure_table(dsn, table, LoadSettings(), None)
    with psycopg.connect(dsn) as conn:
        n, units = conn.execute('SELECT count(*), count(DISTINCT "User ID") FROM gen').fetchone()  # type: ignore[misc]
    assert n == units > 0


def test_a_declared_column_missing_from_the_table_stops_the_start(own: Any, harness: Any) -> None:
    """A misspelt column (or a unit column the table lacks) is named at start, not failed per statement
    with XX000 and the reason only in the operator's log."""
    from proxy.ops.app import StartupError, open_upstream

    text = harness.make_test_config(own.upstream_dsn, 1, extra=DECLARATION.replace(
        "is_mobile = {", '"Is Mobile" = {').replace('"User ID"', '"user_id"'))
    cfg = parse_config(tomllib.loads(text))
    with pytest.raises(StartupError) as err:
        open_upstream(cfg, Path("/nonexistent"))
    assert 'table public.purchases has no column "Is Mobile", user_id (it has "User ID", category' in str(err.value)
    # The declaration as the table is: it starts.
    good = parse_config(tomllib.loads(harness.make_test_config(own.upstream_dsn, 1, extra=DECLARATION)))
    assert open_upstream(good, Path("/nonexistent")).dsn == own.upstream_dsn


def test_a_declared_type_of_another_kind_than_the_stored_one_stops_the_start(own: Any, harness: Any) -> None:
    """A text column declared int (or boolean) would fail every statement over it upstream with XX000, the
    reason only in the log: the start names each such column, its stored type and the declared one. Types of
    the same kind (a numeric measure over an integer column, a date over a timestamp) still start."""
    from proxy.ops.app import StartupError, open_upstream

    mistyped = DECLARATION.replace(
        'category = { type = "text", values = ["Checkout Started", "checkout_done", "support"], nullable = true }',
        'category = { type = "int", min = 0, max = 3 }').replace(
        'price = { type = "numeric", min = 0, max = 300, bins = 20, nullable = true }', 'price = { type = "boolean" }')
    cfg = parse_config(tomllib.loads(harness.make_test_config(own.upstream_dsn, 1, extra=mistyped)))
    with pytest.raises(StartupError) as err:
        open_upstream(cfg, Path("/nonexistent"))
    message = str(err.value)
    assert "column category of table public.purchases is text upstream but declared int" in message
    assert "column price of table public.purchases is numeric upstream but declared boolean" in message
    assert "event_time" not in message and "is_mobile" not in message
    same_kind = DECLARATION.replace('type = "timestamp", resolution = "day"', 'type = "date"').replace(
        'price = { type = "numeric", min = 0, max = 300, bins = 20', 'price = { type = "float", min = 0, max = 300')
    good = parse_config(tomllib.loads(harness.make_test_config(own.upstream_dsn, 1, extra=same_kind)))
    assert open_upstream(good, Path("/nonexistent")).dsn == own.upstream_dsn


def test_an_upstream_role_that_is_not_a_superuser_stops_the_start_naming_it(own: Any, harness: Any) -> None:
    """The catalog database's set-up (information_schema's views redefined, system functions revoked from
    PUBLIC) needs a superuser: a CREATEDB + CREATEROLE role is refused at start with the reason, not
    half-way through the set-up with "permission denied for schema information_schema"."""
    from psycopg.conninfo import make_conninfo

    from proxy.ops.app import StartupError, open_upstream

    with psycopg.connect(own.upstream_dsn, autocommit=True) as conn:
        conn.execute("DROP ROLE IF EXISTS own_not_super")
        conn.execute("CREATE ROLE own_not_super LOGIN CREATEDB CREATEROLE")
        # The proxy closed the database to PUBLIC (README, "To front your own PostgreSQL").
        conn.execute(pgsql.SQL("GRANT CONNECT ON DATABASE {} TO own_not_super").format(
            pgsql.Identifier(conn.info.dbname)))
    try:
        dsn = make_conninfo(own.upstream_dsn, user="own_not_super")
        cfg = parse_config(tomllib.loads(harness.make_test_config(dsn, 1, extra=DECLARATION)))
        with pytest.raises(StartupError) as err:
            open_upstream(cfg, Path("/nonexistent"), serving=True)
        assert "upstream.dsn connects as role own_not_super, which is not a superuser" in str(err.value)
        # Operator commands (whatif, budget) need no catalog set-up: they may read as any role.
        assert open_upstream(cfg, Path("/nonexistent")).dsn == dsn
    finally:
        with psycopg.connect(own.upstream_dsn, autocommit=True) as conn:
            conn.execute("DROP OWNED BY own_not_super")
            conn.execute("DROP ROLE own_not_super")


def test_check_config_says_what_serve_would_refuse_upstream(own: Any, harness: Any, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    """check-config said "OK" of a file whose upstream.dsn names a database that does not exist, or whose
    table lacks a declared column, which `serve` then refused: with an upstream it now runs serve's checks
    there (nothing created) and exits 2 naming the problem."""
    from proxy.ops.cli import main

    def check(declaration: str, dsn: str = own.upstream_dsn) -> tuple[int, str]:
        path = tmp_path / "config.toml"
        path.write_text(harness.make_test_config(dsn, 1, extra=declaration))
        capsys.readouterr()
        code = main(["check-config", "--config", str(path)])
        out = capsys.readouterr()
        return code, out.out + out.err

    code, text = check(DECLARATION.replace("is_mobile = {", "mobile = {"))
    assert code == 2 and "table public.purchases has no column mobile" in text, text
    code, text = check(DECLARATION, dsn=own.upstream_dsn.replace("dbname=", "dbname=no_such_"))
    assert code == 2 and "cannot connect to upstream.dsn" in text and "does not exist" in text, text
    code, text = check(DECLARATION)
    assert code == 0 and "OK" in text, text
