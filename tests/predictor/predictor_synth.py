"""Synthetic query logs for the predictor's tests: recurring panels on various schedules, reports whose
literals advance (counters, dates, cyclic categories, sliding ranges), and ad hoc one-offs as noise.

Deliberately different from the shared Adult sample (other tables, schedules and literal patterns), so the
tests check that the predictor generalises rather than fits one file.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime, timedelta

START = date(2026, 3, 2)  # a Monday


@dataclass(frozen=True)
class Recurring:
    """A query that runs on the days ``when(day_index, weekday)`` says, with probability ``q``."""

    sql: Callable[[int], str]  # day index -> SQL (constant for panels, advancing for reports)
    when: Callable[[int, int], bool]
    q: float = 1.0
    kind: str = "dash"
    hour: int = 8


def daily(d: int, wd: int) -> bool:
    return True


def business(d: int, wd: int) -> bool:
    return wd < 5


def weekly(day: int) -> Callable[[int, int], bool]:
    return lambda d, wd: wd == day


def every(k: int, phase: int = 0) -> Callable[[int, int], bool]:
    return lambda d, wd: d % k == phase


def const(sql: str) -> Callable[[int], str]:
    return lambda d: sql


def adhoc_sql(rng: random.Random) -> str:
    """A one-off analyst query from a large space (repeats are possible but rare)."""
    table = rng.choice(["sales", "visits", "claims"])
    col = rng.choice(["amount", "duration", "units"])
    lo = rng.randint(0, 5000)
    hi = lo + rng.randint(1, 3000)
    region = rng.choice(["north", "south", "east", "west", "central"])
    shape = rng.randrange(3)
    if shape == 0:
        return f"SELECT COUNT(*) FROM {table} WHERE {col} BETWEEN {lo} AND {hi}"
    if shape == 1:
        return f"SELECT SUM({col}) FROM {table} WHERE region = '{region}' AND {col} >= {lo}"
    return f"SELECT region, AVG({col}) FROM {table} WHERE {col} < {hi} GROUP BY region"


def generate(
    items: list[Recurring], days: int, adhoc_per_day: int = 10, seed: int = 0,
    adhoc_by_weekday: tuple[int, ...] | None = None,
) -> list[tuple[datetime, str, str]]:
    """(timestamp, sql, kind) rows in time order; ``adhoc_by_weekday`` (Monday first) gives each day of the
    week its own mean number of one-offs (binomial around it) instead of ``adhoc_per_day`` exactly."""
    rng = random.Random(seed)
    rows: list[tuple[datetime, str, str]] = []
    for d in range(days):
        day = START + timedelta(days=d)
        base = datetime.combine(day, datetime.min.time())
        for it in items:
            if it.when(d, day.weekday()) and rng.random() < it.q:
                ts = base + timedelta(hours=it.hour, seconds=rng.randint(0, 3000))
                rows.append((ts, it.sql(d), it.kind))
        n_adhoc = adhoc_per_day
        if adhoc_by_weekday is not None:
            mean = adhoc_by_weekday[day.weekday()]
            n_adhoc = sum(rng.random() < 0.5 for _ in range(2 * mean))
        for _ in range(n_adhoc):
            ts = base + timedelta(seconds=rng.randint(0, 86399))
            rows.append((ts, adhoc_sql(rng), "adhoc"))
    rows.sort(key=lambda r: r[0])
    return rows


def to_stderr(
    rows: list[tuple[datetime, str, str]], prefix: str = "{ts}.000 UTC [{pid}] {user}@shop "
) -> str:
    out = []
    for i, (ts, sql, _) in enumerate(rows):
        head = prefix.format(ts=ts.strftime("%Y-%m-%d %H:%M:%S"), pid=1000 + i % 50, user="bi")
        out.append(f"{head}LOG:  statement: {sql}")
        if i % 7 == 0:
            out.append(f"{head}LOG:  duration: 1.{i % 10}00 ms")
    return "\n".join(out) + "\n"


def to_truth(rows: list[tuple[datetime, str, str]]) -> str:
    import csv
    import io

    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["ts", "kind", "sql"])
    for ts, sql, kind in rows:
        w.writerow([ts.isoformat(), kind, sql])
    return buf.getvalue()
