"""Crash safety: SIGKILL the proxy at random moments while a query log is replayed through it (5 scenarios x
3 kills, the scenarios side by side), restart it at once, and check what clients saw against what the ledger kept.

A kill lands wherever the in-flight statements are (up to 8 clients each): exact query running, noise drawn,
spend committing, answer committed but not yet sent, rows half sent. The kill moments of a scenario are spread
over the whole interval (one per stratum: early, middle, late after the restart) rather than drawn at random
10 times, and the `after_answer` scenario kills the instant a client holds a fresh answer, so fewer restarts
(each is a whole interpreter start) still visit every phase of a spend.

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
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import psycopg
import pytest

pytest.importorskip("proxy.server.listener")
pytest.importorskip("proxy.dp.service")

from proxy.replay.runner import ReplayOptions, Statement, StatementResult, StopReplay, replay  # noqa: E402

from .harness import budget_remaining, kill, ledger_problems, new_adult_db, start_proxy  # noqa: E402

KILLS_PER_SCENARIO = int(os.environ.get("LAPRAS_CRASH_KILLS", "3"))
PARALLEL = int(os.environ.get("LAPRAS_CRASH_PARALLEL", "2"))
RESTARTS: dict[str, list[float]] = {}
EXPECTED_REFUSALS = {"53400"}


def _log_stream(rng: random.Random, n: int) -> list[Statement]:
    """Statements of a generated BI log (recurring dashboards, reports and ad-hoc queries)."""
    from tests.fixtures import bi_log_fixture

    base = [sql for _, _, _, sql in bi_log_fixture.generate()]
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
        self.first = threading.Event()  # the replay's clients are connected and answered once
        self.waiting = threading.Event()  # between restarts: a client may trigger the next kill
        self.done = threading.Event()
        self.count = 0
        self.budgets: list[float] = []
        self.restart_s: list[float] = []
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.budgets.append(budget_remaining(self.proc))
            # The replay fails fast when it cannot connect at all: kill only once it is under way.
            self.first.wait(120)
            for k in range(self.kills):
                if self.delay is None:
                    self.waiting.set()
                    self.request.wait(5)
                    self.waiting.clear()
                    self.request.clear()
                else:
                    # Stratified: the k-th kill falls in the k-th slice of the interval, so the few kills
                    # cover right after a restart (recovery, first spends) as well as a steady stream.
                    lo, hi = self.delay
                    step = (hi - lo) / self.kills
                    time.sleep(self.rng.uniform(lo + k * step, lo + (k + 1) * step))
                kill(self.proc)
                self.count += 1
                # What the dead process committed is all there is: it must be consistent on its own.
                self.problems += [f"after kill {self.count}: {p}" for p in ledger_problems(self.dsn)]
                t0 = time.monotonic()
                self.proc.start(timeout=180)
                self.restart_s.append(time.monotonic() - t0)
                self.budgets.append(budget_remaining(self.proc))
        except BaseException as exc:  # surfaced by the test, with what the proxy printed
            exc.add_note("proxy output:\n" + "".join(self.proc.output[-40:]))
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
    try:
        before = budget_remaining(proc)
    except Exception as exc:
        exc.add_note(f"proxy exit code {proc.proc.poll()}; output:\n" + "".join(proc.output[-40:]))
        raise
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
            killer.first.set()
            if killer.done.is_set():
                raise StopReplay()
            if delay is None and res.outcome == "answered":
                # Kill the moment a client holds a fresh answer: its spend must already be committed.
                new_answers[0] += 1
                # Only while the killer waits: never during its restart and post-restart checks.
                if new_answers[0] % 3 == 0 and killer.waiting.is_set() and proc.proc.poll() is None:
                    proc.proc.send_signal(signal.SIGKILL)
                    killer.request.set()

        opts = ReplayOptions(host=proc.host, port=proc.port, clients=clients, keep_rows=True,
                             show_stderr=False, reconnect_timeout_s=240, budget_every=10**9)
        killer.start()
        result = replay(statements, opts, on_result=on_result)
        killer.done.wait(120)
        assert killer.error is None, f"restart failed: {killer.error!r} {getattr(killer.error, '__notes__', '')}"
        assert result.aborted is None, result.aborted
        RESTARTS[root.name] = killer.restart_s
        _check_run(proc, statements, result.results, killer)
        assert not ledger_problems(dsn)
    finally:
        proc.stop()


def _sequential(root: Path, dsn: str) -> None:
    _scenario(root, dsn, _log_stream(random.Random(1), 20_000), clients=1, seed=1, delay=(0.05, 0.6))


def _concurrent(root: Path, dsn: str) -> None:
    _scenario(root, dsn, _log_stream(random.Random(2), 20_000), clients=8, seed=2, delay=(0.05, 0.6))


def _after_answer(root: Path, dsn: str) -> None:
    _scenario(root, dsn, _repeat_heavy(random.Random(3), 20_000), clients=4, seed=3, delay=None)


def _repeats(root: Path, dsn: str) -> None:
    _scenario(root, dsn, _repeat_heavy(random.Random(4), 20_000), clients=8, seed=4, delay=(0.0, 0.4))


def _exhaustion(root: Path, dsn: str) -> None:
    rng = random.Random(5)
    stream = [Statement(0.0, None, _new_query(rng)) for _ in range(20_000)]
    _scenario(root, dsn, stream, clients=8, seed=5, delay=(0.05, 0.5), epsilon=0.3)


SCENARIOS = {"sequential": _sequential, "concurrent": _concurrent, "after_answer": _after_answer,
             "repeats": _repeats, "exhaustion": _exhaustion}


@pytest.mark.slow
def test_sigkill_scenarios(embedded_pg: Any, default_config: Any, tmp_path: Path) -> None:
    """The scenarios run side by side (own database, own proxy each): restarts dominate the run time."""
    chosen = [n for n in os.environ.get("LAPRAS_CRASH_SCENARIOS", ",".join(SCENARIOS)).split(",") if n]
    dsns = {name: new_adult_db(embedded_pg, default_config, f"crash_{name}") for name in chosen}
    # Two at a time: restarts are CPU-bound (imports), more in parallel only slows each restart down.
    with ThreadPoolExecutor(PARALLEL) as pool:
        futures = {name: pool.submit(SCENARIOS[name], tmp_path / name, dsns[name]) for name in chosen}
        failures = []
        for name, fut in futures.items():
            try:
                fut.result()
            except BaseException as exc:
                import traceback
                failures.append(f"{name}: " + "".join(traceback.format_exception(exc))[-3000:])
    kills = sum(len(v) for v in RESTARTS.values())
    times = sorted(t for v in RESTARTS.values() for t in v)
    if times:
        print(f"\n{kills} kills; restart to ready: median {times[len(times) // 2]:.1f} s, max {times[-1]:.1f} s")
    assert not failures, "\n".join(failures)
