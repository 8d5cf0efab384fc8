"""Classify each statement: session command, DP command, catalog pass-through, or refusal (cached by digest).

A statement for the DP service leaves here as a typed command (``proxy.dp.commands``) carrying the trees
the router parsed to see that it reads a protected table: the planner analyses those, never the text again.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable
from dataclasses import dataclass, replace

import sqlglot
from sqlglot import exp

from parser import references_protected as parser_check
from parser.model.schema import Catalog
from parser.syntax.cache import DigestLRU, digest
from parser.syntax.parse import parse_statements
from pgcore.identifiers import mention_pattern

from ..dp.commands import (
    NOT_PARSED,
    DPCommand,
    ExplainCommand,
    NewEpochCommand,
    Parsed,
    QueryCommand,
    RegressionCommand,
    ShowCommand,
    Trees,
)
from ..protocol.errors import PgError
from .admin import admin_command
from .session_funcs import session_select
from .sqltext import EscapeError, command_name, decode_escapes, leading_words, strip_comments

_PLAIN_EXPLAIN = re.compile(r"^\s*EXPLAIN\s+(?:SELECT|WITH)\b", re.IGNORECASE)
"""EXPLAIN without options of a query: answered by the DP service (options such as ANALYZE stay refused)."""
_EXPLAIN = re.compile(r"^\s*explain\s+(?P<stmt>(?:select|with)\b.*)$", re.I | re.S)
_REGRESSION_CALL = re.compile(r"\blapras\s*\.\s*linear_regression\s*\(", re.I)
_NEW_EPOCH = re.compile(r"^\s*select\s+(?:\*\s+from\s+)?lapras\s*\.\s*new_epoch\s*\(\s*\)\s*;?\s*$", re.I)

class Kind(enum.Enum):
    EMPTY = "empty"        # only whitespace/comments: EmptyQueryResponse
    SESSION = "session"    # answered from session state (SET, SHOW, BEGIN, DECLARE, ...)
    DP = "dp"              # reads a protected table or calls lapras.*: the DP service
    CATALOG = "catalog"    # schema-only metadata: the shadow catalog database
    ADMIN = "admin"        # the admin console (SHOW STATS, RELOAD, PAUSE...): admin users only
    REFUSED = "refused"    # never runs; `error` says why


@dataclass(frozen=True, slots=True)
class Route:
    kind: Kind
    sql: str
    command: str = ""                 # leading keyword, upper-case (SET, SHOW, SELECT, ...)
    error: PgError | None = None
    dp: DPCommand | None = None       # Kind.DP: what the DP service is asked


SESSION_COMMANDS = frozenset({
    "SET", "RESET", "SHOW", "BEGIN", "START", "COMMIT", "END", "ROLLBACK", "ABORT", "SAVEPOINT", "RELEASE",
    "DISCARD", "DEALLOCATE", "DECLARE", "FETCH", "MOVE", "CLOSE", "LISTEN", "UNLISTEN", "NOTIFY",
})
WRITE_COMMANDS = frozenset({
    "INSERT", "UPDATE", "DELETE", "MERGE", "CREATE", "ALTER", "DROP", "TRUNCATE", "GRANT", "REVOKE",
    "COMMENT", "VACUUM", "ANALYZE", "ANALYSE", "CLUSTER", "REINDEX", "REFRESH", "LOCK", "SECURITY", "IMPORT",
    "CALL", "DO", "LOAD", "CHECKPOINT", "REASSIGN", "UPSERT", "REPLACE",
})
QUERY_COMMANDS = frozenset({"SELECT", "WITH", "VALUES", "TABLE"})

# Objects and functions that expose data, data statistics, other sessions' activity, files or commands, or
# that leave state on a pooled catalog backend: refused everywhere, whatever database would answer. Matched
# on the unescaped text (U&"..." and E'...' written out; comments and literals included): every name of the
# statement's parse tree appears verbatim there, and refusing a harmless query is acceptable where missing a
# harmful one is not. The shadow database revokes the same objects itself (proxy/catalog/hardening.py).
# pg_statistic_ext (definitions of extended statistics, none in the shadow) stays readable for psql's \d;
# pg_stat_user_tables is answered without figures by the catalog relay (proxy/catalog/table_stats.py).
_DANGEROUS = re.compile(
    r"\b(pg_stat(?!istic_ext\b|_user_tables\b)\w*|reltuples|relpages|relallvisible|relallfrozen|histogram_bounds|"
    r"most_common_\w+|pg_read_file|pg_read_binary_file|pg_ls_\w+|pg_stat_file|pg_file_\w+|"
    r"pg_logdir_ls|pg_current_logfile|lo_import|lo_export|lo_get|lo_put|lo_open|lo_create|lo_from_bytea|"
    r"loread|lowrite|pg_largeobject\w*|dblink\w*|set_config|pg_terminate_backend|pg_cancel_backend|"
    r"pg_reload_conf|pg_rotate_logfile|pg_promote|pg_switch_wal|pg_backend_memory_contexts|"
    r"\w+_to_xml\w*|query_to_xmlschema|data_directory|config_file|hba_file|ident_file|external_pid_file|"
    r"log_directory|unix_socket_directories|ssl_key_file|archive_command|restore_command|"
    r"pg_shmem_allocations|pg_buffercache\w*|"
    r"pg_(?:try_)?advisory\w*|txid_\w+|pg_current_\w+|pg_snapshot_\w+|pg_xact_\w+|pg_visible_in_snapshot|"
    r"pg_export_snapshot|pg_last_\w+|pg_control_\w+|pg_walfile\w*|pg_wal_\w+|pg_get_wal\w*|"
    r"pg_get_multixact_members|mxid_age|pg_tablespace_size|pg_locks|pg_lock_status|pg_blocking_pids|"
    r"pg_safe_snapshot_blocking_pids|pg_notify|pg_listening_channels|pg_notification_queue_usage|"
    r"pg_prepared_statements?|pg_cursors?|pg_prepared_xacts?|pg_replication_\w+|pg_get_replication_slots|"
    r"system_identifier|pg_aios|pg_get_aios)\b"
    r"|\b(age|mxid_age)\"?\s*\(",
    re.IGNORECASE,
)
_SET_CONFIG = re.compile(r"\bset_config\b", re.IGNORECASE)  # answered by the session in session_select
_LAPRAS_CALL = re.compile(r"\blapras\s*\.", re.IGNORECASE)
# The lapras schema upstream holds the ledger and the statement history: operator-only data, refused by name
# (the shadow catalog has no such schema, which would say "does not exist" instead of "not yours").
_OPERATOR_ONLY = re.compile(r'\blapras\s*\.\s*"?(statement_history|epochs|answers|releases|spends|parts|partitions|'
                            r'regression_answers|bounded\w*|meta)\b', re.IGNORECASE)
_DML_IN_QUERY = re.compile(r"\b(INSERT|UPDATE|DELETE|MERGE)\b", re.IGNORECASE)
_INTO = re.compile(r"\bINTO\b", re.IGNORECASE)
_LOCKING = re.compile(r"\bFOR\s+(NO\s+KEY\s+)?(UPDATE|SHARE|KEY\s+SHARE)\b", re.IGNORECASE)
CURRENT_SETTING = re.compile(
    r"^\s*SELECT\s+(?:pg_catalog\s*\.\s*)?current_setting\s*\(\s*'(?P<name>[\w.]+)'\s*(?:,\s*(?:true|false)\s*)?\)"
    r"(?:\s+(?:AS\s+)?(?P<alias>\w+|\"[^\"]+\"))?\s*;?\s*$", re.IGNORECASE)
_STRINGS = re.compile(r"'(?:[^']|'')*'|\$\$.*?\$\$", re.S)

PARSE_LIMIT = 65_536
"""Longer statements naming a protected table go to the DP service unparsed: parsing them here would hold
the event loop, and the DP planner parses under the statement's deadline and work limits anyway."""


