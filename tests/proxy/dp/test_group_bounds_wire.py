"""Per-group bounds configured in config.toml reach the answers through a real proxy: the same GROUP BY on
`events` under the shipped bounds (k = 10) and with `max_rows_per_group = 1`, `max_groups_per_unit = 2`,
`max_sum_per_group = { amount = 100.0 }` states standard errors in the ratio the sensitivities give."""

from __future__ import annotations

from typing import Any

import pytest

from lapras.mechanisms.sensitivity import group_bound_norm
from tests.fixtures.notices import stated_stderrs

SQL = "SELECT category, count(*), sum(amount) FROM events WHERE duration_s < 1200 GROUP BY category ORDER BY 1"


def test_configured_group_bounds_scale_the_stated_errors(harness: Any, embedded_pg: Any, default_config: Any,
                                                         tmp_path: Any) -> None:
    texts = {}
    for name, bounds in (("plain", ""), ("grouped", "max_rows_per_group = 1\nmax_sum_per_group = { amount = 100.0 }\n")):
        dsn = harness.demo_database(embedded_pg, default_config, f"gbw_{name}")
        port = harness.free_port()
        text = harness.make_test_config(dsn, port, stream_length=50)
        if bounds:
            text = text.replace("max_groups_per_unit = 12 ", bounds + "max_groups_per_unit = 2 ", 1)
            assert "max_rows_per_group = 1\n" in text
        cfg = tmp_path / f"{name}.toml"
        cfg.write_text(text)
        texts[name] = harness.ProxyProcess(cfg, tmp_path / f"state_{name}", port)
    try:
        for p in texts.values():
            p.start()
        plain, grouped = stated_stderrs(texts["plain"].dsn(), SQL), stated_stderrs(texts["grouped"].dsn(), SQL)
    finally:
        for p in texts.values():
            p.stop()
    assert len(plain) >= 2 and len(grouped) >= 2  # the notice lists the first answers (counts and sums)
    # Plain: k = 10 times the column norm sqrt(2) (a row adds 1 to a count and <= 500/500 to a sum); noise
    # scales 1 and 500. Grouped: counts sqrt(g) c = sqrt(2), clamped sums 1 in min(g, k, 8) = 2 groups:
    # sqrt(2 + 2) = 2; noise scales 1 and min(100, 1 x 500) = 100.
    sens_plain, sens_grouped = 10 * 2**0.5, (group_bound_norm(10, 1, 2, 8) ** 2 + 2) ** 0.5
    assert min(grouped) / min(plain) == pytest.approx(sens_grouped / sens_plain, rel=1e-2)  # counts
    assert max(grouped) / max(plain) == pytest.approx(sens_grouped * 100 / (sens_plain * 500), rel=1e-2)  # sums
