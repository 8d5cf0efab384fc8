"""Any PostgreSQL name: a table whose schema, table and column names use quotes, mixed case, spaces,
punctuation, non-ASCII and the full 63 bytes answers exactly as the same data under plain names.

Both tables are declared through config.toml's quoted keys, filled with the same rows in one real
PostgreSQL, and every statement is planned and answered on the exact path the engine uses
(``PostgresExactSource``: pushed-down aggregates and marginals, privacy-unit bounding included). The odd
side must give the plain side's rows exactly, and PostgreSQL's own answer to the odd SQL.
"""

from __future__ import annotations

import json
import random
import tomllib
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg import sql

from lapras.exact import PostgresExactSource
from parser import Planner, Refusal
from parser.model.schema import Catalog
from pgcore.identifiers import quote_ident
from proxy.config import parse_config, toml_key
from tests.fixtures.exact_rows import leading_keys, rows_match

LONG = "L" + "ö" * 31  # 63 bytes in UTF-8: the longest name PostgreSQL keeps
ODD_SCHEMA, ODD_TABLE = "Odd Schema.ü", 'Sales_3 "Q"; x'
# plain name -> odd name, per column (declared in this order on both sides)
COLUMNS = {
    "n_records": "Number of Records", "fb": "FB.", "screen_name": "twitter#user#screen_name",
    "agep_bin": "Agep (bin)", "city": "Ünïcödé Stadt", "ab": "a.b", "longcol": LONG, "tick": "it's -- x:y",
}
SPECS = {
    "n_records": '{ type = "int", min = 0, max = 9 }',
    "fb": '{ type = "int", min = 0, max = 3 }',
    "screen_name": '{ type = "text", values = ["a", "b", "c"], nullable = true }',
    "agep_bin": '{ type = "int", min = 0, max = 5 }',
    "city": '{ type = "text", values = ["Köln", "Zürich", "Oslo"] }',
    "ab": '{ type = "int", min = 0, max = 4 }',
    "longcol": '{ type = "int", min = 0, max = 2 }',
    "tick": '{ type = "int", min = 0, max = 4 }',
}
UNIT = {"plain": "user_id", "odd": "User ID"}
K = 3  # rows kept per unit; every unit has at most K rows, so bounding keeps the same rows on both sides


def _toml_table(name: str, schema: str, names: dict[str, str], unit: str) -> str:
    """The table as a DBA writes it: quoted TOML keys for odd names, plain ones bare."""
    lines = [f"[tables.{toml_key(name)}]", f"schema = {json.dumps(schema, ensure_ascii=False)}",
             f"privacy_unit = {json.dumps(unit, ensure_ascii=False)}", f"max_rows_per_unit = {K}",
             f"[tables.{toml_key(name)}.columns]"]
    lines += [f"{toml_key(names[c])} = {SPECS[c]}" for c in COLUMNS]
    return "\n".join(lines)


CONFIG = "\n".join(['[[users]]\nname = "analyst"\nauth = "trust"',
                    _toml_table("plain_sales", "public", {c: c for c in COLUMNS}, UNIT["plain"]),
                    _toml_table(ODD_TABLE, ODD_SCHEMA, COLUMNS, UNIT["odd"])])


def rows(n: int = 3000, seed: int = 18) -> list[tuple[Any, ...]]:
    rng = random.Random(seed)
    out: list[tuple[Any, ...]] = []
    unit = 0
    while len(out) < n:
        unit += 1
        for _ in range(rng.randint(1, K)):
            out.append((unit, rng.randint(0, 9), rng.randint(0, 3), rng.choice(["a", "b", "c", None]),
                        rng.randint(0, 5), rng.choice(["Köln", "Zürich", "Oslo"]), rng.randint(0, 4),
                        rng.randint(0, 2), rng.randint(0, 4)))
    return out


