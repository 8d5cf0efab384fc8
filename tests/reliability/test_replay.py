"""The replay tool: log reading, outcome classification, reconnection and the report files."""

from __future__ import annotations

import json
from pathlib import Path

import psycopg
import pytest

from proxy.replay.report import format_table, summarize, write_chart, write_json
from proxy.replay.runner import (
    ReplayOptions,
    Statement,
    load_statements,
    parse_budget,
    parse_provenance,
    replay,
    statement_outcome,
)


def _opts_for(dsn: str, **kw) -> ReplayOptions:
    parts = dict(p.split("=", 1) for p in dsn.split())
    return ReplayOptions(host=parts["host"], port=int(parts["port"]), user=parts["user"], password=None,
                         dbname=parts["dbname"], **kw)


def test_parse_provenance_and_outcome() -> None:
    outcomes, stderrs = parse_provenance(["lapras: outcome=fresh stderr=[25.75, 3.1e1, ...] cost=mu 0.01",
                                          "outcome=free se=0.25", "provenance: predicted, stderr = 3e1"])
    assert outcomes == ["answered", "free", "from_p"]
    assert stderrs == [25.75, 31.0, 0.25, 30.0]
    assert statement_outcome(["free", "from_p"]) == "from_p"
    assert statement_outcome(["free", "answered"]) == "answered"
    assert statement_outcome([]) == "answered"


def test_parse_budget_variants() -> None:
    class D:
        def __init__(self, name: str) -> None:
            self.name = name

    kv = [D("key"), D("value")]
    assert parse_budget(kv, [("epoch", "2026-11-29"), ("mu_total", "0.39"), ("regression_remaining", "0.1"),
                             ("remaining_mu", "0.25")]) == 0.25
    assert parse_budget(kv, [("remaining", "0.3"), ("remaining_mu", "0.25")]) == 0.3
    assert parse_budget([D("lapras.budget")], [("0.25",)]) == 0.25
    assert parse_budget([D("total"), D("remaining"), D("x")], [(1.0, 0.4, 2)]) == 0.4
    assert parse_budget([D("x")], []) is None
    nested = {"epoch": 3, "mu": {"total": 0.39, "remaining": 0.2},
              "remaining": {"epsilon": 0.61, "delta": 0.0004}}
    assert parse_budget(kv, [("current", repr(nested)), ("epochs", "3")]) == 0.61
    assert parse_budget(kv, [("current", json.dumps({"mu": {"remaining": 0.2}}))]) == 0.2


def test_load_statements_offsets(tmp_path: Path) -> None:
    log = tmp_path / "pg.log"
    log.write_text(
        "2026-10-01 00:00:00.000 UTC [1] a@db LOG:  statement: SELECT 1\n"
        "2026-10-01 00:00:10.000 UTC [1] a@db LOG:  duration: 1.0 ms\n"
        "2026-10-01 00:01:00.000 UTC [2] b@db LOG:  statement: SELECT\n  2\n")
    stmts = load_statements(log)
    assert [(s.offset_s, s.user) for s in stmts] == [(0.0, "a"), (60.0, "b")]
    assert stmts[1].sql.split() == ["SELECT", "2"]


def test_replay_against_postgres_reconnects_and_reports(adult_db: str, tmp_path: Path) -> None:
    # Plain PostgreSQL speaks the same protocol: it checks the client side (ordering, errors, reconnect).
    stmts = [Statement(0.0, "u", "SELECT count(*) FROM adult"),
             Statement(0.0, "u", "SELEC broken"),
             Statement(0.0, "u", "SELECT pg_terminate_backend(pg_backend_pid())"),
             Statement(0.0, "u", "SELECT 1"),
             Statement(0.0, "u", "SELECT 1/0")]
    result = replay(stmts, _opts_for(adult_db, clients=1, keep_rows=True, show_stderr=False,
                                     reconnect_timeout_s=10))
    by_index = {r.index: r for r in result.results}
    assert len(by_index) == 5
    assert by_index[0].outcome == "answered" and by_index[0].rows and by_index[0].rows[0][0] > 0
    assert (by_index[1].outcome, by_index[1].sqlstate) == ("refused", "42601")
    assert by_index[2].outcome == "error"          # connection ended under the statement
    assert by_index[3].outcome == "answered" and by_index[3].rows == [(1,)]   # reconnected
    assert (by_index[4].outcome, by_index[4].sqlstate) == ("refused", "22012")
    assert result.budget == []                     # plain PostgreSQL has no lapras.budget
    summary = summarize(result)
    assert summary["outcomes"]["answered"] == 2 and summary["outcomes"]["refused"] == 2
    assert summary["refused_by_sqlstate"] == {"22012": 1, "42601": 1}
    text = format_table(summary)
    assert "refused" in text and "p99" in text
    png = tmp_path / "r.png"
    write_chart(result, str(png))
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    out = tmp_path / "r.json"
    write_json(summary, result, str(out))
    doc = json.loads(out.read_text())
    assert len(doc["per_statement"]) == 5


def test_replay_paces_by_speed(adult_db: str) -> None:
    stmts = [Statement(0.0, None, "SELECT 1"), Statement(2.0, None, "SELECT 1")]
    result = replay(stmts, _opts_for(adult_db, clients=2, speed=4.0, show_stderr=False))
    # The second statement is due 2 s / 4 = 0.5 s after the first.
    assert result.wall_s >= 0.45
    assert all(r.outcome == "answered" for r in result.results)


def test_replay_unreachable_target_raises() -> None:
    opts = ReplayOptions(host="127.0.0.1", port=1, clients=1, reconnect_timeout_s=0.2)
    with pytest.raises(psycopg.OperationalError):
        replay([Statement(0.0, None, "SELECT 1")], opts)


def test_replay_runs_a_history_in_its_recorded_zones(adult_db: str, tmp_path: Path) -> None:
    """A history export with the proxy's zone column: each statement runs under its session's TimeZone, and a
    statement recorded without one (UTC) after a zoned one runs in UTC again (false-failure rate 0)."""
    log = tmp_path / "history.csv"
    show = "SELECT current_setting('TimeZone')"
    log.write_text("at,sql,zone\n"
                   f"2026-10-01 00:00:00,{show},Europe/Berlin\n"
                   f"2026-10-01 00:00:01,{show},\n"
                   f"2026-10-01 00:00:02,{show},<+03>-03\n")
    stmts = load_statements(log, "history")
    result = replay(stmts, _opts_for(adult_db, clients=1, keep_rows=True, show_stderr=False))
    rows = [r.rows for r in sorted(result.results, key=lambda r: r.index)]
    assert rows == [[("Europe/Berlin",)], [("UTC",)], [("<+03>-03",)]]
