"""Prediction with no set-up, through a real proxy: the proxy keeps its own statement history upstream and
learns P from it when an epoch starts; the statements of epoch 1 are answered from P's matrix-mechanism
release in epoch 2 without any manual step, and the history is operator-only."""

from __future__ import annotations

import time

import psycopg
import pytest

STATEMENTS = [
    ("SELECT COUNT(*) FROM adult WHERE age BETWEEN 30 AND 39", None),
    ("SELECT sex, COUNT(*) FROM adult GROUP BY sex", None),
    ("SELECT COUNT(*) FROM adult WHERE hours_per_week >= %s", (40,)),  # extended protocol, a bound $1
]


def _ask(conn: psycopg.Connection, notices: list[str]) -> list[str]:
    out = []
    for sql, params in STATEMENTS:
        notices.clear()
        conn.execute(sql, params).fetchall()
        out.append(next((n for n in notices if n.startswith("lapras: outcome=")), ""))
    return out


def test_epoch_two_answers_epoch_one_statements_from_learnt_p(proxy_factory) -> None:
    px = proxy_factory(epsilon=1.0, delta=1e-3, stream_length=50)
    notices: list[str] = []
    with psycopg.connect(px.dsn(), autocommit=True) as conn, \
            psycopg.connect(px.dsn(user="dba", password="dbapass"), autocommit=True) as dba:
        conn.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
        conn.execute("SET lapras.show_stderr = on")
        first = _ask(conn, notices)
        assert all("outcome=bad" in n for n in first), first
        assert not any("answered from P" in n for n in first)
        _ask(conn, notices)  # free repeats: recorded, not counted in S
        (epoch,) = dba.execute("SELECT lapras.new_epoch()").fetchone()  # type: ignore[misc]
        assert epoch >= 2
        explain = [r[0] for r in conn.execute("EXPLAIN SELECT COUNT(*) FROM adult WHERE age BETWEEN 30 AND 39")]
        text = "\n".join(explain)
        assert "answered from P" in text and "learnt from the proxy's history" in text, text
        assert "SVD lower bound" in text and "per-query RMSE" in text, text
        second = _ask(conn, notices)
        assert all("outcome=good" in n and "answered from P" in n for n in second), second
        # What the history keeps: texts, parameters, times, epochs, outcomes; no value column at all.
        with psycopg.connect(px.upstream_dsn) as up:
            cols = [r[0] for r in up.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_schema = 'lapras' "
                "AND table_name = 'statement_history' ORDER BY ordinal_position")]
            assert cols == ["id", "epoch_id", "at", "sql", "params", "outcome", "zone"]
            deadline = time.monotonic() + 30
            while True:  # written in batches off the serving path, about every second
                rows = up.execute("SELECT epoch_id, sql, params, outcome FROM lapras.statement_history "
                                  "ORDER BY id").fetchall()
                up.commit()
                if len(rows) >= 9 or time.monotonic() > deadline:
                    break
                time.sleep(0.2)
        assert len(rows) >= 9
        assert rows[2][1].endswith("$1") and rows[2][2] == [40]
        assert [r[3] for r in rows[3:6]] == ["repeat"] * 3
        assert [r[0] for r in rows[6:9]] == [epoch] * 3 and [r[3] for r in rows[6:9]] == ["good"] * 3


def test_history_is_not_readable_by_analysts_or_other_roles(proxy_factory) -> None:
    px = proxy_factory()
    with psycopg.connect(px.dsn(), autocommit=True) as conn:
        conn.execute(STATEMENTS[0][0]).fetchall()
        for sql in ("SELECT * FROM lapras.statement_history", "SELECT count(*) FROM lapras.statement_history",
                    "SELECT sql FROM lapras.statement_history WHERE epoch_id = 1"):
            with pytest.raises(psycopg.Error) as err:
                conn.execute(sql).fetchall()
            assert err.value.sqlstate == "42501", (sql, err.value.sqlstate, str(err.value))
    with psycopg.connect(px.upstream_dsn, autocommit=True) as up:
        up.execute("DROP ROLE IF EXISTS history_snoop")
        up.execute("CREATE ROLE history_snoop")
        up.execute("GRANT USAGE ON SCHEMA lapras TO history_snoop")  # even with the schema open to it
        try:
            (can,) = up.execute("SELECT has_table_privilege('history_snoop', 'lapras.statement_history', "
                                "'SELECT')").fetchone()  # type: ignore[misc]
            assert can is False
            (others,) = up.execute(
                "SELECT count(*) FROM pg_class c, aclexplode(c.relacl) a WHERE c.oid = "
                "'lapras.statement_history'::regclass AND a.grantee <> c.relowner").fetchone()  # type: ignore[misc]
            assert others == 0
            up.execute("SET ROLE history_snoop")
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                up.execute("SELECT * FROM lapras.statement_history").fetchall()
            up.execute("RESET ROLE")
        finally:
            up.execute("RESET ROLE")
            up.execute("REVOKE ALL ON SCHEMA lapras FROM history_snoop")
            up.execute("DROP ROLE history_snoop")


