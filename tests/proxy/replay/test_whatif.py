"""`lapras-proxy whatif` on a generated log with known recurring structure, against the embedded PostgreSQL.

Seven days: five dashboard panels opened every morning and refreshed once (the refresh is a free repeat),
and eight one-off range counts a day. Checked against computations made here, independently of the tool:
the statement counts from the log itself, the exact answers from PostgreSQL running each statement's own
SQL, the stop rule (after a refusal only repeats are answered), and the stated standard errors.
"""

from __future__ import annotations

import json
import random
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import psycopg
import pytest
from scipy import stats

from lapras.exact import PostgresExactSource
from predictor.logs import read_log
from proxy.dp.engine_factory import engine_settings
from proxy.ops.cli import main
from proxy.replay.whatif.exact import SnapshotExactSource
from proxy.replay.whatif.simulate import WhatIfOptions, simulate

REPO = Path(__file__).resolve().parents[3]
DAYS = 7
PANELS = [
    "SELECT COUNT(*) FROM adult WHERE sex = 1",
    "SELECT race, COUNT(*) FROM adult GROUP BY race",
    "SELECT sex, COUNT(*) FROM adult WHERE income_gt_50k = 1 GROUP BY sex",
    "SELECT SUM(hours_per_week) FROM adult WHERE race = 0",
    "SELECT COUNT(*) FROM adult WHERE relationship = 2",
]
ADHOC = 8


def _log(path: Path, seed: int = 3) -> list[tuple[datetime, str, str]]:
    rng = random.Random(seed)
    rows: list[tuple[datetime, str, str]] = []
    used: set[tuple[int, int]] = set()
    for d in range(DAYS):
        day = datetime(2026, 5, 4) + timedelta(days=d)
        for i, sql in enumerate(PANELS):
            rows.append((day + timedelta(hours=8, minutes=i), sql, "dash"))
            rows.append((day + timedelta(hours=11, minutes=i), sql, "dash"))  # the refresh: a repeat
        for k in range(ADHOC):
            while True:
                lo = rng.randint(17, 70)
                hi = lo + rng.randint(3, 15)
                if (lo, hi) not in used:
                    used.add((lo, hi))
                    break
            rows.append((day + timedelta(hours=13, minutes=7 * k), f"SELECT COUNT(*) FROM adult WHERE age BETWEEN {lo} AND {hi}", "adhoc"))
    rows.sort()
    path.write_text("".join(f"{ts:%Y-%m-%d %H:%M:%S}.000 UTC [42] bi@adult LOG:  statement: {sql}\n"
                            for ts, sql, _ in rows))
    return rows


def _config(tmp_path: Path, dsn: str) -> Path:
    text = (REPO / "config.toml").read_text().replace('dsn = ""', f"dsn = {json.dumps(dsn)}", 1)
    path = tmp_path / "config.toml"
    path.write_text(text)
    return path


def _exact_cells(dsn: str, sql: str) -> np.ndarray:
    """PostgreSQL's own answer to the statement, one row per group in domain order (the tool's order)."""
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(sql).fetchall()
    if len(rows) == 1 and len(rows[0]) == 1:
        return np.array([[float(rows[0][0] or 0)]])
    return np.array([[float(r[-1])] for r in sorted(rows, key=lambda r: r[0])])


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[tuple[datetime, str, str]]]:
    path = tmp_path_factory.mktemp("whatif") / "bi.log"
    return path, _log(path)


