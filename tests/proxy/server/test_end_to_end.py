"""The walking skeleton, end to end: real proxy process, real embedded PostgreSQL, real clients, real noise."""

from __future__ import annotations

import math
import shutil
import subprocess

import numpy as np
import psycopg
import pytest
from scipy import stats

from proxy.replay.runner import parse_provenance

COUNT_SQL = "SELECT COUNT(*) FROM adult WHERE age >= 40 AND sex = 1"


def test_psql_gets_a_number(proxy) -> None:
    psql = shutil.which("psql")
    if psql is None:
        pytest.skip("psql is not installed")
    done = subprocess.run(
        [psql, f"host={proxy.host} port={proxy.port} user=analyst dbname=adult", "-X", "-A", "-t",
         "-c", "SELECT COUNT(*) FROM adult WHERE age BETWEEN 30 AND 39"],
        capture_output=True, text=True, timeout=60, env={"PGPASSWORD": "lapras", "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    value = int(done.stdout.strip())
    assert 0 < value < 48_842 * 2


def test_refusal_then_next_query_on_same_connection(proxy) -> None:
    with psycopg.connect(proxy.dsn(), autocommit=True) as conn:
        with pytest.raises(psycopg.errors.InsufficientPrivilege) as err:
            conn.execute("SELECT * FROM adult")
        assert err.value.sqlstate == "42501"
        assert "aggregate" in str(err.value).lower() or "protected" in str(err.value).lower()
        with pytest.raises(psycopg.errors.FeatureNotSupported) as err2:
            conn.execute("SELECT STDDEV(age) FROM adult")
        assert err2.value.sqlstate == "0A000"
        (n,) = conn.execute(COUNT_SQL).fetchone()  # type: ignore[misc]
        assert isinstance(n, int)


def test_repeated_query_gets_the_stored_answer(proxy) -> None:
    sql = "SELECT COUNT(*) FROM adult WHERE hours_per_week > 45 AND race = 0"
    with psycopg.connect(proxy.dsn(), autocommit=True) as a, psycopg.connect(proxy.dsn(), autocommit=True) as b:
        first = a.execute(sql).fetchone()
        # a rewrite of the same linear query, on another connection
        again = b.execute("select count(1) from ADULT where race = 0 and 45 < hours_per_week").fetchone()
    assert first == again


def test_noise_spread_matches_calibrated_sigma(proxy_factory, embedded_pg) -> None:
    """Fresh epochs redraw the noise. The standardised errors (noisy - exact) / stated stderr must look
    N(0, 1): sum of squares ~ chi2(K) and mean ~ N(0, 1/K), each tested two-sided at alpha = 5e-4, so the
    false-failure rate of this test is at most 1e-3."""
    # Fresh answers are under test: P learnt from the history would answer the statement from epoch 2 on.
    px = proxy_factory(epsilon=1.0, delta=1e-3, stream_length=200, learn_prediction=False)
    with psycopg.connect(px.upstream_dsn) as direct:
        (exact,) = direct.execute(COUNT_SQL).fetchone()  # type: ignore[misc]
    notices: list[str] = []
    k = 120
    z = []
    with psycopg.connect(px.dsn(user="dba", password="dbapass"), autocommit=True) as conn:
        conn.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
        conn.execute("SET lapras.show_stderr = on")
        for _ in range(k):
            conn.execute("SELECT lapras.new_epoch()")
            notices.clear()
            (noisy,) = conn.execute(COUNT_SQL).fetchone()  # type: ignore[misc]
            (stderr,) = parse_provenance([n for n in notices if "stderr=" in n])[1]
            assert stderr > 5, "sigma must dominate the integer rounding for this test"
            z.append((noisy - exact) / stderr)
    zz = np.asarray(z)
    ss = float(np.sum(zz**2))
    lo, hi = stats.chi2.ppf(2.5e-4, k), stats.chi2.ppf(1 - 2.5e-4, k)
    assert lo < ss < hi, f"sum z^2 = {ss:.1f} outside [{lo:.1f}, {hi:.1f}]"
    assert abs(zz.mean()) < stats.norm.ppf(1 - 2.5e-4) / math.sqrt(k)


def test_only_admins_start_epochs(proxy) -> None:
    with psycopg.connect(proxy.dsn(), autocommit=True) as conn:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("SELECT lapras.new_epoch()")
        conn.execute("SELECT 1")


def test_show_budget_spends_nothing(proxy) -> None:
    with psycopg.connect(proxy.dsn(), autocommit=True) as conn:
        before = dict(conn.execute("SHOW lapras.budget").fetchall())
        after = dict(conn.execute("SHOW lapras.budget").fetchall())
    assert before["spent.epsilon"] == after["spent.epsilon"]
    assert float(before["budget.epsilon"]) == 1e4


def test_show_budget_reads_as_a_person_and_shows_each_user_only_their_own_activity(proxy) -> None:
    """Issue 13 finding 9 and issue 12: remaining budget first, timestamps as timestamps, an explanation
    of the accounting; another analyst's fresh queries move only the shared budget in an analyst's view,
    and the operator figures (answers served, stream position, ...) are for admins only."""
    import datetime as dt

    def show(dsn: str) -> list[tuple[str, str]]:
        with psycopg.connect(dsn, autocommit=True) as conn:
            return [(str(k), str(v)) for k, v in conn.execute("SHOW lapras.budget").fetchall()]

    analyst = proxy.dsn()
    other = proxy.dsn("md5user", "md5pass")
    rows = show(analyst)
    assert rows[0][0] == "remaining.epsilon" and float(rows[0][1]) > 0
    view = dict(rows)
    started = dt.datetime.strptime(view["epoch.started_at"], "%Y-%m-%d %H:%M:%S+00")
    assert abs(started.year - dt.datetime.now(dt.UTC).year) <= 1
    assert view["accounting"] in view["accounting.explained"]
    assert not [k for k in view if k.startswith("operator.")], "operator figures shown to an analyst"
    mine = {k: v for k, v in view.items() if k.startswith("you.")}
    # Another analyst asks fresh questions.
    with psycopg.connect(other, autocommit=True) as conn:
        for age in (23, 29, 37, 43, 51):
            conn.execute(f"SELECT count(*) FROM adult WHERE age = {age} AND hours_per_week > 44").fetchall()
    after = dict(show(analyst))
    assert {k: v for k, v in after.items() if k.startswith("you.")} == mine
    assert set(after) == set(view)
    # remaining.fresh_statements is the budget left counted in statements (the allocation rule's grants).
    shared = {"remaining.epsilon", "remaining.delta", "remaining.mu", "spent.epsilon", "spent.delta", "spent.mu",
              "remaining.fresh_statements"}
    assert {k for k in view if view[k] != after[k]} <= shared
    theirs = dict(show(other))
    assert int(theirs["you.fresh_answers"]) >= 5 and int(theirs["you.answers_released"]) >= 5
    admin = dict(show(proxy.dsn("dba", "dbapass")))
    assert "operator.answers_served" in admin and "operator.stream_position" in admin
