"""Measurements shared across P's marginals: nested and overlapping marginals measured once.

P's queries come grouped by marginal, and each group is one block of the joint release with its own share
of the budget (``lapras.matrix_mechanism``). Over one joint Gaussian release the total variance of all of
P's answers is ``sigma^2 (sum_g sqrt(c_g))^2`` (``c_g``: group g's workload error per unit noise, at its
best weight), so a group that only reads ``(sex)`` costs as much budget as one over ``(race, sex)``.
Measuring the two on their union marginal lets one strategy serve both: the coarse query becomes a sum over
the finer cells (an all-ones vector on the axes it does not read), answered by least squares from the
union's measurements, which is unbiased and whose variance the strategy states.

:func:`share_marginals` merges greedily (HDMM / ResidualPlanner style, on P's own marginals): while a pair
of groups over the same table whose marginals overlap has a union of at most ``max_cells`` cells and
``sqrt(c_union) < sqrt(c_a) + sqrt(c_b)``, by the errors the strategy optimiser itself computes, the pair
with the largest gain is merged. Each merge lowers the release's total variance at any budget; the
sensitivity of the merged strategy is still computed from its matrix when the release is calibrated.
"""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Collection, Mapping, Sequence

import numpy as np

from lapras.strategy.kron import ProductQuery, queries_digest
from lapras.strategy.optimize import kron_strategy, workload_error

Marginal = tuple[str, ...]
Key = tuple[str, Marginal] | tuple[str, Marginal, str]  # a region's group of a table bounded per statement: 3
Workload = tuple[tuple[int, ...], list[ProductQuery]]
# Largest union marginal (cells) two groups are merged into: beyond, a strategy over it costs more to
# optimise and store than the few queries it would share save.
SHARE_MAX_CELLS = 4096
# A merge must lower the summed root errors by this fraction at least (the optimiser's own spread).
MIN_GAIN = 0.01


def embed(query: ProductQuery, marginal: Marginal, union: Marginal, sizes: Mapping[str, int]) -> ProductQuery:
    """The query over ``marginal`` as a query over ``union`` (a superset): ones on the axes it does not read."""
    pos = {a: k for k, a in enumerate(marginal)}
    return [(w, [np.asarray(vs[pos[a]]) if a in pos else np.ones(sizes[a]) for a in union]) for w, vs in query]


def union_workload(members: Sequence[tuple[Marginal, Workload]]) -> tuple[Marginal, Workload]:
    """The members' queries embedded in their union marginal (attributes sorted, as ``LinearQuery``'s)."""
    sizes: dict[str, int] = {}
    for marginal, (shape, _) in members:
        sizes.update(zip(marginal, shape, strict=True))
    union = tuple(sorted(sizes))
    queries = [embed(q, marginal, union, sizes) for marginal, (_, qs) in members for q in qs]
    return union, (tuple(sizes[a] for a in union), queries)


def shared_workloads(workloads: Mapping[Key, Workload], members: Mapping[Key, Sequence[Marginal]]) -> dict[Key, Workload]:
    """The merged groups' workloads from the original ones: ``members`` maps each merged key to the
    original marginals it holds (keys absent from it stand for themselves)."""
    out: dict[Key, Workload] = {}
    for key, ms in members.items():
        if len(key) != 2 or tuple(ms) == (key[1],):
            out[key] = workloads[key]  # not merged (a region's group of a table bounded per statement too)
            continue
        table, marginal = key
        union, work = union_workload([(m, workloads[(table, m)]) for m in ms])
        assert union == marginal, (union, marginal)
        out[(table, marginal)] = work
    return out


# Errors of workloads seen before, by digest: P mostly repeats from one epoch to the next (and a what-if
# plans each day's P at every budget), so the merge search is paid once per workload.
_ERRORS: OrderedDict[str, float] = OrderedDict()
_ERRORS_MAX = 8192
_ERRORS_LOCK = threading.Lock()


def _digest(shape: Sequence[int], queries: Sequence[ProductQuery], joint_max_cells: int) -> str:
    return queries_digest(f"{tuple(shape)}|{joint_max_cells}", queries)


