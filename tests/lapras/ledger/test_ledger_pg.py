"""PostgreSQL ledger: restart resumes exactly, concurrent spenders never overspend, SIGKILL mid-stream."""

from __future__ import annotations

import os
import random
import threading
import time

import psycopg
import pytest

from lapras import BudgetExhausted, Engine, EngineSettings, PostgresLedger, Prediction
from lapras.report import budget_report
from tests.fixtures.engine_helpers import CATALOG, plan, range_sqls


def _engine(dsn: str, exact, **kw) -> Engine:  # type: ignore[no-untyped-def]
    preds = [q for s in range_sqls(6, seed=0) for q in plan(s).queries]
    return Engine(CATALOG, PostgresLedger(dsn), exact,
                  EngineSettings(joint_max_cells=0, epoch="manual", **kw),
                  predictions=lambda _catalog: Prediction(preds, 30, 0.3))


def _consistent(dsn: str) -> dict[str, float]:
    """Ledger invariants: spent = sum of release units; every fresh answer points at a release."""
    with psycopg.connect(dsn) as c:
        ep = c.execute("SELECT id, spent_units, state FROM lapras.epochs WHERE ended_at IS NULL").fetchone()
        assert ep is not None
        total = c.execute("SELECT coalesce(sum(units), 0) FROM lapras.releases WHERE epoch_id = %s", (ep[0],)).fetchone()
        spends = c.execute("SELECT coalesce(sum(units), 0) FROM lapras.spends WHERE epoch_id = %s", (ep[0],)).fetchone()
        orphans = c.execute("SELECT count(*) FROM lapras.answers WHERE epoch_id = %s AND outcome = 'fresh'"
                            " AND release_id IS NULL", (ep[0],)).fetchone()
        answers = dict(c.execute("SELECT key, value FROM lapras.answers WHERE epoch_id = %s", (ep[0],)).fetchall())
    assert total is not None and spends is not None and orphans is not None
    assert ep[1] == pytest.approx(total[0], rel=1e-12, abs=1e-15)
    assert spends[0] == pytest.approx(total[0], rel=1e-12, abs=1e-15)
    assert orphans[0] == 0
    return answers


def test_restart_resumes_the_epoch(fresh_db: str, exact) -> None:  # type: ignore[no-untyped-def]
    eng = _engine(fresh_db, exact, split="equal")
    sqls = range_sqls(10, seed=5)
    first = [eng.answer(plan(s), "u").values[0] for s in sqls]
    before = budget_report(eng.ledger)["current"]
    state = eng.ledger.current_epoch().state  # type: ignore[union-attr]
    eng.close()
    eng2 = _engine(fresh_db, exact, split="equal")
    assert eng2.ledger.current_epoch().state == state  # type: ignore[union-attr]
    again = [eng2.answer(plan(s), "u") for s in sqls]
    assert [a.values[0] for a in again] == first and all(a.outcome == "repeat" for a in again)
    after = budget_report(eng2.ledger)["current"]
    assert after["spent"] == before["spent"] and after["stream_position"] == before["stream_position"]
    _consistent(fresh_db)
    eng2.close()


def test_concurrent_spenders_never_overspend(fresh_db: str, exact) -> None:  # type: ignore[no-untyped-def]
    """Four engines (own connections) race on one epoch until it stops: the total stays within budget."""
    engines = [_engine(fresh_db, exact, split="reserve_heavy", stream_length=10, min_fraction=0.01)
               for _ in range(4)]
    errors: list[BaseException] = []

    def worker(k: int) -> None:
        try:
            for i in range(40):
                try:
                    engines[k].answer(plan(f"SELECT count(*) FROM t WHERE a = {i % 10} AND c = {(7 * i + k) % 40}"), "u")
                except BudgetExhausted:
                    pass
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    ep = engines[0].ledger.current_epoch()
    assert ep is not None
    assert ep.spent_units <= ep.spec.budget.units * (1 + 1e-12)
    assert budget_report(engines[0].ledger)["current"]["spent"]["epsilon"] <= 1.0 + 1e-9
    _consistent(fresh_db)
    for e in engines:
        e.close()


def test_sigkill_mid_stream_keeps_ledger_consistent(fresh_db: str) -> None:
    """Kill the answering process at random points several times; after each restart the ledger is
    consistent and every answer that left the process is the stored one (no new noise on a release).

    Each round is a fresh process forked from one that imported the engine once (tests/fixtures/forkserver.py), so
    a round costs its engine start and its stream, not a new interpreter's imports."""
    from tests.fixtures.forkserver import Forkserver, kill_moment

    seen: dict[str, str] = {}
    rnd = random.Random()
    rounds = 5
    with Forkserver("tests.fixtures.crash_worker", dict(os.environ)) as server:
        for round_ in range(rounds):
            pid = server.start(fresh_db, str(round_ % 2))
            assert server.readline().strip() == "ready"
            lines = server.lines_until_killed(pid, kill_moment(rnd, round_, rounds, 1.45))
            for line in lines:
                parts = line.split()
                if parts and parts[0] == "answer":
                    key, value = parts[1], parts[2]
                    if key in seen:
                        assert seen[key] == value, "an answer changed after a restart"
                    seen[key] = value
            stored = _consistent(fresh_db)
            for key, value in seen.items():
                assert key in stored and repr(stored[key]) == value
    assert seen


