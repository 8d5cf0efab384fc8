"""Back-test: replay a log epoch by epoch and measure how well P would have covered each epoch.

For each epoch d after the first ``min_train`` (rolling mode), train on epochs < d, predict P for d and
compare with what d actually received:

- recall: share of d's statements (every occurrence counts) whose canonical key is in P;
- precision: share of P's keys that occurred in d;
- S: the estimate against the true number of statements (and what it would be without the calendar);
- rho: the overlap the predictor announced against the recall it got.

``fixed`` mode trains once on the first ``train_epochs`` epochs and predicts each later epoch from that
same window (a forecast several epochs ahead). A truth file (``ts,kind,sql``; evaluation only, never seen
by training) adds the recall restricted to the recurring kinds.
"""

from __future__ import annotations

import csv
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from parser.model.schema import Catalog
from predictor.canonical import canonical_key
from predictor.logs import LogStatement, parse_timestamp
from predictor.predict import Epochs, bucket, train
from predictor.utility import CostModel

RECURRING_KINDS = ("dash", "report")


@dataclass(frozen=True)
class DayResult:
    day: str
    epoch: int
    recall: float
    precision: float
    s_estimate: int
    s_true: int
    p_size: int
    rho_estimate: float
    recurring_recall: float | None = None
    recurring_share: float | None = None
    s_model: str = "daily"  # how the unexplained volume was forecast (predictor.volume)
    s_flat: int | None = None  # S had that volume been forecast without the calendar

    def as_record(self) -> dict[str, Any]:
        return asdict(self)


def load_truth(path: str | Path) -> list[tuple[Any, str, str]]:
    """Rows (timestamp, kind, sql) of an evaluation truth file."""
    out = []
    with open(path, newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            ts = parse_timestamp(row.get("ts", ""))
            if ts is not None:
                out.append((ts, row.get("kind", ""), row.get("sql", "")))
    return out


def backtest(
    statements: Iterable[LogStatement],
    epoch_hours: float = 24.0,
    min_train: int = 7,
    catalog: Catalog | None = None,
    cost: CostModel | None = None,
    threshold: float | None = None,
    truth: Sequence[tuple[Any, str, str]] | None = None,
    mode: str = "rolling",
    train_epochs: int | None = None,
    stream_items: bool = True,
) -> list[DayResult]:
    # S and its truth in the allocation's units: a statement counted once per epoch (repeats are free).
    epochs, _, _ = bucket(statements, epoch_hours, catalog, stream_items=stream_items)
    n = len(epochs.buckets)
    truth_by_epoch: dict[int, list[tuple[str, str]]] = {}
    if truth is not None:
        for ts, kind, sql in truth:
            truth_by_epoch.setdefault(epochs.index_of(ts), []).append((kind, sql))
    results: list[DayResult] = []
    if mode == "fixed":
        k = train_epochs if train_epochs is not None else min_train
        window = Epochs(epochs.origin, epochs.hours, epochs.buckets[:k])
        targets = range(k, n)
    else:
        targets = range(min_train, n)
    for d in targets:
        if mode != "fixed":
            window = Epochs(epochs.origin, epochs.hours, epochs.buckets[:d])
        pset = train(window, d, catalog, cost, threshold)
        keys = pset.keys
        resid = pset.stats.get("residual_volume", {})
        day = Counter(o.key for o in epochs.buckets[d])
        s_true = sum(o.count for o in epochs.buckets[d])
        hits = sum(o.count for o in epochs.buckets[d] if o.key in keys)
        recall = hits / s_true if s_true else 1.0
        precision = sum(1 for k in keys if k in day) / len(keys) if keys else 1.0
        rec_recall = rec_share = None
        if truth is not None:
            rows = truth_by_epoch.get(d, [])
            recurring = [sql for kind, sql in rows if kind in RECURRING_KINDS]
            if recurring:
                rec_recall = sum(1 for sql in recurring if canonical_key(sql, catalog) in keys) / len(
                    recurring
                )
            rec_share = len(recurring) / len(rows) if rows else None
        results.append(
            DayResult(
                day=epochs.start_of(d).date().isoformat()
                if epochs.hours == 24
                else epochs.start_of(d).isoformat(),
                epoch=d,
                recall=round(recall, 4),
                precision=round(precision, 4),
                s_estimate=pset.s_estimate,
                s_true=s_true,
                p_size=len(keys),
                rho_estimate=pset.rho_estimate,
                recurring_recall=None if rec_recall is None else round(rec_recall, 4),
                recurring_share=None if rec_share is None else round(rec_share, 4),
                s_model=str(resid.get("model", "daily")),
                s_flat=max(0, round(pset.s_estimate - resid.get("value", 0.0) + resid.get("flat", 0.0))),
            )
        )
    return results


def format_table(results: Sequence[DayResult]) -> str:
    """The per-day table printed by ``predict --backtest`` (plus a mean row)."""
    has_truth = any(r.recurring_recall is not None for r in results)
    head = ["day", "recall", "precision", "S est", "S true", "S err", "|P|", "rho est"]
    if has_truth:
        head[2:2] = ["recurring recall", "recurring share"]
    rows = [head]
    for r in results:
        err = (r.s_estimate - r.s_true) / r.s_true if r.s_true else 0.0
        row = [
            r.day,
            f"{r.recall:.3f}",
            f"{r.precision:.3f}",
            str(r.s_estimate),
            str(r.s_true),
            f"{err:+.1%}",
            str(r.p_size),
            f"{r.rho_estimate:.3f}",
        ]
        if has_truth:
            row[2:2] = [
                f"{r.recurring_recall:.3f}" if r.recurring_recall is not None else "-",
                f"{r.recurring_share:.3f}" if r.recurring_share is not None else "-",
            ]
        rows.append(row)
    if results:
        k = len(results)
        mean = [
            "mean",
            f"{sum(r.recall for r in results) / k:.3f}",
            f"{sum(r.precision for r in results) / k:.3f}",
            f"{sum(r.s_estimate for r in results) / k:.1f}",
            f"{sum(r.s_true for r in results) / k:.1f}",
            f"{sum(abs(r.s_estimate - r.s_true) / r.s_true for r in results if r.s_true) / k:.1%} abs",
            f"{sum(r.p_size for r in results) / k:.1f}",
            f"{sum(r.rho_estimate for r in results) / k:.3f}",
        ]
        if has_truth:
            rr = [r.recurring_recall for r in results if r.recurring_recall is not None]
            rs = [r.recurring_share for r in results if r.recurring_share is not None]
            mean[2:2] = [f"{sum(rr) / len(rr):.3f}" if rr else "-", f"{sum(rs) / len(rs):.3f}" if rs else "-"]
        rows.append(mean)
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    lines = ["  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)
