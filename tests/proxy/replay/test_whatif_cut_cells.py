"""`lapras-proxy whatif` over a log whose statements' literals cut cells (Grafana's `$__timeFilter` ending
at 23:59:59, `amount > 105` inside a bin of 50): each is planned with its own finer partition, answered
through the in-process engine and scored against its exact answer over that partition, never counted as
unsupported. Seeded simulation noise: the figures checked here (counts of statements) do not depend on
it, so the test has no false-failure rate."""

from __future__ import annotations

import json
from pathlib import Path

from proxy.ops.cli import main

REPO = Path(__file__).resolve().parents[3]
STATEMENTS = [
    "SELECT count(*) FROM events WHERE \"ts\" BETWEEN '2026-01-01T00:00:00Z' AND '2026-01-31T23:59:59Z'",
    "SELECT count(*), sum(amount) FROM events WHERE amount > 105",
    "SELECT category, count(*) FROM events WHERE amount >= 105 GROUP BY category",
    "SELECT count(*) FROM events WHERE ts >= '2026-02-01 00:00:00+00'",
]


def test_whatif_answers_statements_with_cut_cells(adult_db: str, tmp_path: Path) -> None:
    cfg = tmp_path / "config.toml"
    cfg.write_text((REPO / "config.toml").read_text().replace('dsn = ""', f"dsn = {json.dumps(adult_db)}", 1))
    log = tmp_path / "cut.log"
    log.write_text("".join(f"2026-05-04 09:{i:02d}:00.000 UTC [42] bi@adult LOG:  statement: {sql}\n"
                           for i, sql in enumerate(STATEMENTS * 2)))
    out = tmp_path / "cut.json"
    assert main(["whatif", str(log), "--config", str(cfg), "--epsilon", "1", "--json", str(out),
                 "--no-progress"]) == 0
    doc = json.loads(out.read_text())
    totals = doc.get("totals") or doc["records"]
    assert all(f["statements"] == len(STATEMENTS) * 2 and f.get("unsupported", 0) == 0 for f in totals), totals
