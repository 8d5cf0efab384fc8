"""Public tables (dimension tables the DBA declares public): their columns, keys and rows as read upstream.

A public table holds nothing private (products, stores, a calendar): the proxy reads it whole from the
upstream (``proxy/ops/public_tables.py``), serves it as is through the catalog database, and lets a
protected fact table join it on a unique key (``parser/analysis/joins.py``): each dimension column then is
a public per-row function of the fact's key column. Values are kept as PostgreSQL's text output, with the
column's type name (``format_type``), so a value compares with a fact column's declared value by text.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pgcore.identifiers import qualified


@dataclass(frozen=True)
class PublicColumn:
    name: str
    type: str
    """PostgreSQL's type name (``format_type``): ``integer``, ``text``, ``numeric(10,2)``, ``date``..."""


@dataclass(frozen=True)
class PublicTable:
    """A table declared public in config.toml (``[public_tables.NAME]``) and, once read, its contents."""

    name: str
    schema: str = "public"
    description: str = ""
    columns: tuple[PublicColumn, ...] = ()
    unique: frozenset[str] = frozenset()
    """Columns with a one-column primary key or unique constraint upstream: the keys a fact may join on."""
    rows: tuple[tuple[str | None, ...], ...] = field(default=(), repr=False)
    """Every row, each value as PostgreSQL's text output (None for NULL), in the columns' order."""
    problem: str | None = None
    """Why the table cannot be read or joined (not a base table, not found...); None once read."""
    loaded: bool = False
    """False for the declaration alone (config.toml), before the proxy read it upstream."""

    @property
    def qualified_name(self) -> str:
        return qualified(self.schema, self.name)

    def column(self, name: str) -> PublicColumn | None:
        return next((c for c in self.columns if c.name == name), None)

    def index(self, name: str) -> int:
        return next(i for i, c in enumerate(self.columns) if c.name == name)
