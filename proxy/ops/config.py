"""Load and validate config.toml into typed settings, collecting every problem with the key and the fix.

Validation never raises a traceback at the user: `load_config` raises `ConfigError`, whose message lists
each problem as `key: what is wrong (how to fix it)`.
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from parser.schema import Attribute, Catalog, Domain, TableSchema

AUTH_METHODS = ("scram-sha-256", "md5", "password", "trust")
ACCOUNTING_MODES = ("gdp", "basic")
SPLITS = ("auto", "equal", "matrix_heavy", "query_heavy", "reserve_heavy", "custom")
FRACTION_KEYS = ("mm", "bad_init", "rem_bad", "reserve")
EPOCHS = ("daily", "hourly", "manual")


class ConfigError(Exception):
    """The configuration is invalid; `problems` lists each one."""

    def __init__(self, path: str, problems: list[str]) -> None:
        self.path = path
        self.problems = problems
        lines = "\n".join(f"  - {p}" for p in problems)
        super().__init__(f"{path}: {len(problems)} problem(s) in the configuration:\n{lines}")


@dataclass(frozen=True)
class ServerSettings:
    host: str = "127.0.0.1"
    port: int = 6432
    database: str = "adult"
    max_connections: int = 200
    max_message_bytes: int = 1 << 20
    statement_timeout_s: float = 60.0
    idle_timeout_s: float = 3600.0
    auth_timeout_s: float = 10.0
    queries_per_minute: int = 6000
    allow_cleartext_without_tls: bool = False
    metrics_listen: str = ""       # HOST:PORT of the Prometheus endpoint; empty = off
    query_log: str = ""            # "" off, "stderr", or a file path: one JSON line per statement


@dataclass(frozen=True)
class TlsSettings:
    cert: str = ""
    key: str = ""

    @property
    def enabled(self) -> bool:
        return bool(self.cert and self.key)


@dataclass(frozen=True)
class User:
    name: str
    auth: str
    secret: str = ""
    admin: bool = False   # may run lapras.new_epoch() through SQL


@dataclass(frozen=True)
class PrivacySettings:
    epsilon: float = 1.0
    delta: float = 1e-3
    accounting: str = "gdp"
    epoch: str = "daily"
    regression_fraction: float = 0.2
    stream_length: int = 200


@dataclass(frozen=True)
class LaprasSettings:
    split: str = "auto"
    fractions: dict[str, float] | None = None
    allocation: str = "smooth"
    warmup: int = 0
    prediction: str = ""
    free_answer_max_stderr: float = 0.0


@dataclass(frozen=True)
class LoadSettings:
    """How `serve --data CSV` maps a CSV onto a protected table."""

    rename: dict[str, str] = field(default_factory=dict)
    offset: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Config:
    path: str
    server: ServerSettings
    tls: TlsSettings
    upstream_dsn: str
    users: tuple[User, ...]
    privacy: PrivacySettings
    lapras: LaprasSettings
    catalog: Catalog
    loads: dict[str, LoadSettings]
    predictor: dict[str, Any] = field(default_factory=dict)
    raw: dict[str, Any] = field(default_factory=dict, repr=False)

    def user(self, name: str) -> User | None:
        return next((u for u in self.users if u.name == name), None)


_TOP_KEYS = {"server", "tls", "upstream", "users", "privacy", "lapras", "tables", "predictor"}


class _Checker:
    """Collects problems while reading a TOML tree, so the user sees them all at once."""

    def __init__(self) -> None:
        self.problems: list[str] = []

    def bad(self, key: str, msg: str) -> None:
        self.problems.append(f"{key}: {msg}")

    def section(self, tree: dict[str, Any], key: str) -> dict[str, Any]:
        value = tree.get(key, {})
        if not isinstance(value, dict):
            self.bad(key, f"must be a table ([{key}]), got {type(value).__name__}")
            return {}
        return value

    def unknown(self, tree: dict[str, Any], allowed: set[str], prefix: str) -> None:
        for k in tree:
            if k not in allowed:
                hint = ", ".join(sorted(allowed))
                self.bad(f"{prefix}{k}", f"unknown key (allowed here: {hint})")

    def get(self, tree: dict[str, Any], key: str, kind: type | tuple[type, ...], default: Any,
            prefix: str) -> Any:
        if key not in tree:
            return default
        value = tree[key]
        kinds = kind if isinstance(kind, tuple) else (kind,)
        if float in kinds and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if isinstance(value, bool) and bool not in kinds:
            ok = False
        else:
            ok = isinstance(value, kinds)
        if not ok:
            names = " or ".join(k.__name__ for k in kinds)
            self.bad(f"{prefix}{key}", f"must be {names}, got {value!r}")
            return default
        return value


def parse_listen(text: str) -> tuple[str, int]:
    """Split HOST:PORT (IPv6 hosts in brackets); raises ValueError with a readable message."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise ValueError(f"expected HOST:PORT, got {text!r}")
    value = int(port)
    if not 0 <= value <= 65535:
        raise ValueError(f"port {value} is outside 0..65535")
    return host.strip("[]"), value


