"""Exact answers for a what-if replay: one snapshot of the data shared by every simulated engine.

The replay asks for the same exact answers many times (each budget, with and without P, and once more to
measure errors). Marginal histograms are fetched once from the upstream (aggregate SQL, never rows) and
every linear query over a small enough marginal is answered from its histogram by a dot product; larger
ones, and SUMs over a measure (each row adds its own value, which no count histogram holds), go to the
upstream once per query. The data is taken as it is now for every day of the log.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np

from lapras.exact import ExactSource, close_source, sub_marginal
from parser.model.linear import LinearQuery
from parser.model.schema import Catalog, TableSchema


class SnapshotExactSource:
    """Caches ``inner``'s marginals and answers for the whole replay (single-threaded use)."""

    def __init__(self, inner: ExactSource, max_cells: int = 4_000_000) -> None:
        self.inner = inner
        self.max_cells = max_cells
        self._marginals: dict[tuple[str, tuple[str, ...]], np.ndarray] = {}
        self._answers: dict[str, float] = {}
        self.marginal_fetches = 0
        self.answer_fetches = 0

    def marginal(self, table: TableSchema, attrs: Sequence[str]) -> np.ndarray:
        key = (table.name, tuple(attrs))
        hist = self._marginals.get(key)
        if hist is None:
            # A sub-marginal of one already fetched is a sum over the other axes: no round trip.
            hist = self._from_cached(table, tuple(attrs))
            if hist is None:
                hist = np.asarray(self.inner.marginal(table, attrs), dtype=np.float64)
                self.marginal_fetches += 1
            self._marginals[key] = hist
        return hist

    def _from_cached(self, table: TableSchema, attrs: tuple[str, ...]) -> np.ndarray | None:
        want = set(attrs)
        for (name, have), hist in self._marginals.items():
            if name == table.name and want <= set(have):
                return sub_marginal(hist, have, attrs)
        return None

    def _from_histogram(self, table: TableSchema, q: LinearQuery) -> bool:
        return not q.measure and q.source is None and math.prod(table.shape(tuple(q.marginal))) <= self.max_cells

    def prefetch(self, catalog: Catalog, queries: Iterable[LinearQuery],
                 marginals: Iterable[tuple[str, tuple[str, ...]]] = ()) -> None:
        """Read ahead, in few round trips, the exact answers of ``queries`` and the ``marginals`` (table,
        attributes) a replay will ask for: the largest marginals first (each marginal inside one of them
        is then summed down from it), the answers no histogram holds in batches of one SELECT per table."""
        want: set[tuple[str, tuple[str, ...]]] = set(marginals)
        remote: dict[str, dict[str, LinearQuery]] = {}
        for q in queries:
            table = catalog.table(q.table)
            if table is None or q.is_zero or q.key in self._answers or any(
                    table.attribute(a) is None for a in q.marginal):
                continue  # (a cell split at a statement's literals is read with its statement)
            if self._from_histogram(table, q):
                want.add((q.table, tuple(q.marginal)))
            else:
                remote.setdefault(q.table, {})[q.key] = q
        for name, attrs in sorted(want, key=lambda m: -len(m[1])):
            table = catalog.table(name)
            if table is not None and math.prod(table.shape(attrs)) <= self.max_cells:
                self.marginal(table, attrs)
        for name, qs in remote.items():
            table = catalog.table(name)
            assert table is not None
            self.answers(table, list(qs.values()))

    def disconnect(self) -> None:
        """Close the upstream connection now (it is opened again when needed): before forking workers."""
        self.close()

    def answers(self, table: TableSchema, queries: Sequence[LinearQuery]) -> np.ndarray:
        out = np.empty(len(queries))
        remote: list[int] = []
        for i, q in enumerate(queries):
            hit = self._answers.get(q.key)
            if hit is not None:
                out[i] = hit
            elif q.is_zero:
                out[i] = 0.0
            elif self._from_histogram(table, q):
                out[i] = self._answers[q.key] = q.answer(table, self.marginal(table, q.marginal))
            else:
                remote.append(i)
        if remote:
            got = self.inner.answers(table, [queries[i] for i in remote])
            self.answer_fetches += len(remote)
            for i, v in zip(remote, got, strict=True):
                out[i] = self._answers[queries[i].key] = float(v)
        return out

    def close(self) -> None:
        close_source(self.inner)
