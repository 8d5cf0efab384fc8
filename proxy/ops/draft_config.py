"""`lapras-proxy draft-config`: the `[tables.NAME]` TOML for an existing table, a DBA's starting point.

Every column is read from PostgreSQL's catalog and its type mapped onto the proxy's column types. The
domains are placeholders ("TODO") that check-config refuses until a person fills them from public
knowledge; with ``from_data`` they are filled from the table's rows instead (operator only: those values
become public, so the command warns about it).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

import psycopg
import tomlkit
from psycopg import sql
from tomlkit.items import InlineTable

from parser.coltypes.integer import MAX_CELLS
from pgcore.identifiers import qualified

from ..config import toml_key

TODO = "TODO"
MAX_LISTED_VALUES = 100
"""A text column with more distinct values than this gets no value list from the data."""
TARGET_BINS = 20
"""--from-data cuts a numeric range into about this many bins of a round width."""
MAX_TIME_CELLS = 10_000
"""--from-data picks the finest time resolution with at most this many cells (a year by the hour)."""

_INT = {"int2": "smallint", "int4": "int", "int8": "bigint"}
_NUMERIC = {"numeric": "numeric", "float4": "float", "float8": "float"}
_TEXT = {"text", "varchar", "bpchar", "name", "citext"}
_TEMPORAL = {"date": "date", "timestamp": "timestamp", "timestamptz": "timestamptz"}

FROM_DATA_WARNING = (
    "lapras-proxy: warning: --from-data read these domains from the table's rows (min, max, value lists). "
    "Once in config.toml they are PUBLIC: every analyst sees them through value lists, MIN/MAX and the "
    "catalog. Replace them by public knowledge where you can (documented ranges, standard code lists).")


class DraftError(Exception):
    """The table cannot be drafted (not found, no column); the message says why."""


@dataclass(frozen=True)
class SourceColumn:
    """A column as PostgreSQL's catalog describes it."""

    name: str
    type_name: str      # the base type's typname (domains resolved): int4, numeric, timestamptz...
    display: str        # format_type(), for comments: "character varying(20)", "numeric(10,2)"
    not_null: bool


def find_table(conn: psycopg.Connection[Any], name: str, schema: str | None = None) -> tuple[str, str]:
    """(schema, table) of ``name``: its exact spelling first (``Sales 3`` as typed in a shell), else
    PostgreSQL's own reading of it as SQL (``public."Sales_3"``, unquoted names folded)."""
    q = ("SELECT n.nspname, c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
         "WHERE c.relkind IN ('r', 'p', 'v', 'm', 'f') AND c.relname = %s AND "
         + ("n.nspname = %s" if schema else "n.nspname = ANY(current_schemas(false))")
         + " ORDER BY array_position(current_schemas(false), n.nspname) LIMIT 1")
    row = conn.execute(q, (name, schema) if schema else (name,)).fetchone()
    if row is None and schema is None:
        row = conn.execute("SELECT n.nspname, c.relname FROM pg_class c JOIN pg_namespace n ON "
                           "n.oid = c.relnamespace WHERE c.oid = to_regclass(%s)", (name,)).fetchone()
    if row is None:
        where = f" in schema {schema!r}" if schema else ""
        raise DraftError(f"no table {name!r}{where} (write it as stored, e.g. --table 'Sales 3', or as SQL, "
                         "e.g. --table 'public.\"Sales_3\"')")
    return str(row[0]), str(row[1])


def read_columns(conn: psycopg.Connection[Any], schema: str, table: str) -> list[SourceColumn]:
    rows = conn.execute(
        "SELECT a.attname, COALESCE(bt.typname, t.typname), format_type(a.atttypid, a.atttypmod), "
        "a.attnotnull OR COALESCE(t.typnotnull, false) "
        "FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid "
        "JOIN pg_namespace n ON n.oid = c.relnamespace JOIN pg_type t ON t.oid = a.atttypid "
        "LEFT JOIN pg_type bt ON t.typtype = 'd' AND bt.oid = t.typbasetype "
        "WHERE n.nspname = %s AND c.relname = %s AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum",
        (schema, table)).fetchall()
    return [SourceColumn(str(r[0]), str(r[1]), str(r[2]), bool(r[3])) for r in rows]


def draft(dsn: str, table: str, *, schema: str | None = None, from_data: bool = False,
          max_values: int = MAX_LISTED_VALUES) -> str:
    """The TOML text declaring ``table`` of the database at ``dsn`` (raises DraftError)."""
    with psycopg.connect(dsn, connect_timeout=10) as conn:
        conn.read_only = True
        schema, table = find_table(conn, table, schema)
        columns = read_columns(conn, schema, table)
        if not columns:
            raise DraftError(f"{schema}.{table} has no column")
        stats = _DataReader(conn, schema, table, max_values) if from_data else None
        return _render(schema, table, columns, stats)


