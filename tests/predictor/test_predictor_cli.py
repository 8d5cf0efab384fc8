"""The predict command: P.json from logs, back-test records, declared templates, mounting in a CLI."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from predictor.cli import add_parser, main, run
from predictor.output import load_prediction
from tests.fixtures import predictor_synth as synth
from tests.fixtures.predictor_synth import Recurring, const, daily


@pytest.fixture
def log(tmp_path: Path) -> Path:
    items = [Recurring(const(f"SELECT COUNT(*) FROM orders WHERE status = {i}"), daily) for i in range(6)]
    items.append(
        Recurring(lambda d: f"SELECT SUM(amount) FROM sales WHERE batch_id = {500 + d}", daily, kind="report")
    )
    rows = synth.generate(items, 10, adhoc_per_day=8, seed=3)
    p = tmp_path / "pg.log"
    p.write_text(synth.to_stderr(rows))
    (tmp_path / "truth.csv").write_text(synth.to_truth(rows))
    return p


def test_predict_writes_p_json(tmp_path: Path, log: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "config.toml"
    config.write_text(
        '[[predictor.templates]]\nsql = "SELECT COUNT(*) FROM orders WHERE status = :s"\n'
        "params = { s = { values = [40, 41] } }\n"
    )
    out = tmp_path / "P.json"
    assert main(["--log", str(log), "--format", "auto", "--config", str(config), "--out", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["version"] == 1 and data["epoch_start"] == "2026-03-12T00:00:00"
    assert isinstance(data["s_estimate"], int) and 0 < data["rho_estimate"] <= 1
    sqls = [q["sql"] for q in data["queries"]]
    assert sqls[:2] == [
        "SELECT COUNT(*) FROM orders WHERE status = 40",
        "SELECT COUNT(*) FROM orders WHERE status = 41",
    ]
    assert "SELECT SUM(amount) FROM sales WHERE batch_id = 510" in sqls  # the counter, advanced
    assert sum(1 for s in sqls if "orders" in s) == 8
    assert all({"sql", "canonical_key", "score", "template", "source"} <= q.keys() for q in data["queries"])
    back = load_prediction(out)
    assert len(back.queries) == len(data["queries"]) and back.s_estimate == data["s_estimate"]
    assert "P: " in capsys.readouterr().out


def test_backtest_json(tmp_path: Path, log: Path, capsys: pytest.CaptureFixture[str]) -> None:
    res = tmp_path / "bt.json"
    code = main(
        [
            "--log",
            str(log),
            "--backtest",
            "--min-train",
            "5",
            "--truth",
            str(tmp_path / "truth.csv"),
            "--json",
            str(res),
            "--quiet",
        ]
    )
    assert code == 0
    records = json.loads(res.read_text())
    assert [r["epoch"] for r in records] == [5, 6, 7, 8, 9]
    assert {"day", "recall", "precision", "s_estimate", "s_true", "p_size"} <= records[0].keys()
    assert all(r["recurring_recall"] == 1.0 for r in records)
    table = capsys.readouterr().out
    assert "recurring recall" in table and "mean" in table


def test_mount_in_another_cli(log: Path, tmp_path: Path) -> None:
    top = argparse.ArgumentParser(prog="lapras-proxy")
    sub = top.add_subparsers(dest="command")
    add_parser(sub)
    args = top.parse_args(["predict", "--log", str(log), "--out", str(tmp_path / "P.json"), "--quiet"])
    assert args.command == "predict"
    assert run(args) == 0 and (tmp_path / "P.json").exists()


def test_bad_inputs_are_reported_not_raised(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--log", str(tmp_path / "missing.log")]) == 2
    bad = tmp_path / "c.toml"
    bad.write_text("[[predictor.templates]]\nsql = 'SELECT :x'\n")
    empty = tmp_path / "e.sql"
    empty.write_text("")
    assert main(["--log", str(empty), "--config", str(bad)]) == 2
    assert "predict:" in capsys.readouterr().err


def test_log_takes_the_files_of_a_glob(tmp_path: Path, log: Path) -> None:
    """`--log /var/log/postgresql/postgresql-*.log` (the README's spelling) hands the shell's expansion, several
    files, to one --log; each is read, as with --log repeated."""
    first, second = tmp_path / "postgresql-1.log", tmp_path / "postgresql-2.log"
    lines = log.read_text().splitlines(keepends=True)
    first.write_text("".join(lines[: len(lines) // 2]))
    second.write_text("".join(lines[len(lines) // 2:]))
    top = argparse.ArgumentParser(prog="lapras-proxy")
    add_parser(top.add_subparsers(dest="command"))
    args = top.parse_args(["predict", "--log", str(first), str(second), "--log", str(log), "--quiet"])
    assert args.log == [str(first), str(second), str(log)]
    out = tmp_path / "P.json"
    assert main(["--log", str(first), str(second), "--out", str(out), "--quiet"]) == 0
    assert json.loads(out.read_text())["epoch_start"] == "2026-03-12T00:00:00"  # the second file's days read


def test_unreadable_lines_are_quoted_without_their_line_break(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """A jsonlog line that is not JSON is quoted on one line of the report (it once carried its own newline,
    leaving a blank line after each), and a pg_stat_statements export (no timestamps) makes P for the next
    epoch instead of an "epoch starting None"."""
    log = tmp_path / "pg.json"
    good = json.dumps({"timestamp": "2026-11-01 09:00:00.123 UTC", "user": "a", "dbname": "adult", "pid": 1,
                       "error_severity": "LOG", "message": "statement: SELECT COUNT(*) FROM adult"})
    log.write_text(f"{good}\n{{not json\r\n{good}\n")
    assert main(["--log", str(log), "--quiet"]) == 0
    assert main(["--log", str(log)]) == 0
    err = capsys.readouterr().err
    assert "pg.json [jsonlog]: 3 lines, 2 statements, 0 skipped, 1 unreadable\n  unreadable line 2: {not json\n" in err
    pgss = tmp_path / "pgss.csv"
    pgss.write_text("query,calls\nSELECT sex, COUNT(*) FROM adult GROUP BY sex,30\n")
    assert main(["--log", str(pgss), "--format", "pgss", "--snapshot-days", "10"]) == 0
    out = capsys.readouterr().out
    assert "queries for the next epoch" in out and "None" not in out
