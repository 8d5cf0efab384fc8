"""Odd PostgreSQL names through the real proxy process: a table whose schema, table and column names hold
quotes, a semicolon, spaces, punctuation, non-ASCII and 63 bytes, declared with TOML quoted keys, is
answered over a real socket, shown by psql's \\d and the catalog as PostgreSQL shows it, refused with
PostgreSQL's wording, never turned into injected SQL, and replayed from the ledger after a restart."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg import sql

from pgcore.identifiers import quote_ident
from proxy.config import LoadSettings, parse_config, toml_key
from proxy.upstream.demo_data import ensure_table
from tests.fixtures.psql import bundled_psql

SCHEMA = "Odd Schema.ü"
TABLE = 'Sales_3 "Q"; DROP TABLE adult; --'
RECORDS, FB, HOSTILE, CITY = "Number of Records", "FB.", 'x"; SELECT 1; --', "Ünïcödé Stadt"
LONG = "L" + "ö" * 31  # 63 bytes
T = f"{quote_ident(SCHEMA)}.{quote_ident(TABLE)}"


def _extra() -> str:
    """The odd table as a DBA declares it (quoted TOML keys), and two tables told apart only by case."""
    s = lambda v: json.dumps(v, ensure_ascii=False)  # noqa: E731 - a TOML basic string
    return "\n".join([
        f"[tables.{toml_key(TABLE)}]", f"schema = {s(SCHEMA)}", f"[tables.{toml_key(TABLE)}.columns]",
        f'{toml_key(RECORDS)} = {{ type = "int", min = 0, max = 9 }}',
        f'{toml_key(FB)} = {{ type = "int", min = 0, max = 3 }}',
        f'{toml_key(HOSTILE)} = {{ type = "int", min = 0, max = 1 }}',
        f'{toml_key(CITY)} = {{ type = "text", values = ["Köln", "Zürich"] }}',
        f'{toml_key(LONG)} = {{ type = "int", min = 0, max = 2 }}',
        '[tables.Sales.columns]', 'x = { type = "int", min = 0, max = 1 }',
        '[tables.sales.columns]', 'x = { type = "int", min = 0, max = 1 }',
    ])


@pytest.fixture(scope="module")
def odd_proxy(embedded_pg: Any, default_config: Any, tmp_path_factory: Any, harness: Any) -> Iterator[Any]:
    dsn = harness.demo_database(embedded_pg, default_config, "names")
    port = harness.free_port()
    text = harness.make_test_config(dsn, port, epsilon=4.0, extra=_extra())
    cfg = parse_config(__import__("tomllib").loads(text))
    odd = cfg.catalog.table(TABLE, SCHEMA)
    assert odd is not None
    ensure_table(dsn, odd, LoadSettings(), None)  # the demo loader, on odd names
    with psycopg.connect(dsn, autocommit=True) as conn:
        for name, rows in (("Sales", 200), ("sales", 5000)):
            conn.execute(sql.SQL("CREATE TABLE {} (x integer)").format(sql.Identifier(name)))
            conn.execute(sql.SQL("INSERT INTO {} SELECT g %% 2 FROM generate_series(1, %s) g").format(
                sql.Identifier(name)), (rows,))
    root = tmp_path_factory.mktemp("names")
    yield from harness.serve_config(root, text, port, dsn)


def test_aggregates_over_odd_names_over_a_real_socket(odd_proxy: Any) -> None:
    with psycopg.connect(odd_proxy.upstream_dsn) as direct:  # type: ignore[attr-defined]
        exact = dict(direct.execute(sql.SQL("SELECT {}, count(*) FROM {} GROUP BY 1").format(
            sql.Identifier(CITY), sql.Identifier(SCHEMA, TABLE))).fetchall())
    with psycopg.connect(odd_proxy.dsn(), autocommit=True) as conn:
        cur = conn.execute(f'SELECT {quote_ident(CITY)} AS "Stadt (Name)", COUNT(*) AS n FROM {T} AS "t 1" '
                           f'WHERE "t 1".{quote_ident(HOSTILE)} IN (0, 1) GROUP BY 1 ORDER BY 1')
        assert [d.name for d in cur.description or []] == ["Stadt (Name)", "n"]
        got = dict(cur.fetchall())
        assert set(got) == set(exact) and all(abs(got[k] - exact[k]) < 0.05 * exact[k] for k in exact), (got, exact)
        (avg,) = conn.execute(f"SELECT AVG({quote_ident(LONG)}) FROM {T} WHERE {quote_ident(FB)} >= 1").fetchone()  # type: ignore[misc]
        assert 0 <= float(avg) <= 2
        # Unquoted names fold to lower case: Sales is sales, a table of its own.
        (low,) = conn.execute("SELECT COUNT(*) FROM Sales").fetchone()  # type: ignore[misc]
        (up,) = conn.execute('SELECT COUNT(*) FROM "Sales"').fetchone()  # type: ignore[misc]
        assert abs(low - 5000) < 250 and abs(up - 200) < 250 and low - up > 4000
    with psycopg.connect(odd_proxy.upstream_dsn) as direct:  # type: ignore[attr-defined]
        assert direct.execute("SELECT count(*) FROM adult").fetchone() == (48_842,)  # nothing injected


@pytest.mark.parametrize("text,state,message", [
    (f'SELECT COUNT("Foo Bar") FROM {T}', "42703", 'column "Foo Bar" does not exist'),
    (f'SELECT COUNT(*) FROM {T} WHERE "fb." = 1', "42703", 'column "fb." does not exist'),
    ('SELECT COUNT(*) FROM "Sales_3"', "42P01", 'relation "Sales_3" does not exist'),
    (f'SELECT {quote_ident(RECORDS)} FROM {T}', "42501", None),
    (f"SELECT * FROM {T}", "42501", None),
    (f"TABLE {T}", "42501", None),
    (f"SELECT count(*) FROM {T} WHERE {quote_ident(HOSTILE)} = 1; DROP TABLE adult", "25006", None),
])
def test_refusals_quote_names_as_postgresql(odd_proxy: Any, text: str, state: str,
                                            message: str | None) -> None:
    with psycopg.connect(odd_proxy.dsn(), autocommit=True) as conn:
        with pytest.raises(psycopg.Error) as err:
            conn.execute(text)  # type: ignore[arg-type]
        assert err.value.sqlstate == state
        if message is not None:
            assert err.value.diag.message_primary == message
        assert conn.execute("SELECT 1").fetchone() == (1,)  # the connection keeps serving


def test_explain_names_the_odd_table_as_sql_spells_it(odd_proxy: Any) -> None:
    with psycopg.connect(odd_proxy.dsn(), autocommit=True) as conn:
        lines = [r[0] for r in conn.execute(f"EXPLAIN SELECT SUM({quote_ident(RECORDS)}) FROM {T}").fetchall()]
    assert lines[0].startswith(f"DP aggregate over {T}: 1 linear queries"), lines


def test_psql_describes_the_odd_table_as_postgresql(odd_proxy: Any) -> None:
    psql = bundled_psql()
    if psql is None:
        pytest.skip("no psql binary")
    pattern = '"' + SCHEMA.replace('"', '""') + '"."' + TABLE.replace('"', '""') + '"'
    run = subprocess.run([psql, "-X", odd_proxy.dsn(), "-c", f"\\d {pattern}", "-c", f'\\dt "{SCHEMA}".*'],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0 and not run.stderr, run.stderr
    out = run.stdout
    assert f'Table "{SCHEMA}.{TABLE}"' in out
    for col, typ in ((RECORDS, "integer"), (FB, "integer"), (HOSTILE, "integer"), (CITY, "text"), (LONG, "integer")):
        assert any(line.strip().startswith(col) and typ in line for line in out.splitlines()), (col, out)
    assert TABLE in out.split(f'Table "{SCHEMA}.{TABLE}"')[-1]  # \dt lists it
    with psycopg.connect(odd_proxy.dsn(), autocommit=True) as conn:
        cols = [r[0] for r in conn.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_schema = %s AND table_name = %s "
            "ORDER BY ordinal_position", (SCHEMA, TABLE)).fetchall()]
    assert cols == [RECORDS, FB, HOSTILE, CITY, LONG]


def test_released_answer_over_odd_names_replays_after_restart(odd_proxy: Any) -> None:
    text = f"SELECT {quote_ident(FB)}, SUM({quote_ident(RECORDS)}), AVG({quote_ident(LONG)}) FROM {T} GROUP BY 1"
    with psycopg.connect(odd_proxy.dsn(), autocommit=True) as conn:
        first = conn.execute(text).fetchall()  # type: ignore[arg-type]
    odd_proxy.stop()
    odd_proxy.start()
    with psycopg.connect(odd_proxy.dsn(), autocommit=True) as conn:
        again = conn.execute(text.replace(f"FROM {T}", f"FROM {T} AS o")).fetchall()  # type: ignore[arg-type]
    assert again == first  # the stored answer, not new noise