def test_ledger_migrates_releases_that_stored_sigma(fresh_db: str) -> None:
    """A ledger written when releases had a mandatory sigma column: opening it turns each row into
    mechanism 'gaussian' with params {"sigma": ...}, keeps costs and spends, and the epoch goes on."""
    from lapras.ledger.postgres import DDL

    old_ddl = DDL.replace("mechanism text NOT NULL,\n    params jsonb NOT NULL,", "sigma double precision NOT NULL,")
    assert "sigma double precision" in old_ddl and "mechanism" not in old_ddl
    spec = ('{"mode": "gdp", "epsilon": 1.0, "delta": 0.001, "total_epsilon": 1.0, "total_delta": 0.001,'
            ' "regression_epsilon": 0.0, "regression_delta": 0.0, "split": {"mm": 0.25, "bad_init": 0.25,'
            ' "rem_bad": 0.25, "reserve": 0.25}, "policy": "smooth", "s": 30, "warmup": 2, "min_fraction": 0.01}')
    with psycopg.connect(fresh_db) as c:
        c.execute(old_ddl)
        eid = c.execute("INSERT INTO lapras.epochs (spec, state, spent_units) VALUES (%s, '{}', 0.04) RETURNING id",
                        (spec,)).fetchone()[0]  # type: ignore[index]
        c.execute("INSERT INTO lapras.releases (epoch_id, position, kind, units, sigma, sensitivity, cost, meta)"
                  " VALUES (%s, 1, 'fresh', 0.04, 5.0, 1.0, '{\"mu\": 0.2}', '{\"keys\": []}')", (eid,))
    led = PostgresLedger(fresh_db)
    try:
        rels = led.releases(eid)
        assert len(rels) == 1 and rels[0].mechanism == "gaussian" and dict(rels[0].params) == {"sigma": 5.0}
        assert rels[0].cost.mu == pytest.approx(0.2) and rels[0].units == pytest.approx(0.04)
        with psycopg.connect(fresh_db) as c:
            cols = {r[0] for r in c.execute("SELECT column_name FROM information_schema.columns WHERE "
                                            "table_schema = 'lapras' AND table_name = 'releases'")}
        assert "sigma" not in cols and {"mechanism", "params"} <= cols
        PostgresLedger(fresh_db).close()  # opening a migrated ledger again is a no-op
    finally:
        led.close()


def test_reads_never_wait_behind_a_spend(fresh_db: str, exact) -> None:  # type: ignore[no-untyped-def]
    """While one session holds its epoch's lock (deciding a spend), the budget report and the stored
    answers are read at once, and a second spender waits on the row lock, not on a process mutex."""
    eng = _engine(fresh_db, exact, split="equal")
    eng.answer(plan("SELECT count(*) FROM t WHERE a = 2"), "u")
    ep = eng.ledger.current_epoch()
    assert ep is not None
    held, release = threading.Event(), threading.Event()

    def spender() -> None:
        with eng.ledger.locked(ep.id):
            held.set()
            release.wait(30)

    t = threading.Thread(target=spender, daemon=True)
    t.start()
    assert held.wait(10)
    try:
        t0 = time.monotonic()
        rep = budget_report(eng.ledger)
        stored = eng.ledger.answers(ep.id)
        assert time.monotonic() - t0 < 1.0 and rep["current"]["epoch"] == ep.id and len(stored) == 1
        second: dict[str, float] = {}

        def other() -> None:
            t1 = time.monotonic()
            with eng.ledger.locked(ep.id):
                second["waited"] = time.monotonic() - t1

        t2 = threading.Thread(target=other, daemon=True)
        t2.start()
        time.sleep(0.5)
        assert "waited" not in second  # serialised by the epoch row lock
    finally:
        release.set()
    t.join(10)
    t2.join(10)
    assert second["waited"] >= 0.4
    eng.close()


class CountingSource:
    """The real histogram source, counting the exact answers it computes."""

    def __init__(self, inner) -> None:  # type: ignore[no-untyped-def]
        self.inner, self.calls = inner, 0

    def answers(self, table, queries):  # type: ignore[no-untyped-def]
        self.calls += 1
        return self.inner.answers(table, queries)

    def marginal(self, table, attrs):  # type: ignore[no-untyped-def]
        return self.inner.marginal(table, attrs)


