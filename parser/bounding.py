"""Per-unit contribution bounding in SQL: each privacy unit's rows cut to k, the same k in every process.

``bounded_rows_sql`` is the one definition of the rows kept (a ``row_number()`` window per unit over a
seeded hash of the row's text); ``table_ref`` is how every exact answer reads a table: its rows as they
are (no privacy unit), the window over them (``[lapras] bounding = "live"``), or the epoch's
materialisation of that window (``TableSchema.rows_from``, written by ``lapras.bounded``), which holds
exactly the rows the window keeps. With ``bounding = "statement"`` the window runs over the rows a
statement reads (``where``: its row filter, a public predicate) so a unit's k rows are among those rows
(docs/bounding.md); ``statement_rows`` is that FROM item.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from .identifiers import quote_ident
from .schema import TableSchema

__all__ = ["bounded_rows_sql", "bounding_seed", "statement_rows", "table_ref"]


def bounding_seed(table: TableSchema) -> int:
    """A fixed 63-bit seed per table for the contribution bound's row order (public; not a secret: the
    guarantee holds for any choice that depends only on the unit's own rows)."""
    h = hashlib.blake2b(f"lapras-bound|{table.schema}|{table.name}".encode(), digest_size=8).digest()
    return int.from_bytes(h, "big") >> 1


def bounded_rows_sql(table: TableSchema, columns: Sequence[str] | None = None, where: str | None = None) -> str:
    """``SELECT`` the rows of a table with a privacy unit that every exact answer counts: per unit, the
    ``max_rows_per_unit`` rows with the smallest seeded hash of the whole row's text (ties: the text).

    The choice depends on that unit's own rows only (a stable transformation: one unit changes at most its
    k kept rows), not on physical order, and every process and restart keeps the same rows. The row text
    is hashed under the session settings ``parser.sql.EXACT_SESSION_SQL`` fixes, so it reads the same
    everywhere. It is computed once per row: ``OFFSET 0`` keeps the inner query from being merged into the
    window's, where the planner would evaluate ``r::text`` once for the hash and again as the tie-break
    (measured: most of the window's cost). ``columns``: the stored columns to return (default: every
    column, plus ``lapras_row`` and ``lapras_unit_row``). ``where``: a condition on the table's columns
    applied before the window (a statement's row filter): the k rows are then each unit's among the rows
    it keeps, still chosen by the same hash order (over the whole row's text), so with no ``where`` they
    are the epoch materialisation's rows."""
    assert table.privacy_unit is not None
    ref = f"{quote_ident(table.schema)}.{quote_ident(table.name)}"
    unit = quote_ident(table.privacy_unit)
    cond = f" AND ({where})" if where else ""
    rows = f"SELECT r.*, r::text AS lapras_row FROM {ref} AS r WHERE r.{unit} IS NOT NULL{cond} OFFSET 0"
    ranked = (f"SELECT t.*, row_number() OVER (PARTITION BY t.{unit} ORDER BY "
              f"hashtextextended(t.lapras_row, {bounding_seed(table)}), t.lapras_row) AS lapras_unit_row "
              f"FROM ({rows}) AS t")
    cols = "u.*" if columns is None else ", ".join(f"u.{quote_ident(c)}" for c in columns)
    return f"SELECT {cols} FROM ({ranked}) AS u WHERE u.lapras_unit_row <= {int(table.max_rows_per_unit)}"


def table_ref(table: TableSchema) -> str:
    """The table as every exact answer reads it (a FROM item): with a privacy unit, each unit's rows
    bounded to k, from the epoch's materialisation when ``table.rows_from`` names one, else through the
    window of ``bounded_rows_sql``."""
    if table.privacy_unit is None:
        return f"{quote_ident(table.schema)}.{quote_ident(table.name)}"
    if table.rows_from is not None:
        return f"{table.rows_from} AS {quote_ident(table.name)}"
    return f"({bounded_rows_sql(table)}) AS {quote_ident(table.name)}"


def statement_rows(table: TableSchema, where: str) -> str:
    """The ``rows_from`` of ``table`` as a statement with row filter ``where`` reads it under
    ``bounding = "statement"``: each unit's rows among those ``where`` keeps, bounded to k (a subquery)."""
    return f"({bounded_rows_sql(table, where=where)})"
