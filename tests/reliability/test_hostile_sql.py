"""Hostile SQL through the real proxy, checked on the wire: a capturing relay between the client and the
proxy records every byte the proxy sends, and no raw row and no exact aggregate may be among them.

Exact values come straight from PostgreSQL (inside the trust boundary). A DP answer can land on the exact
value by chance (a noisy count rounded to an integer), so the check on answers is statistical: a proxy
that leaked would match on every cell, a private one on a small fraction.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import psycopg
import pytest
from psycopg import sql as psql

pytest.importorskip("proxy.server.listener")
pytest.importorskip("proxy.dp.service")

from . import wire  # noqa: E402
from .harness import new_adult_db, start_proxy  # noqa: E402
from .relay import CapturingRelay  # noqa: E402

RAW_READ = {"42501", "0A000"}
ANSWERED = "answered"   # the statement was answered (through the mechanism), not refused
WRITE = {"25006"}

# Statements that must be refused: raw rows, statistics, files, commands, writes, smuggling, cursors.
MUST_REFUSE: list[tuple[str, set[str]]] = [
    ("SELECT * FROM adult", RAW_READ),
    ("SELECT age, fnlwgt, workclass FROM adult LIMIT 5", RAW_READ),
    ("TABLE adult", RAW_READ),
    ("SELECT adult FROM adult", RAW_READ | {"42703"}),
    ("SELECT * FROM public.adult WHERE 1 = 1", RAW_READ),
    ("SELECT * FROM public.adult WHERE 1 = 0 OR true", RAW_READ),
    ("SELECT * FROM adult TABLESAMPLE SYSTEM (1)", RAW_READ),
    ("SELECT/**/*/**/FROM/**/adult", RAW_READ),
    ('SELECT * FROM "public"."adult"', RAW_READ),
    ("SELECT * FROM ADULT", RAW_READ),
    ("SELECT array_agg(age) FROM adult", RAW_READ),
    ("SELECT string_agg(fnlwgt::text, ',') FROM adult", RAW_READ),
    ("SELECT json_agg(a) FROM adult a", RAW_READ | {"42703"}),
    ("SELECT mode() WITHIN GROUP (ORDER BY fnlwgt) FROM adult", RAW_READ),
    ("SELECT sum(DISTINCT fnlwgt) FROM adult", RAW_READ),
    ("SELECT count(DISTINCT (fnlwgt, age)) FROM adult", RAW_READ | {"42703"}),
    ("SELECT age, row_number() OVER () FROM adult", RAW_READ),
    ("SELECT count(*) FROM adult a JOIN adult b ON a.age = b.age", RAW_READ),
    # Wrappers that pick rows (which rows would be data) are refused; plain wrappers are DP (DP_QUERIES).
    ("SELECT count(*) FROM (SELECT * FROM adult LIMIT 10) s", RAW_READ),
    ("SELECT count(*) FROM (SELECT * FROM adult ORDER BY age LIMIT 10) s", RAW_READ),
    ("SELECT count(*) FROM (SELECT age FROM adult OFFSET 5) s", RAW_READ),
    ("SELECT count(*) FROM (SELECT DISTINCT fnlwgt FROM adult) s", RAW_READ),
    ("SELECT count(*) FROM adult WHERE age = (SELECT max(age) FROM adult)", RAW_READ),
    ("SELECT count(*) FROM adult UNION ALL SELECT age FROM adult", RAW_READ),
    ("WITH t AS (SELECT * FROM adult) SELECT * FROM t", RAW_READ),
    ("SELECT count(*) FROM adult WHERE pg_sleep(0.01) IS NOT NULL", RAW_READ | {"42883"}),
    ("SELECT * FROM pg_stats WHERE tablename = 'adult'", RAW_READ),
    ("SELECT * FROM pg_statistic", RAW_READ),
    ("SELECT n_live_tup FROM pg_stat_all_tables", RAW_READ),
    ("SELECT reltuples FROM pg_class WHERE relname = 'adult'", RAW_READ),
    ("SELECT most_common_vals FROM pg_catalog.pg_stats", RAW_READ),
    ("SELECT pg_read_file('/etc/hostname')", RAW_READ),
    ("SELECT pg_ls_dir('.')", RAW_READ),
    ("SELECT lo_import('/etc/hostname')", RAW_READ),
    ("SELECT query_to_xml('select * from adult', true, true, '')", RAW_READ),
    ("COPY adult TO STDOUT", RAW_READ),
    ("COPY (SELECT * FROM adult) TO STDOUT", RAW_READ),
    ("COPY adult TO PROGRAM 'id'", RAW_READ | WRITE),
    ("CREATE VIEW v AS SELECT * FROM adult", WRITE),
    ("CREATE TEMP TABLE t AS SELECT * FROM adult", WRITE),
    ("SELECT * INTO t2 FROM adult", WRITE),
    ("DO $$ BEGIN PERFORM count(*) FROM adult; END $$", WRITE),
    ("EXPLAIN ANALYZE SELECT * FROM adult WHERE age = 30", RAW_READ),
    ("EXPLAIN (VERBOSE) SELECT count(*) FROM adult", RAW_READ),
    ("EXPLAIN SELECT * FROM adult", RAW_READ),  # plain EXPLAIN is the DP service's: a row read is still refused
    ("PREPARE p AS SELECT * FROM adult; EXECUTE p", RAW_READ),
    ("PREPARE p2(int) AS SELECT age FROM adult WHERE age > $1; EXECUTE p2(30)", RAW_READ),
    ("SELECT * FROM adult FOR UPDATE", WRITE | RAW_READ),
    ("SELECT count(*) FROM adult; SELECT * FROM adult", RAW_READ),
    ("SELECT count(*) FROM adult /* ; */ ; SELECT * FROM adult -- ;", RAW_READ),
    ("SELECT count(*) FROM adult WHERE 'a;b' <> ''; SELECT * FROM adult", RAW_READ),
    # One statement: the E-string holds the semicolons. Answered through the mechanism (a constant
    # predicate) or refused; never split.
    ("SELECT count(*) FROM adult WHERE E'\\';SELECT * FROM adult;--' = ''", RAW_READ | {"42601", ANSWERED}),
    ("SELECT $x$;$x$ AS s, * FROM adult", RAW_READ),
    ("SET search_path = pg_catalog, public; SELECT * FROM adult", RAW_READ),
    ("BEGIN; DECLARE c CURSOR FOR SELECT * FROM adult; FETCH ALL FROM c; COMMIT", RAW_READ),
    # Escaped spellings (issue 13, finding 3): names are checked as PostgreSQL resolves them.
    ('SELECT * FROM U&"\\0061dult"', RAW_READ),
    ('SELECT * FROM public.U&"\\+000061dult"', RAW_READ),
    ("SELECT * FROM U&\"!0061dult\" UESCAPE '!'", RAW_READ),
    ('SELECT * FROM U&"pg\\005fstats"', RAW_READ),
    ("SELECT * FROM pg_catalog.U&\"pg_stat!005factivity\" UESCAPE '!'", RAW_READ),
    ('SELECT U&"set\\005fconfig"(\'search_path\', \'nowhere\', false)', RAW_READ),
    ('SELECT pg_catalog."set_config"(\'statement_timeout\', \'1\', false)', RAW_READ),
    ('SELECT U&"pg\\005fadvisory\\005flock"(74737300)', RAW_READ),
    ('SELECT U&"pg\\005fread\\005ffile"(\'/etc/hostname\')', RAW_READ),
    ('SELECT U&"query\\005fto\\005fxml"(\'select * from adult\', true, true, \'\')', RAW_READ),
    ("SELECT current_setting(U&'data\\005fdirectory')", RAW_READ | {"42501"}),
    # Sizes, counters, snapshots, WAL positions and control data (finding 5), other sessions (finding 9).
    ("SELECT pg_tablespace_size('pg_default')", RAW_READ),
    ("SELECT txid_current()", RAW_READ),
    ('SELECT U&"pg\\005fcurrent\\005fxact\\005fid"()', RAW_READ),
    ("SELECT pg_current_snapshot()", RAW_READ),
    ("SELECT pg_current_wal_lsn()", RAW_READ),
    ("SELECT * FROM pg_control_system()", RAW_READ),
    ("SELECT datname, age(datfrozenxid) FROM pg_database", RAW_READ),
    ('SELECT datname, "age"(datfrozenxid) FROM pg_database', RAW_READ),
    ("SELECT * FROM pg_locks", RAW_READ),
    ("SELECT pg_blocking_pids(1)", RAW_READ),
    ("SELECT * FROM pg_prepared_statements", RAW_READ),
    ("SELECT pg_terminate_backend(1)", RAW_READ),
]

# A protected copy of adult whose names are hostile (quotes, semicolons, comment markers): referring to
# it any way that reads rows is refused like adult; its names never become SQL of their own.
HOSTILE_SCHEMA, HOSTILE_TABLE = 'S"; DROP SCHEMA public; --', 'adult "x"; SELECT 1; --'
HOSTILE_T = '"S""; DROP SCHEMA public; --"."adult ""x""; SELECT 1; --"'
MUST_REFUSE += [
    (f"SELECT * FROM {HOSTILE_T}", RAW_READ),
    (f"TABLE {HOSTILE_T}", RAW_READ),
    (f"SELECT age, sex FROM {HOSTILE_T} LIMIT 5", RAW_READ),
    (f"COPY {HOSTILE_T} TO STDOUT", RAW_READ),
    (f"COPY (SELECT * FROM {HOSTILE_T}) TO STDOUT", RAW_READ),
    (f"SELECT count(*) FROM {HOSTILE_T}; SELECT * FROM {HOSTILE_T}", RAW_READ),
    ('SELECT * FROM "S""; DROP SCHEMA public; --".U&"\\0061dult ""x""; SELECT 1; --"', RAW_READ),
    (f"WITH t AS (SELECT * FROM {HOSTILE_T}) SELECT * FROM t", RAW_READ),
    (f"EXPLAIN VERBOSE SELECT count(*) FROM {HOSTILE_T}", RAW_READ),
]


def _hostile_table_toml() -> str:
    """The hostile table declared with adult's columns (their lines in the shipped config.toml)."""
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "config.toml").read_text()
    body = text.split("[tables.adult.columns]\n", 1)[1].split("\n[", 1)[0]
    cols = "\n".join(line for line in body.splitlines() if line and not line.startswith("#"))
    key = '"adult \\"x\\"; SELECT 1; --"'
    return (f'[tables.{key}]\nschema = "S\\"; DROP SCHEMA public; --"\n'
            f"[tables.{key}.columns]\n{cols}\n")


