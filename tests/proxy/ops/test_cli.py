"""The `lapras-proxy` command as a user meets it: help on every sub-command, config validation messages.

Two tests run the real `python -m proxy.ops.cli` process (a valid config: exit 0 and OK on stdout; a bad
one: exit 2, the key on stderr, no traceback). The other messages come from the same `main()` called in
this process: each subprocess pays seconds of imports and would prove nothing more."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import pytest

from proxy.config import Config, ConfigError, load_config, parse_config
from proxy.ops.cli import build_parser, main

REPO = Path(__file__).resolve().parents[3]


def run_cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "proxy.ops.cli", *args], capture_output=True, text=True,
                          cwd=REPO, timeout=timeout)


def main_in_process(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """``main(args)`` here: (exit code, stdout, stderr), a SystemExit read as the process would end."""
    capsys.readouterr()
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        code = main(list(args))
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else 1
    finally:
        # main() configures logging on the captured stderr when nothing else has; undo it
        root.handlers[:], root.level = handlers, level
    out = capsys.readouterr()
    return code, out.out, out.err


def test_every_subcommand_has_help(capsys: pytest.CaptureFixture[str]) -> None:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    names = set(sub.choices)  # type: ignore[arg-type]
    assert {"serve", "check-config", "budget", "epoch", "hash-password", "predict", "replay"} <= names
    for name in sorted(names):
        with pytest.raises(SystemExit) as exit_:
            build_parser().parse_args([name, "--help"])
        assert exit_.value.code == 0
        out = capsys.readouterr().out
        assert "usage: lapras-proxy" in out and name in out
    code, out, _ = main_in_process(capsys, "--help")
    assert code == 0 and "serve" in out


@pytest.mark.process
def test_shipped_config_is_valid() -> None:
    done = run_cli("check-config", "--config", str(REPO / "config.toml"))
    assert done.returncode == 0, done.stderr
    assert "OK" in done.stdout
    cfg = load_config(REPO / "config.toml")
    adult = cfg.catalog.table("adult")
    assert adult is not None
    assert [a.name for a in adult.attributes] == [
        "age", "workclass", "fnlwgt", "education_num", "marital_status", "occupation", "relationship",
        "race", "sex", "capital_gain", "capital_loss", "hours_per_week", "native_country", "income_gt_50k"]
    age = adult.attribute("age")
    assert age is not None and (age.domain.lo, age.domain.hi) == (17, 90)
    assert cfg.privacy.epsilon == 1.0 and cfg.privacy.delta == 1e-3


def _broken(tmp_path: Path, old: str, new: str) -> Path:
    text = (REPO / "config.toml").read_text()
    assert old in text
    p = tmp_path / "bad.toml"
    p.write_text(text.replace(old, new, 1))
    return p


@pytest.mark.parametrize(("old", "new", "key", "words"), [
    ("epsilon = 1.0", "epsilon = -1.0", "privacy.epsilon", "> 0"),
    ("epsilon = 1.0", "epsilon = \"one\"", "privacy.epsilon", "must be float"),
    ("delta = 1e-3", "delta = 1.5", "privacy.delta", "(0, 1)"),
    ("accounting = \"gdp\"", "accounting = \"rdp\"", "privacy.accounting", "gdp, basic"),
    ("[server]", "[server]\nlisten_adress = \"x\"", "server.listen_adress", "unknown key"),
    ("age = { type = \"int\", min = 17, max = 90 }", "age = { type = \"int\", min = 90, max = 17 }",
     "tables.adult.columns.age", "empty domain"),
    ("sex = { type = \"int\", min = 0, max = 1 }", "sex = { type = \"categorical\", values = [] }",
     "tables.adult.columns.sex", "empty domain"),
    ("listen = \"127.0.0.1:6432\"", "listen = \"localhost\"", "server.listen", "HOST:PORT"),
    ("auth = \"scram-sha-256\"", "auth = \"kerberos\"", "users[0].auth", "must be one of"),
])
def test_bad_config_names_key_and_fix(tmp_path: Path, capsys: pytest.CaptureFixture[str], old: str, new: str,
                                      key: str, words: str) -> None:
    path = _broken(tmp_path, old, new)
    with pytest.raises(ConfigError) as err:
        load_config(path)
    text = str(err.value)
    assert key in text and words in text
    code, _, stderr = main_in_process(capsys, "check-config", "--config", str(path))
    assert code == 2
    assert key in stderr and "Traceback" not in stderr


@pytest.mark.process
def test_serve_with_bad_config_stops_with_message(tmp_path: Path) -> None:
    """The real process: exit 2, the key on stderr, no traceback, nothing started."""
    path = _broken(tmp_path, "delta = 1e-3", "delta = 0")
    done = run_cli("serve", "--config", str(path), "--state-dir", str(tmp_path / "state"), timeout=60)
    assert done.returncode == 2
    assert "privacy.delta" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "state").exists(), "nothing starts before the config is valid"


def test_all_problems_reported_at_once() -> None:
    with pytest.raises(ConfigError) as err:
        parse_config({"privacy": {"epsilon": 0, "delta": 2}, "server": {"bogus": 1}})
    problems = err.value.problems
    assert any(p.startswith("privacy.epsilon") for p in problems)
    assert any(p.startswith("privacy.delta") for p in problems)
    assert any(p.startswith("server.bogus") for p in problems)
    assert any(p.startswith("users") for p in problems)


def test_missing_config_file_is_explained(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, stderr = main_in_process(capsys, "check-config", "--config", str(tmp_path / "nope.toml"))
    assert code == 2 and "file not found" in stderr


def test_plain_text_password_rejected() -> None:
    tree = {"users": [{"name": "a", "auth": "md5", "secret": "hunter2"}],
            "tables": {"t": {"columns": {"x": {"type": "int", "min": 0, "max": 3}}}}}
    with pytest.raises(ConfigError) as err:
        parse_config(tree)
    assert "plain-text passwords are not accepted" in str(err.value)


def test_check_config_warns_of_private_keys_without_partition_selection(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """keys = "private" is valid, but without [privacy] partition_fraction every GROUP BY over the column is
    refused at query time: check-config says so (still OK: the rest of the file serves)."""
    text = (REPO / "config.toml").read_text() + '\n[tables.shop]\n[tables.shop.columns]\ncity = { type = "text", keys = "private" }\n'
    text = text.replace("partition_fraction = 0.1 ", "partition_fraction = 0.0 ", 1)  # switched off here
    path = tmp_path / "c.toml"
    path.write_text(text)
    code, out, stderr = main_in_process(capsys, "check-config", "--config", str(path))
    assert code == 0 and "OK" in out, stderr
    assert "warning: public.shop.city: keys = \"private\" but [privacy] partition_fraction is 0" in stderr
    path.write_text(text.replace("partition_fraction = 0.0 ", "partition_fraction = 0.1 "))
    code, _, stderr = main_in_process(capsys, "check-config", "--config", str(path))
    assert code == 0 and "warning" not in stderr, stderr


def test_reload_report_names_a_changed_table_without_an_empty_arrow() -> None:
    """check-config --state-dir and RELOAD's log said "tables:  -> public.t: needs a restart" for a table whose
    declaration changed: an arrow from nothing. They now say what changed."""
    from proxy.config import reload as reloading

    def config(values: list[str]) -> Config:
        return parse_config({"users": [{"name": "a", "auth": "trust"}],
                             "tables": {"t": {"columns": {"c": {"type": "text", "values": values}}}}})

    lines = reloading.summary(reloading.diff(config(["a"]), config(["a", "b"])))
    assert lines == ["tables: public.t changed: needs a restart (the running value stays)"], lines


@pytest.mark.process
def test_a_reader_that_went_away_ends_the_command_without_a_traceback() -> None:
    """`lapras-proxy budget --json | head -c 100` printed a BrokenPipeError traceback once head had its bytes:
    a command whose stdout is closed (a pipe with no reader, deterministic: closed before the start) exits 141
    as shell tools do, with nothing on stderr."""
    import os

    r, w = os.pipe()
    os.close(r)
    try:
        done = subprocess.run([sys.executable, "-c", "import sys; from proxy.ops.cli import main; sys.exit(main())",
                               "check-config", "--config", str(REPO / "config.toml")],
                              stdout=w, stderr=subprocess.PIPE, text=True, cwd=REPO, timeout=120, check=False)
    finally:
        os.close(w)
    assert done.returncode == 141 and "Traceback" not in done.stderr, done.stderr
