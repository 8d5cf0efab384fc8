"""Hostile names never become SQL: every statement the proxy writes over a table whose names hold quotes,
semicolons, comment markers and dollar quotes parses as exactly one statement whose names are exactly the
declared ones (the exact answers, marginals, privacy-unit bounding, the catalog DDL, the regression scan,
the shard key of the dev cluster)."""

from __future__ import annotations

from typing import Any

import pytest
import sqlglot
from psycopg import sql
from sqlglot import exp

from lapras.regression.service import _select_sql
from parser import Planner
from parser.model.schema import Attribute, Catalog, IntType, TableSchema, TextType
from parser.pushdown.bounding import bounded_rows_sql
from parser.pushdown.sql import answers_sql, marginal_sql
from pgcore.identifiers import quote_ident
from proxy.catalog.relay import _table_ddl
from proxy.devcluster.cluster import shard_key

HOSTILE = ['a"; DROP TABLE adult; --', "b'); SELECT pg_sleep(9); --", "c */ SELECT 1 /*", "$$d$$", 'e""', "f\\"]
SCHEMA, TABLE, UNIT = 'S"; DROP SCHEMA public CASCADE; --', 'T" , pg_catalog.pg_authid --', 'u"--'
TBL = TableSchema(TABLE, (
    Attribute(HOSTILE[0], IntType(0, 9)), Attribute(HOSTILE[1], TextType(values=("x", "y'; --"))),
    *(Attribute(n, IntType(0, 3, nullable=True)) for n in HOSTILE[2:]),
), schema=SCHEMA, privacy_unit=UNIT, max_rows_per_unit=2)
CATALOG = Catalog((TBL,))
NAMES = {SCHEMA, TABLE, UNIT, *HOSTILE}


def _names_in(text: str, kind: type[exp.Expr]) -> set[str]:
    trees = [t for t in sqlglot.parse(text, read="postgres") if t is not None]
    assert len(trees) == 1 and isinstance(trees[0], kind), text
    return {str(i.this) for i in trees[0].find_all(exp.Identifier) if i.quoted}


def _check(text: str, kind: type[exp.Expr] = exp.Select) -> None:
    # Quoted names are declared names, or the proxy's own aliases (plain words).
    odd = {n for n in _names_in(text, kind) if not n.replace("_", "").isalnum()}
    assert odd <= NAMES, (odd - NAMES, text)


def _plan() -> Any:
    c = [quote_ident(n) for n in HOSTILE]
    return Planner(CATALOG).plan(
        f"SELECT {c[1]}, COUNT(*), SUM({c[0]}), AVG({c[2]}) FROM {quote_ident(SCHEMA)}.{quote_ident(TABLE)} "
        f"WHERE {c[3]} IS NULL OR {c[4]} IN (1, 2) OR {c[5]} = 3 GROUP BY 1")


def test_pushed_down_answers_and_marginals_keep_names_inside_quotes() -> None:
    plan = _plan()
    assert plan.queries and all(q.key.startswith(f"{quote_ident(SCHEMA)}.{quote_ident(TABLE)}|") for q in plan.queries)
    _check(answers_sql(TBL, list(plan.queries)))
    _check(answers_sql(TBL, list(plan.queries), partial_by=quote_ident(HOSTILE[0])))
    _check(marginal_sql(TBL, HOSTILE[:3]))
    _check(marginal_sql(TBL, HOSTILE[:2], partial_by=quote_ident(HOSTILE[0])))
    assert f"PARTITION BY t.{quote_ident(UNIT)}" in answers_sql(TBL, list(plan.queries))
    # The epoch's materialisation of the bounded rows (lapras.bounded): every stored column by name.
    _check(bounded_rows_sql(TBL, [UNIT, *HOSTILE]))


def test_catalog_ddl_regression_scan_and_shard_key_keep_names_inside_quotes() -> None:
    for stmt in _table_ddl(TBL):  # CREATE SCHEMA, DROP TABLE IF EXISTS (the shadow's own), CREATE TABLE
        _check(stmt.as_string(None), exp.Create | exp.Drop)  # type: ignore[arg-type]
    _check(_select_sql(TBL, TBL.attributes[:1]).as_string(None))
    key = shard_key(TABLE, 2, None, [(n, "integer") for n in HOSTILE[:4]])
    _check(f"SELECT {key}")
    _check(f"SELECT {shard_key(TABLE, 2, UNIT, [])}")


@pytest.mark.parametrize("name", HOSTILE)
def test_quote_ident_is_psycopg_s(name: str) -> None:
    assert quote_ident(name) == sql.Identifier(name).as_string(None)


def test_dev_cluster_partitions_of_a_63_byte_table_keep_distinct_names() -> None:
    from proxy.devcluster.cluster import _partition_name

    long = "L" + "ö" * 31
    names = {_partition_name(long, f"shard{i}") for i in (1, 2, 10)}
    assert len(names) == 3 and all(len(n.encode()) <= 63 and n.endswith(("_shard1", "_shard2", "_shard10"))
                                   for n in names)
    assert _partition_name("events", "shard1") == "events_shard1"
