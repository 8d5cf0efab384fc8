"""What a changed config.toml means for a running proxy: which keys apply at once, which at the next epoch,
which need a restart. `RELOAD`, SIGHUP and `check-config --state-dir` all say it with this one table.

Live: limits and timeouts of new statements and connections, users (logins, secrets, admin), the query
log and the TLS files. At the next epoch: the privacy budget and how it is spent, since an epoch's budget
and split are fixed (stored in the ledger) when it is prepared. The epoch length, the work limit and the
release wait are read as they are needed, so they apply at once. Restart: the listening address, the
database name, the metrics address, the upstream, the protected tables and the prediction inputs.
Pure functions of two `Config`s; nothing here reads a file or touches the server.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any

from psycopg.conninfo import conninfo_to_dict, make_conninfo

from pgcore.identifiers import qualified

from ..config import Config
from ..config.keys import KEYS

LIVE = "live"
NEXT_EPOCH = "next epoch"
RESTART = "restart"

_LIVE_SERVER = ("max_connections", "max_message_bytes", "statement_timeout_s", "idle_timeout_s",
                "auth_timeout_s", "queries_per_minute", "allow_cleartext_without_tls", "query_log")
_LIVE_ENGINE = ("epoch", "epoch_seconds", "max_statement_work", "mm_wait")
_RESTART_LAPRAS = ("prediction", "snapshot", "snapshot_max_cells", "bounding")


@dataclass(frozen=True)
class Change:
    """One key whose value differs between the running and the new configuration."""

    key: str
    old: str
    new: str
    when: str        # LIVE, NEXT_EPOCH or RESTART

    def line(self, next_epoch: str = "") -> str:
        when = {LIVE: "applied now", NEXT_EPOCH: f"applies at the next epoch{next_epoch}",
                RESTART: "needs a restart (the running value stays)"}[self.when]
        change = f"{self.old} -> {self.new}" if self.old else self.new  # tables, a user: what changed, no arrow
        return f"{self.key}: {change}: {when}"


def when_applied(section: str, name: str) -> str:
    if section == "server":
        return LIVE if name in _LIVE_SERVER else RESTART
    if section == "tls":
        return LIVE
    if section in ("privacy", "lapras"):
        if name in _LIVE_ENGINE:
            return LIVE
        if section == "lapras" and name in _RESTART_LAPRAS:
            return RESTART
        return NEXT_EPOCH
    return RESTART


def shown(value: Any) -> str:
    if value is None:
        return "(unset)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, dict | list | tuple):
        return json.dumps(value, sort_keys=True, default=str)
    return '""' if value == "" else str(value)


def value_of(cfg: Config, section: str, name: str) -> Any:
    if section == "server" and name == "listen":
        return f"{cfg.server.host}:{cfg.server.port}"
    if section == "upstream":
        return redact_dsn(cfg.upstream_dsn)
    return getattr(getattr(cfg, section), name)


def redact_dsn(dsn: str) -> str:
    """A connection string without its password (for SHOW CONFIG and reload reports)."""
    if not dsn:
        return ""
    try:
        parts = conninfo_to_dict(dsn)
    except Exception:  # an unparsable DSN fails at start-up anyway; show nothing of it
        return "(unparsable)"
    if "password" in parts:
        parts["password"] = "********"
    return str(make_conninfo(**parts))  # type: ignore[arg-type]


def _users(cfg: Config) -> dict[str, tuple[str, str, bool]]:
    return {u.name: (u.auth, u.secret, u.admin) for u in cfg.users}


def diff(old: Config, new: Config) -> list[Change]:
    """Every changed key, in key-table order, with when it takes effect."""
    out: list[Change] = []
    for k in KEYS:
        if k.section not in ("server", "tls", "upstream", "privacy", "lapras"):
            continue
        a, b = value_of(old, k.section, k.name), value_of(new, k.section, k.name)
        if a != b:
            out.append(Change(k.path, shown(a), shown(b), when_applied(k.section, k.name)))
    ou, nu = _users(old), _users(new)
    for name in sorted(set(ou) | set(nu)):
        if name not in nu:
            out.append(Change(f"users.{name}", "declared", "removed (open sessions stay; no new login)", LIVE))
        elif name not in ou:
            out.append(Change(f"users.{name}", "absent", "added" + (" (admin)" if nu[name][2] else ""), LIVE))
        elif ou[name] != nu[name]:
            what = [w for w, i in (("auth", 0), ("secret", 1), ("admin", 2)) if ou[name][i] != nu[name][i]]
            out.append(Change(f"users.{name}", "", f"{', '.join(what)} changed", LIVE))
    if _declared(old.catalog) != _declared(new.catalog) or old.loads != new.loads:
        names = sorted({t.qualified_name for t in (*old.catalog.tables, *new.catalog.tables)
                        if old.catalog.table(t.name, t.schema) != new.catalog.table(t.name, t.schema)}
                       | {qualified(schema, name) for name, schema, _ in
                          _declared(old.catalog)[1] ^ _declared(new.catalog)[1]})
        out.append(Change("tables", "", (", ".join(names) or "load settings") + " changed", RESTART))
    if old.predictor != new.predictor:
        out.append(Change("predictor", "", "changed", RESTART))
    return out


def live_config(running: Config, new: Config) -> Config:
    """The configuration to run with after a reload: ``new``'s live parts over ``running`` (the listening
    address, database name and metrics address stay; tables, upstream and prediction inputs stay). The
    privacy and lapras sections are ``new``'s: the engine takes them for its next epoch."""
    server = replace(new.server, listen=running.server.listen,
                     database=running.server.database, metrics_listen=running.server.metrics_listen)
    lapras = replace(new.lapras, **{n: getattr(running.lapras, n) for n in _RESTART_LAPRAS})
    return replace(running, path=new.path, server=server, tls=new.tls, users=new.users, privacy=new.privacy,
                   lapras=lapras, raw=new.raw)