class _DataReader:
    """The few aggregates --from-data reads per column (min and max, or a short list of values)."""

    def __init__(self, conn: psycopg.Connection[Any], schema: str, table: str, max_values: int) -> None:
        self.conn, self.max_values = conn, max_values
        self.rel = sql.Identifier(schema, table)

    def min_max(self, col: str) -> tuple[Any, Any]:
        q = sql.SQL("SELECT min({c}), max({c}) FROM {t}").format(c=sql.Identifier(col), t=self.rel)
        row = self.conn.execute(q).fetchone()
        return (row[0], row[1]) if row else (None, None)

    def distinct(self, col: str) -> tuple[int, int]:
        q = sql.SQL("SELECT count(DISTINCT {c}), count({c}) FROM {t}").format(c=sql.Identifier(col), t=self.rel)
        row = self.conn.execute(q).fetchone()
        return (int(row[0]), int(row[1])) if row else (0, 0)

    def values(self, col: str) -> list[str] | None:
        q = sql.SQL("SELECT {c}::text FROM {t} WHERE {c} IS NOT NULL GROUP BY 1 ORDER BY 1 LIMIT %s").format(
            c=sql.Identifier(col), t=self.rel)
        rows = [str(r[0]) for r in self.conn.execute(q, (self.max_values + 1,)).fetchall()]
        return rows if len(rows) <= self.max_values else None


def _render(schema: str, table: str, columns: list[SourceColumn], data: _DataReader | None) -> str:
    doc = tomlkit.document()
    doc.add(tomlkit.comment(f"Drafted by `lapras-proxy draft-config` for {qualified(schema, table)}."))
    if data is not None:
        doc.add(tomlkit.comment("Domains were read from the table's rows (--from-data): they are PUBLIC now."))
    else:
        doc.add(tomlkit.comment("Every \"TODO\" is a placeholder: replace it by a PUBLIC bound or value list "
                                "(documentation,"))
        doc.add(tomlkit.comment("standards, business rules; never the data). check-config refuses this "
                                "table until every TODO is filled."))
    doc.add(tomlkit.comment("If one person has several rows, add privacy_unit = \"COLUMN\" and "
                            "max_rows_per_unit = K (README.md, \"Rows or people?\")."))
    doc.add(tomlkit.comment("Keys that are not public (keys = \"private\", value lists under a filter) are "
                            "released by DP partition selection"))
    doc.add(tomlkit.comment("with [privacy] partition_fraction = 0.1 of each epoch's budget (the default; "
                            "0 refuses them)."))
    body = tomlkit.table()
    body.add("schema", schema)
    cols = tomlkit.table()
    for col in columns:
        spec, note = _column(col, data)
        if spec is None:
            cols.add(tomlkit.comment(f"{toml_key(col.name)}: {note}"))
            continue
        cols.add(col.name, spec)
        if note:
            cols[col.name].comment(note)
    body.add("columns", cols)
    tables = tomlkit.table(is_super_table=True)
    tables.add(table, body)
    doc.add("tables", tables)
    text = tomlkit.dumps(doc)
    return text if text.endswith("\n") else text + "\n"


def _column(col: SourceColumn, data: _DataReader | None) -> tuple[InlineTable | None, str]:
    """The column's inline declaration and a comment for it; (None, why) when it cannot be declared."""
    spec = tomlkit.inline_table()
    t = col.type_name
    note = ""
    why = _identifier(col, data) if t in _INT or t in _NUMERIC else None
    if why is not None:
        # An identifier (ZIP code, NPI number, customer id): its values are keys, not a measure to sum.
        # Declared with its own type (numbers on the wire, in numeric order); a float's text is not exact.
        spec.update({"type": _INT.get(t, "numeric" if t == "numeric" else "text"), "keys": "private"})
        note = (f"an identifier ({why}): GROUP BY it through DP partition selection; declare a range "
                "instead to sum it")
    elif t in _INT:
        note = _int_spec(spec, col, data)
    elif t in _NUMERIC:
        spec["type"] = _NUMERIC[t]
        note = _numeric_spec(spec, col, data)
    elif t in _TEXT:
        spec["type"] = "text"
        listed = _text_spec(spec, col, data)
        if listed is None:
            assert data is not None
            # Too many values to publish: its keys come from DP partition selection, never from this list.
            spec["keys"] = "private"
            listed = (f"more than {data.max_values} values: keys from DP partition selection "
                      "([privacy] partition_fraction > 0), or declare its public values")
        note = listed
    elif t in _TEMPORAL:
        spec["type"] = _TEMPORAL[t]
        note = _temporal_spec(spec, col, data)
    elif t == "time":  # times of day: the whole day is public, one cell a minute (1,440 cells)
        spec["type"] = "time"
        spec["resolution"] = "minute"
    elif t == "bool":
        spec["type"] = "boolean"
    else:
        return None, f"{col.display} has no proxy column type; left out (it cannot be queried)"
    if not col.not_null:
        spec["nullable"] = True
    return spec, note


_ID_WORDS = frozenset({"id", "zip", "zipcode", "postal", "postcode", "npi", "sku", "upc", "ean", "isbn", "ssn",
                       "fips", "duns", "ein", "uuid", "guid"})


