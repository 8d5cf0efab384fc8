"""Train on a window of log statements and produce the prediction set P for the next epoch.

Epochs are calendar days of the log's own clock by default (``epoch_hours=24``; other lengths count from
the midnight before the first statement). Only statements the engine would answer are used: aggregate
SELECTs over a user table (and, with a catalog, over one of its protected tables); everything else
(SET, SHOW, BEGIN, catalog queries, unparseable text) is counted and left out of both P and S.

The output :class:`PredictionSet` holds the candidates above the expected-utility cut-off
(:mod:`predictor.utility`), the expected stream length S and the expected overlap rho (expected share of
the epoch's statements whose key is in P), plus what was left out, for reports.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from parser.model.schema import Catalog
from predictor.canonical import canonical_key
from predictor.declared import expand_templates
from predictor.logs import LogStatement, ReadStats, read_log
from predictor.model import Candidate, Occurrence, WorkloadModel
from predictor.templates import analyse
from predictor.utility import CostModel, choose_cut


@dataclass(frozen=True)
class PredictedQuery:
    sql: str
    canonical_key: str
    score: float
    template: str
    source: str
    schedule: str = ""


@dataclass
class PredictionSet:
    epoch_start: datetime | None
    epoch_hours: float
    queries: list[PredictedQuery]
    s_estimate: int
    rho_estimate: float
    threshold: float
    generated_at: datetime = field(default_factory=lambda: datetime.now().replace(microsecond=0))
    rejected: list[PredictedQuery] = field(default_factory=list)  # scored but below the cut (best first)
    stats: dict[str, Any] = field(default_factory=dict)

    @property
    def keys(self) -> set[str]:
        return {q.canonical_key for q in self.queries}


@dataclass(frozen=True)
class Epochs:
    """Statements bucketed by epoch, with the calendar needed for weekly schedules."""

    origin: datetime
    hours: float
    buckets: list[list[Occurrence]]

    def start_of(self, index: int) -> datetime:
        return self.origin + timedelta(hours=self.hours * index)

    def weekday_of(self, index: int) -> int:
        return self.start_of(index).weekday()

    def index_of(self, ts: datetime) -> int:
        return math.floor((ts - self.origin).total_seconds() / (self.hours * 3600))


def to_occurrence(st: LogStatement, catalog: Catalog | None) -> Occurrence | None:
    shape = analyse(st.sql)
    if shape is None or not shape.is_query:
        return None
    if catalog is not None and not any(catalog.table(t) is not None for t in shape.tables):
        return None
    key = canonical_key(st.sql, catalog)
    if key is None:
        return None
    return Occurrence(key, shape, st.calls)


def bucket(
    statements: Iterable[LogStatement],
    epoch_hours: float = 24.0,
    catalog: Catalog | None = None,
    origin: datetime | None = None,
    stream_items: bool = False,
) -> tuple[Epochs, list[Occurrence], dict[str, int]]:
    """Split dated statements into epochs; undated ones are returned apart (snapshot candidates).

    ``stream_items``: count a key once per epoch, as the engine's allocation does (a statement asked again
    in the same epoch is a free repeat, no stream item), so that S and rho are in the allocation's units."""
    dated: list[tuple[datetime, Occurrence]] = []
    undated: list[Occurrence] = []
    counts = {"statements": 0, "used": 0, "not_query": 0}
    for st in statements:
        counts["statements"] += 1
        occ = to_occurrence(st, catalog)
        if occ is None:
            counts["not_query"] += 1
            continue
        counts["used"] += 1
        if st.ts is None:
            undated.append(occ)
        else:
            dated.append((st.ts, occ))
    if origin is None:
        first = min((ts for ts, _ in dated), default=datetime(1970, 1, 1))
        origin = datetime.combine(first.date(), datetime.min.time())
    epochs = Epochs(origin, epoch_hours, [])
    n = max((epochs.index_of(ts) for ts, _ in dated), default=-1) + 1
    buckets: list[list[Occurrence]] = [[] for _ in range(n)]
    seen: set[tuple[int, str]] = set()
    for ts, occ in dated:
        i = epochs.index_of(ts)
        if i >= 0:
            if stream_items:
                if (i, occ.key) in seen:
                    continue
                seen.add((i, occ.key))
                occ = Occurrence(occ.key, occ.shape, 1)
            buckets[i].append(occ)
    return Epochs(origin, epoch_hours, buckets), undated, counts


