"""Two proxy processes share one ledger: 32 clients race on the same epoch until the budget runs out; the
committed spend never exceeds the budget and every client sees an answer or the budget-exhausted error."""

from __future__ import annotations

import random
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

pytest.importorskip("proxy.server.listener")
pytest.importorskip("proxy.dp.service")

from proxy.replay.runner import parse_budget  # noqa: E402

from .harness import budget_remaining, ledger_problems, new_adult_db, start_proxy  # noqa: E402

CLIENTS = 32
MAX_PER_CLIENT = 400


@pytest.fixture(scope="module")
def two_proxies(embedded_pg: Any, default_config: Any, tmp_path_factory: pytest.TempPathFactory
                ) -> Iterator[tuple[Any, Any, str]]:
    dsn = new_adult_db(embedded_pg, default_config, "race")
    root = tmp_path_factory.mktemp("race")
    server = {"queries_per_minute": 1_000_000, "max_connections": 100}
    a = start_proxy(root / "a", dsn, epsilon=0.5, server=server, start=False)
    b = start_proxy(root / "b", dsn, epsilon=0.5, server=server, start=False)
    # Both start at once (their imports are most of a start): they race to create the one ledger, as two
    # processes of a deployment started together do.
    starting = threading.Thread(target=b.start)
    try:
        starting.start()
        try:
            a.start()
        finally:
            starting.join()
        assert b.proc.poll() is None, "proxy b did not start:\n" + "".join(b.output)
        yield a, b, dsn
    finally:
        a.stop()
        b.stop()


def _client(proc: Any, n: int, out: dict[int, list[tuple[str, str, Any]]]) -> None:
    rng = random.Random(n)
    log: list[tuple[str, str, Any]] = []
    out[n] = log
    with psycopg.connect(proc.dsn(), autocommit=True) as conn:
        for i in range(MAX_PER_CLIENT):
            lo = rng.randint(17, 85)
            sql = (f"SELECT count(*) FROM adult WHERE age BETWEEN {lo} AND {rng.randint(lo, 90)} "
                   f"AND hours_per_week > {rng.randint(0, 90)} /* client {n} query {i} */")
            try:
                rows = conn.execute(sql).fetchall()
                log.append(("answer", sql, rows))
            except psycopg.Error as exc:
                log.append(("error", sql, exc.sqlstate))
                if exc.sqlstate == "53400":
                    return


def test_two_processes_never_overspend(two_proxies: tuple[Any, Any, str]) -> None:
    a, b, dsn = two_proxies
    total = budget_remaining(a)
    assert total > 0 and budget_remaining(b) == pytest.approx(total)
    out: dict[int, list[tuple[str, str, Any]]] = {}
    threads = [threading.Thread(target=_client, args=(a if n % 2 else b, n, out)) for n in range(CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert len(out) == CLIENTS
    errors = {e[2] for log in out.values() for e in log if e[0] == "error"}
    assert errors <= {"53400"}, f"clients saw errors other than budget exhaustion: {errors}"
    exhausted = sum(1 for log in out.values() if log and log[-1][0] == "error")
    assert exhausted == CLIENTS, f"only {exhausted} of {CLIENTS} clients reached the end of the budget"
    remaining_a, remaining_b = budget_remaining(a), budget_remaining(b)
    assert remaining_a == pytest.approx(remaining_b, abs=1e-12)
    assert remaining_a >= -1e-12, f"overspent: remaining {remaining_a}"
    # The committed spend, read from the ledger tables themselves, is within the budget and consistent.
    assert not ledger_problems(dsn)
    # Answers released through one process are the ledger's: the other process serves them unchanged.
    answered = [(sql, rows) for log in out.values() for kind, sql, rows in log if kind == "answer"]
    assert answered
    sample = random.Random(0).sample(answered, min(40, len(answered)))
    with psycopg.connect(a.dsn(), autocommit=True) as ca, psycopg.connect(b.dsn(), autocommit=True) as cb:
        for sql, rows in sample:
            assert ca.execute(sql).fetchall() == rows
            assert cb.execute(sql).fetchall() == rows
    assert budget_remaining(a) == pytest.approx(remaining_a, abs=1e-12)


def test_budget_view_agrees_with_ledger_command(two_proxies: tuple[Any, Any, str], tmp_path: Path) -> None:
    import json
    import subprocess
    import sys

    a, _, _ = two_proxies
    done = subprocess.run([sys.executable, "-m", "proxy.ops.cli", "budget", "--json", "--config", str(a.config_path),
                           "--state-dir", str(a.state_dir)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    rows = [(k, json.dumps(v)) for k, v in report.items()]
    remaining = parse_budget([_Col("key"), _Col("value")], rows)
    assert remaining is not None and remaining >= 0, report
    # The operator's command and the clients' SHOW read the same ledger.
    assert remaining == pytest.approx(budget_remaining(a), rel=1e-6), report
    current = report["current"]
    assert current["spent"]["epsilon"] <= current["stream_budget"]["epsilon"] * (1 + 1e-9), current
    if "mu" in current:
        assert current["mu"]["spent"] <= current["mu"]["total"] * (1 + 1e-9), current


class _Col:
    def __init__(self, name: str) -> None:
        self.name = name
