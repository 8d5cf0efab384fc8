"""The privacy settings that proxies sharing one ledger must agree on, stored with the ledger.

The first proxy (or operator command) to open a ledger stores its settings there; every later one compares
its config with them before it serves: a proxy whose `[privacy]` or budget-split settings differ refuses
to start, naming each difference (a typo in a rolling deploy would otherwise spend another budget on the
same data). `serve --adopt-stored` runs with the stored settings instead of the config's;
`serve --replace-stored` makes the config's the stored ones (stop the other proxies first: they keep
their own until restarted).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from lapras.ledger.postgres import PostgresLedger

from ..config import Config

PRIVACY_KEYS = ("epsilon", "delta", "accounting", "epoch", "epoch_seconds", "regression_fraction",
                "partition_fraction", "partition_selections", "stream_length")
LAPRAS_KEYS = ("split", "fractions", "allocation", "warmup")
"""The settings that decide how much one epoch may release and how it is split and paced."""

HINT = ("start with --adopt-stored to run with the stored settings, or fix config.toml; to change the "
        "settings of every proxy on this ledger, stop them all and start one with --replace-stored")


def privacy_settings(cfg: Config) -> dict[str, Any]:
    """The config's shared settings, as JSON values keyed ``privacy.epsilon``, ``lapras.split``, ..."""
    out: dict[str, Any] = {f"privacy.{k}": getattr(cfg.privacy, k) for k in PRIVACY_KEYS}
    out.update({f"lapras.{k}": getattr(cfg.lapras, k) for k in LAPRAS_KEYS})
    return out


def with_settings(cfg: Config, settings: dict[str, Any]) -> Config:
    """``cfg`` with the given shared settings (keys this code does not know are ignored)."""
    privacy = {k: settings[f"privacy.{k}"] for k in PRIVACY_KEYS if f"privacy.{k}" in settings}
    lapras = {k: settings[f"lapras.{k}"] for k in LAPRAS_KEYS if f"lapras.{k}" in settings}
    return replace(cfg, privacy=replace(cfg.privacy, **privacy), lapras=replace(cfg.lapras, **lapras))


def agree_with_ledger(cfg: Config, upstream_dsn: str, mode: str = "check") -> Config:
    """The config to serve with after comparing its settings with the ledger's (``mode``: check, adopt,
    replace; see the module). Raises lapras.errors.SettingsDiffer (check) or LedgerError (a ledger of a
    newer schema version)."""
    ledger = PostgresLedger(upstream_dsn, max_connections=1)
    try:
        agreed = ledger.agree_settings(privacy_settings(cfg), mode)
    finally:
        ledger.close()
    return with_settings(cfg, agreed)