def train(
    epochs: Epochs,
    target: int | None = None,
    catalog: Catalog | None = None,
    cost: CostModel | None = None,
    threshold: float | None = None,
    undated: Sequence[Occurrence] = (),
    snapshot_days: float = 1.0,
    declared: Sequence[dict[str, Any]] = (),
) -> PredictionSet:
    """Predict P for epoch ``target`` (default: the epoch right after the window) from ``epochs``."""
    n = len(epochs.buckets)
    target = n if target is None else target
    weekday = epochs.weekday_of if epochs.hours == 24 else None
    model = WorkloadModel(epochs.buckets, weekday, catalog, epochs.hours)
    cands = model.candidates(target)
    cands = _add_snapshot(cands, undated, snapshot_days)
    declared_sql = expand_templates(list(declared)) if declared else []
    declared_c: list[Candidate] = []
    for sql in declared_sql:
        shape = analyse(sql)
        key = canonical_key(sql, catalog)
        if shape is not None and key is not None:
            declared_c.append(Candidate(shape.key, key, 1.0, shape.template, "declared", "declared", 0.0))
    declared_keys = {c.key for c in declared_c}
    cands = [c for c in cands if c.key not in declared_keys]

    m, thr = choose_cut([c.p for c in cands], model.distinct_per_epoch(), cost or CostModel(), threshold)
    chosen, rest = cands[:m], cands[m:]
    # S = what P expects to see + what P would not have explained in recent epochs (ad hoc traffic).
    in_p = sum(c.p * c.expected_count for c in chosen)
    # S = the expected volume of every key with a schedule (in P or not: a business-day panel on a Sunday)
    # + what no schedule explained in recent epochs (ad hoc traffic, chance repeats included).
    chosen_keys = {c.key for c in chosen}
    explained = [c for c in cands if c.scheduled or c.key in chosen_keys]
    residual = model.residual_forecast({c.key for c in explained}, target)
    s_est = sum(c.p * c.expected_count for c in explained) + residual.value
    rho = in_p / s_est if s_est > 0 else 0.0

    def pq(c: Candidate) -> PredictedQuery:
        return PredictedQuery(c.sql, c.key, round(c.p, 4), c.template, c.source, c.schedule)

    return PredictionSet(
        epoch_start=epochs.start_of(target) if n or epochs.buckets else None,
        epoch_hours=epochs.hours,
        queries=[pq(c) for c in declared_c] + [pq(c) for c in chosen],
        s_estimate=max(0, round(s_est)),
        rho_estimate=round(rho, 4),
        threshold=round(thr, 4),
        rejected=[pq(c) for c in rest[:200]],
        stats={
            "epochs": n,
            "keys": len(model.keys),
            "streams": len(model.streams),
            "prior": [round(model.prior.a, 4), round(model.prior.b, 4)],
            "new_per_epoch": round(model.new_volume, 2),
            "residual_volume": {"value": round(residual.value, 2), "model": residual.model,
                                "flat": round(residual.flat, 2), "walk_forward_mae": residual.errors},
        },
    )


def _add_snapshot(cands: list[Candidate], undated: Sequence[Occurrence], days: float) -> list[Candidate]:
    """pg_stat_statements / undated SQL: calls over the snapshot's period -> chance of >= 1 call per epoch."""
    if not undated:
        return cands
    calls: dict[str, int] = {}
    shapes: dict[str, Occurrence] = {}
    for o in undated:
        if not o.shape.concrete:
            continue  # a normalised query with $n placeholders is not one concrete query
        calls[o.key] = calls.get(o.key, 0) + o.count
        shapes[o.key] = o
    have = {c.key: c for c in cands}
    for key, n in calls.items():
        rate = n / max(days, 1e-9)
        p = 1 - math.exp(-rate)
        o = shapes[key]
        if key not in have or have[key].p < p:
            have[key] = Candidate(
                o.shape.key, key, p, o.shape.template, "snapshot", "snapshot", max(rate, 1.0)
            )
    return sorted(have.values(), key=lambda c: (-c.p, c.key))


def measure_overlap(
    pset: PredictionSet,
    epochs: Epochs,
    catalog: Catalog | None = None,
    cost: CostModel | None = None,
    threshold: float | None = None,
    days: int = 7,
    min_history: int = 7,
) -> PredictionSet:
    """Replace the model's rho by the overlap measured on the last ``days`` epochs of the window.

    Each of those epochs is predicted from the epochs before it only, exactly as P is, and its recall (share
    of its statements whose key was in that P) is recorded; rho is their mean. This is the honest figure
    for the engine's ``auto`` split: measured on traffic the prediction had not seen. The model's own
    estimate stays in ``stats["rho_model"]``. Needs ``min_history`` epochs before the first measured one.
    """
    n = len(epochs.buckets)
    recalls: list[float] = []
    for d in range(max(min_history, n - days), n):
        window = Epochs(epochs.origin, epochs.hours, epochs.buckets[:d])
        keys = train(window, d, catalog, cost, threshold).keys
        total = sum(o.count for o in epochs.buckets[d])
        if total:
            recalls.append(sum(o.count for o in epochs.buckets[d] if o.key in keys) / total)
    pset.stats["rho_model"] = pset.rho_estimate
    if recalls:
        pset.stats["rho_measured_days"] = [round(r, 4) for r in recalls]
        pset.rho_estimate = round(sum(recalls) / len(recalls), 4)
    return pset


def read_logs(
    paths: Sequence[str | Path], format: str = "auto", prefix: str | None = None
) -> tuple[list[LogStatement], list[ReadStats]]:
    statements: list[LogStatement] = []
    stats: list[ReadStats] = []
    for p in paths:
        sts, s = read_log(p, format, prefix)
        statements.extend(sts)
        stats.append(s)
    return statements, stats


def predict_from_logs(
    paths: Sequence[str | Path],
    format: str = "auto",
    prefix: str | None = None,
    epoch_hours: float = 24.0,
    catalog: Catalog | None = None,
    cost: CostModel | None = None,
    threshold: float | None = None,
    declared: Sequence[dict[str, Any]] = (),
    snapshot_days: float = 1.0,
) -> tuple[PredictionSet, list[ReadStats]]:
    """Read the logs and predict P for the epoch after the last one they cover."""
    statements, stats = read_logs(paths, format, prefix)
    # S in the engine's units: stream items (a statement asked again in its epoch is a free repeat).
    epochs, undated, counts = bucket(statements, epoch_hours, catalog, stream_items=True)
    result = train(epochs, None, catalog, cost, threshold, undated, snapshot_days, declared)
    measure_overlap(result, epochs, catalog, cost, threshold)
    result.stats.update(counts)
    return result, stats