def _server(c: _Checker, tree: dict[str, Any]) -> ServerSettings:
    s = c.section(tree, "server")
    d = ServerSettings()
    p = "server."
    c.unknown(s, {"listen", "database", "max_connections", "max_message_bytes", "statement_timeout_s",
                  "idle_timeout_s", "auth_timeout_s", "queries_per_minute",
                  "allow_cleartext_without_tls", "metrics_listen", "query_log"}, p)
    host, port = d.host, d.port
    listen = c.get(s, "listen", str, f"{d.host}:{d.port}", p)
    try:
        host, port = parse_listen(listen)
    except ValueError as exc:
        c.bad("server.listen", f"{exc} (write it like \"127.0.0.1:6432\")")
    out = ServerSettings(
        host=host, port=port,
        database=c.get(s, "database", str, d.database, p),
        max_connections=c.get(s, "max_connections", int, d.max_connections, p),
        max_message_bytes=c.get(s, "max_message_bytes", int, d.max_message_bytes, p),
        statement_timeout_s=c.get(s, "statement_timeout_s", float, d.statement_timeout_s, p),
        idle_timeout_s=c.get(s, "idle_timeout_s", float, d.idle_timeout_s, p),
        auth_timeout_s=c.get(s, "auth_timeout_s", float, d.auth_timeout_s, p),
        queries_per_minute=c.get(s, "queries_per_minute", int, d.queries_per_minute, p),
        allow_cleartext_without_tls=c.get(s, "allow_cleartext_without_tls", bool,
                                          d.allow_cleartext_without_tls, p),
        metrics_listen=c.get(s, "metrics_listen", str, "", p),
        query_log=c.get(s, "query_log", str, "", p),
    )
    if out.metrics_listen:
        try:
            parse_listen(out.metrics_listen)
        except ValueError as exc:
            c.bad(p + "metrics_listen", f"{exc} (write it like \"127.0.0.1:9187\", or leave it empty)")
    for key in ("max_connections", "max_message_bytes", "queries_per_minute"):
        if getattr(out, key) <= 0:
            c.bad(p + key, "must be a positive integer")
    for key in ("statement_timeout_s", "idle_timeout_s", "auth_timeout_s"):
        if not getattr(out, key) > 0:
            c.bad(p + key, "must be a positive number of seconds")
    if out.max_message_bytes < 8192:
        c.bad(p + "max_message_bytes", "must be at least 8192 (clients send start-up packets of a few KB)")
    if not out.database:
        c.bad(p + "database", "must not be empty (it is the database name clients connect to)")
    return out