def test_a_dashboard_moving_one_step_per_epoch_is_predicted_from_its_progression(proxy_factory) -> None:
    """Panels whose range moves by one each epoch (a sliding window): from a few epochs of history the
    predictor extrapolates the next epoch's panels, which are then answered from P (with three epochs the
    progression is found but its score is low and the auto split gives a two-statement P no share)."""
    px = proxy_factory(epsilon=1.0, delta=1e-3, stream_length=50)

    def panels(d: int) -> list[str]:
        return [f"SELECT COUNT(*) FROM adult WHERE age BETWEEN {30 + d} AND {39 + d}",
                f"SELECT sex, COUNT(*) FROM adult WHERE hours_per_week BETWEEN {20 + d} AND {45 + d} GROUP BY sex"]

    notices: list[str] = []
    with psycopg.connect(px.dsn(), autocommit=True) as conn, \
            psycopg.connect(px.dsn(user="dba", password="dbapass"), autocommit=True) as dba:
        conn.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
        conn.execute("SET lapras.show_stderr = on")
        for d in range(6):
            if d:
                dba.execute("SELECT lapras.new_epoch()")
            seen = []
            for sql in panels(d):
                notices.clear()
                conn.execute(sql).fetchall()
                seen.append(next(n for n in notices if n.startswith("lapras: outcome=")))
        assert all("answered from P" in n for n in seen), seen


def test_a_berlin_session_is_predicted_in_berlin_days(proxy_factory) -> None:
    """A session in Europe/Berlin asks day buckets (Berlin's days, across the 29 March 2026 change): the
    history keeps its zone, P is learnt in it, so epoch 2's same statements under the same zone are answered
    from P (planned in UTC, P would hold UTC's day cells and none would be). A UTC session's row keeps no
    zone (false-failure rate 0: no noisy value is compared)."""
    px = proxy_factory(epsilon=1.0, delta=1e-3, stream_length=50)
    berlin = ["SELECT date_trunc('day', ts) AS d, count(*) FROM events WHERE ts >= '2026-03-26' "
              "AND ts < '2026-04-02' GROUP BY 1",
              "SELECT extract(hour from ts) AS h, count(*) FROM events WHERE ts >= '2026-03-26' "
              "AND ts < '2026-04-02' GROUP BY 1"]
    notices: list[str] = []

    def ask(conn: psycopg.Connection) -> list[str]:
        out = []
        for sql in berlin:
            notices.clear()
            conn.execute(sql).fetchall()
            out.append(next((n for n in notices if n.startswith("lapras: outcome=")), ""))
        return out

    with psycopg.connect(px.dsn(), autocommit=True) as conn, psycopg.connect(px.dsn(), autocommit=True) as utc, \
            psycopg.connect(px.dsn(user="dba", password="dbapass"), autocommit=True) as dba:
        conn.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
        conn.execute("SET lapras.show_stderr = on")
        conn.execute("SET TIME ZONE 'Europe/Berlin'")
        first = ask(conn)
        assert all("outcome=bad" in n for n in first), first
        ask(conn)  # asked again in the epoch: what recurs, P after one epoch
        utc.execute("SELECT count(*) FROM events WHERE ts >= '2026-03-01'").fetchall()
        dba.execute("SELECT lapras.new_epoch()")
        explain = "\n".join(r[0] for r in conn.execute(f"EXPLAIN {berlin[0]}"))
        assert "answered from P" in explain, explain
        second = ask(conn)
        assert all("answered from P" in n for n in second), second
        with psycopg.connect(px.upstream_dsn) as up:
            zones = {(sql, zone) for sql, zone in up.execute("SELECT sql, zone FROM lapras.statement_history")}
        assert {(s, "Europe/Berlin") for s in berlin} <= zones
        assert ("SELECT count(*) FROM events WHERE ts >= '2026-03-01'", None) in zones
