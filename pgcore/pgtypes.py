"""The one table of PostgreSQL types the product knows: oid, name, size on the wire, and the names SQL
(PREPARE, CAST) may spell them with. Every other module takes its type oids from here."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PgType:
    oid: int
    name: str  # as format_type() prints it (error messages, catalog)
    size: int  # pg_type.typlen: bytes of the binary form, -1 for variable length
    aliases: tuple[str, ...] = ()


BOOL, BYTEA, NAME, INT8, INT2, INT4, TEXT, OID = 16, 17, 19, 20, 21, 23, 25, 26
FLOAT4, FLOAT8, UNKNOWN, BPCHAR, VARCHAR = 700, 701, 705, 1042, 1043
DATE, TIME, TIMESTAMP, TIMESTAMPTZ, INTERVAL, NUMERIC = 1082, 1083, 1114, 1184, 1186, 1700

TYPES: tuple[PgType, ...] = (
    PgType(BOOL, "boolean", 1, ("bool",)),
    PgType(BYTEA, "bytea", -1),
    PgType(NAME, "name", 64),
    PgType(INT8, "bigint", 8, ("int8",)),
    PgType(INT2, "smallint", 2, ("int2",)),
    PgType(INT4, "integer", 4, ("int", "int4")),
    PgType(TEXT, "text", -1),
    PgType(OID, "oid", 4),
    PgType(FLOAT4, "real", 4, ("float4",)),
    PgType(FLOAT8, "double precision", 8, ("float8", "float")),
    PgType(UNKNOWN, "unknown", -2),
    PgType(BPCHAR, "character", -1, ("char", "bpchar")),
    PgType(VARCHAR, "character varying", -1, ("varchar",)),
    PgType(DATE, "date", 4),
    PgType(TIME, "time without time zone", 8, ("time",)),
    PgType(TIMESTAMP, "timestamp without time zone", 8, ("timestamp",)),
    PgType(TIMESTAMPTZ, "timestamp with time zone", 8, ("timestamptz",)),
    PgType(INTERVAL, "interval", 16),
    PgType(NUMERIC, "numeric", -1, ("decimal",)),
)

# Array types of the scalar ones, for `col = ANY($1)` with a list bound to $1 (psycopg's IN list):
# element oid -> array oid, as pg_type.typarray has them.
ARRAY_OF: dict[int, int] = {BOOL: 1000, INT2: 1005, INT4: 1007, INT8: 1016, TEXT: 1009, BPCHAR: 1014,
                            VARCHAR: 1015, FLOAT4: 1021, FLOAT8: 1022, NUMERIC: 1231, DATE: 1182,
                            TIMESTAMP: 1115, TIMESTAMPTZ: 1185}
ELEMENT_OF: dict[int, int] = {a: e for e, a in ARRAY_OF.items()}
TYPES += tuple(PgType(a, f"{next(t.name for t in TYPES if t.oid == e)}[]", -1) for e, a in ARRAY_OF.items())

BY_OID: dict[int, PgType] = {t.oid: t for t in TYPES}
OID_BY_NAME: dict[str, int] = {n: t.oid for t in TYPES for n in (t.name, *t.aliases)}

INTEGER_OIDS = frozenset({INT2, INT4, INT8})
FLOAT_OIDS = frozenset({FLOAT4, FLOAT8})
TEXT_OIDS = frozenset({TEXT, VARCHAR, BPCHAR, NAME, UNKNOWN})
TEMPORAL_OIDS = frozenset({DATE, TIMESTAMP, TIMESTAMPTZ})


def type_name(oid: int) -> str:
    """The name PostgreSQL prints for ``oid`` (``oid N`` for one this table lacks; 0 is unknown)."""
    t = BY_OID.get(oid)
    return t.name if t is not None else ("unknown" if oid == 0 else f"oid {oid}")


def type_size(oid: int) -> int:
    """pg_type.typlen of ``oid`` (-1 when variable or not in the table)."""
    t = BY_OID.get(oid)
    return t.size if t is not None and t.size != -2 else -1
