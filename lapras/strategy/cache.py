"""Strategies remembered by workload: a marginal's strategy depends only on its queries (never on the data
or the budget), so an epoch whose P repeats yesterday's groups, or a what-if replay of one day at several
budgets, reuses them instead of optimising again."""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from lapras.strategy import ProductQuery

Marginal = tuple[str, ...]
Workloads = Mapping[tuple[str, Marginal], tuple[tuple[int, ...], Sequence[ProductQuery]]]


def workload_digest(table: str, marginal: Marginal, shape: tuple[int, ...], queries: Sequence[ProductQuery]) -> str:
    """Identity of one group's workload, independent of the order of its queries."""
    parts = []
    for q in queries:
        h = hashlib.blake2b(digest_size=16)
        for w, vecs in q:
            h.update(np.float64(w).tobytes())
            for v in vecs:
                h.update(np.ascontiguousarray(v, dtype=np.float64).tobytes())
        parts.append(h.digest())
    top = hashlib.blake2b(f"{table}|{','.join(marginal)}|{shape}".encode(), digest_size=16)
    for p in sorted(parts):
        top.update(p)
    return top.hexdigest()


class StrategyCache:
    """``plan_groups`` with memory: groups seen before keep their strategy; the weights that split the
    release across groups are recomputed for each epoch's set of groups. At most ``max_groups`` kept."""

    def __init__(self, max_groups: int = 512) -> None:
        self.max_groups = max_groups
        self._groups: OrderedDict[str, Any] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def plan_groups(self, workloads: Workloads, **options: Any) -> list[Any]:
        from lapras.matrix_mechanism import group_weights, plan_groups

        digests = {k: workload_digest(k[0], k[1], tuple(v[0]), v[1]) for k, v in workloads.items()}
        missing = {k: v for k, v in workloads.items() if digests[k] not in self._groups}
        self.hits += len(workloads) - len(missing)
        self.misses += len(missing)
        if missing:
            for k, g in zip(missing, plan_groups(missing, **options), strict=True):
                self._groups[digests[k]] = g
        groups = []
        for k in workloads:
            self._groups.move_to_end(digests[k])
            groups.append(replace(self._groups[digests[k]], weight=1.0))
        while len(self._groups) > self.max_groups:
            self._groups.popitem(last=False)
        for g, a in zip(groups, group_weights([g.unit_error for g in groups]), strict=True):
            g.weight = float(a)
        return groups
