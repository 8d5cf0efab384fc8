"""Exact answers for the engine, injected: pushed-down SQL on the upstream database, or numpy histograms.

The engine never reads rows: it asks for one row of aggregates (``parser.pushdown.sql.answers_sql``) or a marginal
histogram (``parser.pushdown.sql.marginal_sql``). On a table the upstream partitions over foreign partitions (a
postgres_fdw coordinator) the SQL also groups by the partition key, so each shard computes its partial
aggregate and only those cross the network. A table with a privacy unit is read with each unit's rows
bounded to k. ``bounding = "statement"`` (the default): among the rows the statement reads (its row
filter, ``parser.pushdown.rowfilter.bounding_filter``, then the window, ``parser.pushdown.bounding.statement_rows``), or, for a
statement reading every row, from the epoch's materialisation (the same rows); ``"epoch"``: always from
the epoch's materialisation (``lapras.bounded``) once the engine has told the source its epoch
(``new_epoch``), else through the window over all rows (``"live"``: always that window). The matrix
mechanism's release reads each marginal through ``release_table`` (under ``"statement"``: each unit's k rows
among the cells P reads in it), per-group bounds come from ``group_bounds`` (docs/bounding.md).
"""

from __future__ import annotations

import functools
import math
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import Any, Protocol, TypeVar

import numpy as np
import psycopg

from lapras.bounded import BoundedTables
from lapras.factored import answers_from_marginal
from lapras.read_guard import TIMEOUT_MESSAGE, ReadGuard, current_guard
from parser.model.linear import LinearQuery, value_weights
from parser.model.schema import TableSchema
from parser.pushdown.bounding import GroupAxis, statement_groups, statement_rows, sum_factor
from parser.pushdown.rowfilter import bounding_filter, cells_filter
from parser.pushdown.sql import (
    EXACT_SESSION_SQL,
    answers_sql_batches,
    derived_index,
    derived_marginal_sql,
    marginal_sql,
)

# Statements with at least this many queries, or writing at least this many cell ranges in all (and one
# per that many cells of the marginal, which is read back whole), are answered from their union marginal
# when it is small.
MARGINAL_MIN_QUERIES = 32
MARGINAL_MIN_RANGES = 64
MARGINAL_MAX_CELLS = 1 << 21
BOUNDING_MODES = ("statement", "epoch", "live")
"""``[lapras] bounding``: where a privacy-unit table's k rows per unit are chosen (docs/bounding.md)."""
_T = TypeVar("_T")
_F = TypeVar("_F", bound=Callable[..., Any])