def test_counts_errors_and_stated_stderr(generated, adult_db: str, default_config) -> None:
    path, rows = generated
    statements, _ = read_log(path)
    exact = SnapshotExactSource(PostgresExactSource(adult_db))
    result = simulate(statements, default_config.catalog, engine_settings(default_config, progress=False), exact,
                      WhatIfOptions(epsilons=(1.0, 4.0), stream_length=100, seed=11, workers=2))
    assert len(result.runs) == DAYS * 2 * 2
    assert [(r.epoch, r.epsilon, r.with_p) for r in result.runs] == [
        (d, e, p) for d in range(DAYS) for e in (1.0, 4.0) for p in (True, False)]  # in order, from 2 processes
    pg_cache: dict[str, np.ndarray] = {}
    zs: list[float] = []
    for run in result.runs:
        outs = run.outcomes
        # Counts from the log: every statement replayed; each panel's refresh is a free repeat; with an S
        # well above the day's volume nothing is refused.
        assert len(outs) == len(PANELS) * 2 + ADHOC
        assert sum(o.outcome == "free" for o in outs) == len(PANELS)
        assert sum(o.outcome == "refused" for o in outs) == 0
        if not run.with_p:
            assert sum(o.outcome == "from_p" for o in outs) == 0
            assert sum(o.outcome == "fresh" for o in outs) == len(PANELS) + ADHOC
        elif run.epoch >= 4:
            # Four days of history: the five daily panels are in P and answered from its release, the
            # one-offs are not.
            assert sum(o.outcome == "from_p" for o in outs) == len(PANELS), run.day
            assert sum(o.outcome == "fresh" for o in outs) == ADHOC
        day_rows = [r for r in rows if r[0].date().isoformat() == run.day]
        for (_ts, sql, _), o in zip(day_rows, outs, strict=True):
            assert o.released is not None and o.abs_error is not None
            if sql not in pg_cache:
                pg_cache[sql] = _exact_cells(adult_db, sql)
            want = pg_cache[sql]
            # The tool's error is the one computed from PostgreSQL's own answer to the SQL.
            assert o.abs_error == pytest.approx(float(np.abs(o.released - want).mean()), rel=1e-9, abs=1e-9)
            if o.outcome in ("fresh", "from_p") and want.shape == (1, 1):
                assert o.stderrs is not None and o.stderrs[0] > 0
                zs.append(float((o.released[0, 0] - want[0, 0]) / o.stderrs[0]))
    # The stated standard errors are honest: sum of z^2 is chi-square with len(zs) degrees of freedom.
    n = len(zs)
    assert n > 150
    chi = sum(z * z for z in zs)
    assert stats.chi2.ppf(0.0005, n) < chi < stats.chi2.ppf(0.9995, n), chi / n
    # Exact work is shared: each marginal fetched once for all runs.
    assert exact.marginal_fetches <= 6
    assert result.strategy_cache[0] > result.strategy_cache[1]  # P's strategies reused across budgets and days


def test_refusals_follow_the_stop_rule(generated, adult_db: str, default_config) -> None:
    """S = 4 while 18 statements come: the stream stops early, after which only repeats are answered."""
    path, rows = generated
    statements, _ = read_log(path)
    exact = SnapshotExactSource(PostgresExactSource(adult_db))
    result = simulate(statements, default_config.catalog, engine_settings(default_config, progress=False), exact,
                      WhatIfOptions(epsilons=(1.0,), stream_length=4, days=(0, 2), without_p=False))
    refused_total = 0
    for run in result.runs:
        day_sql = [sql for ts, sql, _ in rows if ts.date().isoformat() == run.day]
        outs = run.outcomes
        stop = next(i for i, o in enumerate(outs) if o.outcome == "refused")
        answered: set[str] = set()
        expected_refused = 0
        for i, (sql, o) in enumerate(zip(day_sql, outs, strict=True)):
            if i >= stop:
                # Independent rule: after the stop, a statement is answered iff it repeats one answered
                # earlier that day.
                assert (o.outcome == "free") == (sql in answered), (i, o.outcome)
                expected_refused += sql not in answered
            if o.outcome != "refused":
                answered.add(sql)
        assert sum(o.outcome == "refused" for o in outs) == expected_refused
        refused_total += expected_refused
    assert refused_total >= 3


def test_same_seed_same_figures(generated, adult_db: str, default_config) -> None:
    """Noise is seeded per run and day in a what-if (never in the proxy): a replay is reproducible."""
    path, _ = generated
    statements, _ = read_log(path)
    got = []
    for _ in range(2):
        exact = SnapshotExactSource(PostgresExactSource(adult_db))
        result = simulate(statements, default_config.catalog, engine_settings(default_config, progress=False),
                          exact, WhatIfOptions(epsilons=(1.0,), stream_length=100, days=(4, 5), seed=5))
        exact.close()
        got.append([o.released for r in result.runs for o in r.outcomes])
    assert all(np.array_equal(a, b) for a, b in zip(*got, strict=True))


