"""Issue 18's corpus through a real proxy: about 170 statements in the forms Tableau, Power BI, Looker and
Metabase send (tests/fixtures/bi_corpus/statements.py says which source each group follows), over a table whose names use
quotes, mixed case, spaces and punctuation, with columns of every type; rows generated in a real embedded
PostgreSQL; statements sent with psycopg over a socket to `lapras-proxy serve`.

Each statement meets its classification: aggregates answered with every COUNT/SUM output within 5 stated
standard errors (SET lapras.show_stderr) of PostgreSQL's exact answer on the same text, value lists
answered from the public domain (covering every value PostgreSQL returns) or refused with a reason, the
rest refused with the stated SQLSTATE. Statements waiting for a part of issue 18 that has not landed
(``bi_corpus.PENDING``) may be refused meanwhile; the share test states the floor reached so far.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from tests.fixtures import bi_corpus as corpus

AGGREGATE_SHARE_FLOOR = 0.94
"""Share of the aggregate statements answered within their stated error, now (raised as #18 lands; the
issue's goal is 0.95)."""


@pytest.fixture(scope="module")
def corpus_env(embedded_pg: Any, harness: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The corpus table filled in its own database, a proxy in front of it and the in-process planner of
    the same config (to know which outputs state an error)."""
    import parser as sqlparser
    from proxy.config import ConfigError, load_config

    dsn = harness.create_database(embedded_pg, "bicorpus")
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(corpus.ddl())  # type: ignore[call-overload]
        conn.execute(corpus.fill_sql())  # type: ignore[call-overload]
    root = tmp_path_factory.mktemp("bicorpus")
    port = harness.free_port()
    cfg = root / "config.toml"
    cfg.write_text(corpus.config_toml(dsn, port))
    try:
        planner = sqlparser.Planner(load_config(cfg).catalog)
    except ConfigError as exc:
        if "names" in corpus.PENDING:
            pytest.skip(f"odd names are not accepted yet (issue 18, names): {exc.problems[0]}")
        raise
    proxy = harness.ProxyProcess(cfg, root / "state", port)
    with harness.proxy_beside_upstream(proxy, dsn, "bi") as (conn, exact):
        yield conn, exact, planner


_RESULTS: dict[int, corpus.Result] = {}


def test_corpus_covers_the_tools_and_types() -> None:
    assert len(corpus.CORPUS) >= 150
    assert {s.tool for s in corpus.CORPUS} == set(corpus.TOOLS)
    assert all(sum(1 for s in corpus.CORPUS if s.tool == t) >= 30 for t in corpus.TOOLS)
    types = {t.split("(")[0] for t, _ in corpus.COLUMNS.values()}
    assert types >= {"bigint", "integer", "smallint", "numeric", "double precision", "text", "date", "timestamp",
                     "timestamptz", "boolean"}
    assert len({s.sql for s in corpus.CORPUS}) == len(corpus.CORPUS)


@pytest.mark.parametrize("index", range(len(corpus.CORPUS)),
                         ids=[f"{s.tool}-{s.shape.replace(' ', '_')}-{i}" for i, s in enumerate(corpus.CORPUS)])
def test_statement_meets_its_classification(index: int, corpus_env: Any) -> None:
    conn, exact, planner = corpus_env
    stmt = corpus.CORPUS[index]
    result = corpus.run_one(stmt, conn, exact, planner)
    _RESULTS[index] = result
    ok, why = corpus.passes(result)
    assert ok, f"{stmt.tool} {stmt.shape}: {why}\n{stmt.sql}"


def test_aggregate_share(corpus_env: Any) -> None:
    conn, exact, planner = corpus_env
    for i, stmt in enumerate(corpus.CORPUS):
        if i not in _RESULTS:  # run alone (-k): send what the parametrized test did not
            _RESULTS[i] = corpus.run_one(stmt, conn, exact, planner)
    aggregates = [r for r in _RESULTS.values() if r.stmt.aggregate]
    share = sum(r.within_error for r in aggregates) / len(aggregates)
    checked = sum(r.checked for r in aggregates)
    assert checked > 200  # the comparison is real: hundreds of outputs carry a stated error
    assert share >= AGGREGATE_SHARE_FLOOR, f"{share:.1%} of {len(aggregates)} aggregate statements answered"
