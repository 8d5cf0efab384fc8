"""Strategies remembered by workload: a marginal's strategy depends only on its queries (never on the data
or the budget), so an epoch whose P repeats yesterday's groups, or a what-if replay of one day at several
budgets, reuses them instead of optimising again."""

from __future__ import annotations

import json
import os
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from lapras.matrix_mechanism import MMGroup, group_weights, plan_groups
from lapras.strategy import KronStrategy, ProductQuery
from lapras.strategy.kron import queries_digest

Marginal = tuple[str, ...]
# Keyed by (table, marginal) or (table, marginal, region): lapras.matrix_mechanism.GroupKey.
Workloads = Mapping[tuple[str, Marginal] | tuple[str, Marginal, str], tuple[tuple[int, ...], Sequence[ProductQuery]]]


def workload_digest(table: str, marginal: Marginal, shape: tuple[int, ...], queries: Sequence[ProductQuery]) -> str:
    """Identity of one group's workload, independent of the order of its queries."""
    return queries_digest(f"{table}|{','.join(marginal)}|{shape}", queries)


class StrategyCache:
    """``plan_groups`` with memory: groups seen before keep their strategy; the weights that split the
    release across groups are recomputed for each epoch's set of groups. At most ``max_groups`` kept.

    With ``path``, strategies are also kept on disk, one file per workload digest (written atomically,
    readable by the owner only), so another process (``lapras-proxy epoch --prepare``) or a restart finds
    them instead of optimising again."""

    def __init__(self, max_groups: int = 512, path: Path | None = None) -> None:
        self.max_groups = max_groups
        self.path = path
        self._groups: OrderedDict[str, MMGroup] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def plan_groups(self, workloads: Workloads, **options: Any) -> list[MMGroup]:
        digests = {k: workload_digest(k[0], k[1], tuple(v[0]), v[1]) for k, v in workloads.items()}
        for d in digests.values():
            if d not in self._groups and (g := self._load(d)) is not None:
                self._groups[d] = g
        missing = {k: v for k, v in workloads.items() if digests[k] not in self._groups}
        self.hits += len(workloads) - len(missing)
        self.misses += len(missing)
        if missing:
            for k, g in zip(missing, plan_groups(missing, **options), strict=True):
                self._groups[digests[k]] = g
                self._save(digests[k], g)
        groups = []
        for k in workloads:
            self._groups.move_to_end(digests[k])
            groups.append(replace(self._groups[digests[k]], weight=1.0))
        while len(self._groups) > self.max_groups:
            self._groups.popitem(last=False)
        for g, a in zip(groups, group_weights([g.unit_error for g in groups]), strict=True):
            g.weight = float(a)
        return groups

    def _file(self, digest: str) -> Path | None:
        return self.path / f"{digest}.npz" if self.path is not None else None

    def _save(self, digest: str, group: MMGroup) -> None:
        f = self._file(digest)
        if f is None:
            return
        f.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        meta = {"table": group.table, "marginal": list(group.marginal), "shape": list(group.shape),
                "unit_error": group.unit_error, "n_queries": group.n_queries, "strategy": group.strategy.name}
        arrays: dict[str, Any] = {f"s_{k}": v for k, v in group.strategy.to_arrays().items()}
        tmp = f.with_suffix(f".{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as out:
            np.savez(out, meta=np.array(json.dumps(meta)), **arrays)
        os.replace(tmp, f)

    def _load(self, digest: str) -> MMGroup | None:
        f = self._file(digest)
        if f is None or not f.is_file():
            return None
        try:
            with np.load(f, allow_pickle=False) as d:
                meta = json.loads(str(d["meta"]))
                strat = KronStrategy.from_arrays({k[2:]: d[k] for k in d.files if k.startswith("s_")},
                                                 meta["strategy"])
        except (OSError, ValueError, KeyError):
            return None  # unreadable or from another version: optimise again
        return MMGroup(meta["table"], tuple(meta["marginal"]), tuple(meta["shape"]), strat,
                       float(meta["unit_error"]), int(meta["n_queries"]))
