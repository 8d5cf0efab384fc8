"""Parser test fixtures: an Adult-shaped database filled by the product's own demo generator (so the tests
run from the repository alone), marginal histograms cached per marginal, and a small table with nullable
and text domains."""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from tests.fixtures.databases import new_database, table_fixture
from tests.fixtures.exact_rows import Histograms
from tests.fixtures.parser_catalog import ADULT, PEOPLE


@pytest.fixture(scope="session")
def adult_conn(embedded_pg: Any) -> Iterator[psycopg.Connection]:
    """public.adult with the demo generator's seeded rows (never ../shared: these tests stand alone)."""
    from proxy.config import LoadSettings
    from proxy.upstream.demo_data import ensure_table

    dsn = new_database(embedded_pg, "parser_adult")
    ensure_table(dsn, ADULT, LoadSettings(), None)
    with psycopg.connect(dsn, autocommit=True) as conn:
        yield conn


@pytest.fixture(scope="session")
def adult_hist(adult_conn: psycopg.Connection) -> Histograms:
    return Histograms(adult_conn, ADULT)


def people_rows(n: int = 3000, seed: int = 7) -> list[tuple[Any, ...]]:
    """Rows inside PEOPLE's declared domains, NULLs included where the domain admits them."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        city = rng.choice(["Berlin", "Lyon", "Oslo", None])
        dept = rng.choice(["eng", "ops", "sales", "eng"])
        score = rng.choice([*range(-5, 11), None, None])
        level = rng.randint(1, 4)
        out.append((city, dept, score, level))
    return out


people_conn = table_fixture("parser_people", "hr.people (city text, dept text, score integer, level integer)",
                            people_rows, setup=["CREATE SCHEMA hr"], scope="session")


@pytest.fixture(scope="session")
def people_hist(people_conn: psycopg.Connection) -> Histograms:
    return Histograms(people_conn, PEOPLE)


