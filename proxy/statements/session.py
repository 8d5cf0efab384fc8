"""Per-connection session state: settings, prepared statements, portals, cursors, transaction block.

The session holds the state and owns the transaction status (every change of it is a method here); the
commands that read and change it (SET/SHOW, transaction control, cursors...) are in ``commands.py`` and
SQL-level PREPARE/EXECUTE/DECLARE in ``prepare.py``. Nothing in this module touches data.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from parser.semantics.zones import session_setting
from pgcore.errors import Refusal

from ..protocol import backend
from ..protocol.backend import Field
from ..protocol.connection import ServerConnection
from ..protocol.errors import PgError
from .results import ResultSet
from .router import Route

# Parameters PostgreSQL reports with ParameterStatus (GUC_REPORT), with their canonical spelling.
REPORTED = ("server_version", "server_encoding", "client_encoding", "DateStyle", "TimeZone",
            "integer_datetimes", "standard_conforming_strings", "IntervalStyle", "application_name",
            "is_superuser", "session_authorization", "default_transaction_read_only", "in_hot_standby",
            "search_path")
CANONICAL = {name.lower(): name for name in REPORTED}

DEFAULTS = {
    "server_encoding": "UTF8", "client_encoding": "UTF8", "datestyle": "ISO, MDY", "timezone": "UTC",
    "integer_datetimes": "on", "standard_conforming_strings": "on", "intervalstyle": "postgres",
    "application_name": "", "is_superuser": "off", "default_transaction_read_only": "on",
    "transaction_read_only": "on", "in_hot_standby": "off", "search_path": '"$user", public',
    "transaction_isolation": "read committed", "default_transaction_isolation": "read committed",
    "transaction_deferrable": "off", "default_transaction_deferrable": "off", "extra_float_digits": "1",
    "statement_timeout": "0", "lock_timeout": "0", "idle_in_transaction_session_timeout": "0",
    "max_identifier_length": "63", "bytea_output": "hex", "client_min_messages": "notice",
    "lc_messages": "C", "lc_monetary": "C", "lc_numeric": "C", "lc_time": "C", "lc_collate": "C",
    "lc_ctype": "C", "escape_string_warning": "on", "row_security": "on", "max_index_keys": "32",
    "block_size": "8192", "ssl": "off", "jit": "off", "xmloption": "content", "synchronous_commit": "on",
    "geqo": "on", "enable_seqscan": "on", "array_nulls": "on", "backslash_quote": "safe_encoding",
    "default_with_oids": "off", "quote_all_identifiers": "off", "password_encryption": "scram-sha-256",
    "timezone_abbreviations": "Default", "max_connections": "100", "lapras.show_stderr": "off",
}
# The proxy's own settings: `lapras` is a reserved prefix (as PostgreSQL reserves an extension's), so a
# misspelt name is an error instead of a silently ignored placeholder. SET and SHOW take the same names;
# `lapras.budget` is answered by the DP service (SHOW only).
LAPRAS_SETTINGS = {"lapras.show_stderr": "NOTICE with each answer's provenance and standard errors"}
LAPRAS_READ_ONLY = {"lapras.budget": "the privacy budget and your own activity (answered by the DP service)"}
# Settings a client may not change: they describe the server or the read-only model.
FIXED = {"server_version", "server_version_num", "server_encoding", "integer_datetimes", "is_superuser",
         "session_authorization", "in_hot_standby", "lc_collate", "lc_ctype", "block_size",
         "max_identifier_length", "max_index_keys", "ssl", "max_connections"}


def _zone_spelling(value: str) -> str:
    """A start-up TimeZone as PostgreSQL spells it ('+02' is '<+02>-02'); one this host does not read is kept
    as sent (its values print in UTC: ``results.session_zone``)."""
    try:
        return session_setting(value).text
    except Refusal:
        return value


@dataclass(slots=True)
class PreparedStatement:
    name: str
    sql: str
    route: Route
    param_oids: list[int]
    described: tuple[list[int], list[Field] | None] | None = None


@dataclass(slots=True)
class Portal:
    name: str
    statement: PreparedStatement
    params: list[bytes | None]
    param_formats: list[int]
    result_formats: list[int]
    result: ResultSet | None = None
    position: int = 0
    decoded: list[Any] | None = None     # DP parameters, decoded at Bind


@dataclass(slots=True)
class Cursor:
    name: str
    result: ResultSet
    hold: bool
    position: int = 0          # rows before the cursor position (0 = before the first row)
    values: list[Any] | None = None   # a DP answer's rows as values: a FETCH is encoded in the formats it asks for


@dataclass
class Session:
    """State of one authenticated connection."""

    conn: ServerConnection
    user: str
    database: str
    settings: dict[str, str] = field(default_factory=dict)
    statements: dict[str, PreparedStatement] = field(default_factory=dict)
    portals: dict[str, Portal] = field(default_factory=dict)
    cursors: dict[str, Cursor] = field(default_factory=dict)
    savepoints: list[str] = field(default_factory=list)
    _base: dict[str, str] = field(default_factory=dict)
    _tx_snapshot: dict[str, str] | None = None
    _local: dict[str, str | None] = field(default_factory=dict)   # SET LOCAL keys: their values before it
    reported: list[bytes] = field(default_factory=list)   # ParameterStatus messages to send next

    @classmethod
    def start(cls, conn: ServerConnection, user: str, database: str, startup: dict[str, str],
              server_version: str, tls: bool) -> Session:
        s = cls(conn, user, database)
        base = dict(DEFAULTS)
        base["server_version"] = server_version
        base["server_version_num"] = _version_num(server_version)
        base["session_authorization"] = user
        base["ssl"] = "on" if tls else "off"
        for key, value in startup.items():
            k = key.lower()
            if k in ("user", "database", "replication", "options"):
                continue
            if k == "client_encoding":
                # Start-up packets name the locale's encoding (psql under LATIN1, ODBC drivers...);
                # the proxy reports UTF8 and clients follow the reported value.
                try:
                    value = _client_encoding(value)
                except PgError:
                    value = "UTF8"
            if k not in FIXED:
                base[k] = value
        for opt_key, opt_value in _parse_options(startup.get("options", "")):
            if opt_key not in FIXED:
                base[opt_key] = opt_value
        base["timezone"] = _zone_spelling(base["timezone"])
        s._base = base
        s.settings = dict(base)
        return s

    # -- settings ----------------------------------------------------------------------------------

    def startup_status(self) -> list[bytes]:
        return [backend.parameter_status(name, self.settings.get(name.lower(), "")) for name in REPORTED]

    def get(self, name: str) -> str | None:
        return self.settings.get(name.lower())

    def set(self, name: str, value: str | None, local: bool = False) -> None:
        """SET name (None: DEFAULT); ``local``: SET LOCAL, undone when the transaction block ends."""
        k = name.lower()
        if k.startswith("lapras.") and k not in LAPRAS_SETTINGS:
            if k in LAPRAS_READ_ONLY:
                raise PgError("55P02", f"parameter \"{name}\" cannot be changed",
                              hint=f"SHOW {k} shows it; settable: {', '.join(sorted(LAPRAS_SETTINGS))}")
            raise lapras_setting_error(name)
        if k in FIXED:
            raise PgError("55P02", f"parameter \"{name}\" cannot be changed now")
        if k == "client_encoding" and value is not None:
            value = _client_encoding(value)
        if local:
            self._local.setdefault(k, self.settings.get(k))
        else:
            self._local.pop(k, None)   # a plain SET outlives the block (PostgreSQL: it replaces SET LOCAL's)
        new = self._base.get(k, "") if value is None else value
        if self.settings.get(k) != new:
            self.settings[k] = new
            if k in CANONICAL:
                self.reported.append(backend.parameter_status(CANONICAL[k], new))

    def reset_all(self) -> None:
        for k in list(self.settings):
            if k not in FIXED:
                self.set(k, None)

    # -- transaction block ---------------------------------------------------------------------------

    @property
    def tx(self) -> str:
        """The transaction status ReadyForQuery reports: I (idle), T (in a block), E (failed block). The
        session sets it; the protocol connection holds it for ReadyForQuery and marks a block failed (E)
        when an error is sent inside it."""
        return self.conn.transaction_status

    def begin(self) -> bool:
        """Open a transaction block (False: one is open already)."""
        if self.tx != "I":
            return False
        self.conn.transaction_status = "T"
        self._tx_snapshot = dict(self.settings)
        return True

    def end_transaction(self, commit: bool) -> None:
        """Close the block: a rollback restores the settings it changed; cursors without HOLD close."""
        local, self._local = self._local, {}
        if not commit and self._tx_snapshot is not None:
            for k, v in self._tx_snapshot.items():
                self.set(k, v) if k not in FIXED else None
        else:
            for k, before in local.items():   # SET LOCAL lasts until the end of the block, committed or not
                self.set(k, before)
        self._tx_snapshot = None
        self.savepoints.clear()
        self.conn.transaction_status = "I"
        for name in [n for n, c in self.cursors.items() if not c.hold]:
            del self.cursors[name]

    def add_savepoint(self, name: str) -> None:
        if self.tx == "I":
            raise PgError("25P01", "SAVEPOINT can only be used in transaction blocks")
        self.savepoints.append(name)

    def rollback_to(self, name: str) -> None:
        """ROLLBACK TO SAVEPOINT: the block is usable again (a failed one too)."""
        if name not in self.savepoints:
            raise PgError("3B001", f"savepoint \"{name}\" does not exist")
        del self.savepoints[self.savepoints.index(name) + 1:]
        self.conn.transaction_status = "T"

    def release(self, name: str) -> None:
        if self.tx == "I":
            raise PgError("25P01", "RELEASE SAVEPOINT can only be used in transaction blocks")
        if name not in self.savepoints:
            raise PgError("3B001", f"savepoint \"{name}\" does not exist")
        del self.savepoints[self.savepoints.index(name):]

    def check_aborted(self, route: Route) -> None:
        """In a failed transaction block only its end (or a rollback to a savepoint) may run."""
        if self.tx != "E":
            return
        if route.command in ("ROLLBACK", "ABORT", "COMMIT", "END"):
            return
        raise PgError("25P02", "current transaction is aborted, commands ignored until end of transaction "
                               "block")

    def implicit_commit(self) -> None:
        """Close cursors without HOLD when a statement outside a transaction block finishes."""
        if self.tx == "I" and any(not c.hold for c in self.cursors.values()):
            for name in [n for n, c in self.cursors.items() if not c.hold]:
                del self.cursors[name]

    def discard_all(self) -> None:
        if self.tx != "I":
            raise PgError("25001", "DISCARD ALL cannot run inside a transaction block")
        self.reset_all()
        self.statements.clear()
        self.portals.clear()
        self.cursors.clear()

    def add_cursor(self, name: str, result: ResultSet, hold: bool, values: list[Any] | None = None) -> None:
        if name in self.cursors:
            raise PgError("42P03", f"cursor \"{name}\" already exists")
        if not hold and self.tx == "I":
            raise PgError("25P01", "DECLARE CURSOR can only be used in transaction blocks")
        self.cursors[name] = Cursor(name, result, hold, values=values)


def lapras_setting_error(name: str) -> PgError:
    """An unknown name under the proxy's reserved prefix (PostgreSQL's wording for a reserved prefix)."""
    known = ", ".join(sorted({**LAPRAS_SETTINGS, **LAPRAS_READ_ONLY}))
    return PgError("42704", f"unrecognized configuration parameter \"{name}\"",
                   detail="\"lapras\" is a reserved prefix.", hint=f"the proxy's settings are {known}")


def _version_num(version: str) -> str:
    m = re.match(r"(\d+)(?:\.(\d+))?", version)
    if not m:
        return "160000"
    major, minor = int(m.group(1)), int(m.group(2) or 0)
    return str(major * 10000 + minor) if major >= 10 else str(major * 10000 + minor * 100)


def _client_encoding(value: str) -> str:
    v = value.strip().strip("'").upper().replace("-", "").replace("_", "")
    if v in ("UTF8", "UNICODE", "AUTO", "SQLASCII", ""):
        return "UTF8"
    raise PgError("0A000", f"client_encoding \"{value}\" is not supported; LAPRAS Proxy speaks UTF8",
                  hint="connect with client_encoding=UTF8")


def _parse_options(options: str) -> list[tuple[str, str]]:
    """`-c name=value` pairs from the start-up `options` parameter."""
    out = []
    for m in re.finditer(r"(?:-c\s*|--)([\w.]+)=((?:\\.|[^\s\\])*)", options):
        out.append((m.group(1).lower().replace("-", "_"), re.sub(r"\\(.)", r"\1", m.group(2))))
    return out
