"""A statement whose literals cut cells (parser/bind/splits.py) through every contribution-bounding path of the
exact source, on the real embedded PostgreSQL: the epoch's materialisation (one build for the table,
whatever the statement's split axis: it is not a stored column), the per-statement window after the
statement's row filter, and per-group bounds; each exact answer equals PostgreSQL's answer to the analyst's
SQL over the rows that path keeps, and equals the window's. No noise is drawn: no false-failure rate."""

from __future__ import annotations

import os
import threading

import numpy as np
import psycopg
import pytest

import parser as sqlparser
from lapras.exact import PostgresExactSource
from parser.bind.splits import has_splits
from parser.coltypes import from_config
from parser.model.schema import Attribute, Catalog, TableSchema
from parser.pushdown.sql import EXACT_SESSION_SQL

K = 3
VISITS = TableSchema("visits", (
    Attribute("a", from_config({"type": "int", "min": 0, "max": 9})),
    Attribute("c", from_config({"type": "integer", "min": 0, "max": 399, "bins": 10})),
    Attribute("amount", from_config({"type": "numeric", "min": 0, "max": 100, "bins": 10})),
), privacy_unit="user_id", max_rows_per_unit=K, max_rows_per_group=1)
CATALOG = Catalog((VISITS,))
STATEMENTS = [
    "SELECT count(*), sum(amount) FROM visits WHERE c > 105",
    "SELECT count(*) FROM visits WHERE amount > 10.5 AND c BETWEEN 13 AND 207",
    "SELECT a, count(*), sum(c) FROM visits WHERE amount <= 33.3 GROUP BY a",
    "SELECT count(*) FROM visits WHERE c = 55 OR amount = 20",
]


@pytest.fixture
def db(embedded_pg) -> str:  # type: ignore[no-untyped-def]
    name = f"splitbound_{os.getpid()}_{threading.get_ident() % 100000}"
    with psycopg.connect(embedded_pg.dsn(), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')
    dsn = embedded_pg.dsn(name)
    rng = np.random.default_rng(5)
    with psycopg.connect(dsn) as conn:
        conn.execute("CREATE TABLE visits (user_id bigint, a int, c int, amount numeric, note text)")
        with conn.cursor().copy("COPY visits (user_id, a, c, amount, note) FROM STDIN") as cp:
            for u in range(800):
                for _ in range(int(rng.integers(1, 7))):
                    amount = rng.choice([round(float(rng.uniform(0, 100)), 2), 10.5, 20, 33.3])
                    c = int(rng.choice([rng.integers(0, 400), 105, 106, 55]))
                    cp.write_row((u, int(rng.integers(0, 10)), c, amount, f"n{int(rng.integers(0, 3))}"))
    return str(dsn)


def _postgres(dsn: str, sql: str, rows_from: str) -> list[tuple[object, ...]]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        for s in EXACT_SESSION_SQL:
            conn.execute(s)
        return [tuple(r) for r in conn.execute(sql.replace("FROM visits", f"FROM {rows_from} AS visits", 1)).fetchall()]


def _rows(plan: object, values: np.ndarray) -> list[tuple[object, ...]]:
    return [tuple(float(v or 0) if not isinstance(v, str) else v for v in r) for r in plan.rows(values, None)]  # type: ignore[attr-defined]


def _close(ours: list[tuple[object, ...]], theirs: list[tuple[object, ...]], keys: int) -> None:
    want = {r[:keys]: [float(v or 0) for v in r[keys:]] for r in theirs}
    for r in ours:
        assert list(r[keys:]) == pytest.approx(want.get(r[:keys], [0.0] * (len(r) - keys)), rel=1e-12), (r, want)


@pytest.mark.parametrize("sql", STATEMENTS)
def test_every_bounding_path_answers_a_split_statement_as_postgresql(db: str, sql: str) -> None:
    plan = sqlparser.plan_query(sql, CATALOG)
    table, keys = plan.table_schema, len(plan.template.groups)
    assert has_splits(table)
    epoch, statement, live = (PostgresExactSource(db, bounding=b) for b in ("epoch", "statement", "live"))
    try:
        epoch.new_epoch(1)
        mat = epoch.bounded_table(table)
        assert mat.rows_from is not None and mat.rows_from == epoch.bounded_table(VISITS).rows_from  # one build
        by_epoch = epoch.answers(table, plan.queries)
        _close(_rows(plan, by_epoch), _postgres(db, sql, mat.rows_from), keys)
        np.testing.assert_array_equal(by_epoch, live.answers(table, plan.queries))  # the window's rows
        assert len(epoch.bounded.built) == 1
        view = statement.statement_table(table, plan.queries)  # the row filter's window, per-group bounds
        assert view.rows_from is not None
        _close(_rows(plan, statement.answers(table, plan.queries)), _postgres(db, sql, view.rows_from), keys)
    finally:
        for s in (epoch, statement, live):
            s.close()