def _guarded(method: _F) -> _F:
    """A public read of ``PostgresExactSource`` under the statement's ``ReadGuard`` (``_reading``)."""
    @functools.wraps(method)
    def wrapper(self: PostgresExactSource, *args: Any, **kwargs: Any) -> Any:
        with self._reading():
            return method(self, *args, **kwargs)
    return wrapper  # type: ignore[return-value]


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

    def __init__(self, conninfo: str, bounding: str = "statement") -> None:
        if bounding not in BOUNDING_MODES:
            raise ValueError(f"bounding must be one of {', '.join(BOUNDING_MODES)}, got {bounding!r}")
        self._conninfo = conninfo
        self._local = threading.local()
        self._psycopg = psycopg
        self._partition_keys: dict[tuple[str, str], str | None] = {}
        self._keys_lock = threading.Lock()
        # Privacy-unit tables: each epoch's bounded rows materialised once (lapras.bounded), read by every
        # exact answer of the epoch ("statement": by those reading every row; the others run the window
        # over the rows they read); "live" (or before any epoch is set) runs the window per statement.
        self.bounding = bounding
        self.bounded = BoundedTables()
        self._epoch: int | None = None

    def new_epoch(self, epoch_id: int) -> None:
        """The epoch whose materialised bounded rows exact answers read from now on (engine adoption)."""
        self._epoch = int(epoch_id)

    @contextmanager
    def reading_live(self) -> Iterator[None]:
        """Within this block this thread reads privacy-unit tables through the window: the MM release of
        an epoch not yet begun is measured before its id, hence its materialisation, exists."""
        self._local.live = True
        try:
            yield
        finally:
            self._local.live = False

    @_guarded
    def bounded_table(self, table: TableSchema, epoch_id: int | None = None) -> TableSchema:
        """``table`` as exact answers read it in ``epoch_id`` (default: the current epoch): over the epoch's
        materialised bounded rows (built now if nobody did), or ``table`` itself (no privacy unit, bounding
        ``live``, no epoch yet, or an epoch behind the newest materialised: the window then)."""
        epoch = self._epoch if epoch_id is None else int(epoch_id)
        if (table.privacy_unit is None or table.derived is not None or table.rows_from is not None
                or self.bounding == "live" or epoch is None or getattr(self._local, "live", False)):
            return table
        ref = self.bounded.ref(self._conn(), table, epoch)
        return table if ref is None else replace(table, rows_from=ref)

    def statement_table(self, table: TableSchema, queries: Sequence[LinearQuery]) -> TableSchema:
        """``table`` as the exact answers of a statement with these ``queries`` read it: with
        ``bounding = "statement"`` and a privacy unit, each unit's rows among those some query reads
        (``bounding_filter``) bounded to k, and per group where ``group_bounds`` says so (``rows_from`` is
        then that subquery); else ``table`` (a statement reading every row with no per-group bounds reads
        the epoch's materialisation, the same rows)."""
        if (self.bounding != "statement" or table.privacy_unit is None or table.derived is not None
                or table.rows_from is not None):
            return table
        where = bounding_filter(table, queries)
        groups = self.group_bounds(table, queries)
        if where is None and groups is None:
            return table
        factors = {name: sum_factor(i) for i, (name, _) in enumerate(groups.clamps)} if groups is not None else {}
        return replace(table, rows_from=statement_rows(table, where, groups), sum_factors=factors or None)

    def group_bounds(self, table: TableSchema, queries: Sequence[LinearQuery]) -> GroupAxis | None:
        """The per-group bounds ``answers`` applies to a statement with these ``queries`` (the engine
        calibrates its sensitivity on them, ``group_bound_norm``), or None: each unit's k rows only."""
        if self.bounding != "statement" or table.rows_from is not None or table.derived is not None:
            return None
        # The engine asks once to calibrate a statement's noise and its exact answers ask again
        # (statement_table): the last statement's groups are kept per thread, so they are found once.
        last = getattr(self._local, "groups", None)
        if last is not None and last[0] is table and _same_queries(last[1], queries):
            return last[2]
        groups = statement_groups(table, queries)
        self._local.groups = (table, tuple(queries), groups)
        return groups

    def release_table(self, table: TableSchema, attrs: Sequence[str], cells: np.ndarray,
                      axis: GroupAxis | None = None) -> tuple[TableSchema, np.ndarray | None]:
        """``table`` as a release's histogram over the marginal ``attrs`` reads it, and the cells it holds
        rows of: with ``bounding = "statement"`` and a privacy unit, each unit's rows among ``cells`` (the
        cells the release's queries read, ``lapras.matrix_mechanism.workload_cells``) bounded to k, or with
        ``axis`` per group as its GROUP BY statement reads them (``statement_rows``); else
        ``table`` and None (every cell, each unit's rows bounded over all rows, as every fresh answer is).
        When the cells are more than ``MAX_BOUNDING_BOXES`` boxes, or all of them, the histogram bounds each
        unit over all rows and says so: every cell (then only statements reading every cell of the
        marginal are estimated from it, ``MMRelease.estimate``)."""
        per_group = (self.bounding == "statement" and table.privacy_unit is not None and table.derived is None
                     and table.rows_from is None)
        where = cells_filter(table, attrs, cells) if per_group else None
        if where is None:
            # A group read per group is charged its per-group bound: it must read exactly its own cells so.
            if axis is not None:
                raise RuntimeError(f"release group over {tuple(attrs)} is bounded per group but not read so")
            return (table, None) if not per_group else (table, np.ones(np.shape(cells), dtype=bool))
        return replace(table, rows_from=statement_rows(table, where, axis)), np.asarray(cells, dtype=bool)

    def prepare(self, tables: Sequence[TableSchema]) -> None:
        """Materialise the current epoch's bounded rows of ``tables`` ahead of their first statement (the
        epoch preparer's thread, off the serving path)."""
        for t in tables:
            self.bounded_table(t)

    def _read(self, table: TableSchema, run: Callable[[TableSchema], _T]) -> _T:
        """``run`` over the table as this epoch reads it; if its materialisation was dropped meanwhile (a
        newer epoch began elsewhere), once more through the window."""
        read = self.bounded_table(table)
        if read is table:
            return run(table)
        try:
            return run(read)
        except self._psycopg.errors.UndefinedTable:
            if self._epoch is not None:
                self.bounded.forget(table, self._epoch)
            return run(table)

    @contextmanager
    def _reading(self) -> Iterator[None]:
        """This thread's upstream reads inside, under the guard of the statement it reads for (outermost
        call only; none: the epoch preparer's, whatif's). Each query then runs with ``statement_timeout``
        at most the statement's time left and is cancelled when the client stops waiting (a timed-out or
        cancelled statement must not hold a worker thread and an upstream backend). A query the upstream
        cancelled raises ``StatementInterrupted`` (57014), and a connection left inside a transaction by it
        is closed (the next read opens a clean one). Only armed reads are guarded (``read_guard.armed_reads``:
        the answerer's, which charges a read stopped after it began)."""
        guard = current_guard()
        local = self._local
        if getattr(local, "guard", None) is not None:
            yield  # inside a guarded read of this thread already
            return
        if guard is None:
            if getattr(local, "timeout_set", False):
                self._conn().execute("RESET statement_timeout")
                local.timeout_set = False
            yield
            return
        guard.check()
        conn = self._conn()
        ms = guard.timeout_ms()
        if ms is not None:
            conn.execute(f"SET statement_timeout = {ms}")
            local.timeout_set = True
        local.guard = guard
        try:
            with guard.running(conn):
                yield
        except self._psycopg.errors.QueryCanceled as exc:
            self._drop_if_unclean(conn)
            if not guard.cancelled and TIMEOUT_MESSAGE not in str(exc):
                raise  # cancelled by someone else (an operator's pg_cancel_backend): as before
            raise guard.interrupted() from None
        except self._psycopg.Error:
            self._drop_if_unclean(conn)
            raise
        finally:
            local.guard = None

    def _drop_if_unclean(self, conn: Any) -> None:
        """Close ``conn`` when an error left it anywhere but idle outside a transaction."""
        if not conn.closed and conn.info.transaction_status != self._psycopg.pq.TransactionStatus.IDLE:
            conn.close()

    def _execute(self, sql: str, params: Any = None) -> Any:
        """``sql`` on this thread's connection; none starts once the statement's guard is cancelled."""
        guard: ReadGuard | None = getattr(self._local, "guard", None)
        if guard is not None:
            guard.check()
        return self._conn().execute(sql, params)

    def _conn(self) -> Any:
        c = getattr(self._local, "conn", None)
        if c is None or c.closed:
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

    @_guarded
    def partition_key(self, table: TableSchema) -> str | None:
        """The upstream's partition key of ``table`` as SQL, when it has foreign partitions (else None).

        Read once from the catalog (a public property of the schema, never of the data)."""
        key = (table.schema, table.name)
        with self._keys_lock:
            if key in self._partition_keys:
                return self._partition_keys[key]
        row = self._execute(
            "SELECT pg_get_partkeydef(c.oid) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = %s AND c.relname = %s AND c.relkind = 'p' AND EXISTS ("
            "  SELECT 1 FROM pg_inherits i JOIN pg_class p ON p.oid = i.inhrelid"
            "  WHERE i.inhparent = c.oid AND p.relkind = 'f')", key).fetchone()
        found = partition_key_sql(row[0]) if row and row[0] else None
        with self._keys_lock:
            self._partition_keys[key] = found
        return found

    @_guarded
    def answers(self, table: TableSchema, queries: Sequence[LinearQuery]) -> np.ndarray:
        if any(q.source is not None for q in queries):
            return derived_answers(self, table, queries)
        table = self.statement_table(table, queries)
        if not any(q.measure for q in queries) and table.sum_factors is None:
            # (A SUM over a measure adds each row's own value, a clamped SUM its row's share of its unit's
            # group sum: a count histogram answers neither.)
            attrs = tuple(a.name for a in table.attributes if any(a.name in q.marginal for q in queries))
            cells = math.prod(table.shape(attrs))
            if _one_scan_pays(queries, cells):
                # Many queries (a wide GROUP BY), or groups that are many scattered cells (extract(hour)
                # over hourly cells: 365 ranges per group), over a small union marginal: one pushed-down
                # GROUP BY scan computing each row's cell once, and sums over cells in numpy, beat one
                # aggregate per query testing every range of every query on every row.
                return answers_from_marginal(table, queries, self.marginal(table, attrs))
        by_cells = self._answers_by_cells(table, queries)
        if by_cells is not None:
            return by_cells
        return self._read(table, lambda t: self._answers(t, queries))

    def _answers_by_cells(self, table: TableSchema, queries: Sequence[LinearQuery]) -> np.ndarray | None:
        """Exact answers from one pushed-down GROUP BY over the cells the queries' predicates read, with
        per cell the row count and each summed attribute's sum (``marginal_sql``'s ``sums``), when their
        predicates are many or scattered over few cells: ``SUM(amount)`` by ``extract(hour FROM ts)`` is 24
        queries of 365 ranges each, which as per-query CASEs test 8,760 ranges on every row (a minute on
        100,000 rows) and here one cell expression a row. The answers are the per-query SQL's (same row
        terms, same bounded rows); None when the form does not apply."""
        if table.sum_factors is not None or any(q.weights is not None or q.expr is not None for q in queries):
            return None  # per-cell weights of an expression, or clamped group sums: the per-query SQL
        forms, families = zip(*(_count_form(table, q) for q in queries), strict=True)
        read = [q.marginal for q in forms]
        attrs = tuple(a.name for a in table.attributes if any(a.name in r for r in read))
        cells = math.prod(table.shape(attrs))
        if not _one_scan_pays(queries, cells):
            return None
        kinds = tuple(dict.fromkeys(f for f in families if f is not None))
        sums = tuple(a for k, a in kinds if k == "sum")
        counts = tuple(a for k, a in kinds if k == "count")

        def run(t: TableSchema) -> list[Any]:
            key = None if t.rows_from is not None else self.partition_key(t)
            return self._execute(marginal_sql(t, attrs, key, sums, counts)).fetchall()

        hists = np.zeros((1 + len(kinds), *table.shape(attrs)))
        index = [table.attribute(a).domain.index_of for a in attrs]  # type: ignore[union-attr]
        for row in self._read(table, run):
            idx = tuple(f(v) for f, v in zip(index, row[:len(attrs)], strict=True))
            if None not in idx:
                hists[(slice(None), *idx)] += np.asarray(row[len(attrs):], dtype=np.float64)
        # Each query as a count over the cells its predicate reads, on the histogram of its family: rows,
        # an attribute's sums or its non-NULL cells (the columns in marginal_sql's order: sums, counts).
        order = [None, *(("sum", a) for a in sums), *(("count", a) for a in counts)]
        out = np.zeros(len(queries))
        for h, family in enumerate(order):
            members = [i for i, f in enumerate(families) if f == family]
            if members:
                used = tuple(a for a in attrs if any(a in read[i] for i in members))
                out[members] = answers_from_marginal(table, [forms[i] for i in members],
                                                     sub_marginal(hists[h], attrs, used))
        return out

    def _answers(self, table: TableSchema, queries: Sequence[LinearQuery]) -> np.ndarray:
        # A materialised table is local to the upstream's coordinator: no partial sums per shard.
        key = None if table.rows_from is not None else self.partition_key(table)
        out: list[float] = []
        for sql in answers_sql_batches(table, list(queries), partial_by=key):
            row = self._execute(sql).fetchone()
            out.extend(float(v) for v in row)
        return np.asarray(out, dtype=np.float64)

    @_guarded
    def key_counts(self, sql: str) -> tuple[list[tuple[object, ...]], np.ndarray]:
        """Rows of a per-key count statement (keys..., count): the keys and their counts, grouped by
        PostgreSQL (partition selection's input; never leaves the engine)."""
        rows = self._execute(sql).fetchall()
        return [tuple(r[:-1]) for r in rows], np.asarray([int(r[-1]) for r in rows], dtype=np.int64)

    @_guarded
    def marginal(self, table: TableSchema, attrs: Sequence[str]) -> np.ndarray:
        attrs = tuple(attrs)
        hist = np.zeros(table.shape(attrs))
        if table.derived is not None:
            # Units (or values) present per group: counted across the whole table, never per shard.
            rows = self._execute(derived_marginal_sql(table, attrs)).fetchall()
            index = [derived_index(table, a) for a in attrs]
        else:
            def read(t: TableSchema) -> list[Any]:
                key = None if t.rows_from is not None else self.partition_key(t)
                return self._execute(marginal_sql(t, attrs, key)).fetchall()

            rows = self._read(table, read)
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


