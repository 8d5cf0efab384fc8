"""The recurrence model: from epochs of past statements to scored candidates for a target epoch.

Two sources of candidates:

1. Concrete queries (canonical keys): each key's presence over past epochs is scored by
   :mod:`predictor.recurrence` (schedules averaged by their evidence, empirical-Bayes prior). This covers
   dashboards (daily, business days, weekly, every k days) and also gives one-off ad hoc queries the low
   score they deserve.
2. Literal progressions (:mod:`predictor.progressions`): a stream's presence is scored the same way and its
   next literal values are extrapolated, giving a query never seen before (tomorrow's date, the next
   counter, the next category of a cycle).

A key predicted by both keeps the larger score. Each candidate carries ``expected_count``, its mean number
of occurrences in an epoch where it occurs, for the stream-length estimate S.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from parser.model.schema import Catalog
from predictor.canonical import canonical_key
from predictor.progressions import ColumnRange, Stream, TemplateLog, find_cycles, find_streams
from predictor.recurrence import BetaPrior, Schedule, class_tables, fit_prior, make_schedules, score
from predictor.templates import Kind, Shape, analyse, numeric, render
from predictor.volume import VolumeForecast, forecast, level_models


@dataclass(frozen=True)
class Occurrence:
    """A statement of the training window: its identity, shape and how many executions it stands for."""

    key: str
    shape: Shape
    count: int = 1


@dataclass(frozen=True)
class Candidate:
    sql: str
    key: str
    p: float
    template: str
    source: str  # recurring | progression | declared | snapshot
    schedule: str
    expected_count: float
    # True when the history shows a schedule (a rich one, or a daily rate of at least 1/2) and not just a
    # chance repeat: such a key's volume is predicted even on epochs where it is not worth putting in P.
    scheduled: bool = False


@dataclass
class _KeyStats:
    shape: Shape
    present: list[bool]
    counts: list[int]
    first: int


class WorkloadModel:
    """Fit once on ``epochs`` (list index = epoch index), then ask for candidates of any later epoch."""

    def __init__(
        self,
        epochs: Sequence[Sequence[Occurrence]],
        weekday_of: Callable[[int], int] | None = None,
        catalog: Catalog | None = None,
        epoch_hours: float = 24.0,
        max_gap: int = 7,
    ) -> None:
        self.n = len(epochs)
        self.catalog = catalog
        self.weekday_of = weekday_of
        self.epoch_hours = epoch_hours
        self.schedules: list[Schedule] = make_schedules(self.n, weekday_of, epoch_hours)
        self.keys: dict[str, _KeyStats] = {}
        self.shapes: dict[str, tuple[Shape, list[bool]]] = {}
        self.key_shapes: dict[str, set[tuple[str, tuple]]] = defaultdict(set)
        for d, occs in enumerate(epochs):
            for o in occs:
                st = self.keys.get(o.key)
                if st is None:
                    st = self.keys[o.key] = _KeyStats(o.shape, [False] * self.n, [0] * self.n, d)
                st.present[d] = True
                st.counts[d] += o.count
                # Several texts can share a key (with the parser's key, "x = 2 AND y >= 0" may equal
                # "x = 2"): progressions are learnt on the texts' shapes, not on the keys.
                sh = self.shapes.get(o.shape.key)
                if sh is None:
                    sh = self.shapes[o.shape.key] = (o.shape, [False] * self.n)
                sh[1][d] = True
                self.key_shapes[o.key].add((o.shape.template, o.shape.values))
        self.prior: BetaPrior = fit_prior(
            [(sum(st.present[st.first + 1 :]), self.n - st.first - 1) for st in self.keys.values()]
        )
        self._column_values: dict[str, Counter[float]] = defaultdict(Counter)
        for shape, _ in self.shapes.values():
            for v, k, c in zip(shape.values, shape.kinds, shape.columns, strict=True):
                x = numeric(v, k)
                if c is not None and x is not None:
                    self._column_values[c][x] += 1
        self.streams: list[Stream] = self._find_streams(max_gap)
        # Values that move with a progression (a dashboard's sliding window, its panels in step): they are
        # not edges other statements stopped at, so column_range leaves them out of "others".
        self._moving: dict[str, Counter[float]] = defaultdict(Counter)
        for stream in self.streams:
            for i, (col, kind, r) in enumerate(zip(stream.columns, stream.kinds, stream.rate, strict=True)):
                if col is None or r == 0:
                    continue
                for _, values in stream.nodes:
                    x = numeric(values[i], kind)
                    if x is not None:
                        self._moving[col][x] += 1
        self._in_stream: set[tuple[str, tuple]] = {(s.template, v) for s in self.streams for _, v in s.nodes}
        self.new_volume = self._new_volume()

    # -- fitting -------------------------------------------------------------------------------------------

    @staticmethod
    def _recurs_by_itself(present: list[bool]) -> bool:
        later = present[present.index(True) + 1 :]
        return len(later) >= 2 and sum(later) * 2 >= len(later)

    def _find_streams(self, max_gap: int) -> list[Stream]:
        groups: dict[tuple[str, tuple[Kind, ...], tuple[str | None, ...]], dict[int, set[tuple]]] = (
            defaultdict(lambda: defaultdict(set))
        )
        for sh, present in self.shapes.values():
            if not sh.values or self._recurs_by_itself(present):
                continue
            g = groups[(sh.template, sh.kinds, sh.columns)]
            for d, here in enumerate(present):
                if here:
                    g[d].add(sh.values)
        streams: list[Stream] = []
        for (template, kinds, columns), by_epoch in groups.items():
            log = TemplateLog(template, kinds, columns, by_epoch)
            streams.extend(find_streams(log, max_gap=max_gap))
            streams.extend(find_cycles(log))
        return streams

    def _new_volume(self, window: int = 14) -> float:
        """Mean executions per epoch of keys never seen before (and not explained by a stream)."""
        per_epoch = [0.0] * self.n
        for key, st in self.keys.items():
            if not self.key_shapes[key].isdisjoint(self._in_stream):
                continue
            per_epoch[st.first] += st.counts[st.first]
        recent = per_epoch[max(1, self.n - window) :]
        return sum(recent) / len(recent) if recent else 0.0

    def residual_volume(self, predicted: set[str], target: int | None = None) -> float:
        """Expected executions in epoch ``target`` (default: the next one) that P would not explain:
        statements whose key is not in ``predicted`` and that are not instances of a progression (those
        are predicted afresh). A weekly pattern of that traffic (analysts on business days only) is
        followed when the history shows one (:mod:`predictor.volume`)."""
        return self.residual_forecast(predicted, target).value

    def residual_forecast(self, predicted: set[str], target: int | None = None) -> VolumeForecast:
        per_epoch = [0.0] * self.n
        for key, st in self.keys.items():
            if key in predicted or not self.key_shapes[key].isdisjoint(self._in_stream):
                continue
            for d, c in enumerate(st.counts):
                per_epoch[d] += c
        models = level_models(self.weekday_of, self.epoch_hours)
        return forecast(per_epoch, self.n if target is None else target, models)

    def distinct_per_epoch(self, window: int = 14) -> float:
        per_epoch = [0] * self.n
        for st in self.keys.values():
            for d, here in enumerate(st.present):
                per_epoch[d] += 1 if here else 0
        recent = per_epoch[max(0, self.n - window) :]
        return sum(recent) / len(recent) if recent else 0.0

    # -- domains -------------------------------------------------------------------------------------------

    def domain_of(self, column: str) -> tuple[float, float] | None:
        if self.catalog is None:
            return None
        for table in self.catalog.tables:
            attr = table.attribute(column)
            if attr is not None and attr.domain.summable:
                return attr.domain.sum_bounds
        return None

    def column_range(self, column: str | None, own: Counter[float]) -> ColumnRange | None:
        """(min, max) of every value the log used for ``column``, (min, max) of other statements' values
        (``own`` counts the stream's), and how many other statements used the column."""
        if column is None or column not in self._column_values:
            return None
        allv = self._column_values[column]
        moving = self._moving.get(column, Counter())
        others = {x: c - max(own.get(x, 0), moving.get(x, 0)) for x, c in allv.items()
                  if c > max(own.get(x, 0), moving.get(x, 0))}
        return (
            min(allv),
            max(allv),
            min(others) if others else None,
            max(others) if others else None,
            sum(others.values()),
        )

    # -- prediction ----------------------------------------------------------------------------------------

    def candidates(self, target: int) -> list[Candidate]:
        """Every key with a non-negligible chance of occurring in epoch ``target`` (>= n), best first."""
        best: dict[str, Candidate] = {}
        tables = class_tables(self.schedules, target)

        def offer(c: Candidate) -> None:
            old = best.get(c.key)
            if old is None or c.p > old.p:
                best[c.key] = c

        for key, st in self.keys.items():
            if not (st.shape.is_query and st.shape.concrete):
                continue
            rec = score(st.present, st.first, target, tables, self.prior)
            active = [c for c in st.counts if c]
            scheduled = len(active) >= 3 and (rec.schedule != "daily" or 2 * rec.hits >= rec.trials)
            offer(
                Candidate(
                    st.shape.key,
                    key,
                    rec.p,
                    st.shape.template,
                    "recurring",
                    rec.schedule,
                    sum(active) / len(active),
                    scheduled,
                )
            )
        for stream in self.streams:
            present = [False] * self.n
            for d in stream.epochs:
                present[d] = True
            rec = score(present, stream.epochs[0], target, tables, self.prior)
            for values, share in stream.predict(target, self.domain_of, self.column_range):
                share *= stream.credibility
                sql = render(stream.template, values, stream.kinds)
                pkey = canonical_key(sql, self.catalog)
                shape = analyse(sql)
                if pkey is None or shape is None or not shape.is_query:
                    continue
                key = pkey
                offer(
                    Candidate(
                        shape.key,
                        key,
                        rec.p * share,
                        stream.template,
                        "progression",
                        f"{rec.schedule}, rate {_fmt_rate(stream.rate)}",
                        1.0,
                        True,
                    )
                )
        return sorted(best.values(), key=lambda c: (-c.p, c.key))


def _fmt_rate(rate: tuple[float, ...]) -> str:
    return "(" + ", ".join(f"{r:g}" for r in rate) + ")/epoch"
