"""Shared fixtures: one real embedded PostgreSQL per test session, the Adult table, fresh databases.

The proxy fixture starts the real `lapras-proxy serve` process on a free port against that cluster.
"""

from __future__ import annotations

import itertools
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from proxy.config import load_config
from proxy.demo_data import ensure_table
from proxy.embedded import EmbeddedPostgres

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"
ADULT_CSV = SHARED_DATA / "adult.csv"


def shared_data_or_skip() -> Path:
    if not ADULT_CSV.exists():
        pytest.skip("../shared/data is not present")
    return SHARED_DATA


@pytest.fixture(scope="session")
def shared_data() -> Path:
    return shared_data_or_skip()


@pytest.fixture(scope="session")
def default_config():
    return load_config(REPO / "config.toml")


@pytest.fixture(scope="session")
def embedded_pg() -> Iterator[EmbeddedPostgres]:
    """A real PostgreSQL cluster for the whole test session (not per test)."""
    root = Path(tempfile.mkdtemp(prefix="lapras-test-"))
    pg = EmbeddedPostgres(root)
    pg.start()
    try:
        yield pg
    finally:
        pg.stop(mode="immediate")
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def pg_dsn(embedded_pg: EmbeddedPostgres) -> str:
    """Admin conninfo of the session's cluster (database postgres)."""
    return embedded_pg.dsn()


_db_counter = itertools.count()


def create_database(embedded_pg: EmbeddedPostgres, prefix: str = "t") -> str:
    name = f"{prefix}_{os.getpid()}_{next(_db_counter)}"
    with psycopg.connect(embedded_pg.dsn(), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return embedded_pg.dsn(name)


@pytest.fixture
def fresh_db(embedded_pg: EmbeddedPostgres) -> str:
    """Conninfo of a new, empty database (one per test)."""
    return create_database(embedded_pg, "fresh")


@pytest.fixture(scope="session")
def adult_db(embedded_pg: EmbeddedPostgres, default_config) -> str:
    """Conninfo of a database holding public.adult: the real Adult data when ../shared is present
    (age decoded to 17..90), otherwise the built-in demo rows."""
    dsn = create_database(embedded_pg, "adult")
    table = default_config.catalog.table("adult")
    csv_path = ADULT_CSV if ADULT_CSV.exists() else None
    ensure_table(dsn, table, default_config.loads["adult"], csv_path)
    return dsn