def group_error(shape: Sequence[int], queries: Sequence[ProductQuery], *, seed: int = 0,
                time_limit: float | None = None, joint_max_cells: int = 256) -> float:
    """The optimiser's computed error (sensitivity included) for one workload: what merging compares.
    Remembered by workload (an error found under a time limit is an upper bound: still a valid choice)."""
    key = _digest(shape, queries, joint_max_cells)
    with _ERRORS_LOCK:
        if key in _ERRORS:
            _ERRORS.move_to_end(key)
            return _ERRORS[key]
    # One round of short optimisations: what the search compares is the choice, not the final strategy
    # (measured on the Adult log's P: 4x faster than the preparation's settings, the same merges).
    strat = kron_strategy(shape, queries, rng=np.random.default_rng(seed), time_limit=time_limit,
                          joint_max_cells=joint_max_cells, rounds=1, maxiter=30)
    err = workload_error(strat, queries)
    with _ERRORS_LOCK:
        _ERRORS[key] = err
        while len(_ERRORS) > _ERRORS_MAX:
            _ERRORS.popitem(last=False)
    return err


def share_marginals(
    workloads: Mapping[Key, Workload], *, tables: Collection[str] | None = None, max_cells: int = SHARE_MAX_CELLS,
    time_limit: float | None = None, joint_max_cells: int = 256,
    error: Callable[[Sequence[int], Sequence[ProductQuery]], float] | None = None,
) -> dict[Key, tuple[Marginal, ...]]:
    """Greedy merge of overlapping marginals; returns, per group of the merged release, the original
    marginals it measures (a group not merged maps to itself). Only groups over ``tables`` (None: all)
    are merged: a histogram of units present is not the sum of a finer one, and a table bounded per
    statement reads each group's rows among its own cells. ``time_limit`` stops merging (what is merged
    so far stands); ``error`` (default :func:`group_error`) is the error compared."""
    deadline = math.inf if time_limit is None else time.monotonic() + time_limit

    def err(shape: Sequence[int], queries: Sequence[ProductQuery]) -> float:
        if error is not None:
            return error(shape, queries)
        left = None if time_limit is None else max(0.05, deadline - time.monotonic())
        return group_error(shape, queries, time_limit=left, joint_max_cells=joint_max_cells)

    clusters: dict[Key, tuple[Marginal, ...]] = {k: (k[1],) for k in workloads}
    root: dict[Key, float] = {}
    pair_root: dict[tuple[Key, Key], float | None] = {}

    def root_of(k: Key) -> float:
        if k not in root:
            union, (shape, qs) = union_workload([(m, workloads[(k[0], m)]) for m in clusters[k]])
            root[k] = math.sqrt(max(err(shape, qs), 0.0))
        return root[k]

    def candidate(a: Key, b: Key) -> tuple[Key, float] | None:
        """The merged key and its root error, or None when the pair may not merge."""
        key = (a[0], tuple(sorted({*a[1], *b[1]})))
        if key not in (a, b) and key in clusters:
            return None  # another group is that union already (checked each time: clusters change)
        if (a, b) not in pair_root:
            members = [(m, workloads[(a[0], m)]) for m in (*clusters[a], *clusters[b])]
            _, (shape, qs) = union_workload(members)
            pair_root[(a, b)] = math.sqrt(max(err(shape, qs), 0.0)) if math.prod(shape) <= max_cells else None
        r = pair_root[(a, b)]
        return None if r is None else (key, r)

    while time.monotonic() < deadline:
        best: tuple[float, Key, Key, Key, float] | None = None
        keys = sorted(clusters)
        for i, a in enumerate(keys):
            if tables is not None and a[0] not in tables:
                continue
            for b in keys[i + 1:]:
                if b[0] != a[0] or not set(a[1]) & set(b[1]):
                    continue
                sizes = dict(zip(a[1], workloads_shape(workloads, a, clusters), strict=True))
                sizes.update(zip(b[1], workloads_shape(workloads, b, clusters), strict=True))
                if math.prod(sizes.values()) > max_cells:
                    continue  # decided without optimising anything
                if time.monotonic() >= deadline:
                    break
                found = candidate(a, b)
                if found is None:
                    continue
                apart = root_of(a) + root_of(b)
                gain = apart - found[1]
                if gain > MIN_GAIN * apart and (best is None or gain > best[0]):
                    best = (gain, a, b, found[0], found[1])
        if best is None:
            break
        _, a, b, key, r = best
        merged = (*clusters.pop(a), *clusters.pop(b))
        clusters[key] = merged
        for stale in (a, b, key):
            root.pop(stale, None)
        root[key] = r
        pair_root = {p: v for p, v in pair_root.items() if not {a, b, key} & set(p)}
    return clusters


def workloads_shape(workloads: Mapping[Key, Workload], key: Key, clusters: Mapping[Key, Sequence[Marginal]]) -> tuple[int, ...]:
    """Shape of a (possibly merged) group's marginal, from its members' shapes."""
    sizes: dict[str, int] = {}
    for m in clusters[key]:
        sizes.update(zip(m, workloads[(key[0], m)][0], strict=True))
    return tuple(sizes[a] for a in key[1])
