"""A generated 21-day BI query log over the Adult table, in PostgreSQL's stderr and csvlog formats, with
its truth file (ts, kind, sql), so the tests that need realistic traffic stand alone without ../shared.

The traffic has the structure of a BI deployment: dashboards whose panels refresh daily or on business
days (each refresh skipped now and then), reports whose literals advance from day to day, and ad hoc
analyst queries drawn from a space too large to repeat often. Columns and domains follow the demo Adult
table (proxy's config.toml), so every statement plans against it.
"""

from __future__ import annotations

import csv
import io
import random
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from pathlib import Path

START = date(2026, 10, 1)
SMALL = {"workclass": 9, "education_num": 16, "marital_status": 7, "relationship": 6, "race": 5, "sex": 2,
         "income_gt_50k": 2}
MEASURES = ("age", "hours_per_week")

Row = tuple[datetime, str, str, str]  # (timestamp, user, kind, sql)


@dataclass(frozen=True)
class Panel:
    """One recurring statement: runs on the days ``when`` allows, with probability ``q``, near ``hour``."""

    sql: Callable[[int], str]
    when: Callable[[int], bool]
    user: str
    kind: str
    hour: int
    q: float


def _weekday(d: int) -> int:
    return (START + timedelta(days=d)).weekday()


def _panel_sql(rng: random.Random) -> str:
    group = rng.choice(list(SMALL))
    col, val = rng.choice([(c, rng.randrange(n)) for c, n in SMALL.items() if c != group])
    agg = rng.choice(["COUNT(*)", f"SUM({rng.choice(MEASURES)})", f"AVG({rng.choice(MEASURES)})"])
    if rng.random() < 0.5:
        return f"SELECT {group}, {agg} FROM adult WHERE {col} = {val} GROUP BY {group}"
    return f"SELECT {agg} FROM adult WHERE {col} = {val} AND age >= {rng.randint(18, 60)}"


def _report_sql(rng: random.Random) -> Callable[[int], str]:
    col = rng.choice(list(SMALL))
    n = SMALL[col]
    other = rng.choice([c for c in SMALL if c != col])
    lo = rng.randint(17, 40)
    # The literal advances with the day: a report over one category per day, cycling, or a sliding range.
    if rng.random() < 0.5:
        return lambda d: f"SELECT COUNT(*) FROM adult WHERE {col} = {d % n} AND {other} >= 0"
    return lambda d: f"SELECT COUNT(*) FROM adult WHERE age BETWEEN {lo + d % 30} AND {lo + d % 30 + 9}"


def _adhoc_sql(rng: random.Random) -> str:
    cols = rng.sample(list(SMALL), 2)
    conds = [f"{c} = {rng.randrange(SMALL[c])}" for c in cols[: rng.randint(1, 2)]]
    a = rng.randint(17, 80)
    if rng.random() < 0.5:
        conds.append(f"age BETWEEN {a} AND {rng.randint(a, 90)}")
    if rng.random() < 0.3:
        conds.append(f"hours_per_week >= {rng.randint(1, 80)}")
    where = " AND ".join(conds)
    shape = rng.randrange(3)
    if shape == 0:
        return f"SELECT COUNT(*) FROM adult WHERE {where}"
    if shape == 1:
        return f"SELECT AVG({rng.choice(MEASURES)}) FROM adult WHERE {where}"
    g = rng.choice([c for c in SMALL if c not in cols])
    return f"SELECT {g}, COUNT(*) FROM adult WHERE {where} GROUP BY {g}"


def panels(seed: int = 0, dashboards: int = 6, per_dashboard: int = 8, reports: int = 3) -> list[Panel]:
    rng = random.Random(seed)
    out: list[Panel] = []
    for i in range(dashboards):
        daily = i % 3 != 2  # every third dashboard is a business-day one
        when: Callable[[int], bool] = (lambda d: True) if daily else (lambda d: _weekday(d) < 5)
        user, hour = rng.choice(["metabase", "superset", "grafana"]), rng.randint(6, 10)
        for _ in range(per_dashboard):
            sql = _panel_sql(rng)
            out.append(Panel(lambda d, s=sql: s, when, user, "dash", hour, 0.95))
    for _ in range(reports):
        out.append(Panel(_report_sql(rng), lambda d: True, "reports", "report", 5, 1.0))
    return out


def generate(days: int = 21, adhoc_per_day: int = 25, seed: int = 0) -> list[Row]:
    """The log's statements in time order."""
    rng = random.Random(seed + 1)
    rows: list[Row] = []
    items = panels(seed)
    for d in range(days):
        base = datetime.combine(START + timedelta(days=d), datetime.min.time())
        for p in items:
            if p.when(d) and rng.random() < p.q:
                rows.append((base + timedelta(hours=p.hour, seconds=rng.randint(0, 3000)), p.user, p.kind,
                             p.sql(d)))
        for _ in range(adhoc_per_day):
            rows.append((base + timedelta(seconds=rng.randint(0, 86399)), "analyst", "adhoc", _adhoc_sql(rng)))
    rows.sort(key=lambda r: r[0])
    return rows


def to_stderr(rows: list[Row]) -> str:
    """PostgreSQL's stderr format with log_line_prefix '%m [%p] %u@%d ', duration lines included."""
    out = []
    for i, (ts, user, _, sql) in enumerate(rows):
        head = f"{ts:%Y-%m-%d %H:%M:%S}.000 UTC [{1000 + i % 97}] {user}@analytics "
        out.append(f"{head}LOG:  statement: {sql}")
        if i % 5 == 0:
            out.append(f"{head}LOG:  duration: {1 + i % 13}.{i % 1000:03d} ms")
    return "\n".join(out) + "\n"


def to_csvlog(rows: list[Row]) -> str:
    """PostgreSQL's csvlog format (the message is field 14, as the server writes it)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    for i, (ts, user, _, sql) in enumerate(rows):
        stamp = f"{ts:%Y-%m-%d %H:%M:%S}.000 UTC"
        w.writerow([stamp, user, "analytics", 1000 + i % 97, "127.0.0.1:5000", "", i, "SELECT", "", "", "",
                    "LOG", "00000", f"statement: {sql}", *[""] * 11])
    return buf.getvalue()


def to_truth(rows: list[Row]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["ts", "kind", "sql"])
    for ts, _, kind, sql in rows:
        w.writerow([ts.isoformat(), kind, sql])
    return buf.getvalue()


def write(directory: Path, seed: int = 0) -> dict[str, Path]:
    """Writes adult_bi_21d.{log,csv,truth.csv} into ``directory`` and returns their paths by format."""
    rows = generate(seed=seed)
    paths = {"stderr": directory / "adult_bi_21d.log", "csvlog": directory / "adult_bi_21d.csv",
             "truth": directory / "adult_bi_21d.truth.csv"}
    paths["stderr"].write_text(to_stderr(rows))
    paths["csvlog"].write_text(to_csvlog(rows))
    paths["truth"].write_text(to_truth(rows))
    return paths
