"""Learn P and S from the proxy's own statement history (no exported log, no set-up).

The proxy records every statement it answers or refuses over a protected table (text, bound parameters,
time, epoch id, the session's TimeZone and how it was served; never a value) in the upstream's ``lapras`` schema. At each epoch
start the engine asks for the next epoch's prediction; this module turns that history into the
predictor's epochs (one bucket per ledger epoch, whatever their length: daily, hourly or manual epochs
minutes apart) and trains the same model as ``lapras-proxy predict``.

S counts what the allocation counts: stream items. A statement served entirely from stored answers (a
free repeat) is no stream item, so repeats are left out; a refused statement or one answered from P is an
item. Within an epoch a statement is counted once (a refused statement asked again would have been a
free repeat had it been answered), which is how ``bucket(stream_items=True)`` counts.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from parser.model.schema import Catalog
from parser.semantics.zoned_text import tagged
from predictor.canonical import canonical_key
from predictor.logs import LogStatement
from predictor.predict import Epochs, PredictionSet, bucket, measure_overlap, train
from predictor.utility import CostModel
from predictor.volume import forecast, level_models

# Epochs of history read at each learning: four weeks of daily epochs (the weekly models look back 28
# epochs), eight days of shorter ones (hourly: the hour-of-day model looks back 3 x 24; the progression
# search grows with the epochs read), and never fewer than 14. The ledger keeps MAX_EPOCHS.
MIN_EPOCHS, MAX_EPOCHS = 14, 720
NOT_ITEMS = frozenset({"repeat", "zero"})

_PARAM = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|\$(\d+)")


class SpanLike(Protocol):
    """An epoch of the history as the ledger gives it (``lapras.ledger.base.EpochSpan``)."""

    @property
    def id(self) -> int: ...
    @property
    def started_at(self) -> float: ...
    @property
    def ended_at(self) -> float | None: ...


class RecordLike(Protocol):
    """A history row as the ledger gives it (``lapras.ledger.base.HistoryRow``)."""

    @property
    def epoch_id(self) -> int: ...
    @property
    def at(self) -> float: ...
    @property
    def sql(self) -> str: ...
    @property
    def params(self) -> Sequence[Any] | None: ...
    @property
    def outcome(self) -> str: ...
    @property
    def zone(self) -> str | None: ...


def epochs_to_read(epoch_seconds: float | None) -> int:
    """How many of the newest epochs a learning reads (see MIN_EPOCHS, MAX_EPOCHS)."""
    if not epoch_seconds:
        return 60
    return max(MIN_EPOCHS, min(MAX_EPOCHS, math.ceil(28 * 86400 / epoch_seconds) if epoch_seconds >= 86400
                                else math.ceil(8 * 86400 / epoch_seconds)))


def literal(value: Any) -> str:
    """A bound parameter written as an SQL literal (text quoted, NULL, numbers and booleans as such)."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int | float):
        return repr(value)
    return "'" + str(value).replace("'", "''") + "'"


def inline_params(sql: str, params: Sequence[Any] | None) -> str:
    """``sql`` with its ``$n`` placeholders replaced by their values (quoted strings left alone)."""
    if not params:
        return sql

    def sub(m: re.Match[str]) -> str:
        if m.group(1) is None:
            return m.group(0)
        i = int(m.group(1)) - 1
        return literal(params[i]) if 0 <= i < len(params) else m.group(0)

    return _PARAM.sub(sub, sql)


def statement_text(r: RecordLike) -> str:
    """The recorded statement as the predictor plans it: parameters inlined, and the session's TimeZone
    (``zoned_text``) when it was not UTC, so that a Berlin session's days are predicted, not UTC's."""
    return tagged(inline_params(r.sql, r.params), r.zone)