def _identifier(col: SourceColumn, data: _DataReader | None) -> str | None:
    """Why a numeric column is an identifier (its name, or nearly one distinct value a row), or None."""
    words = re.findall(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+", col.name)
    if any(w.lower() in _ID_WORDS for w in words) or col.name.lower().endswith(("_id", "_no", "_number")):
        return "by its name"
    if data is not None and col.type_name in _INT:
        distinct, rows = data.distinct(col.name)
        if rows >= 100 and distinct >= 0.99 * rows:  # (nearly) one value a row: a key, not an amount
            return f"{distinct:,} distinct values in {rows:,} rows"
    return None


def _int_spec(spec: InlineTable, col: SourceColumn, data: _DataReader | None) -> str:
    spec["type"] = _INT[col.type_name]
    lo, hi = data.min_max(col.name) if data is not None else (None, None)
    if lo is None or hi is None:
        spec.update({"min": TODO, "max": TODO})
        return "public range (a range wider than 1,000,000 values also needs bins = WIDTH)" if data is None \
            else "no value in the data: fill min and max"
    if int(hi) - int(lo) + 1 <= MAX_CELLS:
        spec.update({"min": int(lo), "max": int(hi)})
        return ""
    # Too many integers for one cell each: integer bins of a round width (sums still read exact values).
    lo_f, hi_f, width = _round_bins(float(lo), float(hi))
    spec.update({"min": int(lo_f), "max": int(hi_f), "bins": int(max(width, 1))})
    return f"{int(hi) - int(lo) + 1:,} values: binned"


def _numeric_spec(spec: InlineTable, col: SourceColumn, data: _DataReader | None) -> str:
    lo, hi = data.min_max(col.name) if data is not None else (None, None)
    if lo is None or hi is None:
        spec.update({"min": TODO, "max": TODO})
        return ("clamp range of SUM/AVG; add bins = WIDTH to filter or group by it" if data is None
                else "no value in the data: fill min and max")
    lo_f, hi_f, width = _round_bins(float(lo), float(hi))
    spec.update({"min": _plain(lo_f), "max": _plain(hi_f), "bins": _plain(width)})
    return ""


def _text_spec(spec: InlineTable, col: SourceColumn, data: _DataReader | None) -> str | None:
    """The value list (a note), or None when the data has too many values to list: the column is left out."""
    if data is None:
        spec["values"] = TODO
        return "list of public values, e.g. [\"a\", \"b\"], or values_from = \"schema.table.column\""
    values = data.values(col.name)
    if not values:
        return None
    spec["values"] = values
    return ""


def _temporal_spec(spec: InlineTable, col: SourceColumn, data: _DataReader | None) -> str:
    lo, hi = data.min_max(col.name) if data is not None else (None, None)
    if spec["type"] != "date":
        spec["resolution"] = "day"
    if lo is None or hi is None:
        spec.update({"min": TODO, "max": TODO})
        if data is None:
            return ("public range, e.g. 2026-01-01" if spec["type"] == "date"
                    else "public range, e.g. 2026-01-01T00:00:00Z; resolution day, hour or minute")
        return "no value in the data: fill min and max"
    if isinstance(lo, datetime):
        # Cells start on a whole day: the lower bound goes down to its midnight (UTC for timestamptz).
        if lo.tzinfo is not None:
            lo, hi = lo.astimezone(UTC), hi.astimezone(UTC)
        lo = lo.replace(hour=0, minute=0, second=0, microsecond=0)
        hi = hi.replace(microsecond=0)
    elif not isinstance(lo, date):
        spec.update({"min": TODO, "max": TODO})
        return "infinite or unreadable bounds in the data: fill min and max"
    if spec["type"] != "date":
        spec["resolution"] = _resolution(hi - lo)
    spec.update({"min": lo, "max": hi})
    return ""


def _resolution(span: timedelta) -> str:
    """The finest cell (minute, hour, day) that cuts ``span`` into at most MAX_TIME_CELLS cells."""
    for name, step in (("minute", timedelta(minutes=1)), ("hour", timedelta(hours=1))):
        if span / step <= MAX_TIME_CELLS:
            return name
    return "day"


def _round_bins(lo: float, hi: float) -> tuple[float, float, float]:
    """(min, max, width): the range widened to multiples of a round width (1, 2 or 5 times a power of ten)
    giving about TARGET_BINS bins."""
    span = max(hi - lo, 1e-9)
    raw = span / TARGET_BINS
    power = 10.0 ** math.floor(math.log10(raw))
    width = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    lo_r = math.floor(lo / width) * width
    hi_r = math.ceil(hi / width) * width
    if hi_r <= lo_r:
        hi_r = lo_r + width
    return lo_r, hi_r, width


def _plain(x: float | Decimal) -> int | float:
    """A round number written as an integer when it is one (TOML ``100`` rather than ``100.0``)."""
    f = float(round(float(x), 12))
    return int(f) if f.is_integer() and abs(f) < 2**53 else f