# Catalog-side probes that may be answered (from the schema-only shadow catalog) but must carry no data.
MAY_ANSWER_WITHOUT_DATA = [
    "SELECT * FROM pg_class WHERE relname = 'adult'",
    "SELECT pg_relation_size('adult')",
    "SELECT pg_total_relation_size('public.adult')",
    'SELECT * FROM U&"\\0061dult"',
    "SELECT U&\"\\0070g_read_file\"('/etc/hostname')",
    "SELECT column_name, data_type FROM information_schema.columns WHERE table_name = 'adult'",
    "SELECT current_setting('data_directory')",
    "SHOW data_directory",
    "SELECT rolname, rolpassword FROM pg_authid",
    "SHOW ALL",
    # A WHERE clause false by its text (Tableau's metadata probe): the columns and no row, whatever the data.
    "SELECT * FROM public.adult WHERE false",
    "SELECT age, fnlwgt FROM adult WHERE (1 = 0)",
]

# Aggregates the mechanism answers: (sql, params, exact sql run on PostgreSQL, number of group columns).
DP_QUERIES: list[tuple[str, tuple[Any, ...], int]] = [
    ("SELECT count(*) FROM adult", (), 0),
    ("SELECT count(*) FROM adult WHERE age BETWEEN 30 AND 39", (), 0),
    ("SELECT COUNT(*) FROM adult WHERE age >= 30 AND age < 40", (), 0),
    ("SELECT count(*) FROM adult WHERE sex = 1 AND income_gt_50k = 1", (), 0),
    ("SELECT sum(hours_per_week) FROM adult", (), 0),
    ("SELECT avg(age) FROM adult WHERE sex = 0", (), 0),
    ("SELECT race, count(*) FROM adult GROUP BY race", (), 1),
    ("SELECT sex, sum(hours_per_week) FROM adult GROUP BY sex", (), 1),
    ("SELECT relationship, avg(hours_per_week) FROM adult GROUP BY relationship", (), 1),
    ("SELECT income_gt_50k, sex, count(*) FROM adult GROUP BY income_gt_50k, sex", (), 2),
    ("SELECT count(*) FROM adult -- trailing comment", (), 0),
    ("SELECT count(*) FROM (SELECT * FROM adult) s", (), 0),
    ("SELECT s.sex, count(*) FROM (SELECT sex, age FROM adult WHERE age > 40) s GROUP BY s.sex", (), 1),
    ("SELECT count(*) /* inline ; comment */ FROM adult WHERE age > 50", (), 0),
    ('SELECT count(*) FROM "adult" WHERE "age" < 25', (), 0),
    ("SELECT count(*) FROM adult WHERE age > %s", (40,), 0),
    ("SELECT count(*) FROM adult WHERE age > %s", (60,), 0),
    ("SELECT count(*) FROM adult WHERE age BETWEEN %s AND %s AND sex = %s", (20, 29, 1), 0),
    ("SELECT count(DISTINCT fnlwgt) FROM adult", (), 0),  # values present per cell, sensitivity 1 per row
]