def read_only_error(what: str) -> PgError:
    return PgError("25006", f"cannot execute {what} in a read-only transaction",
                   hint="LAPRAS Proxy is read-only: it answers aggregate queries with differentially "
                        "private results")


def statistics_error(name: str) -> PgError:
    return PgError("42501", f"permission denied: {name} exposes data or data statistics",
                   hint="catalog queries through LAPRAS Proxy describe the schema only; sizes, counters, "
                        "activity, locks and session settings of the database are not available")


class Router:
    """Statement classifier with a cache keyed by the digest of the text, bounded in entries and bytes."""

    def __init__(self, catalog: Catalog, cache_size: int = 4096, cache_bytes: int = 16 << 20) -> None:
        self.catalog = catalog
        self._cache = DigestLRU(cache_size, cache_bytes)
        self._mentions = mention_pattern(t.name for t in catalog.tables)
        self._references = _protected_checker(catalog)

    def route(self, sql: str) -> Route:
        """Classify one statement (never several: split simple-query strings first)."""
        key = digest(sql)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        route = self._classify(sql)
        dp = route.dp
        if dp is not None and not isinstance(dp, ShowCommand | NewEpochCommand) and dp.parsed is not NOT_PARSED:
            # A parse tree is many times its text: the cached route keeps the text only (a repeat is planned
            # from the planner's caches), this first one hands its trees to the planner.
            self._cache.put(key, replace(route, dp=replace(dp, parsed=NOT_PARSED)), 2 * len(sql))
        else:
            self._cache.put(key, route, 2 * len(sql))  # the Route holds the text
        return route

    def mentions_protected(self, sql: str) -> bool:
        return bool(self._mentions and self._mentions.search(sql))

    def references_protected(self, sql: str) -> bool:
        """True when the statement reads a protected table; cheap when no table name occurs in the text.

        A name that occurs only inside string literals or comments (catalog lookups such as
        `relname = 'adult'`) cannot be a table reference, so such statements skip the SQL parser.
        """
        return self._reads_protected(sql)[0]

    def _reads_protected(self, sql: str) -> tuple[bool, Trees | None]:
        """``references_protected`` and the trees it read (None: not parsed, or not parseable by the
        planner's parser, in which case sqlglot's own reading decides, as the parser's check does)."""
        if not self.mentions_protected(sql):
            return False, None
        if not self.mentions_protected(_STRINGS.sub("''", strip_comments(sql))):
            return False, None
        if len(sql) > PARSE_LIMIT:
            return True, None  # conservative: the DP service answers or refuses it, under its limits
        trees = _parse(sql)
        if trees is None:
            return self._references(sql), None
        return self._references(trees), trees

    def _classify(self, sql: str) -> Route:
        words = leading_words(sql, 3)
        if not words:
            return Route(Kind.EMPTY, sql)
        first = words[0]
        console = admin_command(words)
        if console is not None:
            return Route(Kind.ADMIN, sql, console)
        if first in SESSION_COMMANDS:
            if first == "SHOW" and words[1:3] == ["LAPRAS", "BUDGET"]:
                return _dp_route(sql, first, None)  # the other lapras.* settings are the session's
            if first in ("COMMIT", "ROLLBACK") and len(words) > 1 and words[1] == "PREPARED":
                return Route(Kind.REFUSED, sql, first, read_only_error(f"{first} PREPARED"))
            return Route(Kind.SESSION, sql, first)
        if first in WRITE_COMMANDS:
            return Route(Kind.REFUSED, sql, first, read_only_error(command_name(sql)))
        if first == "COPY":
            return self._copy(sql)
        if first == "PREPARE" and len(words) > 1 and words[1] == "TRANSACTION":
            return Route(Kind.REFUSED, sql, first, read_only_error("PREPARE TRANSACTION"))
        if first in ("PREPARE", "EXECUTE"):
            return Route(Kind.SESSION, sql, first)   # SQL-level prepared statements (psql < 16 users)
        if first == "EXPLAIN" and words[1:2] == ["EXECUTE"]:
            return Route(Kind.SESSION, sql, "EXPLAIN EXECUTE")   # the session's prepared statement, explained
        try:
            plain = decode_escapes(sql)
        except EscapeError as exc:
            return Route(Kind.REFUSED, sql, first, PgError("42601", str(exc)))
        if (first == "SELECT" and not _DANGEROUS.search(_SET_CONFIG.sub("", plain))
                and session_select(plain) is not None):
            # current_database(), current_user, current_setting/set_config: the client's own names and
            # settings, from the session (never the catalog reader's, never a pooled backend's setting).
            return Route(Kind.SESSION, sql, "SESSION_SELECT")
        m = _DANGEROUS.search(plain)
        if m:
            return Route(Kind.REFUSED, sql, first, statistics_error(m.group(1) or m.group(2)))
        if plain != sql:
            # The rest of the routing, and the DP planner, see the names PostgreSQL would resolve; the
            # catalog database gets the statement as written.
            route = self._classify_plain(plain, first)
            return route if route.kind is not Kind.CATALOG else Route(Kind.CATALOG, sql, first)
        return self._classify_plain(sql, first)

    def _classify_plain(self, sql: str, first: str) -> Route:
        if first == "EXPLAIN":
            # The explained statement is opaque to most SQL parsers: any identifier naming a
            # protected table is enough to refuse.
            # A regression call names its table in a string: recognised by the function's name instead.
            if (self.mentions_protected(_STRINGS.sub("''", strip_comments(sql)))
                    or _REGRESSION_CALL.search(_STRINGS.sub("''", strip_comments(sql)))):
                if _PLAIN_EXPLAIN.match(strip_comments(sql)):
                    # The DP service explains it: what would be measured and charged, nothing of the data.
                    return _dp_route(sql, first, None)
                return Route(Kind.REFUSED, sql, first, PgError(
                    "42501", "permission denied: EXPLAIN of a protected table reveals planner statistics"))
            return Route(Kind.CATALOG, sql, first)
        if first == "SELECT" and CURRENT_SETTING.match(sql):
            # Answered from the session (its SET values), like SHOW; other forms reach the catalog DB.
            return Route(Kind.SESSION, sql, "CURRENT_SETTING")
        if first in QUERY_COMMANDS:
            bare = _STRINGS.sub("''", strip_comments(sql))
            if first == "WITH" and _DML_IN_QUERY.search(bare):
                return Route(Kind.REFUSED, sql, first, read_only_error("a data-modifying WITH"))
            if first == "SELECT" and _INTO.search(bare) and _select_into(sql):
                return Route(Kind.REFUSED, sql, first, read_only_error("SELECT INTO"))
            if _LOCKING.search(bare):
                return Route(Kind.REFUSED, sql, first, read_only_error("SELECT FOR UPDATE/SHARE"))
            private = _OPERATOR_ONLY.search(bare)
            if private is not None:
                return Route(Kind.REFUSED, sql, first, PgError(
                    "42501", f"permission denied for table lapras.{private[1].lower()}",
                    hint="the ledger and the statement history are the operator's; SHOW lapras.budget shows "
                         "the budget"))
            if _LAPRAS_CALL.search(bare):
                return _dp_route(sql, first, None)
            protected, trees = self._reads_protected(sql)
            if protected:
                return _dp_route(sql, first, trees)
            return Route(Kind.CATALOG, sql, first)
        # Anything else goes to the read-only shadow catalog, which answers or rejects it as PostgreSQL.
        return Route(Kind.CATALOG, sql, first)

    def _copy(self, sql: str) -> Route:
        bare = _STRINGS.sub("''", strip_comments(sql))
        if re.search(r"\bFROM\b", bare, re.IGNORECASE) and not re.search(r"\(\s*SELECT\b", bare, re.I):
            return Route(Kind.REFUSED, sql, "COPY", read_only_error("COPY FROM"))
        if re.search(r"\bPROGRAM\b", bare, re.IGNORECASE):
            return Route(Kind.REFUSED, sql, "COPY", PgError("42501", "permission denied: COPY ... PROGRAM"))
        if self.references_protected(sql):
            # COPY runs no DP statement, even over an aggregate (psql's \copy (SELECT ...) TO 'f.csv'):
            # say how to save an answer instead of suggesting the aggregate was a row-level read.
            return Route(Kind.REFUSED, sql, "COPY", PgError(
                "42501", "permission denied: COPY of a protected table is not supported",
                hint=_COPY_HINT + " Rows of a protected table are never exported: ask aggregate questions "
                "(COUNT, SUM, AVG ... GROUP BY)."))
        return Route(Kind.REFUSED, sql, "COPY", PgError("0A000", "COPY is not supported by LAPRAS Proxy",
                                                        hint=_COPY_HINT))


