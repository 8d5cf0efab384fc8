"""Per-epoch snapshot of exact marginal histograms: ``[lapras] snapshot = "epoch"``.

A fresh query needs its exact answer. With ``live`` (the default) every one is an aggregate pushed down to
the database (a table scan). With ``epoch`` the first query over a marginal in an epoch reads that
marginal's histogram once (one ``GROUP BY`` pushed down, only cell counts leave the database) and keeps it
for the rest of the epoch: later queries over the same marginal, or over a marginal it contains, cost a
dot product. Answers are then exact *as of the marginal's first use in the epoch*; rows written later reach
answers at the next epoch. Snapshots live in the proxy's memory only (never on disk, never released) and
are bounded by ``max_cells`` (least recently used first out); a marginal larger than that is answered live.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from collections.abc import Sequence

import numpy as np

from lapras.exact import ExactSource, close_source, sub_marginal
from parser.bind.partition import has_selected_keys
from parser.model.linear import LinearQuery
from parser.model.schema import TableSchema, listed_values

# 16M cells = 128 MB of float64: a few hundred 2- and 3-way marginals of a typical table.
DEFAULT_MAX_CELLS = 1 << 24


class SnapshotExactSource:
    """An :class:`ExactSource` answering from per-epoch marginal histograms read through ``inner``."""

    def __init__(self, inner: ExactSource, max_cells: int = DEFAULT_MAX_CELLS) -> None:
        self.inner = inner
        self.max_cells = max_cells
        self._lock = threading.Lock()
        self._hists: OrderedDict[tuple[str, tuple[str, ...]], np.ndarray] = OrderedDict()
        self._cells = 0
        self._epoch: int | None = None
        self._lists: dict[str, tuple[tuple[str, ...], ...]] = {}  # each table's value lists its histograms use
        self.scans = 0
        self.hits = 0

    def new_epoch(self, epoch_id: int) -> None:
        """Forget every histogram when the epoch changes: the next epoch sees the data as of then."""
        inner = getattr(self.inner, "new_epoch", None)
        if inner is not None:
            inner(epoch_id)  # the bounded rows the inner source reads are the epoch's too
        with self._lock:
            if epoch_id != self._epoch:
                self._epoch = epoch_id
                self._hists.clear()
                self._cells = 0

    def __getattr__(self, name: str) -> object:
        # The inner source's bounding hooks (prepare, reading_live, bounded_table, statement_table, release_table,
        # group_bounds) and mode (bounding), where it has them.
        if name in ("prepare", "reading_live", "bounded_table", "statement_table", "release_table", "group_bounds",
                    "bounding"):
            return getattr(self.inner, name)
        raise AttributeError(name)

    def marginal(self, table: TableSchema, attrs: Sequence[str]) -> np.ndarray:
        # The MM release is measured for an epoch about to begin: always live, never kept for this one.
        return self.inner.marginal(table, attrs)

    def key_counts(self, sql: str) -> tuple[list[tuple[object, ...]], np.ndarray]:
        # A selection is stored and replayed for the whole epoch: read once, live.
        return self.inner.key_counts(sql)  # type: ignore[attr-defined]

    def answers(self, table: TableSchema, queries: Sequence[LinearQuery]) -> np.ndarray:
        plain = [q for q in queries if q.source is None and not q.is_zero]
        bounded = getattr(self.inner, "statement_table", None)
        if plain and bounded is not None and bounded(table, plain) is not table:
            # Bounded among the rows this statement reads (bounding = "statement"): its data vector is its
            # own, not a marginal of the table's; answered live.
            return self.inner.answers(table, queries)
        out = np.zeros(len(queries))
        live: list[int] = []
        for i, q in enumerate(queries):
            if q.is_zero:
                continue
            if q.source is not None:
                live.append(i)  # a derived histogram (COUNT(DISTINCT)) is read live, as the release's are
                continue
            # A SUM over a measure adds each row's own value: no count histogram answers it.
            hist = None if q.measure else self._histogram(table, tuple(q.marginal))
            if hist is None:
                live.append(i)
            else:
                out[i] = q.answer(table, hist)
        if live:
            out[live] = self.inner.answers(table, [queries[i] for i in live])
        return out

    def _histogram(self, table: TableSchema, attrs: tuple[str, ...]) -> np.ndarray | None:
        """The marginal over ``attrs`` (axes in that order) from the snapshot, read once if absent."""
        if math.prod(table.shape(attrs)) > self.max_cells or has_selected_keys(table, attrs):
            return None  # too large, or over a selection's keys (another selection's cells differ): live
        lists = listed_values(table)
        with self._lock:
            epoch = self._epoch
            kept = self._lists.setdefault(table.name, lists)
            if kept != lists:
                # Another epoch's value lists (a statement in flight across the boundary, or the new
                # epoch after it): histograms of the other lists have other cells, so they go.
                self._drop(table.name)
                self._lists[table.name] = lists
            hit = self._find(table.name, attrs)
            if hit is not None:
                self.hits += 1
                return hit
        hist = np.asarray(self.inner.marginal(table, attrs), dtype=np.float64)
        with self._lock:
            self.scans += 1
            if epoch == self._epoch and self._lists.get(table.name) == lists:  # nothing changed meanwhile
                self._hists[(table.name, attrs)] = hist
                self._cells += hist.size
                while self._cells > self.max_cells and len(self._hists) > 1:
                    _, old = self._hists.popitem(last=False)
                    self._cells -= old.size
        return hist

    def _drop(self, table: str) -> None:
        for key in [k for k in self._hists if k[0] == table]:
            self._cells -= self._hists.pop(key).size

    def _find(self, table: str, attrs: tuple[str, ...]) -> np.ndarray | None:
        """A kept histogram over ``attrs`` or over a superset of them (summed down), smallest first."""
        exact = self._hists.get((table, attrs))
        if exact is not None:
            self._hists.move_to_end((table, attrs))
            return exact
        want = set(attrs)
        best: tuple[str, ...] | None = None
        for t, have in self._hists:
            if t == table and want <= set(have) and (best is None or self._hists[(t, have)].size
                                                     < self._hists[(t, best)].size):
                best = have
        if best is None:
            return None
        self._hists.move_to_end((table, best))
        return sub_marginal(self._hists[(table, best)], best, attrs)

    def close(self) -> None:
        close_source(self.inner)
