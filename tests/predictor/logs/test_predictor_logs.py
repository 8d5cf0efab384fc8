"""Log readers: every format, multi-line statements, junk lines (counted, never fatal), format detection."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest

from predictor.logs import compile_prefix, detect_format, read_log
from predictor.logs.messages import bind_parameters, parse_parameters, statement_of
from predictor.logs.sqlfile import split_sql

STDERR = """\
2026-10-01 08:00:14.123 UTC [1866] metabase@analytics LOG:  statement: SELECT income_gt_50k, SUM(hours_per_week) FROM adult
WHERE workclass = 4
  AND sex = 1 GROUP BY income_gt_50k
2026-10-01 08:00:14.200 UTC [1866] metabase@analytics LOG:  duration: 9.273 ms
2026-10-01 08:01:00.000 UTC [17] LOG:  checkpoint starting: time
this line is junk that no prefix explains
2026-10-01 08:02:00.000 UTC [1900] app@analytics LOG:  execute <unnamed>: SELECT COUNT(*) FROM adult WHERE age = $1 AND sex = $2
2026-10-01 08:02:00.000 UTC [1900] app@analytics DETAIL:  parameters: $1 = '42', $2 = '1'
2026-10-01 08:03:00.000 UTC [1901] app@analytics LOG:  duration: 0.512 ms  statement: SELECT COUNT(*) FROM adult
2026-10-01 08:04:00.000 UTC [1902] app@analytics ERROR:  relation "nope" does not exist
2026-10-01 08:04:00.000 UTC [1902] app@analytics STATEMENT:  SELECT * FROM nope
2026-10-02 09:00:00.000 UTC [1903] bob@analytics LOG:  statement: SELECT AVG(age) FROM adult WHERE name = 'a;b
c'
"""


def _write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def test_stderr_multiline_duration_detail_and_junk(tmp_path: Path) -> None:
    statements, stats = read_log(_write(tmp_path, "pg.log", STDERR))
    assert stats.format == "stderr"
    sqls = [s.sql for s in statements]
    assert sqls[0] == (
        "SELECT income_gt_50k, SUM(hours_per_week) FROM adult\nWHERE workclass = 4\n  AND sex = 1 GROUP BY income_gt_50k"
    )
    assert sqls[1] == "SELECT COUNT(*) FROM adult WHERE age = 42 AND sex = 1"  # parameters bound
    assert sqls[2] == "SELECT COUNT(*) FROM adult"  # log_min_duration_statement form
    assert sqls[3] == "SELECT AVG(age) FROM adult WHERE name = 'a;b\nc'"
    assert len(statements) == 4  # the STATEMENT line after an ERROR is not counted twice
    assert statements[0].user == "metabase" and statements[0].database == "analytics"
    assert statements[0].ts == datetime(2026, 10, 1, 8, 0, 14, 123000)
    assert statements[0].source_line == 1
    assert stats.unreadable == 1 and "junk" in stats.examples[0][1]
    assert stats.statements == 4 and stats.lines == STDERR.count("\n")


@pytest.mark.parametrize(
    ("prefix", "line"),
    [
        ("%m [%p] ", "2026-10-01 08:00:14.123 CEST [12] LOG:  statement: SELECT 1"),
        (
            "%t [%p]: [%l-1] user=%u,db=%d,app=%a,client=%h ",
            "2026-10-01 08:00:14 UTC [12]: [3-1] user=ann,db=shop,app=psql,client=10.0.0.1 LOG:  statement: SELECT 1",
        ),
        ("%m [%p] %q%u@%d ", "2026-10-01 08:00:14.123 UTC [12] ann@shop LOG:  statement: SELECT 1"),
        ("%n [%p] ", "1790841614.123 [12] LOG:  statement: SELECT 1"),
        (
            "%m %r %c %v %x %e %% ",
            "2026-10-01 08:00:14.123 UTC 10.0.0.1(5432) 6541a.2f 3/7 0 00000 % LOG:  statement: SELECT 1",
        ),
        ("%-10u|%d| ", "ann       |shop| LOG:  statement: SELECT 1"),
    ],
)
def test_prefix_compiler(prefix: str, line: str) -> None:
    m = compile_prefix(prefix).match(line)
    assert m is not None, prefix
    assert m.group("severity") == "LOG" and m.group("msg") == "statement: SELECT 1"
    if "%u" in prefix or "%-10u" in prefix:
        assert m.group("user").strip() == "ann"


def test_prefix_q_makes_the_rest_optional() -> None:
    rx = compile_prefix("%m [%p] %q%u@%d ")
    assert rx.match("2026-10-01 08:00:14.123 UTC [17] LOG:  checkpoint starting: time")


def test_stderr_explicit_prefix_and_syslog(tmp_path: Path) -> None:
    text = (
        "Oct  1 08:00:14 db1 postgres[1866]: [5-1] user=ann,db=shop LOG:  statement: SELECT COUNT(*)\n"
        "Oct  1 08:00:14 db1 postgres[1866]: [5-2] #011FROM sales\n"
        "Oct  1 08:00:15 db1 postgres[1866]: [6-1] user=ann,db=shop LOG:  duration: 1.0 ms\n"
    )
    statements, stats = read_log(_write(tmp_path, "syslog", text), "stderr", prefix="user=%u,db=%d ")
    assert [s.sql for s in statements] == ["SELECT COUNT(*)\nFROM sales"]
    assert statements[0].user == "ann" and statements[0].ts is not None
    assert statements[0].ts.month == 10 and statements[0].ts.day == 1
    assert stats.unreadable == 0


def test_csvlog_multiline_and_bad_records(tmp_path: Path) -> None:
    text = (
        '2026-10-01 08:00:14.000 UTC,ann,shop,1866,127.0.0.1:5000,,0,SELECT,,,,LOG,00000,"statement: SELECT a\n'
        "FROM t WHERE b = 'x,y'\",,,,,,,,,,,\n"
        "2026-10-01 08:00:15.000 UTC,ann,shop,1866,127.0.0.1:5000,,1,SELECT,,,,LOG,00000,duration: 1 ms,,,,,,,,,,,\n"
        "not,a,csvlog,record\n"
        "2026-10-01 08:00:16.000 UTC,ann,shop,1867,127.0.0.1:5000,,2,SELECT,,,,LOG,00000,"
        "execute S_1: SELECT c FROM t WHERE d = $1,parameters: $1 = 'O''Hara',,,,,,,,,,\n"
    )
    statements, stats = read_log(_write(tmp_path, "pg.csv", text))
    assert stats.format == "csvlog"
    assert [s.sql for s in statements] == [
        "SELECT a\nFROM t WHERE b = 'x,y'",
        "SELECT c FROM t WHERE d = 'O''Hara'",
    ]
    assert statements[0].source_line == 1 and statements[1].source_line == 5
    assert stats.unreadable == 1 and stats.skipped == 1


def test_jsonlog(tmp_path: Path) -> None:
    rows = [
        {
            "timestamp": "2026-10-01 08:00:14.000 UTC",
            "user": "ann",
            "dbname": "shop",
            "pid": 1,
            "error_severity": "LOG",
            "message": "statement: SELECT COUNT(*)\nFROM t",
        },
        {
            "timestamp": "2026-10-01 08:00:15.000 UTC",
            "pid": 1,
            "error_severity": "LOG",
            "message": "duration: 2 ms",
        },
    ]
    text = "\n".join(json.dumps(r) for r in rows) + "\n{broken json\n" + json.dumps({"no": "message"}) + "\n"
    statements, stats = read_log(_write(tmp_path, "pg.json", text))
    assert stats.format == "jsonlog"
    assert [s.sql for s in statements] == ["SELECT COUNT(*)\nFROM t"]
    assert statements[0].database == "shop"
    assert stats.unreadable == 2


def test_pgss_csv_and_json(tmp_path: Path) -> None:
    csv_text = (
        'userid,dbid,query,calls,total_exec_time\n10,5,"SELECT COUNT(*) FROM t WHERE a = $1",120,3.5\n'
        "10,5,SELECT COUNT(*) FROM t,7,1.0\n10,5,,3,1\n"
    )
    statements, stats = read_log(_write(tmp_path, "pgss.csv", csv_text))
    assert stats.format == "pgss"
    assert [(s.sql, s.calls, s.ts) for s in statements] == [
        ("SELECT COUNT(*) FROM t WHERE a = $1", 120, None),
        ("SELECT COUNT(*) FROM t", 7, None),
    ]
    assert stats.unreadable == 1
    js = json.dumps([{"query": "SELECT SUM(x) FROM t", "calls": 3}])
    statements, stats = read_log(_write(tmp_path, "pgss.json", js))
    assert stats.format == "pgss" and statements[0].calls == 3


def test_sql_file_comments_strings_and_timestamps(tmp_path: Path) -> None:
    text = (
        "-- weekly report\n"
        "SELECT COUNT(*) FROM t WHERE s = 'a;b'; /* block; comment */\n"
        "-- 2026-10-01 08:00:00\n"
        "SELECT $$x;y$$, SUM(a) FROM t;\n"
        'SELECT "odd;name" FROM t'
    )
    statements, stats = read_log(_write(tmp_path, "q.sql", text))
    assert stats.format == "sql"
    assert [s.sql for s in statements] == [
        "SELECT COUNT(*) FROM t WHERE s = 'a;b'",
        "SELECT $$x;y$$, SUM(a) FROM t",
        'SELECT "odd;name" FROM t',
    ]
    assert statements[0].ts is None and statements[1].ts == datetime(2026, 10, 1, 8)
    assert [line for line, _, _ in split_sql(text)] == [2, 4, 5]


def test_history_rows(tmp_path: Path) -> None:
    text = "ts,user,sql\n2026-10-01T08:00:00,ann,SELECT COUNT(*) FROM t\nbad,ann,SELECT 1\n"
    statements, stats = read_log(_write(tmp_path, "history.csv", text))
    assert stats.format == "history"
    assert len(statements) == 1 and statements[0].user == "ann"
    assert stats.unreadable == 1


def test_detect_format_on_empty_and_garbage(tmp_path: Path) -> None:
    assert detect_format(_write(tmp_path, "empty.log", "")) == "sql"
    statements, stats = read_log(_write(tmp_path, "bin.log", "\x00\x01garbage\n"), "stderr")
    assert statements == [] and stats.unreadable == 1


def test_message_helpers() -> None:
    assert statement_of("statement: SELECT 1") == ("SELECT 1", False)
    assert statement_of("duration: 1.5 ms  execute S_1: SELECT 2") == ("SELECT 2", True)
    assert statement_of("duration: 1.5 ms  parse <unnamed>: SELECT 2") == (None, False)
    assert statement_of("duration: 1.5 ms") == (None, False)
    assert parse_parameters("parameters: $1 = '5', $2 = NULL, $3 = 'it''s'") == {
        1: "5",
        2: "NULL",
        3: "'it''s'",
    }
    assert bind_parameters("SELECT '$1', $1, $10", {1: "5", 10: "'x'"}) == "SELECT '$1', 5, 'x'"


def test_unknown_format_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        read_log(_write(tmp_path, "x.log", "x"), "nope")


def test_stderr_log_and_csv_twin_agree(bi_log: dict[str, Path]) -> None:
    a, sa = read_log(bi_log["stderr"])
    b, sb = read_log(bi_log["csvlog"])
    assert (sa.format, sb.format) == ("stderr", "csvlog")
    assert sa.unreadable == sb.unreadable == 0
    assert [(s.ts, s.sql) for s in a] == [(s.ts, s.sql) for s in b]


def test_junk_after_a_statement_is_cut_off_and_tabs_are_removed(tmp_path: Path) -> None:
    text = (
        "2026-10-01 08:00:00.000 UTC [1] a@b LOG:  statement: SELECT COUNT(*)\n"
        "\tFROM t\n"
        "\tWHERE x = 1\n"
        "}}} ### corrupted ###\n"
        "2026-10-01 08:00:01.000 UTC [1] a@b LOG:  duration: 1.0 ms  plan:\n"
        "\t  Seq Scan on t\n"
    )
    statements, stats = read_log(_write(tmp_path, "pg.log", text))
    assert [s.sql for s in statements] == ["SELECT COUNT(*)\nFROM t\nWHERE x = 1"]
    assert stats.unreadable == 1 and stats.examples[0][0] == 4
