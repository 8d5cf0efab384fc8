"""Load and validate config.toml into typed settings, collecting every problem with the key and the fix.

Keys, types, defaults, allowed values and per-key checks come from the key table (`proxy.config.keys`,
declared in `proxy.config.sections`); this module adds what spans keys (listen addresses, TLS pairs, custom splits, users
and tables). Validation never raises a traceback at the user: `load_config` raises `ConfigError`, whose
message lists each problem as `key: what is wrong (how to fix it)`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import rtoml
import tomlkit

from parser import coltypes
from parser.model.public import PublicTable
from parser.model.schema import Attribute, Catalog, TableSchema
from pgcore.identifiers import name_problem, qualified, split_qualified

from . import sections as S
from .keys import SECTIONS, key, section_keys

AUTH_METHODS = key("users.auth").choices
ACCOUNTING_MODES = key("privacy.accounting").choices
SPLITS = key("lapras.split").choices
FRACTION_KEYS = ("mm", "bad_init", "rem_bad", "reserve")
EPOCHS = key("privacy.epoch").choices


class ConfigError(Exception):
    """The configuration is invalid; `problems` lists each one."""

    def __init__(self, path: str, problems: list[str]) -> None:
        self.path = path
        self.problems = problems
        lines = "\n".join(f"  - {p}" for p in problems)
        super().__init__(f"{path}: {len(problems)} problem(s) in the configuration:\n{lines}")


@dataclass(frozen=True)
class Config:
    path: str
    server: S.ServerSettings
    tls: S.TlsSettings
    upstream_dsn: str
    users: tuple[S.User, ...]
    privacy: S.PrivacySettings
    lapras: S.LaprasSettings
    catalog: Catalog
    loads: dict[str, S.LoadSettings]
    predictor: dict[str, Any] = field(default_factory=dict)
    raw: dict[str, Any] = field(default_factory=dict, repr=False)

    def user(self, name: str) -> S.User | None:
        return next((u for u in self.users if u.name == name), None)


_TOP_KEYS = {sec.name.split(".")[0] for sec in SECTIONS}


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

    def read(self, tree: dict[str, Any], section: str, prefix: str) -> dict[str, Any]:
        """Every declared key of `section`: unknown keys, types, allowed values and checks reported,
        defaults filled in for absent keys."""
        declared = section_keys(section)
        self.unknown(tree, set(declared), prefix)
        out: dict[str, Any] = {}
        for name, k in declared.items():
            before = len(self.problems)
            value = self.get(tree, name, k.type, k.default, prefix)
            if len(self.problems) == before:
                if k.choices and value not in k.choices:
                    self.bad(prefix + name, f"must be one of {', '.join(k.choices)}, got {value!r}")
                elif k.check is not None and value is not None and (problem := k.check(value)):
                    self.bad(prefix + name, problem)
            out[name] = value
        return out


def _server(c: _Checker, tree: dict[str, Any]) -> S.ServerSettings:
    p = "server."
    v = c.read(c.section(tree, "server"), "server", p)
    try:
        S.parse_listen(v["listen"])
    except ValueError as exc:
        c.bad("server.listen", f"{exc} (write it like \"127.0.0.1:6432\")")
        v["listen"] = key("server.listen").default
    if v["metrics_listen"]:
        try:
            S.parse_listen(v["metrics_listen"])
        except ValueError as exc:
            c.bad(p + "metrics_listen", f"{exc} (write it like \"127.0.0.1:9187\", or leave it empty)")
    return S.ServerSettings(**v)


def _tls(c: _Checker, tree: dict[str, Any], base: Path) -> S.TlsSettings:
    v = c.read(c.section(tree, "tls"), "tls", "tls.")
    if bool(v["cert"]) != bool(v["key"]):
        c.bad("tls", "set both cert and key, or neither")
    resolved = []
    for name, value in (("cert", v["cert"]), ("key", v["key"])):
        if value:
            path = (base / value) if not Path(value).is_absolute() else Path(value)
            if not path.is_file():
                c.bad(f"tls.{name}", f"file {path} does not exist")
            resolved.append(str(path))
        else:
            resolved.append("")
    return S.TlsSettings(cert=resolved[0], key=resolved[1])


def _users(c: _Checker, tree: dict[str, Any]) -> tuple[S.User, ...]:
    raw = tree.get("users", [])
    if not isinstance(raw, list):
        c.bad("users", "must be an array of tables ([[users]])")
        return ()
    users: list[S.User] = []
    for i, u in enumerate(raw):
        p = f"users[{i}]."
        if not isinstance(u, dict):
            c.bad(f"users[{i}]", "must be a table with name, auth and secret")
            continue
        v = c.read(u, "users", p)
        name, auth, secret = v["name"], v["auth"], v["secret"]
        if auth == "scram-sha-256" and not secret.startswith("SCRAM-SHA-256$"):
            c.bad(p + "secret", "must be a SCRAM-SHA-256 verifier (lapras-proxy hash-password --user NAME)")
        elif auth in ("md5", "password") and not (secret.startswith("md5") and len(secret) == 35):
            c.bad(p + "secret", "must be an md5 hash 'md5' + md5(password + user) "
                                "(lapras-proxy hash-password --user NAME --method md5); "
                                "plain-text passwords are not accepted")
        if any(x.name == name for x in users):
            c.bad(p + "name", f"user {name!r} is declared twice")
        users.append(S.User(name=name, auth=auth, secret=secret, admin=v["admin"]))
    if not users:
        c.bad("users", "declare at least one [[users]] entry, or nobody can connect")
    return tuple(users)


def _privacy(c: _Checker, tree: dict[str, Any]) -> S.PrivacySettings:
    return S.PrivacySettings(**c.read(c.section(tree, "privacy"), "privacy", "privacy."))


def _lapras(c: _Checker, tree: dict[str, Any]) -> S.LaprasSettings:
    p = "lapras."
    v = c.read(c.section(tree, "lapras"), "lapras", p)
    split, fractions = v["split"], v["fractions"]
    if split == "custom":
        if fractions is None:
            c.bad(p + "fractions", "split = \"custom\" needs fractions = { mm, bad_init, rem_bad, reserve }")
        else:
            fr: dict[str, float] = {}
            for k, x in fractions.items():
                if k not in FRACTION_KEYS:
                    c.bad(f"{p}fractions.{k}", f"unknown key (allowed: {', '.join(FRACTION_KEYS)})")
                elif isinstance(x, bool) or not isinstance(x, int | float) or x < 0:
                    c.bad(f"{p}fractions.{k}", "must be a number >= 0")
                else:
                    fr[k] = float(x)
            total = sum(fr.values())
            if fr and abs(total - 1.0) > 1e-9:
                c.bad(p + "fractions", f"must add up to 1, they add up to {total:g}")
            v["fractions"] = fr
    elif fractions is not None:
        c.bad(p + "fractions", f"only used with split = \"custom\" (split is {split!r}); remove it")
    return S.LaprasSettings(**v)


def _predictor(c: _Checker, tree: dict[str, Any]) -> dict[str, Any]:
    """[predictor] and its [[predictor.templates]] (expanded and planned by check-config and the engine)."""
    section = c.section(tree, "predictor")
    c.read(section, "predictor", "predictor.")
    templates = section.get("templates", [])
    if not isinstance(templates, list):
        return section   # reported by the key table (must be array)
    for i, t in enumerate(templates):
        if not isinstance(t, dict):
            c.bad(f"predictor.templates[{i}]", "must be a table with sql and params ([[predictor.templates]])")
            continue
        c.read(t, "predictor.templates", f"predictor.templates[{i}].")
    return section


def toml_key(name: str) -> str:
    """``name`` as a TOML key: bare when TOML allows it, else quoted (tomlkit's spelling)."""
    return str(tomlkit.key(name).as_string())


def _identifier(c: _Checker, key: str, name: str) -> bool:
    """Any name PostgreSQL stores is accepted, exactly as written (SQL refers to odd ones quoted)."""
    problem = name_problem(name)
    if problem is not None:
        c.bad(key, f"name {name!r} {problem}")
        return False
    return True


def _column(c: _Checker, key: str, name: str, spec: Any) -> Attribute | None:
    if not isinstance(spec, dict):
        c.bad(key, "must be a table like { type = \"int\", min = 0, max = 9 }")
        return None
    desc = c.get(spec, "description", str, "", key + ".")
    try:
        domain = coltypes.from_config(spec)  # the column type parses its own keys
    except coltypes.DeclarationError as e:
        for sub, msg in e.problems:
            c.bad(f"{key}.{sub}" if sub else key, msg)
        return None
    return Attribute(name, domain, desc, spec.get("per_unit") is True)


def _sound_column(name: str, spec: Any) -> Attribute | None:
    """The column when its declaration has no problem, else None (then `_column` reports each problem
    under its key). Wide configs have tens of thousands of columns: the fast path spells no key."""
    desc = spec.get("description", "") if isinstance(spec, dict) else None
    if not isinstance(desc, str) or name_problem(name) is not None:
        return None
    try:
        return Attribute(name, coltypes.from_config(spec), desc, spec.get("per_unit") is True)
    except coltypes.DeclarationError:
        return None


def _table_entries(c: _Checker, tree: dict[str, Any], section: str,
                   shape: str) -> Iterator[tuple[str, dict[str, Any], str, dict[str, Any]]]:
    """Each ``[section.NAME]`` whose name and schema are identifiers: its name, its table, its key and
    its values read; an entry that is not a table (it "must be a table {shape}") or is misnamed is
    reported and skipped."""
    for tname, t in c.section(tree, section).items():
        p = f"{section}.{toml_key(tname)}"
        if not isinstance(t, dict):
            c.bad(p, f"must be a table {shape}")
            continue
        if not _identifier(c, p, tname):
            continue
        tv = c.read(t, f"{section}.*", p + ".")
        if _identifier(c, p + ".schema", tv["schema"]):
            yield tname, t, p, tv


def _tables(c: _Checker, tree: dict[str, Any]) -> tuple[Catalog, dict[str, S.LoadSettings]]:
    tables: list[TableSchema] = []
    loads: dict[str, S.LoadSettings] = {}
    for tname, entry, p, tv in _table_entries(c, tree, "tables", "with `columns`"):
        schema = tv["schema"]
        cols = entry.get("columns")
        if not isinstance(cols, dict) or not cols:
            c.bad(p + ".columns", "declare at least one column with its public domain")
            continue
        attrs = []
        for cname, spec in cols.items():
            a = _sound_column(cname, spec)
            if a is not None:
                attrs.append(a)
                continue
            key = f"{p}.columns.{toml_key(cname)}"  # spelled only to report a problem (costly per column)
            if _identifier(c, key, cname):
                a = _column(c, key, cname, spec)
                if a is not None:
                    attrs.append(a)
        unit = tv["privacy_unit"] or None
        if unit is not None and (unit in cols or not _identifier(c, p + ".privacy_unit", unit)):
            if unit in cols:
                c.bad(p + ".privacy_unit", f"{unit!r} is a declared column; the privacy unit must not be "
                      "one (its values would be group keys)")
            unit = None
        if tv["max_rows_per_unit"] != 1 and unit is None and not tv["privacy_unit"]:
            c.bad(p + ".max_rows_per_unit", "needs privacy_unit")
        if unit is None and not tv["privacy_unit"]:
            for a in attrs:
                if a.per_unit:  # an attribute of the unit, on a table whose every row is its own unit
                    c.bad(f"{p}.columns.{toml_key(a.name)}.per_unit", "needs privacy_unit")
        groups = tv["max_groups_per_unit"]
        if groups is not None and unit is None and not tv["privacy_unit"]:
            c.bad(p + ".max_groups_per_unit", "needs privacy_unit")
        per_group = tv["max_rows_per_group"]
        if per_group is not None and unit is None and not tv["privacy_unit"]:
            c.bad(p + ".max_rows_per_group", "needs privacy_unit")
        elif per_group is not None and unit is not None and per_group > tv["max_rows_per_unit"]:
            c.bad(p + ".max_rows_per_group", f"{per_group} exceeds max_rows_per_unit = {tv['max_rows_per_unit']} "
                  "(a unit adds at most k rows in all, so at most k to one group)")
        sums: list[tuple[str, float]] = []
        auto: list[str] = []
        for col, bound in (tv["max_sum_per_group"] or {}).items():
            where = f"{p}.max_sum_per_group.{col}"
            attr = next((a for a in attrs if a.name == col), None)
            if unit is None and not tv["privacy_unit"]:
                c.bad(where, "needs privacy_unit")
            elif attr is None or not attr.domain.summable:
                c.bad(where, "names no declared numeric column")
            elif bound == "auto":
                auto.append(col)  # chosen once per epoch from a DP quantile (lapras.auto_bound)
            elif isinstance(bound, bool) or not isinstance(bound, int | float) or not bound > 0:
                c.bad(where, f"must be a number > 0 (a unit's largest sum in one group) or \"auto\" (chosen "
                      f"once per epoch from a DP quantile of the units' sums), got {bound!r}")
            else:
                sums.append((col, float(bound)))
        tables.append(TableSchema(name=tname, attributes=tuple(attrs), schema=schema, privacy_unit=unit,
                                  max_rows_per_unit=int(tv["max_rows_per_unit"]),
                                  max_groups_per_unit=int(groups) if groups is not None and unit else None,
                                  max_rows_per_group=int(per_group) if per_group is not None and unit else None,
                                  max_sum_per_group=tuple(sorted(sums)) if unit else (),
                                  auto_sum_per_group=tuple(sorted(auto)) if unit else ()))
        load = tv["load"] or {}
        lv = c.read(load, "tables.*.load", p + ".load.")
        rename, offset = lv["rename"] or {}, lv["offset"] or {}
        for col, v in offset.items():
            if col not in cols:
                c.bad(f"{p}.load.offset.{toml_key(col)}", "names no declared column")
            if isinstance(v, bool) or not isinstance(v, int):
                c.bad(f"{p}.load.offset.{toml_key(col)}", "must be an integer")
        loads[tname] = S.LoadSettings(rename={str(k): str(v) for k, v in rename.items()},
                                    offset={str(k): int(v) for k, v in offset.items()
                                            if isinstance(v, int)},
                                    generator=lv["generator"])
    if not tables and not c.problems:
        c.bad("tables", "declare at least one protected table ([tables.NAME] with columns)")
    for t in tables:
        for a in t.attributes:
            source = getattr(a.domain, "values_from", "")
            parts = split_qualified(source) if source else None
            if parts is not None:
                schema, name, _ = parts
                if any(o.schema == schema and o.name == name for o in tables):
                    c.bad(f"tables.{toml_key(t.name)}.columns.{toml_key(a.name)}.values_from",
                          f"{qualified(schema, name)} is a protected table: a value list comes from a "
                          "public table")
    return Catalog(tuple(tables)), loads


def _public_tables(c: _Checker, tree: dict[str, Any], catalog: Catalog) -> Catalog:
    """``catalog`` with the declared public tables (``[public_tables.NAME]``), not read yet."""
    out = []
    for tname, _, p, tv in _table_entries(c, tree, "public_tables", "([public_tables.NAME] with an optional schema)"):
        schema = tv["schema"]
        if catalog.table(tname, schema) is not None:
            c.bad(p, f"{qualified(schema, tname)} is also a protected table ([tables.{toml_key(tname)}]): a "
                  "table is either public or protected")
            continue
        out.append(PublicTable(name=tname, schema=schema, description=tv["description"]))
    return dataclasses.replace(catalog, public=tuple(out)) if out else catalog


def parse_config(tree: dict[str, Any], path: str = "<config>") -> Config:
    """Validate a parsed TOML tree; raises ConfigError listing every problem."""
    c = _Checker()
    c.unknown(tree, _TOP_KEYS, "")
    base = Path(path).resolve().parent if path != "<config>" else Path.cwd()
    server = _server(c, tree)
    tls = _tls(c, tree, base)
    dsn = c.read(c.section(tree, "upstream"), "upstream", "upstream.")["dsn"]
    users = _users(c, tree)
    privacy = _privacy(c, tree)
    lapras = _lapras(c, tree)
    catalog, loads = _tables(c, tree)
    catalog = _public_tables(c, tree, catalog)
    predictor = _predictor(c, tree)
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
        # rtoml (Rust) reads a 150-table, 26,000-column config about eight times faster than tomllib.
        tree = rtoml.loads(p.read_text(encoding="utf-8"))
    except rtoml.TomlParsingError as exc:
        raise ConfigError(str(p), [f"not valid TOML: {exc}"]) from None
    except UnicodeDecodeError:
        raise ConfigError(str(p), ["not UTF-8 text"]) from None
    return parse_config(tree, str(p))
