"""Literal progressions: instances of one template whose literals move predictably from epoch to epoch.

(Two kinds: arithmetic streams, below, and cycles over a set of values, :func:`find_cycles`.)

Examples: a daily report on ``day = '2026-10-14'`` (a date advancing one day per day), ``batch_id = 1041``
(a counter), a sliding window ``age BETWEEN 30 AND 39`` -> ``BETWEEN 31 AND 40``, a category cycling over
its domain (``education_num = 0, 1, ..., 15, 0, ...``), a weekly report whose week number advances by one
every seven days.

Detection, per template: every pair of instances (a at epoch d1, b at epoch d2, 1 <= d2 - d1 <= max_gap)
whose text slots are equal and whose numeric slots (numbers; dates as day numbers) differ proportionally to
the gap defines a rate vector (change per epoch). For each non-zero rate, instances are chained to their
nearest linked successor; a chain of at least ``min_nodes`` instances is a stream. Chains that meet again
after a reset (the value goes from the top of its range back to the bottom) are merged into one cyclic
stream that remembers its range. Instances that recur by themselves (a constant dashboard panel) are not
used as chain nodes: they are already predicted as concrete queries, and they would make chance chains.

The stream's next value is the last value plus rate x epochs elapsed, wrapped into the learnt range, or
into the column's declared domain when a catalog is known. Without either, when the next value leaves the
range every statement in the log has used for that column (and other statements do reach that range, i.e.
the column looks bounded rather than a counter), the predictor hedges: continue and wrap are both offered,
continuing with probability 1 / (n + 2) when n other statements used the column and none went past that
edge (Laplace's rule of succession), wrapping with the rest.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from parser.coltypes import IntType, TextType
from predictor.templates import Kind, Value, numeric, shift_value

Tuple = tuple[Value, ...]
Node = tuple[int, Tuple]
# (min, max) of all values of a column, (min, max) of other statements' values, how many other statements
ColumnRange = tuple[float, float, float | None, float | None, int]


@dataclass(frozen=True)
class TemplateLog:
    """One template's instances in the log: the kinds and columns of its slots, and the literal tuples it
    took in each epoch (epoch index -> tuples), which both kinds of progression are found in."""

    template: str
    kinds: tuple[Kind, ...]
    columns: tuple[str | None, ...]
    by_epoch: Mapping[int, set[Tuple]]


@dataclass
class Stream:
    template: str
    kinds: tuple[Kind, ...]
    columns: tuple[str | None, ...]
    rate: tuple[float, ...]
    nodes: list[Node]
    wraps: dict[int, tuple[float, float]] = field(default_factory=dict)
    # A cyclic stream (values rotating over a set, text or numbers): epoch index modulo period -> values.
    period: int = 0
    cycle: dict[int, Tuple] = field(default_factory=dict)
    # Expected number of chains at least this long that chance alone makes in this template.
    chance: float = 0.0

    @property
    def credibility(self) -> float:
        """Probability that the stream is real rather than a coincidence of ad hoc instances."""
        return 1.0 / (1.0 + self.chance)

    @property
    def epochs(self) -> list[int]:
        return [d for d, _ in self.nodes]

    def gap(self) -> int:
        gaps = sorted(b - a for a, b in zip(self.epochs, self.epochs[1:], strict=False))
        return gaps[len(gaps) // 2] if gaps else 1

    def predict(
        self,
        target: int,
        domain_of: Callable[[str], tuple[float, float] | None],
        column_range: Callable[[str | None, Counter[float]], ColumnRange | None],
    ) -> list[tuple[Tuple, float]]:
        """Candidate value tuples for epoch ``target`` with their share of the stream's probability."""
        if self.period:
            phase = target % self.period
            return [(self.cycle[phase], 1.0)] if phase in self.cycle else []
        last_epoch, last = self.nodes[-1]
        steps = target - last_epoch
        out: list[Value] = []
        hedges: list[tuple[int, Value]] = []
        p_out = 1.0
        for i, (v, kind, r) in enumerate(zip(last, self.kinds, self.rate, strict=True)):
            if r == 0 or numeric(v, kind) is None:
                out.append(v)
                continue
            nv = shift_value(v, kind, r * steps)
            x = numeric(nv, kind)
            assert x is not None
            width_step = abs(r) * self.gap()
            col = self.columns[i]
            dom = domain_of(col) if col else None
            if i in self.wraps:
                lo, hi = self.wraps[i]
                nv = shift_value(nv, kind, _wrap(x, lo, hi, width_step) - x)
            elif dom is not None:  # a declared domain settles it: no hedging
                if not dom[0] <= x <= dom[1]:
                    nv = shift_value(
                        nv, kind, _wrap(x, dom[0], dom[1], 1.0 if kind is IntType else width_step) - x
                    )
            else:
                seen = Counter(numeric(t[i], kind) for t in {t for _, t in self.nodes})
                rng = column_range(col, Counter({s: c for s, c in seen.items() if s is not None}))
                x_last = numeric(v, kind)
                if rng is not None and x_last is not None:
                    lo, hi, others_lo, others_hi, n_others = rng
                    if (r > 0 and x > hi and others_hi is not None and others_hi >= x_last) or (
                        r < 0 and x < lo and others_lo is not None and others_lo <= x_last
                    ):
                        hedges.append((i, shift_value(nv, kind, _wrap(x, lo, hi, width_step) - x)))
                    if hedges and hedges[-1][0] == i:
                        # Rule of succession: n other statements used this column and none went past the
                        # edge, so a value past it is valid with probability about 1 / (n + 2).
                        p_out = min(p_out, 1.0 / (n_others + 2))
            out.append(nv)
        base = tuple(out)
        if not hedges:
            return [(base, 1.0)]
        wrapped = list(base)
        for i, v in hedges:
            wrapped[i] = v
        return [(base, p_out), (tuple(wrapped), 1.0 - p_out)]


