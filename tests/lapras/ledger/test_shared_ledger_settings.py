"""Proxies sharing one upstream ledger agree on the privacy settings: two real proxies on one database. The
first stores its settings with the ledger; a second whose config differs refuses to start naming each
difference, starts with `--adopt-stored` on the stored ones, and a ledger of a newer schema version is
refused (proxy.config.stored, lapras.ledger.postgres)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg
import pytest

pytestmark = pytest.mark.process


def _proxy(rc: Any, dsn: str, root: Path, *args: str, **overrides: Any) -> Any:
    root.mkdir(parents=True, exist_ok=True)
    port = rc.free_port()
    cfg = root / "config.toml"
    cfg.write_text(rc.make_test_config(dsn, port, **overrides))
    return rc.ProxyProcess(cfg, root / "state", port, extra_args=args)


def _budget(p: Any) -> dict[str, str]:
    with psycopg.connect(p.dsn("dba", "dbapass"), autocommit=True) as conn:
        return dict(conn.execute("SHOW lapras.budget").fetchall())


def test_second_proxy_with_other_settings_refuses_or_adopts(harness: Any, embedded_pg: Any, default_config: Any,
                                                           tmp_path: Path) -> None:
    rc = harness
    dsn = rc.demo_database(embedded_pg, default_config, "shared")
    first = _proxy(rc, dsn, tmp_path / "a", epsilon=50.0)
    first.start()
    try:
        with psycopg.connect(first.dsn(), autocommit=True) as conn:
            assert conn.execute("SELECT COUNT(*) FROM adult WHERE sex = 1").fetchone()
        spent_before = _budget(first)
        # The rolling deploy's typo: ten times the budget, basic accounting, no regression part.
        second = _proxy(rc, dsn, tmp_path / "b", epsilon=500.0)
        text = second.config_path.read_text().replace('accounting = "gdp"', 'accounting = "basic"', 1)
        text = text.replace("regression_fraction = 0.2 ", "regression_fraction = 0 ", 1)
        second.config_path.write_text(text)
        with pytest.raises(RuntimeError) as info:
            second.start(timeout=60)
        out = str(info.value)
        assert "differ from those stored with the ledger" in out, out
        for word in ("privacy.epsilon = 500.0 here, 50.0 stored", "privacy.accounting = 'basic' here, 'gdp' stored",
                     "privacy.regression_fraction = 0.0 here, 0.2 stored", "--adopt-stored"):
            assert word in out, (word, out)
        assert second.proc.returncode == 1
        # With --adopt-stored it serves on the stored settings: the same epoch, the same budget.
        adopted = rc.ProxyProcess(second.config_path, second.state_dir, second.port, extra_args=("--adopt-stored",))
        adopted.start()
        try:
            assert any("--adopt-stored" in line for line in adopted.output)
            budget = _budget(adopted)
            assert {k: v for k, v in budget.items() if k.startswith("budget.")} == \
                {k: v for k, v in spent_before.items() if k.startswith("budget.")}
            with psycopg.connect(adopted.dsn("dba", "dbapass"), autocommit=True) as conn:
                (epoch,) = conn.execute("SELECT lapras.new_epoch()").fetchone()  # type: ignore[misc]
            with psycopg.connect(dsn, autocommit=True) as up:
                (spec,) = up.execute("SELECT spec FROM lapras.epochs WHERE id = %s", (epoch,)).fetchone()  # type: ignore[misc]
            assert spec["mode"] == "gdp" and spec["total_epsilon"] == pytest.approx(50.0)  # not 500
        finally:
            adopted.stop()
    finally:
        first.stop()
    # A deliberate change: --replace-stored makes this config's settings the ledger's.
    replacing = rc.ProxyProcess(second.config_path, second.state_dir, second.port, extra_args=("--replace-stored",))
    replacing.start()
    replacing.stop()
    with psycopg.connect(dsn, autocommit=True) as up:
        (stored,) = up.execute("SELECT value FROM lapras.meta WHERE key = 'privacy_settings'").fetchone()  # type: ignore[misc]
    assert stored["privacy.epsilon"] == 500.0 and stored["privacy.accounting"] == "basic"
    with pytest.raises(RuntimeError) as info:
        first.start(timeout=60)  # now the first proxy's config is the one that differs
    assert "privacy.epsilon = 50.0 here, 500.0 stored" in str(info.value)


def test_newer_ledger_schema_is_refused(harness: Any, embedded_pg: Any, default_config: Any, tmp_path: Path) -> None:
    rc = harness
    dsn = rc.demo_database(embedded_pg, default_config, "newer")
    p = _proxy(rc, dsn, tmp_path / "a")
    p.start()
    p.stop()
    with psycopg.connect(dsn, autocommit=True) as up:
        up.execute("UPDATE lapras.meta SET value = '99' WHERE key = 'schema_version'")
    with pytest.raises(RuntimeError) as info:
        p.start(timeout=60)
    assert "schema is version 99, newer than this lapras-proxy's" in str(info.value)
    assert p.proc.returncode == 1