@pytest.fixture(scope="module")
def names_db(embedded_pg: Any) -> Iterator[tuple[str, Catalog]]:
    cfg = parse_config(tomllib.loads(CONFIG))
    dsn = embedded_pg.dsn()
    name = "parser_names"
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(name)))
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    dsn = str(embedded_pg.dsn(name))
    data = rows()
    with psycopg.connect(dsn, autocommit=True) as conn:
        for t in cfg.catalog.tables:
            assert t.privacy_unit is not None
            cols = [sql.SQL("{} bigint").format(sql.Identifier(t.privacy_unit))]
            cols += [sql.SQL("{} {}").format(sql.Identifier(a.name), sql.SQL(a.domain.sql_type)) for a in t.attributes]
            target = sql.Identifier(t.schema, t.name)
            conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(t.schema)))
            conn.execute(sql.SQL("CREATE TABLE {} ({})").format(target, sql.SQL(", ").join(cols)))
            names = sql.SQL(", ").join(sql.Identifier(n) for n in (t.privacy_unit, *(a.name for a in t.attributes)))
            with conn.cursor().copy(sql.SQL("COPY {} ({}) FROM STDIN").format(target, names)) as copy:
                for r in data:
                    copy.write_row(r)
        yield dsn, cfg.catalog


# Statements as templates over {t} (the table), {s} (its schema) and one placeholder per column; the
# third field says whether PostgreSQL's own answer to the text is comparable (not for order statistics
# from tree counts, nor value lists, which return the declared domain).
STATEMENTS = [
    ("SELECT COUNT(*) FROM {t}", True),
    ("SELECT COUNT(*) FROM {s}.{t} WHERE {fb} = 2 AND {n_records} >= 3", True),
    ("SELECT {agep_bin}, SUM({n_records}), AVG({longcol}) FROM {t} GROUP BY {agep_bin} ORDER BY 1", True),
    ("SELECT {city} AS {ab}, COUNT(*) FROM {t} WHERE {screen_name} IN ('a', 'b') GROUP BY 1 ORDER BY 1", True),
    ("SELECT {screen_name}, {fb}, COUNT({screen_name}), SUM({tick}) FROM {t} GROUP BY 1, 2", True),
    ("SELECT AVG(x.{ab}) AS \"avg of a.b\" FROM {t} AS x WHERE x.{tick} BETWEEN 1 AND 3", True),
    ("SELECT COUNT(*), SUM({s}.{t}.{fb}) FROM {s}.{t} WHERE {screen_name} IS NULL OR {city} <> 'Oslo'", True),
    ("SELECT {agep_bin}, {n_records}, COUNT(*) FROM {t} GROUP BY 1, 2", True),  # 60 groups: marginal path
    ("SELECT {fb}, SUM({n_records}) AS total FROM {t} GROUP BY {fb} HAVING SUM({n_records}) > 0 "
     "ORDER BY total DESC", True),
    ('SELECT COUNT(*) FROM (SELECT {n_records} AS "r n", {fb} FROM {t} WHERE {fb} > 0) AS "Custom SQL Query" '
     'WHERE "r n" > 2', True),
    ("WITH w AS (SELECT * FROM {s}.{t} WHERE {longcol} = 1) SELECT {city}, AVG({n_records}) FROM w GROUP BY 1", True),
    ("SELECT CASE WHEN {n_records} < 5 THEN 'low' ELSE 'high' END AS b, COUNT(*) FROM {t} GROUP BY 1", True),
    ("SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY {n_records}), MIN({tick}), MAX({agep_bin}) FROM {t}",
     False),
    ("SELECT {fb}, percentile_disc(0.9) WITHIN GROUP (ORDER BY {agep_bin}) FROM {t} GROUP BY {fb}", False),
    ("SELECT DISTINCT {city} FROM {t}", False),
    ("SELECT {screen_name} FROM {t} GROUP BY {screen_name}", False),
]


def _render(template: str, side: str) -> str:
    if side == "plain":
        names = {"t": "plain_sales", "s": "public", **{c: c for c in COLUMNS}}
    else:
        names = {"t": quote_ident(ODD_TABLE), "s": quote_ident(ODD_SCHEMA),
                 **{c: quote_ident(o) for c, o in COLUMNS.items()}}
    return template.format(**names)


def _exact_rows(text: str, catalog: Catalog, source: PostgresExactSource) -> tuple[list[Any], Any]:
    plan = Planner(catalog).plan(text)
    table = catalog.table(plan.table)
    assert table is not None
    return plan.rows(source.answers(table, list(plan.queries)) if plan.queries else []), plan