# A parameter that sets the statement's shape (how many values the predicate lists): answered through the
# mechanism for this binding, or refused.
SHAPE_PARAMS: list[tuple[str, tuple[Any, ...]]] = [
    ("SELECT count(*) FROM adult WHERE age = ANY(%s)", ([30, 31, 32],)),
    ("SELECT count(*) FROM adult WHERE age = ANY(%s)", ([50, 51, 52, 53, 54, 55, 56],)),
    ("SELECT count(*) FROM adult WHERE age IN (%s, %s) OR sex = %s", (30, 40, 1)),
]

# Parameter values that try to change the statement's shape; each must fail as a value, never as SQL.
BAD_PARAMS: list[tuple[str, tuple[Any, ...]]] = [
    ("SELECT count(*) FROM adult WHERE age > %s", ("30) OR (1=1",)),
    ("SELECT count(*) FROM adult WHERE age > %s", ("0; SELECT * FROM adult",)),
    ("SELECT count(*) FROM adult WHERE age = %s", ("x" * 5000,)),
]


@dataclass
class Wire:
    """What the relay saw for one statement."""

    sql: str
    messages: list[wire.BackendMessage]
    error: str | None = None
    notices: list[str] = field(default_factory=list)

    def data_rows(self) -> list[list[str | None]]:
        return [_fields(m.body) for m in self.messages if m.kind == "D"]

    def kinds(self) -> set[str]:
        return {m.kind for m in self.messages}


