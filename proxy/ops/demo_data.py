"""Create and fill a protected table in the embedded database: from a CSV, or from a seeded generator.

The generator makes census-like rows (correlated age, education, hours, income...) so the demo behaves like
real data; for columns it does not know it draws from a skewed distribution over the declared domain.
It is only used to fill the embedded demo database, never on an upstream the operator owns.
"""

from __future__ import annotations

import csv
import logging
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import psycopg
from psycopg import sql

from parser.identifiers import display_ident
from parser.schema import Attribute, IntType, TableSchema

from .config import LoadSettings
from .events_data import relation_exists

log = logging.getLogger("lapras.demo")

DEMO_ROWS = 48_842
# A fixed seed makes the demo table reproducible; it only generates demo rows, never privacy noise.
DEMO_SEED = 20_260_501


class DataLoadError(RuntimeError):
    """The CSV could not be mapped onto the declared table; the message says which column and why."""


def table_exists(conn: psycopg.Connection, table: TableSchema) -> bool:
    return relation_exists(conn, table.schema, table.name)


def create_table(conn: psycopg.Connection, table: TableSchema) -> None:
    cols = sql.SQL(", ").join(
        sql.SQL("{} {}").format(sql.Identifier(a.name), sql.SQL(a.domain.sql_type))
        for a in table.attributes
    )
    conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(table.schema)))
    conn.execute(sql.SQL("CREATE TABLE {}.{} ({})").format(
        sql.Identifier(table.schema), sql.Identifier(table.name), cols))


def _copy_rows(conn: psycopg.Connection, table: TableSchema, rows: Iterator[tuple[object, ...]]) -> int:
    names = sql.SQL(", ").join(sql.Identifier(a.name) for a in table.attributes)
    stmt = sql.SQL("COPY {}.{} ({}) FROM STDIN").format(
        sql.Identifier(table.schema), sql.Identifier(table.name), names)
    n = 0
    with conn.cursor().copy(stmt) as copy:
        for row in rows:
            copy.write_row(row)
            n += 1
    return n


def csv_rows(path: Path, table: TableSchema, load: LoadSettings) -> Iterator[tuple[object, ...]]:
    """Rows of a CSV with a header, mapped onto the table's columns (renames and offsets applied)."""
    with path.open(newline="", encoding="utf-8") as fh:
        reader = csv.reader(fh)
        try:
            header = next(reader)
        except StopIteration:
            raise DataLoadError(f"{path} is empty; it needs a header row") from None
        names = [load.rename.get(h.strip(), h.strip()) for h in header]
        folded = [n.lower() for n in names]
        index = {}
        for a in table.attributes:
            # The header names the column exactly, or in another case when that is unambiguous.
            if a.name in names:
                index[a.name] = names.index(a.name)
            elif folded.count(a.name.lower()) == 1:
                index[a.name] = folded.index(a.name.lower())
            else:
                raise DataLoadError(f"{path}: no column for {a.name!r} (header has {', '.join(header)}); "
                                    f"map it with [tables.{display_ident(table.name)}.load] rename")
        for lineno, rec in enumerate(reader, start=2):
            if not rec:
                continue
            yield tuple(_cell(rec, index[a.name], a, load, path, lineno) for a in table.attributes)


def _cell(rec: list[str], i: int, a: Attribute, load: LoadSettings, path: Path, lineno: int) -> object:
    if i >= len(rec):
        raise DataLoadError(f"{path}:{lineno}: too few fields")
    raw = rec[i].strip()
    if raw == "" or raw.upper() == "NULL":
        return None
    try:
        v = a.domain.read_text(raw)
    except ValueError:
        raise DataLoadError(f"{path}:{lineno}: column {a.name} expects {a.domain.sql_type}, got {raw!r}") from None
    offset = load.offset.get(a.name, 0)
    return v + offset if offset else v


def _clip_int(x: np.ndarray, a: Attribute) -> np.ndarray:
    lo, hi = a.domain.sum_bounds
    return np.clip(np.rint(x), lo, hi).astype(np.int64)


def generated_rows(table: TableSchema, n: int = DEMO_ROWS) -> Iterator[tuple[object, ...]]:
    """Seeded census-like rows over the declared domains."""
    rng = np.random.default_rng(DEMO_SEED)
    cols: dict[str, np.ndarray] = {}
    age = rng.gamma(shape=5.0, scale=4.2, size=n) + 16.0
    edu = np.clip(rng.normal(9.0, 2.6, n), 0, 15)
    sex = (rng.random(n) < 0.67).astype(float)
    hours = np.where(rng.random(n) < 0.55, 40.0, rng.normal(40.0 + 4.0 * sex, 12.0, n))
    logit = -9.0 + 0.045 * np.minimum(age, 60) + 0.42 * edu + 0.9 * sex + 0.03 * (hours - 40)
    income = (rng.random(n) < 1.0 / (1.0 + np.exp(-logit))).astype(float)
    gain = np.where(rng.random(n) < 0.08 + 0.1 * income, rng.gamma(1.2, 18.0, n), 0.0)
    loss = np.where(rng.random(n) < 0.05, rng.normal(45.0, 10.0, n), 0.0)
    known = {"age": age, "education_num": edu, "sex": sex, "hours_per_week": hours,
             "income_gt_50k": income, "capital_gain": gain, "capital_loss": loss}
    for a in table.attributes:
        size = a.domain.base_size
        if a.name in known and isinstance(a.domain, IntType):
            cols[a.name] = _clip_int(known[a.name], a)
            continue
        # Unknown columns: a Zipf-like skew over the domain, as most census categoricals have.
        p = 1.0 / np.arange(1, size + 1) ** 1.1
        idx = rng.choice(size, size=n, p=p / p.sum())
        cols[a.name] = a.domain.base_values()[idx]
    yield from zip(*(cols[a.name].tolist() for a in table.attributes), strict=True)


def ensure_table(dsn: str, table: TableSchema, load: LoadSettings, csv_path: Path | None) -> bool:
    """Create and fill ``table`` if it is missing; returns True when it was created."""
    with psycopg.connect(dsn) as conn:
        if table_exists(conn, table):
            return False
        with conn.transaction():
            create_table(conn, table)
            if csv_path is not None:
                n = _copy_rows(conn, table, csv_rows(csv_path, table, load))
                log.info("loaded %d rows into %s from %s", n, table.qualified_name, csv_path)
            else:
                n = _copy_rows(conn, table, generated_rows(table))
                log.info("generated %d demo rows into %s", n, table.qualified_name)
        conn.execute(sql.SQL("ANALYZE {}.{}").format(sql.Identifier(table.schema), sql.Identifier(table.name)))
    return True