def _wrap(x: float, lo: float, hi: float, step: float) -> float:
    width = hi - lo + step
    if width <= 0:
        return x
    return lo + ((x - lo) % width)


def _rate(a: Tuple, b: Tuple, kinds: tuple[Kind, ...], gap: int) -> tuple[float, ...] | None:
    rate: list[float] = []
    for va, vb, kind in zip(a, b, kinds, strict=True):
        na, nb = numeric(va, kind), numeric(vb, kind)
        if na is None or nb is None:
            if va != vb:
                return None
            rate.append(0.0)
        else:
            rate.append(round((nb - na) / gap, 6))
    if all(r == 0 for r in rate):
        return None
    return tuple(rate)


def _advance(a: Tuple, rate: tuple[float, ...], kinds: tuple[Kind, ...], gap: int) -> Tuple | None:
    try:
        return tuple(
            v if r == 0 else shift_value(v, k, r * gap) for v, r, k in zip(a, rate, kinds, strict=True)
        )
    except TypeError:
        return None


def find_streams(log: TemplateLog, max_gap: int = 7, min_nodes: int = 3,
                 max_instances: int = 200) -> list[Stream]:
    """Streams of one template (see the module docstring)."""
    kinds, by_epoch = log.kinds, log.by_epoch
    if not any(numeric_kind(k) for k in kinds):
        return []
    epochs = sorted(d for d, ts in by_epoch.items() if ts)
    if len(epochs) < min_nodes or any(len(by_epoch[d]) > max_instances for d in epochs):
        return []
    # How easily chance makes a chain: with N instances an epoch drawn from D distinct tuples, a given
    # tuple turns up in an epoch with probability q ~ N / D. A chain of L nodes is L - 2 such hits after
    # its first pair, each with as many chances as the chain uses distinct gaps; so about
    # pairs * (k q)^(L-2) chains of L nodes arise by chance (pairs = instance pairs compared below).
    # Busy ad hoc templates need long, regular chains before one is believed.
    n_mean = sum(len(by_epoch[d]) for d in epochs) / len(epochs)
    distinct = len(set().union(*(by_epoch[d] for d in epochs)))
    # A few epochs show few distinct tuples, which says little about how many the template can take:
    # assume at least ten times what one epoch uses.
    q = min(1.0, n_mean / max(distinct, 10.0 * n_mean, 1.0))
    links: dict[tuple[float, ...], list[tuple[Node, Node]]] = defaultdict(list)
    pairs_compared = 0
    for j, d2 in enumerate(epochs):
        for d1 in epochs[max(0, j - max_gap) : j]:
            g = d2 - d1
            if g > max_gap:
                continue
            pairs_compared += len(by_epoch[d1]) * len(by_epoch[d2])
            for a in by_epoch[d1]:
                for b in by_epoch[d2]:
                    r = _rate(a, b, kinds, g)
                    if r is not None:
                        links[r].append(((d1, a), (d2, b)))

    def chance(nodes: list[Node], merges: int) -> float:
        kinds_of_gap = len({b[0] - a[0] for a, b in zip(nodes, nodes[1:], strict=False)}) or 1
        # A restart is a jump chance could make too: it confirms nothing.
        confirmations = max(len(nodes) - 2 - merges, 0)
        return pairs_compared * min(1.0, kinds_of_gap * q) ** confirmations

    need = min_nodes
    while need < 30 and pairs_compared * q ** (need - 2) > 1.0:
        need += 1
    found: list[Stream] = []
    for rate, pairs in links.items():
        if len({b for _, b in pairs}) < min(need, 6) - 1:
            continue
        merged = _merge_wraps(_chains(pairs), rate, kinds, by_epoch)
        for nodes, wraps, merges in merged:
            if len(nodes) >= min_nodes:
                found.append(
                    Stream(log.template, kinds, log.columns, rate, nodes, wraps, chance=chance(nodes, merges))
                )
    # Each instance belongs to one stream: the longest chains claim their nodes first, so a cycle's
    # instances do not also make up a dozen shorter chains at other rates.
    found.sort(key=lambda s: (-len(s.nodes), bool(s.wraps), sum(abs(r) for r in s.rate)))
    claimed: set[Node] = set()
    streams: list[Stream] = []
    for stream in found:
        if claimed.isdisjoint(stream.nodes):
            streams.append(stream)
            claimed.update(stream.nodes)
    return streams