def test_cli_json_and_report(generated, adult_db: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path, _ = generated
    cfg = _config(tmp_path, adult_db)
    out_json, report = tmp_path / "w.json", tmp_path / "report"
    code = main(["whatif", str(path), "--config", str(cfg), "--epsilon", "0.5,2", "--days", "6:7",
                 "--json", str(out_json), "--report", str(report), "--no-progress"])
    assert code == 0
    printed = capsys.readouterr().out
    assert "at epsilon = 0.5 per day" in printed and "Without P" in printed
    doc = json.loads(out_json.read_text())
    recs = doc["records"]
    assert {(r["day"], r["epsilon"], r["with_p"]) for r in recs} == {
        (d, e, p) for d in ("2026-05-09", "2026-05-10") for e in (0.5, 2.0) for p in (True, False)}
    for r in recs:
        for k in ("statements", "fresh", "from_p", "free", "refused", "mae", "median_rel_error"):
            assert k in r
        assert r["statements"] == r["fresh"] + r["from_p"] + r["free"] + r["refused"] == 18
    assert out_json.stat().st_mode & 0o077 == 0  # operator only
    assert (report / "whatif.png").stat().st_size > 10_000
    page = (report / "whatif.html").read_text()
    assert "data:image/png;base64," in page and "Operator only" in page


def test_json_of_one_statement_gives_back_no_exact_answer(adult_db: str, tmp_path: Path) -> None:
    """A log of one statement: its MAE and relative error would give back its exact answer (|exact| = MAE /
    relative error), its z times the stated error the exact deviation. Error figures of fewer than
    MIN_STATEMENTS statements are null, in every record, total and kind; the exact count appears nowhere."""
    from proxy.replay.whatif.figures import MIN_STATEMENTS

    sql = "SELECT COUNT(*) FROM adult WHERE age BETWEEN 30 AND 34"
    log = tmp_path / "one.log"
    log.write_text(f"2026-05-04 09:00:00.000 UTC [42] bi@adult LOG:  statement: {sql}\n")
    out_json = tmp_path / "one.json"
    code = main(["whatif", str(log), "--config", str(_config(tmp_path, adult_db)), "--epsilon", "1",
                 "--json", str(out_json), "--no-progress"])
    assert code == 0
    doc = json.loads(out_json.read_text())
    (exact,) = _exact_cells(adult_db, sql)[0]
    figures = [*doc["records"], *doc.get("totals", [])]
    figures += [k for f in list(figures) for k in f["by_kind"].values()]
    answered = [f for f in figures if f["statements"] == 1 and f["refused"] == 0]
    assert answered, doc
    for f in figures:
        if f["statements"] < MIN_STATEMENTS:
            assert f["mae"] is None and f["median_rel_error"] is None and f.get("z_rms") is None, f

    def numbers(x: object) -> list[float]:
        if isinstance(x, dict):
            return [n for v in x.values() for n in numbers(v)]
        if isinstance(x, list):
            return [n for v in x for n in numbers(v)]
        return [float(x)] if isinstance(x, int | float) and not isinstance(x, bool) else []

    assert exact > 100 and exact not in numbers(doc)


def test_a_zoned_history_is_simulated_in_its_zone(adult_db: str, default_config, tmp_path: Path) -> None:
    """A history export whose zone column says Europe/Berlin: what-if plans the statement in Berlin's days
    (across the 29 March 2026 change), so its released counts are the exact ones (its own exact source's) of
    Berlin's days, not of UTC's. At epsilon 1e7 a count's stated sd is far below 1; each count must lie within
    5 sd + 1 of Berlin's (Gaussian: a false failure below 1e-6 per value), while UTC's days differ by whole
    hours of events."""
    from lapras.engine.statements import table_of
    from parser import plan_query
    from parser.semantics.session_zone import using_zone
    from parser.semantics.zones import session_setting

    sql = ("SELECT date_trunc('day', ts) AS d, count(*) FROM events WHERE ts >= '2026-03-28' AND ts < '2026-03-31' "
           "GROUP BY 1 ORDER BY 1")
    log = tmp_path / "history.csv"
    log.write_text(f'at,sql,zone\n2026-10-01 09:00:00,"{sql}",Europe/Berlin\n')
    statements, _ = read_log(log, "history")
    exact = SnapshotExactSource(PostgresExactSource(adult_db))
    catalog = default_config.catalog
    result = simulate(statements, catalog, engine_settings(default_config, progress=False), exact,
                      WhatIfOptions(epsilons=(1e7,), stream_length=10, without_p=False))
    (out,) = result.runs[0].outcomes
    assert out.outcome == "fresh" and out.released is not None and out.stderrs is not None

    def exact_counts(zone: str | None) -> list[float]:
        with using_zone(session_setting(zone) if zone else None):
            plan = plan_query(sql, catalog)
        rows = plan.rows(exact.answers(table_of(plan, catalog), plan.queries), None)
        return [float(r[1]) for r in rows]

    berlin, utc = exact_counts("Europe/Berlin"), exact_counts(None)
    released = [float(v) for v in np.asarray(out.released)[:, -1]]
    sd = float(max(out.stderrs))
    assert sd < 0.5 and len(released) == len(berlin) == 3
    assert all(abs(r - b) <= 5 * sd + 1 for r, b in zip(released, berlin, strict=True)), (released, berlin, utc)
    assert berlin != utc