def _ledger_rows(dsn: str) -> tuple[object, ...]:
    with psycopg.connect(dsn) as c:
        row = c.execute("SELECT (SELECT state FROM lapras.epochs WHERE ended_at IS NULL),"
                        " (SELECT count(*) FROM lapras.releases), (SELECT count(*) FROM lapras.answers),"
                        " (SELECT count(*) FROM lapras.spends)").fetchone()
    assert row is not None
    return tuple(row)


def test_refusal_after_the_stop_computes_and_writes_nothing(fresh_db: str, exact) -> None:  # type: ignore[no-untyped-def]
    source = CountingSource(exact)
    eng = Engine(CATALOG, PostgresLedger(fresh_db), source,
                 EngineSettings(epoch="manual", split="equal", allocation="static", warmup=2,
                                min_fraction=0.5), predictions=lambda _catalog: Prediction((), 4, 0.0))
    early = Engine(CATALOG, PostgresLedger(fresh_db), source, EngineSettings(epoch="manual"))  # adopts now
    refused = 0
    for i in range(30):
        try:
            eng.answer(plan(f"SELECT count(*) FROM t WHERE c = {i}"), "u")
        except BudgetExhausted:
            refused += 1
            if refused == 2:
                break
    assert refused == 2 and eng.ledger.current_epoch().state.stopped  # type: ignore[union-attr]
    calls, rows = source.calls, _ledger_rows(fresh_db)
    # Every refusal names the position where the stream stopped, as the ledger has it (a process that
    # adopted the epoch earlier said the position of its adoption: "stopped at statement 10" of 448).
    stop = f"the stream stopped at statement {eng.ledger.current_epoch().state.n};"  # type: ignore[union-attr]
    for i in range(5):
        with pytest.raises(BudgetExhausted) as err:
            eng.answer(plan(f"SELECT count(*) FROM t WHERE a = {i} AND c > 3"), "u")
        assert stop in str(err.value.detail)
    assert source.calls == calls and _ledger_rows(fresh_db) == rows
    # A second process (fresh engine) learns of the stop from the ledger and refuses the same way.
    eng2 = Engine(CATALOG, PostgresLedger(fresh_db), source, EngineSettings(epoch="manual"))
    with pytest.raises(BudgetExhausted) as err:
        eng2.answer(plan("SELECT count(*) FROM t WHERE b = 'x'"), "u")
    assert stop in str(err.value.detail) and source.calls == calls and _ledger_rows(fresh_db) == rows
    # A process that learns of the stop from its poll refuses without exact work too, and still serves what
    # another process released after it adopted.
    early.sync_epoch()
    with pytest.raises(BudgetExhausted) as err:
        early.answer(plan("SELECT count(*) FROM t WHERE b = 'y'"), "u")
    assert stop in str(err.value.detail)
    again = early.answer(plan("SELECT count(*) FROM t WHERE c = 0"), "u")
    assert again.outcome == "repeat" and source.calls == calls and _ledger_rows(fresh_db) == rows
    for e in (eng, eng2, early):
        e.close()


def test_ledger_adds_the_history_zone_to_an_older_history(fresh_db: str) -> None:
    """A statement history written before the session's TimeZone was kept: opening the ledger adds the zone
    column, the old rows read as UTC (zone None), and a new row keeps its zone (false-failure rate 0)."""
    from lapras.ledger.base import HistoryRow
    from lapras.ledger.postgres import DDL

    old_ddl = DDL.replace("    outcome text NOT NULL,\n    zone text\n);", "    outcome text NOT NULL\n);")
    assert "zone text" not in old_ddl
    with psycopg.connect(fresh_db) as c:
        c.execute(old_ddl)
        eid = c.execute("INSERT INTO lapras.epochs (spec, state, spent_units) VALUES ('{}', '{}', 0) RETURNING id"
                        ).fetchone()[0]  # type: ignore[index]
        c.execute("INSERT INTO lapras.statement_history (epoch_id, at, sql, params, outcome) VALUES "
                  "(%s, now(), 'SELECT count(*) FROM events', NULL, 'bad')", (eid,))
    led = PostgresLedger(fresh_db)
    try:
        led.record_history([HistoryRow(eid, 1.0e9, "SELECT count(*) FROM events WHERE ts >= '2026-03-29'", None,
                                       "bad", "Europe/Berlin")])
        _, rows = led.history(5)
        assert [(r.sql.endswith("events"), r.zone) for r in rows] == [(True, None), (False, "Europe/Berlin")]
        PostgresLedger(fresh_db).close()  # opening a migrated ledger again is a no-op
    finally:
        led.close()
