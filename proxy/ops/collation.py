"""The upstream database's text order (its default collation), read at start-up into the catalog, so the
planner orders text as PostgreSQL does (``parser.semantics.collation``): C / POSIX and the builtin provider's
collations are code point order and need nothing more; any other (a libc locale such as en_US.UTF-8, an
ICU locale) is asked of the database, which sorts the public strings the planner gives it (declared
values, literals of statements; never rows), each set once (cached)."""

from __future__ import annotations

import dataclasses
import logging
import threading

import psycopg

from parser.semantics.collation import C_LOCALE, CODE_POINT, CODE_POINT_NAMES, Collation

from ..config import Config

log = logging.getLogger(__name__)


class UpstreamSort:
    """Sorts strings under the database's default collation on one connection of its own (reopened after
    a failure); thread-safe."""

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self._conn: psycopg.Connection | None = None
        self._lock = threading.Lock()

    def __call__(self, values: list[str]) -> list[str]:
        with self._lock:
            try:
                if self._conn is None or self._conn.closed:
                    self._conn = psycopg.connect(self.dsn, autocommit=True, connect_timeout=10)
                row = self._conn.execute("SELECT array_agg(v ORDER BY v) FROM unnest(%s::text[]) AS v",
                                         (values,)).fetchone()
            except psycopg.Error:
                if self._conn is not None:
                    self._conn.close()
                self._conn = None
                raise
        return list(row[0] or []) if row is not None else []


def read_collation(dsn: str) -> Collation:
    """The database's default collation: code point order, or one the database is asked to sort by."""
    with psycopg.connect(dsn, autocommit=True, connect_timeout=10) as conn:
        row = conn.execute("SELECT datcollate, datctype, datlocprovider FROM pg_database "
                           "WHERE datname = current_database()").fetchone()
    collate, ctype, provider = (str(row[0]), str(row[1]), str(row[2])) if row is not None else ("C", "C", "c")
    ascii_case = provider == "c" and ctype in ("C", "POSIX")  # lower/upper change ASCII letters only
    if provider == "b" or (provider == "c" and collate in CODE_POINT_NAMES):
        return C_LOCALE if ascii_case else CODE_POINT
    name = collate if provider == "c" else f"icu:{collate}"
    log.info("text is ordered by the upstream database's collation %s (sorted by the database)", name)
    return Collation(name, UpstreamSort(dsn), ascii_case=ascii_case)


def attach_collation(cfg: Config, dsn: str) -> Config:
    """``cfg`` with its catalog ordering text as the upstream database does."""
    catalog = dataclasses.replace(cfg.catalog, collation=read_collation(dsn))
    return dataclasses.replace(cfg, catalog=catalog)
