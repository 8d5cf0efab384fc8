"""Exact answers for the engine, injected: pushed-down SQL on the upstream database, or numpy histograms.

The engine never reads rows: it asks for one row of aggregates (``parser.sql.answers_sql``) or a marginal
histogram (``parser.sql.marginal_sql``). On a table the upstream partitions over foreign partitions (a
postgres_fdw coordinator) the SQL also groups by the partition key, so each shard computes its partial
aggregate and only those cross the network.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import numpy as np

from lapras.factored import answers_from_marginal
from parser.linear import LinearQuery
from parser.schema import TableSchema

# Statements with at least this many queries, or writing at least this many cell ranges in all (and one
# per that many cells of the marginal, which is read back whole), are answered from their union marginal
# when it is small.
MARGINAL_MIN_QUERIES = 32
MARGINAL_MIN_RANGES = 64
MARGINAL_MAX_CELLS = 1 << 21


def statement_ranges(queries: Sequence[LinearQuery]) -> int:
    """How many cell ranges the queries' predicates list in all: each one a condition per-query SQL
    writes (and PostgreSQL evaluates on every row it reads)."""
    return sum(len(rs) for q in queries for box in q.boxes for _, rs in box)


def sub_marginal(hist: np.ndarray, have: Sequence[str], attrs: Sequence[str]) -> np.ndarray:
    """The marginal over ``attrs`` (axes in that order) of a histogram over ``have``, a superset of them:
    the other axes summed out (a histogram kept for one marginal answers every marginal inside it)."""
    want = set(attrs)
    drop = tuple(i for i, a in enumerate(have) if a not in want)
    m = hist.sum(axis=drop) if drop else hist
    kept = [a for a in have if a in want]
    return np.transpose(m, [kept.index(a) for a in attrs])


def close_source(source: object) -> None:
    """Close an exact source that holds a connection (those without one have no ``close``)."""
    close = getattr(source, "close", None)
    if close is not None:
        close()


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
        self._partition_keys: dict[tuple[str, str], str | None] = {}
        self._keys_lock = threading.Lock()

    def _conn(self) -> Any:
        c = getattr(self._local, "conn", None)
        if c is None or c.closed:
            from parser.sql import EXACT_SESSION_SQL

            c = self._psycopg.connect(self._conninfo, autocommit=True)
            for stmt in EXACT_SESSION_SQL:
                c.execute(stmt)
            try:
                # Lets the coordinator push the per-partition aggregates down; absent on non-PostgreSQL engines.
                c.execute("SET enable_partitionwise_aggregate = on")
            except self._psycopg.Error:
                pass
            self._local.conn = c
        return c

    def partition_key(self, table: TableSchema) -> str | None:
        """The upstream's partition key of ``table`` as SQL, when it has foreign partitions (else None).

        Read once from the catalog (a public property of the schema, never of the data)."""
        key = (table.schema, table.name)
        with self._keys_lock:
            if key in self._partition_keys:
                return self._partition_keys[key]
        row = self._conn().execute(
            "SELECT pg_get_partkeydef(c.oid) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = %s AND c.relname = %s AND c.relkind = 'p' AND EXISTS ("
            "  SELECT 1 FROM pg_inherits i JOIN pg_class p ON p.oid = i.inhrelid"
            "  WHERE i.inhparent = c.oid AND p.relkind = 'f')", key).fetchone()
        found = partition_key_sql(row[0]) if row and row[0] else None
        with self._keys_lock:
            self._partition_keys[key] = found
        return found

    def answers(self, table: TableSchema, queries: Sequence[LinearQuery]) -> np.ndarray:
        from parser.sql import answers_sql_batches

        if any(q.source is not None for q in queries):
            return derived_answers(self, table, queries)
        if not any(q.measure for q in queries):
            # (A SUM over a measure adds each row's own value: a count histogram cannot answer it.)
            attrs = tuple(a.name for a in table.attributes if any(a.name in q.marginal for q in queries))
            cells = math.prod(table.shape(attrs))
            if cells <= MARGINAL_MAX_CELLS and (len(queries) >= MARGINAL_MIN_QUERIES or statement_ranges(
                    queries) >= max(MARGINAL_MIN_RANGES, cells // MARGINAL_MIN_RANGES)):
                # Many queries (a wide GROUP BY), or groups that are many scattered cells (extract(hour)
                # over hourly cells: 365 ranges per group), over a small union marginal: one pushed-down
                # GROUP BY scan computing each row's cell once, and sums over cells in numpy, beat one
                # aggregate per query testing every range of every query on every row.
                return answers_from_marginal(table, queries, self.marginal(table, attrs))
        out: list[float] = []
        for sql in answers_sql_batches(table, list(queries), partial_by=self.partition_key(table)):
            row = self._conn().execute(sql).fetchone()
            out.extend(float(v) for v in row)
        return np.asarray(out, dtype=np.float64)

    def key_counts(self, sql: str) -> tuple[list[tuple[object, ...]], np.ndarray]:
        """Rows of a per-key count statement (keys..., count): the keys and their counts, grouped by
        PostgreSQL (partition selection's input; never leaves the engine)."""
        rows = self._conn().execute(sql).fetchall()
        return [tuple(r[:-1]) for r in rows], np.asarray([int(r[-1]) for r in rows], dtype=np.int64)

    def marginal(self, table: TableSchema, attrs: Sequence[str]) -> np.ndarray:
        from parser.sql import derived_index, derived_marginal_sql, marginal_sql

        attrs = tuple(attrs)
        hist = np.zeros(table.shape(attrs))
        if table.derived is not None:
            # Units (or values) present per group: counted across the whole table, never per shard.
            rows = self._conn().execute(derived_marginal_sql(table, attrs)).fetchall()
            index = [derived_index(table, a) for a in attrs]
        else:
            rows = self._conn().execute(marginal_sql(table, attrs, self.partition_key(table))).fetchall()
            index = [table.attribute(a).domain.index_of for a in attrs]  # type: ignore[union-attr]
        for row in rows:
            idx = tuple(f(v) for f, v in zip(index, row[:-1], strict=True))
            if None not in idx:
                hist[idx] += row[-1]
        return hist

    def close(self) -> None:
        c = getattr(self._local, "conn", None)
        if c is not None:
            c.close()


def derived_answers(source: ExactSource, table: TableSchema, queries: Sequence[LinearQuery]) -> np.ndarray:
    """Exact answers of a statement with queries over derived tables (``LinearQuery.source``: units or
    values present per group): those from their derived histograms read through ``source.marginal``
    (one aggregate per derived marginal), the rest through ``source.answers``."""
    out = np.zeros(len(queries))
    plain = [i for i, q in enumerate(queries) if q.source is None]
    if plain:
        out[plain] = source.answers(table, [queries[i] for i in plain])
    hists: dict[tuple[str, tuple[str, ...]], np.ndarray] = {}
    for i, q in enumerate(queries):
        if q.source is None or q.is_zero:
            continue
        key = (q.source.name, tuple(q.marginal))
        if key not in hists:
            hists[key] = source.marginal(q.source, q.marginal)
        out[i] = q.answer(q.source, hists[key])
    return out


def partition_key_sql(definition: str) -> str | None:
    """``pg_get_partkeydef`` output (``LIST ((expr))``, ``HASH (a, b)``) -> the key list for a GROUP BY.

    Keys naming a collation or operator class are left alone (None): grouping by them would not match."""
    method, _, rest = definition.partition(" ")
    rest = rest.strip()
    if method not in ("LIST", "HASH", "RANGE") or not (rest.startswith("(") and rest.endswith(")")):
        return None
    inner = rest[1:-1].strip()
    if " COLLATE " in inner.upper() or "_ops" in inner:
        return None
    return inner or None


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
        if any(q.source is not None for q in queries):
            raise ValueError("COUNT(DISTINCT) needs the rows: a histogram of counts does not determine it")
        return np.array([q.answer(table, self.marginal(table, q.marginal)) for q in queries], dtype=np.float64)