def _tls(c: _Checker, tree: dict[str, Any], base: Path) -> TlsSettings:
    s = c.section(tree, "tls")
    c.unknown(s, {"cert", "key"}, "tls.")
    cert = c.get(s, "cert", str, "", "tls.")
    key = c.get(s, "key", str, "", "tls.")
    if bool(cert) != bool(key):
        c.bad("tls", "set both cert and key, or neither")
    resolved = []
    for name, value in (("cert", cert), ("key", key)):
        if value:
            path = (base / value) if not Path(value).is_absolute() else Path(value)
            if not path.is_file():
                c.bad(f"tls.{name}", f"file {path} does not exist")
            resolved.append(str(path))
        else:
            resolved.append("")
    return TlsSettings(cert=resolved[0], key=resolved[1])


def _users(c: _Checker, tree: dict[str, Any]) -> tuple[User, ...]:
    raw = tree.get("users", [])
    if not isinstance(raw, list):
        c.bad("users", "must be an array of tables ([[users]])")
        return ()
    users: list[User] = []
    for i, u in enumerate(raw):
        p = f"users[{i}]."
        if not isinstance(u, dict):
            c.bad(f"users[{i}]", "must be a table with name, auth and secret")
            continue
        c.unknown(u, {"name", "auth", "secret", "admin"}, p)
        name = c.get(u, "name", str, "", p)
        auth = c.get(u, "auth", str, "scram-sha-256", p)
        secret = c.get(u, "secret", str, "", p)
        admin = c.get(u, "admin", bool, False, p)
        if not name:
            c.bad(p + "name", "must be a non-empty login name")
        if auth not in AUTH_METHODS:
            c.bad(p + "auth", f"must be one of {', '.join(AUTH_METHODS)}, got {auth!r}")
        elif auth == "scram-sha-256" and not secret.startswith("SCRAM-SHA-256$"):
            c.bad(p + "secret", "must be a SCRAM-SHA-256 verifier (lapras-proxy hash-password --user NAME)")
        elif auth in ("md5", "password") and not (secret.startswith("md5") and len(secret) == 35):
            c.bad(p + "secret", "must be an md5 hash 'md5' + md5(password + user) "
                                "(lapras-proxy hash-password --user NAME --method md5); "
                                "plain-text passwords are not accepted")
        if any(x.name == name for x in users):
            c.bad(p + "name", f"user {name!r} is declared twice")
        users.append(User(name=name, auth=auth, secret=secret, admin=admin))
    if not users:
        c.bad("users", "declare at least one [[users]] entry, or nobody can connect")
    return tuple(users)


def _privacy(c: _Checker, tree: dict[str, Any]) -> PrivacySettings:
    s = c.section(tree, "privacy")
    p = "privacy."
    d = PrivacySettings()
    c.unknown(s, {"epsilon", "delta", "accounting", "epoch", "regression_fraction", "stream_length"}, p)
    out = PrivacySettings(
        epsilon=c.get(s, "epsilon", float, d.epsilon, p),
        delta=c.get(s, "delta", float, d.delta, p),
        accounting=c.get(s, "accounting", str, d.accounting, p),
        epoch=c.get(s, "epoch", str, d.epoch, p),
        regression_fraction=c.get(s, "regression_fraction", float, d.regression_fraction, p),
        stream_length=c.get(s, "stream_length", int, d.stream_length, p),
    )
    if not (out.epsilon > 0 and math.isfinite(out.epsilon)):
        c.bad(p + "epsilon", f"must be a finite number > 0, got {out.epsilon!r} (1.0 is a common choice)")
    if not 0 < out.delta < 1:
        c.bad(p + "delta", f"must lie in (0, 1), got {out.delta!r} (pick well below 1/rows, e.g. 1e-6)")
    if out.accounting not in ACCOUNTING_MODES:
        c.bad(p + "accounting", f"must be one of {', '.join(ACCOUNTING_MODES)}, got {out.accounting!r}")
    if out.epoch not in EPOCHS:
        c.bad(p + "epoch", f"must be one of {', '.join(EPOCHS)}, got {out.epoch!r}")
    if not 0 <= out.regression_fraction < 1:
        c.bad(p + "regression_fraction", "must lie in [0, 1): the query stream needs some budget")
    if out.stream_length < 1:
        c.bad(p + "stream_length", "must be a positive integer (expected statements per epoch)")
    return out


