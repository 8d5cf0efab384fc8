"""Crash safety: SIGKILL the proxy at random moments while a query log is replayed through it (5 scenarios x
10 kills), restart it at once, and check what clients saw against what the ledger kept.

After every run: each statement text got one and the same answer whenever it was answered, before and after
any number of kills (a released answer is recorded before it is sent and never re-noised); asking all of
them again spends nothing and returns the same rows; the remaining budget never went up across a restart
and never went below zero. The upstream PostgreSQL survives the kills (it is the session's cluster).
"""

from __future__ import annotations

import os
import random
import signal
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import psycopg
import pytest

pytest.importorskip("proxy.server")
pytest.importorskip("proxy.dp_service")

from proxy.replay import ReplayOptions, Statement, StatementResult, StopReplay, replay  # noqa: E402

from .harness import budget_remaining, kill, ledger_problems, new_adult_db, start_proxy  # noqa: E402

KILLS_PER_SCENARIO = int(os.environ.get("LAPRAS_CRASH_KILLS", "10"))
LOG = Path(__file__).resolve().parents[3] / "shared" / "data" / "querylogs" / "adult_bi_21d.log"
EXPECTED_REFUSALS = {"53400"}


def _log_stream(rng: random.Random, n: int) -> list[Statement]:
    """Statements of the BI log (recurring dashboards and ad-hoc queries), or generated ones without it."""
    if LOG.exists():
        from proxy.replay import load_statements

        base = [s.sql for s in load_statements(LOG)]
    else:
        base = [_new_query(rng) for _ in range(400)]
    start = rng.randrange(len(base))
    return [Statement(0.0, None, base[(start + i) % len(base)]) for i in range(n)]


def _new_query(rng: random.Random) -> str:
    a = rng.randint(17, 80)
    b = rng.randint(a, 90)
    h = rng.randint(1, 60)
    return (f"SELECT count(*) FROM adult WHERE age BETWEEN {a} AND {b} AND hours_per_week >= {h} "
            f"AND sex = {rng.randint(0, 1)}")


def _repeat_heavy(rng: random.Random, n: int) -> list[Statement]:
    pool = [_new_query(rng) for _ in range(40)]
    return [Statement(0.0, None, rng.choice(pool) if rng.random() < 0.7 else _new_query(rng)) for _ in range(n)]


class Killer(threading.Thread):
    """Kills the proxy `kills` times (after a random delay, or when asked), restarting it each time, and
    reads the remaining budget after every restart."""

    def __init__(self, proc: Any, dsn: str, kills: int, rng: random.Random,
                 delay: tuple[float, float] | None) -> None:
        super().__init__(daemon=True)
        self.proc = proc
        self.dsn = dsn
        self.problems: list[str] = []
        self.kills = kills
        self.rng = rng
        self.delay = delay
        self.request = threading.Event()
        self.done = threading.Event()
        self.count = 0
        self.budgets: list[float] = []
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.budgets.append(budget_remaining(self.proc))
            for _ in range(self.kills):
                if self.delay is None:
                    self.request.wait(5)
                    self.request.clear()
                else:
                    time.sleep(self.rng.uniform(*self.delay))
                kill(self.proc)
                self.count += 1
                # What the dead process committed is all there is: it must be consistent on its own.
                self.problems += [f"after kill {self.count}: {p}" for p in ledger_problems(self.dsn)]
                self.proc.start()
                self.budgets.append(budget_remaining(self.proc))
        except BaseException as exc:  # surfaced by the test
            self.error = exc
        finally:
            self.done.set()


def _answers(results: list[StatementResult], statements: list[Statement]) -> dict[str, list[Any]]:
    seen: dict[str, list[Any]] = defaultdict(list)
    for r in results:
        if r.outcome in ("answered", "from_p", "free") and r.rows is not None:
            seen[statements[r.index].sql].append(r.rows)
    return seen


