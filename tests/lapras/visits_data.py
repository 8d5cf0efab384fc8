"""The ``visits`` table (user_id, a, c) of the privacy-unit tests, loaded into two databases of the embedded
PostgreSQL in opposite physical orders (so a test can check that a per-unit choice does not depend on it)."""

from __future__ import annotations

import os
from typing import Any

import psycopg

Row = tuple[int, int, int]


def load_visits(dsn: str, rows: list[Row]) -> None:
    with psycopg.connect(dsn) as conn:
        conn.execute("CREATE TABLE visits (user_id bigint, a int, c int)")
        with conn.cursor().copy("COPY visits (user_id, a, c) FROM STDIN") as cp:
            for r in rows:
                cp.write_row(r)


def visits_in_two_orders(embedded_pg: Any, rows: list[Row], prefix: str) -> tuple[list[Row], str, str]:
    """The rows, and the DSNs of two fresh databases holding them in opposite physical orders."""
    dsns = []
    for i in range(2):
        name = f"{prefix}_{os.getpid()}_{i}"
        with psycopg.connect(embedded_pg.dsn(), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
            conn.execute(f'CREATE DATABASE "{name}"')
        dsns.append(embedded_pg.dsn(name))
    load_visits(dsns[0], rows)
    load_visits(dsns[1], rows[::-1])
    return rows, dsns[0], dsns[1]
