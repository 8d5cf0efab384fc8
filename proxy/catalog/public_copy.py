"""The shadow database's copies of the public tables (``[public_tables.NAME]``): their columns, unique
keys and rows as the proxy read them upstream (``proxy/ops/public_tables.py``), so that plain SELECTs,
value lists and every tool's introspection (psql's ``\\d``) read the public data there, as a table, and
never the upstream. A script per table; its digest covers the rows, so a changed table is copied again."""

from __future__ import annotations

from parser.model.public import PublicTable
from parser.model.schema import Catalog
from pgcore.identifiers import quote_ident

ROWS_PER_INSERT = 1000


def _literal(v: str | None) -> str:
    return "NULL" if v is None else "'" + v.replace("'", "''") + "'"


def public_script(t: PublicTable, role: str) -> str:
    """DDL, rows and the reader's grants of one public table's copy (one round trip)."""
    name = f"{quote_ident(t.schema)}.{quote_ident(t.name)}"
    cols = [f"{quote_ident(c.name)} {c.type}" for c in t.columns]
    cols += [f"UNIQUE ({quote_ident(c)})" for c in sorted(t.unique)]
    stmts = [f"CREATE SCHEMA IF NOT EXISTS {quote_ident(t.schema)}", f"DROP TABLE IF EXISTS {name}",
             # Statistics fixed at copy time: autovacuum's later analyze would move pg_class figures the
             # reader sees at a moment nothing the analysts did explains (the catalog audit's rule).
             f"CREATE TABLE {name} ({', '.join(cols)}) WITH (autovacuum_enabled = false)"]
    for i in range(0, len(t.rows), ROWS_PER_INSERT):
        values = ", ".join("(" + ", ".join(_literal(v) for v in row) + ")" for row in t.rows[i:i + ROWS_PER_INSERT])
        stmts.append(f"INSERT INTO {name} VALUES {values}")
    stmts.append(f"ANALYZE {name}")
    if t.description:
        stmts.append(f"COMMENT ON TABLE {name} IS {_literal(t.description)}")
    stmts += [f"GRANT USAGE ON SCHEMA {quote_ident(t.schema)} TO {quote_ident(role)}",
              f"GRANT SELECT ON {name} TO {quote_ident(role)}"]
    return ";\n".join(stmts)


def public_scripts(catalog: Catalog, role: str) -> dict[str, str]:
    """Per public table that was read (keyed by its quoted name), the script that copies it."""
    return {f"{quote_ident(t.schema)}.{quote_ident(t.name)}": public_script(t, role)
            for t in catalog.public if t.loaded and t.problem is None and t.columns}