def _one_scan_pays(queries: Sequence[LinearQuery], cells: int) -> bool:
    """Whether one GROUP BY scan over a marginal of ``cells`` cells beats per-query aggregates: the marginal
    is small and the queries many (a wide GROUP BY) or scattered over many ranges (extract(hour) over hourly
    cells)."""
    return cells <= MARGINAL_MAX_CELLS and (len(queries) >= MARGINAL_MIN_QUERIES or statement_ranges(
        queries) >= max(MARGINAL_MIN_RANGES, cells // MARGINAL_MIN_RANGES))


def _count_form(table: TableSchema, q: LinearQuery) -> tuple[LinearQuery, tuple[str, str] | None]:
    """``q`` as a count over the cells its predicate reads, and the per-cell histogram its answer is read
    from: None (rows), ("sum", its attribute) or ("count", an attribute whose non-NULL cells it counts).

    A SUM's own attribute is left out of a box that keeps all its non-zero cells (the binder drops the
    cells adding 0, ``duration_s >= 1``): on the per-cell sums they add nothing. ``COUNT(col)`` of a
    nullable column (every box: all of col's non-NULL cells) is read from col's non-NULL counts per cell.
    Either way the cells read are then the other columns' only. A measure's box is kept whole (its cells
    hold unequal values)."""
    family: tuple[str, str] | None = None
    boxes = q.boxes
    if q.value is not None:
        family = ("sum", q.value)
        if not q.measure:
            # (Disjoint boxes stay disjoint but on cells adding 0, where the per-cell sums are 0.)
            nonzero = value_weights(table, q.value, None) != 0
            boxes = tuple(tuple(e for e in box if e[0] != q.value or np.any(nonzero & ~_covered(nonzero.size, e[1])))
                          for box in boxes)
    elif boxes:
        for name, rs in boxes[0]:
            d = table.attribute(name).domain  # type: ignore[union-attr]
            whole = ((0, d.base_size - 1),)
            if d.null_index is not None and rs == whole and all((name, whole) in box for box in boxes):
                family = ("count", name)
                boxes = tuple(tuple(e for e in box if e != (name, whole)) for box in boxes)
                break
    read = {name for box in boxes for name, _ in box}
    return replace(q, marginal=tuple(a for a in q.marginal if a in read), boxes=boxes, value=None,
                   measure=False), family


def _covered(size: int, ranges: Sequence[tuple[int, int]]) -> np.ndarray:
    out = np.zeros(size, dtype=bool)
    for lo, hi in ranges:
        out[lo:hi + 1] = True
    return out


def _same_queries(a: Sequence[LinearQuery], b: Sequence[LinearQuery]) -> bool:
    """The same statement's queries (their noise scale aside: ``sensitivity`` is not compared)."""
    return len(a) == len(b) and all(x == y and x.source is y.source for x, y in zip(a, b, strict=True))


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