def _fields(body: bytes) -> list[str | None]:
    n = int.from_bytes(body[:2], "big")
    out: list[str | None] = []
    pos = 2
    for _ in range(n):
        length = int.from_bytes(body[pos:pos + 4], "big", signed=True)
        pos += 4
        if length < 0:
            out.append(None)
        else:
            out.append(body[pos:pos + length].decode("utf-8", "replace"))
            pos += length
    return out


@pytest.fixture(scope="module")
def setup(embedded_pg: Any, default_config: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    dsn = new_adult_db(embedded_pg, default_config, "hostile")
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute(psql.SQL("CREATE SCHEMA {}").format(psql.Identifier(HOSTILE_SCHEMA)))
        c.execute(psql.SQL("CREATE TABLE {} AS SELECT * FROM adult").format(
            psql.Identifier(HOSTILE_SCHEMA, HOSTILE_TABLE)))
    proc = start_proxy(tmp_path_factory.mktemp("hostile"), dsn, epsilon=1.0, delta=1e-3,
                       extra=_hostile_table_toml())
    relay = CapturingRelay(proc.host, proc.port)
    conninfo = (f"host=127.0.0.1 port={relay.port} user=analyst password=lapras dbname=adult "
                f"sslmode=disable")
    conn = psycopg.connect(conninfo, autocommit=True)
    try:
        yield dsn, relay, conn
    finally:
        conn.close()
        relay.close()
        proc.stop()


def _run(relay: CapturingRelay, conn: psycopg.Connection, sql: str, params: tuple[Any, ...] = ()) -> Wire:
    mark = relay.mark()
    error = None
    try:
        cur = conn.execute(sql, params) if params else conn.execute(sql.encode())
        while True:
            if cur.description is not None:
                cur.fetchall()
            if not cur.nextset():
                break
    except psycopg.Error as exc:
        error = exc.sqlstate or "?"
    msgs, tail = wire.split_backend(relay.since(mark))
    assert not tail, "the proxy's output ended mid-message"
    notices = [m.error_fields().get("M", "") for m in msgs if m.kind == "N"]
    return Wire(sql, msgs, error, notices)


def _raw_rows(dsn: str) -> tuple[set[tuple[str, ...]], list[str]]:
    with psycopg.connect(dsn) as conn:
        cur = conn.execute("SELECT * FROM adult")
        names = [d.name for d in cur.description or []]
        rows = {tuple("" if v is None else str(v) for v in r) for r in cur.fetchall()}
    return rows, names


_PREFIXES: dict[int, set[tuple[str, ...]]] = {}


def _assert_no_raw_row(w: Wire, raw: set[tuple[str, ...]], width: int) -> None:
    for row in w.data_rows():
        k = min(len(row), width)
        if k >= 3:
            if k not in _PREFIXES:
                _PREFIXES[k] = {r[:k] for r in raw}
            assert tuple(v or "" for v in row[:k]) not in _PREFIXES[k], f"{w.sql!r}: a raw row crossed the wire"
    assert not ({"H", "d", "G"} & w.kinds()), f"{w.sql!r}: COPY data crossed the wire"


def test_hostile_statements_refused_on_the_wire(setup: Any) -> None:
    dsn, relay, conn = setup
    raw, names = _raw_rows(dsn)
    n_rows = len(raw)
    wrong = []
    for sql, allowed in MUST_REFUSE:
        w = _run(relay, conn, sql)
        if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
            conn.execute("ROLLBACK")
        if (w.error or ANSWERED) not in allowed:
            wrong.append(f"{sql!r}: expected a refusal in {sorted(allowed)}, got {w.error}")
        _assert_no_raw_row(w, raw, len(names))
        if "SELECT * FROM adult" in sql or "FETCH" in sql:
            # The refused part produced no rows at all; a leading DP part may have produced one.
            assert len(w.data_rows()) <= 1, f"{sql!r}: {len(w.data_rows())} rows"
        # A leading DP part may answer a noisy count that rounds onto the true one; other messages may not.
        text = b"".join(m.body for m in w.messages if m.kind != "D").decode("latin-1")
        assert str(n_rows) not in re.findall(r"\d+", text), f"{sql!r}: the exact row count crossed the wire"
    assert not wrong, "\n".join(wrong)


def test_catalog_probes_carry_no_data(setup: Any) -> None:
    dsn, relay, conn = setup
    raw, names = _raw_rows(dsn)
    with psycopg.connect(dsn) as direct:
        size = direct.execute("SELECT pg_relation_size('adult'), pg_total_relation_size('adult')").fetchone()
        hostname = open("/etc/hostname").read().strip() if _exists("/etc/hostname") else None
    secrets = {str(len(raw)), str(size[0]), str(size[1])} if size else {str(len(raw))}
    for sql in MAY_ANSWER_WITHOUT_DATA:
        w = _run(relay, conn, sql)
        _assert_no_raw_row(w, raw, len(names))
        text = b"".join(m.body for m in w.messages).decode("latin-1")
        leaked = secrets & set(re.findall(r"\d+", text))
        assert not leaked, f"{sql!r}: {leaked} crossed the wire"
        if hostname:
            assert hostname not in text, f"{sql!r}: file content crossed the wire"
        assert "SCRAM-SHA-256$" not in text and "md5" not in re.findall(r"md5[0-9a-f]{32}", text)


def _exists(path: str) -> bool:
    import os

    return os.path.exists(path)


def _numeric(value: str | None) -> float | None:
    try:
        return None if value is None else float(value)
    except ValueError:
        return None


def test_no_exact_aggregate_crosses_the_wire(setup: Any) -> None:
    dsn, relay, conn = setup
    cells = 0
    collisions: list[str] = []
    exact_numbers: set[float] = set()
    with psycopg.connect(dsn) as direct:
        for sql, params, groups in DP_QUERIES:
            exact_rows = direct.execute(sql, params).fetchall() if params else direct.execute(sql).fetchall()
            exact = {tuple(str(v) for v in r[:groups]): float(r[-1]) for r in exact_rows if r[-1] is not None}
            exact_numbers.update(v for v in exact.values() if abs(v) >= 100 or not float(v).is_integer())
            w = _run(relay, conn, sql, params)
            assert w.error is None, f"{sql!r} {params}: refused with {w.error}"
            rows = w.data_rows()
            assert rows, f"{sql!r}: no rows"
            for row in rows:
                key = tuple(v or "" for v in row[:groups])
                got = _numeric(row[-1])
                if key in exact and got is not None:
                    cells += 1
                    e = exact[key]
                    if math.isclose(got, e, rel_tol=1e-12, abs_tol=1e-9):
                        collisions.append(f"{sql} {params} {key}: {row[-1]}")
            # Notices (standard errors, provenance) and errors must not carry an exact value either.
            for text in w.notices:
                for tok in re.findall(r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?", text):
                    assert float(tok) not in exact_numbers, f"{sql!r}: exact value {tok} in a NOTICE"
    assert cells >= 20
    # Rounded noisy counts hit the exact value now and then; a leak hits it every time.
    assert len(collisions) <= max(2, cells // 4), collisions
    with psycopg.connect(dsn) as direct:
        for sql, params in SHAPE_PARAMS:
            exact_value = float(direct.execute(sql, params).fetchone()[0])
            w = _run(relay, conn, sql, params)
            if w.error is not None:
                assert w.error in ("0A000", "42601", "42883"), f"{sql!r} {params}: {w.error}"
                assert not w.data_rows()
                continue
            cells += 1
            if math.isclose(float(w.data_rows()[0][0] or "nan"), exact_value, abs_tol=1e-9):
                collisions.append(f"{sql} {params}")
    assert len(collisions) <= max(2, cells // 4), collisions
    for sql, params in BAD_PARAMS:
        w = _run(relay, conn, sql, params)
        assert w.error is not None and w.error not in ("XX000",), f"{sql!r} {params}: {w.error}"
        assert not w.data_rows()


def test_transaction_rollback_does_not_undo_a_release(setup: Any) -> None:
    dsn, relay, conn = setup
    sql = "SELECT count(*) FROM adult WHERE hours_per_week BETWEEN 35 AND 45 AND race = 4"
    conn.execute("BEGIN")
    first = _run(relay, conn, sql)
    conn.execute("ROLLBACK")
    again = _run(relay, conn, sql)
    assert first.error is None and again.error is None
    # The released answer stays released: the same value comes back, it is not noised afresh.
    assert first.data_rows() == again.data_rows()


def test_cursor_over_an_aggregate_goes_through_the_mechanism(setup: Any) -> None:
    dsn, relay, conn = setup
    sql = "SELECT count(*) FROM adult WHERE education_num BETWEEN 9 AND 12"
    direct = _run(relay, conn, sql)
    conn.execute("BEGIN")
    via_cursor = _run(relay, conn, f"DECLARE c CURSOR FOR {sql}")
    fetched = _run(relay, conn, "FETCH ALL FROM c")
    conn.execute("COMMIT")
    assert direct.error is None
    if via_cursor.error is None:
        # Same canonical query, same released answer: the cursor is not a way around the cache.
        assert fetched.data_rows() == direct.data_rows()


def test_sql_level_prepare_goes_through_the_mechanism(setup: Any) -> None:
    dsn, relay, conn = setup
    conn.execute("PREPARE byage(int) AS SELECT count(*) FROM adult WHERE age > $1 AND sex = 0")
    for age in (35, 47):
        executed = _run(relay, conn, f"EXECUTE byage({age})")
        plain = _run(relay, conn, f"SELECT count(*) FROM adult WHERE sex = 0 AND age > {age}")
        assert executed.error is None and plain.error is None, (executed.error, plain.error)
        # The parameter decides the query; each binding is its own canonical query with its own release,
        # and the prepared and the plain spelling get the same released answer.
        assert executed.data_rows() == plain.data_rows()
    conn.execute("DEALLOCATE byage")
