"""A column declared `per_unit` in config.toml reaches the answers through a real proxy: the shipped `events`
declares `country = { ..., per_unit = true }` (the generator picks one country per user). With
`max_rows_per_group = 1` (c) added, `GROUP BY country` keeps each user in one country with up to k = 10
events there, not 1: its counts are the upstream's over each user's k events, stated with k times the
column norm as their sensitivity; the same proxy with the declaration removed cuts every user to 1 event
(sensitivity sqrt(12) = group_bound_norm(12, 1, 12, 20): 1 event in each of g = 12 countries, no total k). Both proxies' answers lie within 4.9 stated
standard errors (plus 0.5 of rounding) of their own bounded truth, read here from the upstream: 40 cells,
false-failure rate 40 x 9.6e-7 < 1e-4."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from lapras.mechanisms.sensitivity import group_bound_norm
from tests.fixtures.notices import notice_columns, noticed

SQL = "SELECT country, count(*) FROM events WHERE duration_s < 1200 GROUP BY country ORDER BY 1"
K = 10


def _truths(dsn: str) -> tuple[dict[str, int], dict[str, int]]:
    """Per country, the counts each bound keeps: each user's min(k, n) events (per-unit: its one country),
    and 1 per user (c = 1 in its one country)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        varying = conn.execute("SELECT count(*) FROM (SELECT user_id FROM events GROUP BY 1 "
                               "HAVING count(DISTINCT country) > 1) AS t").fetchone()
        assert varying == (0,)  # the declaration is true of the generated data
        rows = conn.execute("SELECT country, sum(least(n, %s)), count(*) FROM (SELECT user_id, country, count(*) AS n "
                            "FROM events WHERE duration_s < 1200 GROUP BY 1, 2) AS t GROUP BY 1", (K,)).fetchall()
    return {c: int(k) for c, k, _ in rows}, {c: int(u) for c, _, u in rows}


def test_a_per_unit_group_by_keeps_k_rows_in_one_group(harness: Any, embedded_pg: Any, default_config: Any,
                                                      tmp_path: Any) -> None:
    proxies, dsns = {}, {}
    for name in ("declared", "undeclared"):
        dsn = dsns[name] = harness.demo_database(embedded_pg, default_config, f"puw_{name}")
        port = harness.free_port()
        text = harness.make_test_config(dsn, port, stream_length=50, learn_prediction=False)
        text = text.replace("max_groups_per_unit = 12 ", "max_rows_per_group = 1\nmax_groups_per_unit = 12 ", 1)
        assert "max_rows_per_group = 1\n" in text and '"ZA"], per_unit = true }' in text
        if name == "undeclared":
            text = text.replace('"ZA"], per_unit = true }', '"ZA"] }', 1)
        cfg = tmp_path / f"{name}.toml"
        cfg.write_text(text)
        proxies[name] = harness.ProxyProcess(cfg, tmp_path / f"state_{name}", port)
    answers: dict[str, dict[str, int]] = {}
    stderrs: dict[str, float] = {}
    try:
        for p in proxies.values():
            p.start()
        for name, p in proxies.items():
            with noticed(p.dsn()) as (conn, notices):
                answers[name] = {c: int(n) for c, n in conn.execute(SQL).fetchall()}
            stated = [s for s in notice_columns(notices[-1])["count"] if s is not None]
            assert stated and max(stated) == pytest.approx(min(stated))  # one noise scale for every country
            stderrs[name] = stated[0]
    finally:
        for p in proxies.values():
            p.stop()
    # Sensitivity k = 10 against sqrt(12) (c = 1 in each of g = 12 groups: a GROUP BY has no total cap k).
    assert stderrs["declared"] / stderrs["undeclared"] == pytest.approx(K / group_bound_norm(12, 1, 12, 20), rel=1e-2)
    kept, users = _truths(dsns["declared"])
    assert _truths(dsns["undeclared"]) == (kept, users)  # the same generated rows
    assert sum(kept.values()) > 1.5 * sum(users.values())  # the c cut dropped a third of the events
    for name, truth in (("declared", kept), ("undeclared", users)):
        assert set(answers[name]) == set(truth)
        for country, n in truth.items():
            assert abs(answers[name][country] - n) <= 4.9 * stderrs[name] + 0.5, (name, country)