_COPY_HINT = ("To save a query's answer, run the SELECT itself and save its output "
              "(psql: \\g FILE or \\o FILE, with \\pset format csv for CSV).")


def _select_into(sql: str) -> bool:
    if len(sql) > PARSE_LIMIT:
        return True  # too long to parse on the event loop; INTO appears outside strings: refuse
    try:
        tree = sqlglot.parse_one(sql, read="postgres")
    except Exception:
        return True
    return tree.find(exp.Into) is not None


def _protected_checker(catalog: Catalog) -> Callable[[str | Trees], bool]:
    """The parser's `references_protected`, safe on any text or trees."""

    def check(sql: str | Trees) -> bool:
        try:
            return bool(parser_check(sql, catalog))
        except Exception:
            # Unparseable SQL that mentions a protected table: the DP service reports the error.
            return True
    return check


def _parse(sql: str) -> Trees | None:
    """The statement as the DP planner reads it, or None where that parser refuses it (the planner then
    reports the error when the statement reaches it)."""
    try:
        return tuple(parse_statements(sql))
    except Exception:
        return None


def _show_target(sql: str) -> str | None:
    words = sql.strip().rstrip(";").split()
    if len(words) == 2 and words[0].upper() == "SHOW" and words[1].lower().startswith("lapras."):
        return words[1].lower()
    return None


def _dp_route(sql: str, first: str, trees: Trees | None) -> Route:
    """The route of a statement for the DP service, with its typed command. Statements the service cannot
    tell apart otherwise (a SHOW of three words, EXPLAIN after a comment) are queries: the planner refuses
    them as it would any statement it cannot plan."""
    target = _show_target(sql)
    dp: DPCommand
    if target is not None:
        dp = ShowCommand(sql, target)
    elif (explain := _EXPLAIN.match(sql)) is not None:
        statement = explain["stmt"]
        dp = ExplainCommand(sql, statement, Parsed(_parse(statement) if len(statement) <= PARSE_LIMIT else None))
    elif _NEW_EPOCH.match(sql):
        dp = NewEpochCommand(sql)
    else:
        if trees is None and len(sql) <= PARSE_LIMIT:
            trees = _parse(sql)
        parsed = Parsed(trees)
        dp = RegressionCommand(sql, parsed) if "linear_regression" in sql.lower() else QueryCommand(sql, parsed)
    return Route(Kind.DP, sql, first, dp=dp)


