"""Exact answers for the engine, injected: pushed-down SQL on the upstream database, or numpy histograms.

The engine never reads rows: it asks for one row of aggregates (``parser.sql.answers_sql``) or a marginal
histogram (``parser.sql.marginal_sql``).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import numpy as np

from parser.linear import LinearQuery
from parser.schema import TableSchema


class ExactSource(Protocol):
    def answers(self, table: TableSchema, queries: Sequence[LinearQuery]) -> np.ndarray:
        """Exact answers, one per query, in order."""
        ...

    def marginal(self, table: TableSchema, attrs: Sequence[str]) -> np.ndarray:
        """Dense histogram over ``attrs`` (axes in that order, each of its domain's size)."""
        ...


class PostgresExactSource:
    """Exact answers computed by the upstream PostgreSQL (aggregates only leave the database)."""

    def __init__(self, conninfo: str) -> None:
        import psycopg

        self._conninfo = conninfo
        self._local = threading.local()
        self._psycopg = psycopg

    def _conn(self) -> Any:
        c = getattr(self._local, "conn", None)
        if c is None or c.closed:
            c = self._psycopg.connect(self._conninfo, autocommit=True)
            self._local.conn = c
        return c

    def answers(self, table: TableSchema, queries: Sequence[LinearQuery]) -> np.ndarray:
        from parser.sql import answers_sql_batches

        out: list[float] = []
        for sql in answers_sql_batches(table, list(queries)):
            row = self._conn().execute(sql).fetchone()
            out.extend(float(v) for v in row)
        return np.asarray(out, dtype=np.float64)

    def marginal(self, table: TableSchema, attrs: Sequence[str]) -> np.ndarray:
        from parser.sql import marginal_sql

        attrs = tuple(attrs)
        hist = np.zeros(table.shape(attrs))
        rows = self._conn().execute(marginal_sql(table, attrs)).fetchall()
        domains = [table.attribute(a).domain for a in attrs]  # type: ignore[union-attr]
        for row in rows:
            idx = tuple(d.index_of(v) for d, v in zip(domains, row[:-1], strict=True))
            if None not in idx:
                hist[idx] += row[-1]
        return hist

    def close(self) -> None:
        c = getattr(self._local, "conn", None)
        if c is not None:
            c.close()


class HistogramExactSource:
    """Exact answers from full numpy histograms per table (tests, simulations, demos)."""

    def __init__(self, histograms: Mapping[str, tuple[Sequence[str], np.ndarray]]) -> None:
        self._h = {t: (tuple(a), np.asarray(h, dtype=np.float64)) for t, (a, h) in histograms.items()}

    def marginal(self, table: TableSchema, attrs: Sequence[str]) -> np.ndarray:
        names, full = self._h[table.name]
        drop = tuple(i for i, a in enumerate(names) if a not in attrs)
        m = full.sum(axis=drop) if drop else full
        kept = [a for a in names if a in attrs]
        return np.transpose(m, [kept.index(a) for a in attrs])

    def answers(self, table: TableSchema, queries: Sequence[LinearQuery]) -> np.ndarray:
        return np.array([q.answer(table, self.marginal(table, q.marginal)) for q in queries], dtype=np.float64)
