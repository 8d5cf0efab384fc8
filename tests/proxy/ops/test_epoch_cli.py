"""`lapras-proxy epoch` prints the new epoch as `budget` prints the ledger (one key a line, UTC timestamps,
floats to 6 digits), the raw JSON object with --json; run in-process against the embedded PostgreSQL as an
upstream (false-failure rate 0)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from proxy.dp.service import flatten
from proxy.ops.cli import main


def test_epoch_prints_a_table_and_json_on_request(embedded_pg: Any, default_config: Any, harness: Any,
                                                  tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dsn = harness.demo_database(embedded_pg, default_config, "epochcli")
    (tmp_path / "config.toml").write_text(harness.make_test_config(dsn, harness.free_port()))
    args = ["epoch", "--config", str(tmp_path / "config.toml"), "--state-dir", str(tmp_path / "state")]
    assert main(args) == 0
    table = capsys.readouterr().out
    rows = dict(re.match(r"^\s*(\S+): (.*)$", ln).groups() for ln in table.splitlines())  # type: ignore[union-attr]
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\+00", rows["started_at"]), table
    assert rows["budget.epsilon"] == "1" and not re.search(r"\d\.\d{9,}", table), table
    first = int(rows["epoch"])
    assert main([*args, "--json"]) == 0
    raw = json.loads(capsys.readouterr().out)
    assert raw["epoch"] == first + 1 and isinstance(raw["started_at"], int | float)
    # Same keys either way: the table is the JSON object flattened.
    assert {k for k, _ in flatten(raw)} == set(rows)
