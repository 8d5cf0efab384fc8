"""Per-epoch materialisation of a privacy-unit table's bounded rows (lapras.bounded), on the real embedded
PostgreSQL: the same k rows per unit as the per-statement window (and as the window's old spelling, which
computed the row text twice), equal exact answers over many random statements, one table shared by two
sources (two proxies) of one upstream, data as of the epoch's first use, older epochs dropped (a source
left behind reads the window), an aborted build leaves nothing, and no other role can read it."""

from __future__ import annotations

import os
import threading
from dataclasses import replace

import numpy as np
import psycopg
import pytest

import parser as sqlparser
from lapras import Engine, EngineSettings, Prediction
from lapras.bounded import fingerprint, relname
from lapras.exact import PostgresExactSource
from lapras.ledger.postgres import PostgresLedger
from lapras.regression.service import _select_sql
from parser.model.schema import Attribute, Catalog, IntType, TableSchema, TextType
from parser.pushdown.bounding import bounded_rows_sql, bounding_seed
from parser.pushdown.sql import EXACT_SESSION_SQL
from pgcore.identifiers import quote_ident
from tests.fixtures.databases import fill_table

K = 3
VISITS = TableSchema("visits", (Attribute("a", IntType(0, 9)), Attribute("c", IntType(0, 39)),
                                Attribute("tag", TextType(("x", "y", "z")))),
                     privacy_unit="user_id", max_rows_per_unit=K)
CATALOG = Catalog((VISITS,))


def _rows(seed: int, users: int = 1500, start: int = 0) -> list[tuple[int | None, int, int, str | None, str]]:
    """Light users with 1-4 rows, heavy users with 200 (many identical rows: ties in hash and text), NULL
    units, and an undeclared column ``note`` (part of the hashed row text, never of an answer)."""
    rng = np.random.default_rng(seed)
    out: list[tuple[int | None, int, int, str | None, str]] = []
    for u in range(start, start + users):
        for _ in range(int(rng.integers(1, 5))):
            out.append((u, int(rng.integers(0, 10)), int(rng.integers(0, 40)),
                        str(rng.choice(["x", "y", "z", "w"])), f"n{int(rng.integers(0, 3))}"))
    for u in range(start + users, start + users + 15):
        out += [(u, int(rng.integers(0, 2)), int(rng.integers(35, 40)), "x", "same") for _ in range(200)]
    out += [(None, 1, 1, "x", "nobody")] * 30
    return out


def _load(dsn: str, rows: list[tuple[int | None, int, int, str | None, str]], create: bool = True) -> None:
    with psycopg.connect(dsn) as conn:
        fill_table(conn, "visits (user_id bigint, a int, c int, tag text, note text)", rows, create)


