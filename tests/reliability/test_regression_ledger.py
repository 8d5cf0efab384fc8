"""Regression releases in the ledger (issues 15 and 13): the spend and the released rows commit in one
transaction, so a kill at any point neither charges a call whose answer is lost nor loses a charged
answer; spellings of one call (default epsilon written out, regressors reordered) are one release."""

from __future__ import annotations

import json
import os
import random
from typing import Any

import psycopg
import pytest

pytest.importorskip("proxy.dp.service")

from .harness import new_adult_db, proxy_fixture  # noqa: E402


def _ledger(dsn: str) -> tuple[float, int, dict[str, Any]]:
    """(regression epsilon charged, regression spend rows, stored answers by call key)."""
    with psycopg.connect(dsn) as c:
        spent = c.execute("SELECT coalesce(sum(regression_epsilon_spent), 0) FROM lapras.epochs").fetchone()
        spends = c.execute("SELECT count(*) FROM lapras.spends WHERE part LIKE 'regression%'").fetchone()
        stored = dict(c.execute("SELECT call_key, rows FROM lapras.regression_answers").fetchall())
    assert spent is not None and spends is not None
    return float(spent[0]), int(spends[0]), stored


def test_kill_at_any_point_never_pays_twice_nor_loses_an_answer(embedded_pg: Any, default_config: Any) -> None:
    """Six rounds of the worker, each SIGKILLed at a moment in its own slice of 0.05-2 s (stratified, so
    early and late kills both happen); a round is a process forked from one that imported the engine once
    (tests/fixtures/forkserver.py), so it costs its engine start and its calls, not a new interpreter's imports."""
    from tests.fixtures.forkserver import Forkserver, kill_moment

    dsn = new_adult_db(embedded_pg, default_config, "regcrash")
    printed: dict[str, list[Any]] = {}
    rnd = random.Random()
    rounds = 6
    with Forkserver("tests.fixtures.regression_crash_worker", dict(os.environ)) as server:
        for round_ in range(rounds):
            pid = server.start(dsn)
            assert server.readline().strip() == "ready"
            lines = server.lines_until_killed(pid, kill_moment(rnd, round_, rounds, 1.95))
            for line in lines:
                if line.startswith("answer "):
                    sql, rows = json.loads(line[len("answer "):])
                    assert printed.setdefault(sql, rows) == rows, "a released regression changed"
            spent, spends, stored = _ledger(dsn)
            # Every charge has its stored answer and every stored answer was charged exactly once.
            assert spends == len(stored)
            assert spent == pytest.approx(0.02 * len(stored), rel=1e-9)
            stored_rows = {json.dumps(sorted(map(tuple, r))) for r in stored.values()}
            for rows in printed.values():
                assert json.dumps(sorted(map(tuple, rows))) in stored_rows
    assert printed


proxy = proxy_fixture("regcanon", epsilon=1.0)


def test_spellings_of_one_call_are_one_release(proxy: Any) -> None:
    """The default epsilon (half the regression part: 0.2 * 1.0 / 2) written out, and the regressors
    listed in another order, replay the first release; the rows come in the order the call lists them."""
    base = "SELECT * FROM lapras.linear_regression('adult', 'hours_per_week', '{}', 'adassp'{})"
    notices: list[str] = []
    with psycopg.connect(proxy.dsn(), autocommit=True, connect_timeout=10) as conn:
        conn.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
        first = conn.execute(base.format("age, education_num", "")).fetchall()
        written = conn.execute(base.format("age, education_num", ", 0.1")).fetchall()
        reordered = conn.execute(base.format("education_num, age", ", 0.1, NULL")).fetchall()
        other = conn.execute(base.format("age, sex", ", 0.1")).fetchall()
    assert [r[0] for r in first] == ["intercept", "age", "education_num"] and written == first
    assert [r[0] for r in reordered] == ["intercept", "education_num", "age"]
    assert sorted(reordered) == sorted(first)
    assert sum("replayed" in n for n in notices) == 2 and other != first
    spent, spends, stored = _ledger(proxy.upstream)
    assert spends == 2 and len(stored) == 2 and spent == pytest.approx(0.2, rel=1e-9)
