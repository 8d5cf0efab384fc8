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

from parser.model.schema import Attribute, IntType, TableSchema
from pgcore.identifiers import display_ident

from ..config import LoadSettings
from .events_data import relation_exists
from .shop_data import ensure_shop_tables

log = logging.getLogger("lapras.demo")

DEMO_ROWS = 48_842
# A fixed seed makes the demo table reproducible; it only generates demo rows, never privacy noise.
DEMO_SEED = 20_260_501


class DataLoadError(RuntimeError):
    """The CSV could not be mapped onto the declared table; the message says which column and why."""


def table_exists(conn: psycopg.Connection, table: TableSchema) -> bool:
    return relation_exists(conn, table.schema, table.name)


def _unit_column(table: TableSchema) -> str | None:
    """The privacy unit's column when it is not also a declared attribute (it never is: it is not
    queryable), so the loader must create and fill it beside the attributes."""
    unit = table.privacy_unit
    return unit if unit is not None and table.attribute(unit) is None else None


def _columns(table: TableSchema) -> list[str]:
    """Names of the stored columns the loader fills, in COPY order: the unit first, then the attributes."""
    unit = _unit_column(table)
    return ([unit] if unit is not None else []) + [a.name for a in table.attributes]


def create_table(conn: psycopg.Connection, table: TableSchema, unit_type: str = "bigint") -> None:
    """The table with its declared attributes, and its privacy unit's column (``unit_type``) when it has one."""
    types = [sql.SQL(a.domain.sql_type) for a in table.attributes]
    if _unit_column(table) is not None:
        types.insert(0, sql.SQL(unit_type))
    cols = sql.SQL(", ").join(
        sql.SQL("{} {}").format(sql.Identifier(name), t) for name, t in zip(_columns(table), types, strict=True)
    )
    conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(table.schema)))
    conn.execute(sql.SQL("CREATE TABLE {}.{} ({})").format(
        sql.Identifier(table.schema), sql.Identifier(table.name), cols))


def _copy_rows(conn: psycopg.Connection, table: TableSchema, rows: Iterator[tuple[object, ...]]) -> int:
    names = sql.SQL(", ").join(sql.Identifier(n) for n in _columns(table))
    stmt = sql.SQL("COPY {}.{} ({}) FROM STDIN").format(
        sql.Identifier(table.schema), sql.Identifier(table.name), names)
    n = 0
    with conn.cursor().copy(stmt) as copy:
        for row in rows:
            copy.write_row(row)
            n += 1
    return n


def _csv_index(path: Path, header: list[str], table: TableSchema, load: LoadSettings) -> dict[str, int]:
    """Position in the CSV of every column the loader fills (the privacy unit's too)."""
    names = [load.rename.get(h.strip(), h.strip()) for h in header]
    folded = [n.lower() for n in names]
    index = {}
    for name in _columns(table):
        # The header names the column exactly, or in another case when that is unambiguous.
        if name in names:
            index[name] = names.index(name)
        elif folded.count(name.lower()) == 1:
            index[name] = folded.index(name.lower())
        else:
            what = "the privacy unit" if name == table.privacy_unit else "column"
            raise DataLoadError(f"{path}: no column for {what} {name!r} (header has {', '.join(header)}); "
                                f"map it with [tables.{display_ident(table.name)}.load] rename")
    return index


def csv_unit_type(path: Path, table: TableSchema, load: LoadSettings) -> str:
    """SQL type of the privacy unit's column read from a CSV: ``bigint`` when every value is an integer
    (user ids usually are), else ``text``. Rows are bounded per unit by a hash of the row, which reads any
    type, so the choice only decides how the operator sees the column."""
    unit = _unit_column(table)
    if unit is None:
        return "bigint"
    with path.open(newline="", encoding="utf-8") as fh:
        reader = csv.reader(fh)
        header = next(reader, None)
        if header is None:
            raise DataLoadError(f"{path} is empty; it needs a header row")
        i = _csv_index(path, header, table, load)[unit]
        for rec in reader:
            raw = rec[i].strip() if i < len(rec) else ""
            if raw and raw.upper() != "NULL":
                try:
                    if not -2**63 <= int(raw) < 2**63:
                        return "text"
                except ValueError:
                    return "text"
    return "bigint"


def csv_rows(path: Path, table: TableSchema, load: LoadSettings) -> Iterator[tuple[object, ...]]:
    """Rows of a CSV with a header, mapped onto the table's columns (renames and offsets applied); the
    privacy unit's value first when the table has one (an empty field is NULL: such rows are left out)."""
    unit = _unit_column(table)
    with path.open(newline="", encoding="utf-8") as fh:
        reader = csv.reader(fh)
        try:
            header = next(reader)
        except StopIteration:
            raise DataLoadError(f"{path} is empty; it needs a header row") from None
        index = _csv_index(path, header, table, load)
        for lineno, rec in enumerate(reader, start=2):
            if not rec:
                continue
            row = tuple(_cell(rec, index[a.name], a, load, path, lineno) for a in table.attributes)
            if unit is not None:
                raw = rec[index[unit]].strip() if index[unit] < len(rec) else ""
                row = (None if raw == "" or raw.upper() == "NULL" else raw, *row)
            yield row


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
    rows = zip(*(cols[a.name].tolist() for a in table.attributes), strict=True)
    if _unit_column(table) is None:
        yield from rows
    else:  # a declared unit with generated rows: each row its own unit (the row-level guarantee)
        yield from ((i, *row) for i, row in enumerate(rows, start=1))


def ensure_table(dsn: str, table: TableSchema, load: LoadSettings, csv_path: Path | None,
                 replace: bool = False) -> bool:
    """Create and fill ``table`` if it is missing (``replace``: drop and refill it in one transaction, so
    readers see the old rows or the new ones, never none); returns True when it was (re)created."""
    if csv_path is None and load.generator == "shop":
        return ensure_shop_tables(dsn, table)
    with psycopg.connect(dsn) as conn:
        if table_exists(conn, table) and not replace:
            return False
        with conn.transaction():
            if replace:
                conn.execute(sql.SQL("DROP TABLE IF EXISTS {}.{}").format(sql.Identifier(table.schema),
                                                                        sql.Identifier(table.name)))
            create_table(conn, table, csv_unit_type(csv_path, table, load) if csv_path is not None else "bigint")
            if csv_path is not None:
                n = _copy_rows(conn, table, csv_rows(csv_path, table, load))
                log.info("loaded %d rows into %s from %s", n, table.qualified_name, csv_path)
            else:
                n = _copy_rows(conn, table, generated_rows(table))
                log.info("generated %d demo rows into %s", n, table.qualified_name)
        conn.execute(sql.SQL("ANALYZE {}.{}").format(sql.Identifier(table.schema), sql.Identifier(table.name)))
    return True