@pytest.mark.parametrize("template,vs_pg", STATEMENTS, ids=[s[:40] for s, _ in STATEMENTS])
def test_odd_names_answer_as_plain_names(template: str, vs_pg: bool, names_db: tuple[str, Catalog]) -> None:
    dsn, catalog = names_db
    source = PostgresExactSource(dsn)
    try:
        odd, plan = _exact_rows(_render(template, "odd"), catalog, source)
        plain, _ = _exact_rows(_render(template, "plain"), catalog, source)
    finally:
        source.close()
    assert odd and odd == plain
    if not vs_pg:
        return
    text = _render(template, "odd")
    with psycopg.connect(dsn) as conn:
        # Unqualified names: PostgreSQL finds the odd table through the search path.
        conn.execute(sql.SQL("SET search_path = {}, public").format(sql.Identifier(ODD_SCHEMA)))
        cur = conn.execute(text.encode())  # type: ignore[call-overload]
        theirs = cur.fetchall()
        assert [c.name for c in plan.columns] == [d.name for d in cur.description or []]
    problem = rows_match(odd, theirs, leading_keys(plan), "ORDER BY" in template)
    assert problem is None, f"{text}\n{problem}"


def test_unquoted_names_fold_and_quoted_names_do_not(names_db: tuple[str, Catalog]) -> None:
    _, catalog = names_db
    planner = Planner(catalog)
    assert planner.plan("SELECT COUNT(*) FROM PLAIN_SALES WHERE FB = 1").table == "plain_sales"
    assert planner.plan('SELECT COUNT(*) FROM Public."plain_sales"').table == "plain_sales"
    with pytest.raises(Refusal) as info:
        planner.plan('SELECT COUNT(*) FROM "PLAIN_SALES"')
    assert (info.value.sqlstate, info.value.message) == ("42P01", 'relation "PLAIN_SALES" does not exist')
    odd = _render("SELECT COUNT(*) FROM {t} WHERE {fb} = 1", "odd")
    with pytest.raises(Refusal) as info:
        planner.plan(odd.replace('"FB."', '"fb."'))
    assert (info.value.sqlstate, info.value.message) == ("42703", 'column "fb." does not exist')
    with pytest.raises(Refusal) as info:
        planner.plan(odd.replace('"FB."', 'x."FB."'))
    assert info.value.sqlstate == "42P01" and info.value.message == 'missing FROM-clause entry for table "x"'
    # An identifier longer than 63 bytes is cut to 63, as PostgreSQL's lexer cuts it.
    long_sql = _render("SELECT SUM({longcol}) FROM {t}", "odd").replace(LONG, LONG + "öö")
    assert Planner(catalog).plan(long_sql).queries


def test_keys_of_odd_names_are_unambiguous(names_db: tuple[str, Catalog]) -> None:
    _, catalog = names_db
    planner = Planner(catalog)
    odd = planner.plan(_render("SELECT SUM({ab}) FROM {t} WHERE {fb} = 1", "odd")).queries[0].key
    assert odd.startswith('"Odd Schema.ü"."Sales_3 ""Q""; x"|sum("a.b")|'), odd
    plain = planner.plan("SELECT SUM(ab) FROM plain_sales WHERE fb = 1").queries[0].key
    assert plain == "public.plain_sales|sum(ab)|ab={1..4}&fb={1}"


@pytest.mark.parametrize("template", [
    'SELECT COUNT("Foo Bar") FROM {t}',
    'SELECT COUNT(*) FROM {t} AS x WHERE x."no Such" = 1',
    'SELECT SUM({s}.{t}."no Such") FROM {s}.{t}',
    'SELECT COUNT(*) FROM "PLAIN_SALES"',
    'SELECT COUNT(*) FROM {s}."Nope"',
    "SELECT COUNT(*) FROM {t} WHERE y.{fb} = 1",
    "SELECT {fb}, COUNT(*) FROM {t}",
    "SELECT x.{fb}, COUNT(*) FROM {t} AS x",
])
def test_errors_name_things_as_postgresql(template: str, names_db: tuple[str, Catalog]) -> None:
    dsn, catalog = names_db
    text = _render(template, "odd")
    with pytest.raises(Refusal) as ours:
        Planner(catalog).plan(text)
    with psycopg.connect(dsn) as conn, pytest.raises(psycopg.Error) as theirs:
        conn.execute(sql.SQL("SET search_path = {}, public").format(sql.Identifier(ODD_SCHEMA)))
        conn.execute(text.encode())  # type: ignore[call-overload]
    assert (ours.value.sqlstate, ours.value.message) == (theirs.value.sqlstate, theirs.value.diag.message_primary)
