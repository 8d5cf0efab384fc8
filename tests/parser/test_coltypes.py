"""Column types: the one oid table agrees with PostgreSQL's catalog, and each type parses its own
declaration (config.toml) with errors that name the key."""

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import Any

import psycopg
import pytest

from parser import coltypes
from pgcore import pgtypes


def test_oid_table_matches_postgres(pg_dsn: str) -> None:
    with psycopg.connect(pg_dsn) as conn:
        rows = conn.execute("SELECT oid::int, typlen, format_type(oid, NULL) FROM pg_type WHERE oid = ANY(%s)",
                            ([t.oid for t in pgtypes.TYPES],)).fetchall()
    real = {oid: (size, name) for oid, size, name in rows}
    for t in pgtypes.TYPES:
        assert t.oid in real, t
        assert real[t.oid][1] == t.name, (t, real[t.oid])
        assert real[t.oid][0] == t.size, (t, real[t.oid])
    for alias in ("int", "int4", "float8", "bool", "varchar", "timestamptz", "decimal"):
        assert alias in pgtypes.OID_BY_NAME


@pytest.mark.parametrize(("spec", "key", "words"), [
    ({"type": "int", "min": 5, "max": 1}, "", "empty domain"),
    ({"type": "int", "min": 0}, "", "needs min and max"),
    ({"type": "int", "min": 0, "max": 3, "values": ["a"]}, "values", "unknown key"),
    ({"type": "int", "min": "0", "max": 3}, "min", "integer"),
    ({"type": "int", "min": 0, "max": 2_000_000}, "", "too large"),
    ({"type": "text", "values": []}, "", "empty domain"),
    ({"type": "categorical", "values": ["a", "a"]}, "values", "distinct"),
    ({"type": "text", "values": ["a"], "nullable": "yes"}, "nullable", "true or false"),
    ({"type": "money"}, "type", "must be one of"),
    ({"type": "date", "min": "2026-01-01", "max": "2026-02-01", "resolution": "hour"}, "resolution", "must be day"),
    ({"type": "timestamptz", "min": "2026-01-01T00:30:00Z", "max": "2026-02-01", "resolution": "hour"}, "min",
     "hour boundary"),
    ({"type": "timestamp", "min": "2026-01-01", "max": "2025-02-01"}, "", "empty domain"),
    ({"type": "timestamp", "min": "2026-01-01", "max": "2027-12-31", "resolution": "minute"}, "", "too many"),
    ({"type": "date", "min": "2026-02-30", "max": "2027-01-01"}, "min", "out of range"),
    ({"type": "date", "max": "2027-01-01"}, "", "needs min and max"),
])
def test_declaration_errors_name_the_key(spec: dict[str, Any], key: str, words: str) -> None:
    with pytest.raises(coltypes.DeclarationError) as err:
        coltypes.from_config(spec)
    assert any(k == key and words in m for k, m in err.value.problems), err.value.problems


def test_every_registered_type_round_trips_its_cells() -> None:
    """index_of(value_at(i)) == i for every cell, NULL included, for each registered type."""
    samples = {
        "int": {"type": "int", "min": -3, "max": 4, "nullable": True},
        "text": {"type": "text", "values": ["x", "y"], "nullable": True},
        "date": {"type": "date", "min": date(2026, 2, 27), "max": date(2026, 3, 2), "nullable": True},
        "timestamp": {"type": "timestamp", "min": "2026-01-01", "max": "2026-01-02", "resolution": "hour"},
        "timestamptz": {"type": "timestamptz", "min": datetime(2026, 1, 1, tzinfo=UTC),
                        "max": "2026-01-01T02:59:00+00:00", "resolution": "minute", "nullable": True},
    }
    for name, cls in coltypes.COLUMN_TYPES.items():
        spec = samples.get(cls.type_name)
        if spec is None:
            continue
        d = coltypes.from_config(spec)
        assert isinstance(d, cls), name
        assert [d.index_of(d.value_at(i)) for i in range(d.size)] == list(range(d.size))
        assert not d.nullable or d.index_of(d.value_at(d.size - 1)) == d.null_index
        assert d.format_ranges([(0, d.size - 1)]).startswith("{")
    tz = coltypes.from_config(samples["timestamptz"])
    assert tz.base_size == 180 and tz.index_of(datetime(2026, 1, 1, 1, 30, 59, tzinfo=UTC)) == 90
    assert coltypes.from_config(samples["date"]).base_size == 4  # 2026 is not a leap year