def find_cycles(log: TemplateLog, max_period: int = 31, min_repeats: int = 2) -> list[Stream]:
    """Instances whose literals rotate over a fixed set: one slot takes the values v0, v1, ..., v(k-1),
    v0, ... on consecutive occurrences while the other slots stay fixed (a region, a category code, a
    weekday name). The period k is the smallest that every pair of epochs k apart agrees with, confirmed
    at least ``min_repeats`` times, with k distinct values (a rotation, not a constant)."""
    out: list[Stream] = []
    kinds = log.kinds
    for i in range(len(kinds)):
        groups: dict[Tuple, dict[int, set[Value]]] = defaultdict(lambda: defaultdict(set))
        for d, tuples in log.by_epoch.items():
            for t in tuples:
                groups[t[:i] + t[i + 1 :]][d].add(t[i])
        for rest, per_epoch in groups.items():
            seq = {d: next(iter(vs)) for d, vs in per_epoch.items() if len(vs) == 1}
            if len(seq) < 4:
                continue
            for k in range(2, min(max_period, len(seq) // 2) + 1):
                pairs = [(seq[d], seq[d + k]) for d in seq if d + k in seq]
                if len(pairs) < min_repeats + k - 1 or any(a != b for a, b in pairs):
                    continue
                phases: dict[int, Value] = {}
                for d in sorted(seq):
                    phases[d % k] = seq[d]
                if len(set(phases.values())) != k or len(phases) != k:
                    continue
                cycle = {ph: rest[:i] + (v,) + rest[i:] for ph, v in phases.items()}
                nodes = sorted((d, cycle[d % k]) for d in seq)
                still = tuple(0.0 for _ in kinds)  # a cycle does not move at a rate
                out.append(Stream(log.template, kinds, log.columns, still, nodes, {}, k, cycle))
                break
    return out


def numeric_kind(kind: Kind) -> bool:
    return kind is not TextType


def _chains(pairs: list[tuple[Node, Node]]) -> list[list[Node]]:
    """Chains of one rate: each node linked to its nearest linked successor."""
    succ: dict[Node, Node] = {}
    for a, b in sorted(pairs, key=lambda ab: (ab[0][0], ab[1][0] - ab[0][0], repr(ab))):
        old = succ.get(a)
        if old is None or b[0] < old[0]:
            succ[a] = b
    has_pred: dict[Node, Node] = {}
    for a, b in sorted(succ.items(), key=lambda ab: (ab[1][0] - ab[0][0], repr(ab))):
        if b not in has_pred:
            has_pred[b] = a
    succ = {a: b for b, a in has_pred.items()}
    chains: list[list[Node]] = []
    for node in sorted(succ, key=lambda n: (n[0], repr(n[1]))):
        if node in has_pred:
            continue
        chain = [node]
        while chain[-1] in succ:
            chain.append(succ[chain[-1]])
        chains.append(chain)
    return chains


def _merge_wraps(
    chains: list[list[Node]],
    rate: tuple[float, ...],
    kinds: tuple[Kind, ...],
    by_epoch: Mapping[int, set[Tuple]],
) -> list[tuple[list[Node], dict[int, tuple[float, float]], int]]:
    """Join chain A to what follows it one gap after its end when the moving slots reset there: another
    chain, or (after a chain of three or more) a single instance, which is how a cycle's restart looks."""
    chains = sorted(chains, key=lambda c: (c[0][0], repr(c[0][1])))
    starts: dict[Node, int] = {c[0]: i for i, c in enumerate(chains)}
    in_chain = {n for c in chains for n in c}
    out: list[tuple[list[Node], dict[int, tuple[float, float]], int]] = []
    used: set[int] = set()
    for i, chain in enumerate(chains):
        if i in used:
            continue
        used.add(i)
        nodes = list(chain)
        wraps: dict[int, tuple[float, float]] = {}
        merges = 0
        while True:
            end_d, end_v = nodes[-1]
            gaps = sorted(b[0] - a[0] for a, b in zip(nodes, nodes[1:], strict=False))
            gap = gaps[len(gaps) // 2] if gaps else 1
            nxt = end_d + gap
            found: tuple[list[Node], dict[int, tuple[float, float]]] | None = None
            before = [v for _, v in nodes]
            for start_v in sorted(by_epoch.get(nxt, ()), key=repr):
                node = (nxt, start_v)
                j = starts.get(node)
                if len(nodes) < 3 or (j is None and node in in_chain):
                    continue  # a restart is only believable after a real chain
                if j is not None and j in used:
                    continue
                w = _reset(end_v, start_v, rate, kinds, before)
                if w is not None:
                    if j is not None:
                        used.add(j)
                    found = (chains[j] if j is not None else [node], w)
                    break
            if found is None:
                break
            more, w = found
            merges += 1
            for slot, (lo, hi) in w.items():
                old = wraps.get(slot)
                wraps[slot] = (min(lo, old[0]), max(hi, old[1])) if old else (lo, hi)
            nodes.extend(more)
        out.append((nodes, wraps, merges))
    return out


def _reset(
    end: Tuple, start: Tuple, rate: tuple[float, ...], kinds: tuple[Kind, ...], before: list[Tuple]
) -> dict[int, tuple[float, float]] | None:
    """Wrap ranges if ``start`` is a cycle's restart after ``end``: every moving slot goes back to (or past)
    the lowest value the chain had (highest, for a falling slot), every fixed slot stays."""
    wraps: dict[int, tuple[float, float]] = {}
    for i, (a, b, r, k) in enumerate(zip(end, start, rate, kinds, strict=True)):
        na, nb = numeric(a, k), numeric(b, k)
        if r == 0:
            if a != b:
                return None
            continue
        if na is None or nb is None:
            return None
        seen = [x for x in (numeric(t[i], k) for t in before) if x is not None]
        if r > 0 and nb <= min(seen):
            wraps[i] = (nb, na)
        elif r < 0 and nb >= max(seen):
            wraps[i] = (na, nb)
        else:
            return None
    return wraps or None