def summary(changes: list[Change], next_epoch: str = "") -> list[str]:
    """One line per change; a line saying nothing changed when nothing did."""
    if not changes:
        return ["no setting changed"]
    return [c.line(next_epoch) for c in changes]


def epoch_differences(current: dict[str, Any], cfg: Config) -> list[tuple[str, str, str]]:
    """(key, the current epoch's value, ``cfg``'s value) for each privacy setting in which ``cfg`` differs
    from the epoch in force (``current``: the ledger's report of it, `lapras.report.epoch_report`). Those
    values are fixed in the ledger when an epoch is prepared: ``cfg``'s apply from the next epoch, whether
    the proxy was reloaded or restarted."""
    if not current:
        return []
    eps = float(current["budget"]["epsilon"])
    stored: dict[str, Any] = {
        "privacy.epsilon": eps,
        "privacy.delta": float(current["budget"]["delta"]),
        "privacy.accounting": current.get("accounting"),
        "privacy.regression_fraction": float(current["regression_budget"]["epsilon"]) / eps,
        "privacy.partition_fraction": float(current["partition_budget"]["epsilon"]) / eps,
        "lapras.allocation": current.get("allocation"),
    }
    if float(current["partition_budget"]["epsilon"]) > 0:
        stored["privacy.partition_selections"] = int(current["partition_budget"]["selections"])
    out = []
    for key, have in stored.items():
        section, name = key.split(".")
        want = getattr(getattr(cfg, section), name)
        same = (abs(float(have) - float(want)) <= 1e-9 * max(1.0, abs(float(want)))
                if isinstance(have, float) else have == want)
        if not same:
            out.append((key, shown(have), shown(want)))
    return out


def epoch_difference_lines(current: dict[str, Any], cfg: Config, next_epoch: str) -> list[str]:
    """The differences as sentences, naming the epoch in force and when the file's values apply."""
    diffs = epoch_differences(current, cfg)
    if not diffs:
        return []
    epoch = current.get("epoch")
    return [f"{key}: the current epoch {epoch} runs with {have} (fixed in the ledger); {want} from the next "
            f"epoch{next_epoch}" for key, have, want in diffs]


def _public_declared(p: Any) -> tuple[str, str, str]:
    """What config.toml declares of a public table (its rows and columns are read upstream at start)."""
    return (p.name, p.schema, p.description)


def _declared(catalog: Any) -> tuple[Any, frozenset[tuple[str, str, str]]]:
    """A catalog as config.toml declares it: the running one also holds the public tables as read."""
    return (catalog.tables, frozenset(_public_declared(p) for p in catalog.public))