@pytest.fixture
def db(embedded_pg) -> str:  # type: ignore[no-untyped-def]
    name = f"bounded_{os.getpid()}_{threading.get_ident() % 100000}_{np.random.default_rng().integers(1 << 30)}"
    with psycopg.connect(embedded_pg.dsn(), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    dsn = embedded_pg.dsn(name)
    _load(dsn, _rows(7))
    return dsn


def _session(dsn: str) -> psycopg.Connection:
    conn = psycopg.connect(dsn, autocommit=True)
    for s in EXACT_SESSION_SQL:
        conn.execute(s)
    return conn


def _kept(conn: psycopg.Connection, sql: str) -> list[tuple[object, ...]]:
    return sorted(conn.execute(f"SELECT user_id, a, c, tag FROM ({sql}) AS k").fetchall(), key=repr)


def _random_statements(rng: np.random.Generator, n: int) -> list[str]:
    out = []
    for _ in range(n):
        lo, hi = sorted(int(v) for v in rng.integers(0, 40, 2))
        a = int(rng.integers(0, 10))
        tag = str(rng.choice(["x", "y", "z"]))
        out.append(str(rng.choice([
            f"SELECT count(*), sum(c) FROM visits WHERE c BETWEEN {lo} AND {hi}",
            f"SELECT a, count(*), avg(c) FROM visits WHERE c >= {lo} GROUP BY a",
            f"SELECT tag, sum(a) FROM visits WHERE a <> {a} GROUP BY tag",
            f"SELECT count(*) FROM visits WHERE tag = '{tag}' AND c < {hi}",
            f"SELECT max(c), min(c) FROM visits WHERE a = {a}",
            f"SELECT percentile_disc(0.5) WITHIN GROUP (ORDER BY c) FROM visits WHERE tag <> '{tag}'",
            f"SELECT a, tag, count(*) FROM visits WHERE c <= {hi} GROUP BY a, tag",
        ])))
    return out


def test_materialised_rows_are_the_windows_rows(db: str) -> None:
    """The same multiset of kept rows: the old window (row text twice), the new one (once), the table."""
    seed = bounding_seed(VISITS)
    old = (f"SELECT * FROM (SELECT r.*, row_number() OVER (PARTITION BY r.user_id ORDER BY "
           f"hashtextextended(r::text, {seed}), r::text) AS n FROM public.visits AS r "
           f"WHERE r.user_id IS NOT NULL) AS u WHERE u.n <= {K}")
    src = PostgresExactSource(db, bounding="epoch")
    src.new_epoch(1)
    mat = src.bounded_table(VISITS)
    assert mat.rows_from == f"lapras.{quote_ident(relname(1, VISITS))}"
    with _session(db) as conn:
        a = _kept(conn, old)
        assert a == _kept(conn, bounded_rows_sql(VISITS))
        assert a == _kept(conn, f"SELECT * FROM {mat.rows_from}")
        per_unit = conn.execute(f"SELECT max(n) FROM (SELECT count(*) AS n FROM {mat.rows_from} "
                                "GROUP BY user_id) AS g").fetchone()[0]
        assert per_unit == K
        # Logged (an UNLOGGED table would come back empty after a crash), holding the unit and the declared
        # columns only (the undeclared `note` chose rows through the row text but is not stored).
        assert conn.execute("SELECT relpersistence FROM pg_class WHERE oid = to_regclass(%s)",
                            (mat.rows_from,)).fetchone()[0] == "p"
        assert [r[0] for r in conn.execute(
            "SELECT attname FROM pg_attribute WHERE attrelid = to_regclass(%s) AND attnum > 0 ORDER BY attnum",
            (mat.rows_from,)).fetchall()] == ["user_id", "a", "c", "tag"]
    src.close()


def test_answers_over_the_materialisation_equal_the_windows(db: str) -> None:
    live = PostgresExactSource(db, bounding="live")
    epoch = PostgresExactSource(db, bounding="epoch")
    epoch.new_epoch(1)
    planner = sqlparser.Planner(CATALOG)
    stmts = _random_statements(np.random.default_rng(11), 60)
    for sql in stmts:
        qs = planner.plan(sql).queries
        np.testing.assert_array_equal(epoch.answers(VISITS, qs), live.answers(VISITS, qs), err_msg=sql)
    for attrs in (("a",), ("a", "tag"), ("c", "tag"), ()):
        np.testing.assert_array_equal(epoch.marginal(VISITS, attrs), live.marginal(VISITS, attrs))
    assert len(epoch.bounded.built) == 1  # one build for the whole epoch
    # The regression scan reads the same rows.
    cols = [VISITS.attribute("c"), VISITS.attribute("a")]
    with _session(db) as conn:
        over_window = sorted(conn.execute(_select_sql(VISITS, cols)).fetchall())
        over_table = sorted(conn.execute(_select_sql(epoch.bounded_table(VISITS), cols)).fetchall())
    assert over_window == over_table
    live.close()
    epoch.close()


def test_two_sources_share_one_build_and_a_new_epoch_drops_the_old(db: str) -> None:
    """Two proxies (sources) on one upstream: one build; epoch 2 drops epoch 1's table; a source still in
    epoch 1 then reads the window (same answers) and builds nothing."""
    one, two = PostgresExactSource(db, bounding="epoch"), PostgresExactSource(db, bounding="epoch")
    for s in (one, two):
        s.new_epoch(1)
    q = sqlparser.plan_query("SELECT count(*), sum(c) FROM visits", CATALOG).queries
    got: list[np.ndarray] = []
    threads = [threading.Thread(target=lambda s=s: got.append(s.answers(VISITS, q))) for s in (one, two, one, two)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(one.bounded.built) + len(two.bounded.built) == 1
    assert all((g == got[0]).all() for g in got)
    with _session(db) as conn:
        meta = conn.execute("SELECT epoch_id, fingerprint, relname FROM lapras.bounded_tables").fetchall()
        assert meta == [(1, fingerprint(VISITS), relname(1, VISITS))]
        _load(db, _rows(8, users=100, start=100_000), create=False)  # rows written during the epoch
    # Data as of the epoch's first use: the new rows are not in epoch 1's answers.
    assert (one.answers(VISITS, q) == got[0]).all()
    live = PostgresExactSource(db, bounding="live").answers(VISITS, q)
    assert live[0] > got[0][0]
    two.new_epoch(2)
    assert (two.answers(VISITS, q) == live).all()  # next epoch: the rows as they are now
    with _session(db) as conn:
        assert conn.execute("SELECT epoch_id FROM lapras.bounded_tables").fetchall() == [(2,)]
        assert conn.execute("SELECT to_regclass(%s)", (f"lapras.{quote_ident(relname(1, VISITS))}",)).fetchone()[0] is None
    # `one` still believes epoch 1's table exists: it falls back to the window, and builds nothing.
    assert (one.answers(VISITS, q) == live).all()
    assert one.bounded_table(VISITS) is VISITS
    with _session(db) as conn:
        assert conn.execute("SELECT count(*) FROM lapras.bounded_tables").fetchone()[0] == 1
    one.close()
    two.close()


def test_an_aborted_build_leaves_nothing_and_a_lost_table_is_rebuilt(db: str) -> None:
    src = PostgresExactSource(db, bounding="epoch")
    src.new_epoch(4)
    before = src.bounded_table(VISITS).rows_from
    src.new_epoch(5)
    src._conn().execute("SET statement_timeout = '1ms'")  # the build of epoch 5 fails midway
    with pytest.raises(psycopg.errors.QueryCanceled):
        src.bounded_table(VISITS)
    src._conn().execute("RESET statement_timeout")
    name = f"lapras.{quote_ident(relname(5, VISITS))}"
    with _session(db) as conn:  # nothing of it, and epoch 4's table is still there
        assert conn.execute("SELECT epoch_id FROM lapras.bounded_tables").fetchall() == [(4,)]
        assert conn.execute("SELECT to_regclass(%s)", (name,)).fetchone()[0] is None
        assert conn.execute("SELECT to_regclass(%s)", (before,)).fetchone()[0] is not None
    assert src.bounded_table(VISITS).rows_from == name
    # Its row outlives the relation (dropped by hand): a source that has not seen it yet rebuilds it.
    with _session(db) as conn:
        conn.execute(f"DROP TABLE {name}")
    other = PostgresExactSource(db, bounding="epoch")
    other.new_epoch(5)
    q = sqlparser.plan_query("SELECT count(*) FROM visits", CATALOG).queries
    assert other.answers(VISITS, q)[0] == PostgresExactSource(db, bounding="live").answers(VISITS, q)[0]
    assert len(other.bounded.built) == 1
    # And the source that knew the dropped table falls back to the window instead of failing.
    assert src.answers(VISITS, q)[0] == other.answers(VISITS, q)[0]
    src.close()
    other.close()


def test_no_other_role_can_read_it(db: str) -> None:
    """Even where default privileges grant SELECT on new tables of the schema to PUBLIC and to a role."""
    role = f"reader_{os.getpid()}_{np.random.default_rng().integers(1 << 30)}"
    with psycopg.connect(db, autocommit=True) as conn:
        conn.execute(f'CREATE ROLE "{role}" LOGIN')
        conn.execute("CREATE SCHEMA IF NOT EXISTS lapras")
        conn.execute(f'GRANT USAGE ON SCHEMA lapras TO PUBLIC, "{role}"')
        conn.execute(f'ALTER DEFAULT PRIVILEGES IN SCHEMA lapras GRANT SELECT ON TABLES TO PUBLIC, "{role}"')
    try:
        src = PostgresExactSource(db, bounding="epoch")
        src.new_epoch(3)
        name = src.bounded_table(VISITS).rows_from
        with psycopg.connect(db, autocommit=True) as conn:
            for table in (name, "lapras.bounded_tables"):
                assert conn.execute("SELECT has_table_privilege(%s, %s, 'SELECT')", (role, table)).fetchone()[0] is False
                assert conn.execute("SELECT has_table_privilege('public', %s, 'SELECT')", (table,)).fetchone()[0] is False
        with psycopg.connect(db, autocommit=True) as conn:
            conn.execute(f'SET ROLE "{role}"')
            for table in (name, "lapras.bounded_tables"):
                with pytest.raises(psycopg.errors.InsufficientPrivilege):
                    conn.execute(f"SELECT count(*) FROM {table}")
        src.close()
    finally:
        with psycopg.connect(db, autocommit=True) as conn:
            conn.execute(f'DROP OWNED BY "{role}"')
            conn.execute(f'DROP ROLE "{role}"')


def test_engine_restart_reuses_the_epochs_table_and_a_new_epoch_builds_anew(db: str) -> None:
    """Engines on one ledger: a restarted engine in the same epoch reads the table the first built; a new
    epoch's first statement builds its own and drops the old; answers equal the window's throughout."""
    settings = EngineSettings(epsilon=1e4, delta=1e-3, stream_length=1000)
    q = sqlparser.plan_query("SELECT count(*) FROM visits WHERE c < 30", CATALOG)
    truth = PostgresExactSource(db, bounding="live").answers(VISITS, q.queries)[0]

    def engine() -> Engine:
        return Engine(CATALOG, PostgresLedger(db), PostgresExactSource(db, bounding="epoch"), settings, lambda _c: Prediction())

    first = engine()
    ans = first.answer(q, "u")
    assert abs(ans.values[0] - truth) < 50  # epsilon 1e4: the noise is tiny
    assert len(first.exact.bounded.built) == 1
    first.close()
    again = engine()  # restart, same epoch
    again.answer(sqlparser.plan_query("SELECT count(*) FROM visits WHERE c < 31", CATALOG), "u")
    assert again.exact.bounded.built == []
    old = again.exact.bounded_table(VISITS).rows_from
    again.new_epoch()
    again.answer(q, "u")
    assert len(again.exact.bounded.built) == 1
    new = again.exact.bounded_table(VISITS).rows_from
    assert new != old
    with _session(db) as conn:
        assert conn.execute("SELECT to_regclass(%s)", (old,)).fetchone()[0] is None
        assert conn.execute(f"SELECT count(*) FROM {new} WHERE c < 30").fetchone()[0] == truth
    again.close()


def test_live_bounding_and_derived_tables_read_no_materialisation(db: str) -> None:
    src = PostgresExactSource(db, bounding="live")
    src.new_epoch(1)
    assert src.bounded_table(VISITS) is VISITS
    epoch = PostgresExactSource(db, bounding="epoch")
    assert epoch.bounded_table(VISITS) is VISITS  # no epoch told yet: the window
    epoch.new_epoch(1)
    row_level = replace(VISITS, privacy_unit=None, max_rows_per_unit=1)
    assert epoch.bounded_table(row_level) is row_level
    src.close()
    epoch.close()


def test_unit_cells_window_keeps_the_same_cells_as_before(db: str) -> None:
    """COUNT(DISTINCT)'s per-unit cell bound (g cells by a seeded hash of the unit and cell text): its text is now
    computed once per pair; the cells kept are those of the spelling that computed it twice."""
    from parser.pushdown.sql import cell_expr, groups_seed, unit_cells_sql

    g2 = replace(VISITS, max_groups_per_unit=2)
    cells = [cell_expr(g2.attribute("a")), cell_expr(g2.attribute("tag"))]
    new = unit_cells_sql(g2, cells, "c < 35")
    pairs = (f"SELECT DISTINCT \"user_id\" AS lapras_unit, {cells[0]} AS c0, {cells[1]} AS c1 FROM "
             "\"public\".\"visits\" WHERE \"user_id\" IS NOT NULL AND (c < 35)")
    row = "ROW(c0, c1)::text"
    old = (f"SELECT lapras_unit, c0, c1 FROM (SELECT lapras_unit, c0, c1, row_number() OVER (PARTITION BY "
           f"lapras_unit ORDER BY hashtextextended(lapras_unit::text || ':' || {row}, {groups_seed(g2)}), {row}) "
           f"AS n FROM ({pairs}) AS p) AS b WHERE b.n <= 2")
    with _session(db) as conn:
        a = sorted(conn.execute(old).fetchall(), key=repr)
        assert len(a) > 1000
        assert a == sorted(conn.execute(new).fetchall(), key=repr)
