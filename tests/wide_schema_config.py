"""A generated wide schema (issue 18): 150 tables of 50 to 300 columns cycling through every column type,
plus a 5-column table, as config.toml declares them and as PostgreSQL creates them. Used by
tests/test_wide_schema.py and benchmarks/wide_schema.py."""

from __future__ import annotations

KINDS = (
    ("int", "integer", '{ type = "int", min = 0, max = 100 }'),
    ("num", "numeric(12,2)", '{ type = "numeric", min = 0, max = 1000, bins = 50 }'),
    ("float", "double precision", '{ type = "float", min = 0, max = 1, bins = 0.125 }'),
    ("text", "text", '{ type = "text", values = ["a", "b", "c", "d"], nullable = true }'),
    ("date", "date", "{ type = \"date\", min = 2024-01-01, max = 2025-12-31 }"),
    ("ts", "timestamp", '{ type = "timestamp", min = 2025-01-01T00:00:00, max = 2025-12-31T23:00:00, '
                        'resolution = "hour" }'),
    ("tstz", "timestamptz", '{ type = "timestamptz", min = 2025-01-01T00:00:00Z, max = 2025-12-31T23:00:00Z, '
                            'resolution = "day" }'),
    ("bool", "boolean", '{ type = "boolean", nullable = true }'),
    ("big", "bigint", '{ type = "bigint", min = 0, max = 10000000, bins = 100000 }'),
)
N_TABLES = 150


def columns(n: int) -> list[tuple[str, str, str]]:
    """(name, PostgreSQL type, declaration) of a table's ``n`` columns, cycling through every type."""
    return [(f"Col {j} ({k[0]})", k[1], k[2]) for j, k in ((j, KINDS[j % len(KINDS)]) for j in range(n))]


def widths() -> dict[str, int]:
    """Table name -> column count: "Wide_0" has 300, the others 50..300, plus "Narrow" with 5."""
    out = {f"Wide_{i}": (300 if i == 0 else 50 + (i * 37) % 251) for i in range(N_TABLES)}
    out["Narrow"] = 5
    return out


def config_text(dsn: str, port: int, tables: dict[str, int]) -> str:
    head = (f'[server]\nlisten = "127.0.0.1:{port}"\ndatabase = "wide"\n\n[upstream]\ndsn = "{dsn}"\n\n'
            '[[users]]\nname = "analyst"\nauth = "trust"\n\n[privacy]\nepsilon = 1.0\ndelta = 1e-6\n\n')
    parts = []
    for name, n in tables.items():
        cols = "\n".join(f'"{c}" = {spec}' for c, _, spec in columns(n))
        parts.append(f'[tables."{name}"]\nschema = "public"\n\n[tables."{name}".columns]\n{cols}\n')
    return head + "\n".join(parts)


def create_tables(dsn: str, tables: dict[str, int]) -> None:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        for name, n in tables.items():
            cols = ", ".join(f'"{c}" {t}' for c, t, _ in columns(n))
            conn.execute(f'CREATE TABLE IF NOT EXISTS "{name}" ({cols})')  # type: ignore[call-overload]