def history_epochs(spans: Sequence[SpanLike], rows: Sequence[RecordLike], catalog: Catalog | None,
                   epoch_seconds: float | None) -> tuple[Epochs, list[float]]:
    """The history as the predictor's epochs (bucket i = the i-th span, oldest first) and each span's
    length in hours."""
    index = {s.id: i for i, s in enumerate(spans)}
    seen: set[tuple[int, str]] = set()
    statements_by_epoch: list[list[LogStatement]] = [[] for _ in spans]
    for r in rows:
        i = index.get(r.epoch_id)
        if i is None or r.outcome in NOT_ITEMS:
            continue
        sql = statement_text(r)
        if (i, sql) in seen:
            continue  # counted once per epoch anyway (stream items); canonicalising it again costs time
        seen.add((i, sql))
        statements_by_epoch[i].append(LogStatement(datetime(1970, 1, 1), None, None, sql, 0))
    lengths = [((s.ended_at or s.started_at) - s.started_at) / 3600 for s in spans]
    hours = epoch_seconds / 3600 if epoch_seconds else (
        sorted(x for x in lengths if x > 0)[len([x for x in lengths if x > 0]) // 2] if any(lengths) else 24.0)
    origin = datetime.fromtimestamp(spans[0].started_at, UTC).replace(tzinfo=None) if spans else datetime(1970, 1, 1)
    buckets = []
    for sts in statements_by_epoch:
        ep, _, _ = bucket(sts, 1e9, catalog, origin=datetime(1970, 1, 1), stream_items=True)
        buckets.append(ep.buckets[0] if ep.buckets else [])
    return Epochs(origin, hours, buckets), lengths


def learn(spans: Sequence[SpanLike], rows: Sequence[RecordLike], catalog: Catalog | None, *,
          epoch_seconds: float | None, now: float, cost: CostModel | None = None,
          overlap: bool = True, time_limit: float | None = None) -> PredictionSet | None:
    """P, S and rho for the epoch after the newest span, or None when the history holds no statement.

    The newest span may still be open: a timed epoch prepared ahead of its boundary has seen most of its
    statements but not all. Its statements count for P (a dashboard's panels asked so far), while S comes
    from the completed epochs alone (a partial count would make S too small)."""
    if not spans or not any(r.outcome not in NOT_ITEMS for r in rows):
        return None
    epochs, _ = history_epochs(spans, rows, catalog, epoch_seconds)
    n = len(epochs.buckets)
    last = spans[-1]
    # Prepared ahead of a timed boundary (the epoch preparer starts at 90% of the epoch): the newest epoch
    # is still running. Earlier than that the epoch is being ended now (SELECT lapras.new_epoch()).
    elapsed = now - last.started_at
    running = (last.ended_at is None and epoch_seconds is not None
               and 0.85 * epoch_seconds <= elapsed < epoch_seconds)
    partial = running and n >= 2
    if n == 1:
        # One epoch of history says nothing yet about what recurs: predict all it asked (a dashboard opened
        # again tomorrow is the likely case, and the auto split sizes P's share by the expected hits) and
        # take its item count as S (scaled up when the epoch is still running).
        pset = train(epochs, n, catalog, cost, threshold=0.0)
        # Statements asked more than once in the epoch (a dashboard reopened, refreshed) are the ones that
        # recur: P keeps those when there are any, and its expected overlap is their share of the items.
        asked: dict[str, int] = {}
        for r in rows:
            if r.epoch_id == last.id:
                key = canonical_key(statement_text(r), catalog)
                if key is not None:
                    asked[key] = asked.get(key, 0) + 1
        again = {k for k, c in asked.items() if c > 1}
        if again:
            pset.queries = [q for q in pset.queries if q.canonical_key in again]
        items = len(epochs.buckets[0])
        if running and epoch_seconds is not None:
            items = round(items * epoch_seconds / elapsed)
        pset.s_estimate = items
        if again:
            pset.rho_estimate = round(min(1.0, len(pset.queries) / items), 4) if items else 0.0
        else:
            pset.stats["rho_unknown"] = True  # no evidence yet of what recurs: the engine's default overlap
        pset.stats["history_epochs"] = 1
        return pset
    t0 = time.monotonic()
    pset = train(epochs, n, catalog, cost)
    seconds = time.monotonic() - t0
    in_p = pset.rho_estimate * pset.s_estimate  # P's expected hits under the model
    # S: the stream items per epoch forecast from the completed epochs by their calendar class (weekday
    # or hour of day when the history shows the pattern), not the sum of the keys' probabilities, which
    # is biased low on a steady workload (a key seen every day has p < 1 after a finite history).
    series = [float(len(b)) for b in (epochs.buckets[:-1] if partial else epochs.buckets)]
    weekday = epochs.weekday_of if abs(epochs.hours - 24) < 1e-9 else None
    volume = forecast(series, n, level_models(weekday, epochs.hours))
    pset.stats["s_model"] = pset.s_estimate
    pset.stats["s_volume"] = {"model": volume.model, "errors": volume.errors}
    pset.s_estimate = max(1, round(volume.value))
    pset.rho_estimate = round(min(1.0, in_p / pset.s_estimate), 4)
    # The measured overlap trains the model seven more times: only when that fits a quarter of the time
    # the epoch's preparation is given (``time_limit``, the matrix mechanism's), else the model's rho.
    if overlap and n >= 8 and (time_limit is None or 7 * seconds <= time_limit / 4):
        measure_overlap(pset, epochs, catalog, cost)
    pset.stats["history_epochs"] = n
    pset.epoch_start = epochs.origin + timedelta(hours=epochs.hours * n)
    return pset
