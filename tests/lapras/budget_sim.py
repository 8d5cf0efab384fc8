"""A week of a dashboard through the real engine: in-memory ledger, the proxy's statement history and its
learner, the real pacing code; what share of each epoch's budget is spent, and where refusals fall.

Each epoch: the same ``panels`` (a dashboard opened ``opens`` times: later openings are free repeats) and
``ad_hoc`` fresh unpredicted statements, spread over the epoch. Epochs are manual (``new_epoch``)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
from engine_helpers import CATALOG, make_hist

import parser as sqlparser
from lapras import BudgetExhausted, Engine, EngineSettings, MemoryLedger
from lapras.exact import HistogramExactSource
from lapras.history import StatementHistory
from proxy.dp.engine_factory import history_learner

PANELS = ([f"SELECT count(*) FROM t WHERE c BETWEEN {lo} AND {lo + 9}" for lo in range(0, 40, 5)]
          + [f"SELECT b, count(*) FROM t WHERE a = {a} GROUP BY b" for a in range(4)])


@dataclass
class EpochResult:
    spent: float  # share of the stream budget's units (mu^2) spent by the epoch's end
    items: int
    refused: list[int] = field(default_factory=list)  # positions (1-based, among fresh statements) refused
    predicted: int = 0
    s: int = 0


def ad_hoc(day: int, k: int, seed: int) -> list[str]:
    rng = np.random.default_rng([seed, day])
    out: list[str] = []
    while len(out) < k:
        lo, hi = sorted(int(v) for v in rng.integers(0, 40, 2))
        a = int(rng.integers(0, 10))
        sql = f"SELECT count(*) FROM t WHERE c BETWEEN {lo} AND {hi} AND a = {a}"
        if sql not in out:
            out.append(sql)
    return out


def run(days: int, ad_hoc_per_day: list[int] | int = 4, opens: int = 4, seed: int = 0,
        settings: EngineSettings | None = None, predict: bool = True) -> list[EpochResult]:
    """``predict`` false: the learner learns S only (``learn_prediction = false``, ``learn_stream = true``)."""
    st = settings or EngineSettings(epsilon=1.0, delta=1e-3, epoch="manual", stream_length=200,
                                    mm_time_limit=5.0)
    ledger = MemoryLedger()
    history = StatementHistory(ledger, background=False)
    engine = Engine(CATALOG, ledger, HistogramExactSource({"t": (("a", "b", "c"), make_hist())}), st,
                    predictions=history_learner(ledger, history, None, st.split, predict=predict), history=history,
                    rng=np.random.default_rng(seed))
    rng = np.random.default_rng(seed)
    out: list[EpochResult] = []
    try:
        for day in range(days):
            if day:
                engine.new_epoch()
            k = ad_hoc_per_day if isinstance(ad_hoc_per_day, int) else ad_hoc_per_day[day]
            fresh = ad_hoc(day, k, seed)
            # The dashboard's openings split the day; ad hoc statements fall anywhere in it.
            stream = [s for _ in range(opens) for s in PANELS]
            for s in fresh:
                stream.insert(int(rng.integers(0, len(stream) + 1)), s)
            res = EpochResult(0.0, 0, s=engine._epoch.spec.s)  # type: ignore[union-attr]
            position = 0
            seen: set[str] = set()
            for sql in stream:
                plan = sqlparser.plan_query(sql, CATALOG)
                new = sql not in seen
                seen.add(sql)
                position += new
                try:
                    ans = engine.lookup(plan) or engine.answer(plan, "dash")
                    engine.record_statement(sql, None, ans.outcome)
                    res.predicted += ans.predicted
                except BudgetExhausted:
                    engine.record_statement(sql, None, "refused")
                    if new:
                        res.refused.append(position)
            ep = ledger.current_epoch()
            assert ep is not None
            res.spent = ep.spent_units / ep.spec.budget.units
            res.items = position
            out.append(res)
    finally:
        engine.close()
    return out


def with_settings(**kw: object) -> EngineSettings:
    return replace(EngineSettings(epsilon=1.0, delta=1e-3, epoch="manual", stream_length=200, mm_time_limit=5.0),
                   **kw)