def _lapras(c: _Checker, tree: dict[str, Any]) -> LaprasSettings:
    s = c.section(tree, "lapras")
    p = "lapras."
    d = LaprasSettings()
    c.unknown(s, {"split", "fractions", "allocation", "warmup", "prediction", "free_answer_max_stderr"}, p)
    split = c.get(s, "split", str, d.split, p)
    fractions = c.get(s, "fractions", dict, None, p)
    if split not in SPLITS:
        c.bad(p + "split", f"must be one of {', '.join(SPLITS)}, got {split!r}")
    if split == "custom":
        if fractions is None:
            c.bad(p + "fractions", "split = \"custom\" needs fractions = { mm, bad_init, rem_bad, reserve }")
        else:
            fr: dict[str, float] = {}
            for k, v in fractions.items():
                if k not in FRACTION_KEYS:
                    c.bad(f"{p}fractions.{k}", f"unknown key (allowed: {', '.join(FRACTION_KEYS)})")
                elif isinstance(v, bool) or not isinstance(v, int | float) or v < 0:
                    c.bad(f"{p}fractions.{k}", "must be a number >= 0")
                else:
                    fr[k] = float(v)
            total = sum(fr.values())
            if fr and abs(total - 1.0) > 1e-9:
                c.bad(p + "fractions", f"must add up to 1, they add up to {total:g}")
            fractions = fr
    elif fractions is not None:
        c.bad(p + "fractions", f"only used with split = \"custom\" (split is {split!r}); remove it")
    allocation = c.get(s, "allocation", str, d.allocation, p)
    if allocation not in ("smooth", "static"):
        c.bad(p + "allocation", f"must be smooth or static, got {allocation!r}")
    warmup = c.get(s, "warmup", int, d.warmup, p)
    if warmup < 0:
        c.bad(p + "warmup", "must be >= 0 (0 means ceil(log2(S)^2))")
    max_se = c.get(s, "free_answer_max_stderr", float, d.free_answer_max_stderr, p)
    if max_se < 0:
        c.bad(p + "free_answer_max_stderr", "must be >= 0")
    return LaprasSettings(split=split, fractions=fractions, allocation=allocation, warmup=warmup,
                          prediction=c.get(s, "prediction", str, d.prediction, p),
                          free_answer_max_stderr=max_se)


_IDENT_OK = set("abcdefghijklmnopqrstuvwxyz0123456789_")


def _identifier(c: _Checker, key: str, name: str) -> bool:
    if not name or name[0].isdigit() or not set(name) <= _IDENT_OK:
        c.bad(key, f"{name!r} must be a lower-case SQL identifier (letters, digits, underscore)")
        return False
    return True


def _column(c: _Checker, key: str, name: str, spec: Any) -> Attribute | None:
    if not isinstance(spec, dict):
        c.bad(key, "must be a table like { type = \"int\", min = 0, max = 9 }")
        return None
    c.unknown(spec, {"type", "min", "max", "values", "nullable", "description"}, key + ".")
    kind = c.get(spec, "type", str, "", key + ".")
    nullable = c.get(spec, "nullable", bool, False, key + ".")
    desc = c.get(spec, "description", str, "", key + ".")
    if kind == "int":
        lo = c.get(spec, "min", int, None, key + ".")
        hi = c.get(spec, "max", int, None, key + ".")
        if lo is None or hi is None:
            c.bad(key, "an int column needs min and max (its public range)")
            return None
        if hi < lo:
            c.bad(key, f"empty domain: max ({hi}) is below min ({lo})")
            return None
        if hi - lo + 1 > 1_000_000:
            c.bad(key, f"domain of {hi - lo + 1} values is too large; bin the column (at most 1,000,000)")
            return None
        return Attribute(name, Domain("int", lo=lo, hi=hi, nullable=nullable), desc)
    if kind in ("categorical", "text"):
        values = spec.get("values")
        if not isinstance(values, list) or not values:
            c.bad(key, "empty domain: a categorical column needs a non-empty list `values`")
            return None
        if not all(isinstance(v, str) for v in values):
            c.bad(key + ".values", "categorical values must be strings")
            return None
        if len(set(values)) != len(values):
            c.bad(key + ".values", "values must be distinct")
            return None
        return Attribute(name, Domain("categorical", values=tuple(values), nullable=nullable), desc)
    c.bad(key + ".type", f"must be \"int\" or \"categorical\", got {kind!r}")
    return None