def _check_run(proc: Any, statements: list[Statement], results: list[StatementResult], killer: Killer) -> None:
    assert killer.error is None, f"restart failed: {killer.error!r}"
    assert killer.count == killer.kills
    assert not killer.problems, killer.problems
    # No answer is re-noised: every answer to the same text is the same, across all kills.
    answers = _answers(results, statements)
    assert answers, "no statement was answered"
    for sql, got in answers.items():
        assert all(rows == got[0] for rows in got), f"{sql!r} got different answers: {got}"
    refused = {r.sqlstate for r in results if r.outcome == "refused"}
    assert refused <= EXPECTED_REFUSALS, f"unexpected refusals {refused}"
    # The budget only goes down, and never below zero.
    assert all(b >= -1e-12 for b in killer.budgets), killer.budgets
    assert all(later <= earlier + 1e-12 for earlier, later in zip(killer.budgets, killer.budgets[1:],
                                                                   strict=False)), killer.budgets
    # Every answer a client received is recorded: asking again returns it and spends nothing.
    before = budget_remaining(proc)
    with psycopg.connect(proc.dsn(), autocommit=True) as conn:
        for sql, got in answers.items():
            rows = conn.execute(sql.encode()).fetchall()
            assert rows == got[0], f"{sql!r}: {rows} after the crashes, {got[0]} before"
    after = budget_remaining(proc)
    assert after == before, f"re-asking released queries spent budget: {before} -> {after}"
    assert after >= -1e-12


def _scenario(root: Path, dsn: str, statements: list[Statement], *, clients: int, seed: int,
              delay: tuple[float, float] | None, epsilon: float = 1.0, privacy_extra: str = "") -> None:
    rng = random.Random(seed)
    proc = start_proxy(root, dsn, epsilon=epsilon, privacy_extra=privacy_extra,
                       server={"queries_per_minute": 1_000_000})
    try:
        killer = Killer(proc, dsn, KILLS_PER_SCENARIO, rng, delay)
        new_answers = [0]

        def on_result(res: StatementResult) -> None:
            if killer.done.is_set():
                raise StopReplay()
            if delay is None and res.outcome == "answered":
                # Kill the moment a client holds a fresh answer: its spend must already be committed.
                new_answers[0] += 1
                if new_answers[0] % 3 == 0 and proc.proc.poll() is None:
                    proc.proc.send_signal(signal.SIGKILL)
                    killer.request.set()

        opts = ReplayOptions(host=proc.host, port=proc.port, clients=clients, keep_rows=True,
                             show_stderr=False, reconnect_timeout_s=60, budget_every=10**9)
        killer.start()
        result = replay(statements, opts, on_result=on_result)
        killer.done.wait(120)
        assert result.aborted is None, result.aborted
        _check_run(proc, statements, result.results, killer)
        assert not ledger_problems(dsn)
    finally:
        proc.stop()


@pytest.fixture(scope="module")
def crash_db(embedded_pg: Any, default_config: Any) -> Any:
    def make() -> str:
        return new_adult_db(embedded_pg, default_config, "crash")
    return make


@pytest.mark.slow
def test_kill_sequential_client(crash_db: Any, tmp_path: Path) -> None:
    rng = random.Random(1)
    _scenario(tmp_path, crash_db(), _log_stream(rng, 20_000), clients=1, seed=1, delay=(0.05, 0.6))


@pytest.mark.slow
def test_kill_concurrent_clients(crash_db: Any, tmp_path: Path) -> None:
    rng = random.Random(2)
    _scenario(tmp_path, crash_db(), _log_stream(rng, 20_000), clients=8, seed=2, delay=(0.05, 0.6))


@pytest.mark.slow
def test_kill_right_after_an_answer(crash_db: Any, tmp_path: Path) -> None:
    rng = random.Random(3)
    _scenario(tmp_path, crash_db(), _repeat_heavy(rng, 20_000), clients=4, seed=3, delay=None)


@pytest.mark.slow
def test_kill_repeat_heavy(crash_db: Any, tmp_path: Path) -> None:
    rng = random.Random(4)
    _scenario(tmp_path, crash_db(), _repeat_heavy(rng, 20_000), clients=8, seed=4, delay=(0.0, 0.4))


@pytest.mark.slow
def test_kill_while_exhausting_the_budget(crash_db: Any, tmp_path: Path) -> None:
    rng = random.Random(5)
    stream = [Statement(0.0, None, _new_query(rng)) for _ in range(20_000)]
    _scenario(tmp_path, crash_db(), stream, clients=8, seed=5, delay=(0.05, 0.5), epsilon=0.3,
              privacy_extra="")