def _tables(c: _Checker, tree: dict[str, Any]) -> tuple[Catalog, dict[str, LoadSettings]]:
    s = c.section(tree, "tables")
    tables: list[TableSchema] = []
    loads: dict[str, LoadSettings] = {}
    for tname, t in s.items():
        p = f"tables.{tname}"
        if not isinstance(t, dict):
            c.bad(p, "must be a table with `columns`")
            continue
        if not _identifier(c, p, tname):
            continue
        c.unknown(t, {"schema", "columns", "description", "load"}, p + ".")
        schema = c.get(t, "schema", str, "public", p + ".")
        cols = t.get("columns")
        if not isinstance(cols, dict) or not cols:
            c.bad(p + ".columns", "declare at least one column with its public domain")
            continue
        attrs = []
        for cname, spec in cols.items():
            key = f"{p}.columns.{cname}"
            if _identifier(c, key, cname):
                a = _column(c, key, cname, spec)
                if a is not None:
                    attrs.append(a)
        tables.append(TableSchema(name=tname, attributes=tuple(attrs), schema=schema))
        load = t.get("load", {})
        if not isinstance(load, dict):
            c.bad(p + ".load", "must be a table")
            load = {}
        c.unknown(load, {"rename", "offset"}, p + ".load.")
        rename = c.get(load, "rename", dict, {}, p + ".load.")
        offset = c.get(load, "offset", dict, {}, p + ".load.")
        for col, v in offset.items():
            if col not in cols:
                c.bad(f"{p}.load.offset.{col}", "names no declared column")
            if isinstance(v, bool) or not isinstance(v, int):
                c.bad(f"{p}.load.offset.{col}", "must be an integer")
        loads[tname] = LoadSettings(rename={str(k): str(v) for k, v in rename.items()},
                                    offset={str(k): int(v) for k, v in offset.items()
                                            if isinstance(v, int)})
    if not tables and not c.problems:
        c.bad("tables", "declare at least one protected table ([tables.NAME] with columns)")
    return Catalog(tuple(tables)), loads


def parse_config(tree: dict[str, Any], path: str = "<config>") -> Config:
    """Validate a parsed TOML tree; raises ConfigError listing every problem."""
    c = _Checker()
    c.unknown(tree, _TOP_KEYS, "")
    base = Path(path).resolve().parent if path != "<config>" else Path.cwd()
    server = _server(c, tree)
    tls = _tls(c, tree, base)
    up = c.section(tree, "upstream")
    c.unknown(up, {"dsn"}, "upstream.")
    dsn = c.get(up, "dsn", str, "", "upstream.")
    users = _users(c, tree)
    privacy = _privacy(c, tree)
    lapras = _lapras(c, tree)
    catalog, loads = _tables(c, tree)
    predictor = c.section(tree, "predictor")
    if c.problems:
        raise ConfigError(path, c.problems)
    return Config(path=path, server=server, tls=tls, upstream_dsn=dsn, users=users, privacy=privacy,
                  lapras=lapras, catalog=catalog, loads=loads, predictor=predictor, raw=tree)


def load_config(path: str | Path) -> Config:
    """Read and validate a config file; raises ConfigError (never a bare traceback) on any problem."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(str(p), ["file not found (pass --config PATH, or run from a directory with "
                                   "config.toml)"])
    try:
        tree = tomllib.loads(p.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(str(p), [f"not valid TOML: {exc}"]) from None
    except UnicodeDecodeError:
        raise ConfigError(str(p), ["not UTF-8 text"]) from None
    return parse_config(tree, str(p))
