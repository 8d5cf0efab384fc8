"""Per-connection session state: settings, prepared statements, portals, cursors, transaction block.

Session commands (SET/RESET/SHOW, transaction control, DISCARD, DEALLOCATE, cursors, LISTEN) are answered
here from that state; nothing in this module touches data.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from pgcore.pgtypes import OID_BY_NAME

from ..protocol import backend, types
from ..protocol.backend import Field
from ..protocol.connection import ServerConnection
from ..protocol.errors import PgError
from .results import ResultSet, command, text_result
from .router import Route
from .session_funcs import session_select
from .sqltext import decode_escapes

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
        s._base = base
        s.settings = dict(base)
        return s

    # -- settings ----------------------------------------------------------------------------------

    def startup_status(self) -> list[bytes]:
        return [backend.parameter_status(name, self.settings.get(name.lower(), "")) for name in REPORTED]

    def get(self, name: str) -> str | None:
        return self.settings.get(name.lower())

    def set(self, name: str, value: str | None) -> None:
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
        return self.conn.transaction_status

    def _end_transaction(self, commit: bool) -> None:
        if not commit and self._tx_snapshot is not None:
            for k, v in self._tx_snapshot.items():
                self.set(k, v) if k not in FIXED else None
        self._tx_snapshot = None
        self.savepoints.clear()
        self.conn.transaction_status = "I"
        for name in [n for n, c in self.cursors.items() if not c.hold]:
            del self.cursors[name]

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

    # -- session commands ---------------------------------------------------------------------------

    def execute(self, route: Route, formats: list[int] | None = None) -> ResultSet:
        """Run a session command (everything but DECLARE, which needs the executor)."""
        handler = _HANDLERS.get(route.command)
        if handler is None:
            raise PgError("0A000", f"{route.command} is not supported")
        return handler(self, route.sql, formats or [])

    def show_columns(self, sql: str) -> list[Field] | None:
        """RowDescription fields of SHOW/FETCH without running them (for Describe)."""
        m = current_setting_call(sql)
        if m is not None:
            return [backend.field(m[1], types.TEXT)]
        funcs = session_select(sql)
        if funcs is not None:
            return [backend.field(name, types.TEXT) for name, _ in funcs]
        words = _words(sql)
        if words and words[0].upper() == "SHOW":
            name = _show_name(words[1:])
            if name.lower() == "all":
                return [backend.field(n, types.TEXT) for n in ("name", "setting", "description")]
            return [backend.field(name, types.TEXT)]
        if words and words[0].upper() == "FETCH":
            _, _, cname = _fetch_args(sql)
            cur = self.cursors.get(cname)
            if cur is None:
                raise PgError("34000", f"cursor \"{cname}\" does not exist")
            return cur.result.fields
        return None

    def discard_all(self) -> None:
        if self.tx != "I":
            raise PgError("25001", "DISCARD ALL cannot run inside a transaction block")
        self.reset_all()
        self.statements.clear()
        self.portals.clear()
        self.cursors.clear()

    def add_cursor(self, name: str, result: ResultSet, hold: bool) -> None:
        if name in self.cursors:
            raise PgError("42P03", f"cursor \"{name}\" already exists")
        if not hold and self.tx == "I":
            raise PgError("25P01", "DECLARE CURSOR can only be used in transaction blocks")
        self.cursors[name] = Cursor(name, result, hold)


# ------------------------------------------------------------------------------------------ helpers

_TOKEN = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|[^\s,=;]+|,|=", re.S)


def _words(sql: str) -> list[str]:
    from .sqltext import strip_comments

    return _TOKEN.findall(strip_comments(sql).strip().rstrip(";"))


def _unquote(tok: str) -> str:
    if len(tok) >= 2 and tok[0] == tok[-1] == "'":
        return tok[1:-1].replace("''", "'")
    if len(tok) >= 2 and tok[0] == tok[-1] == '"':
        return tok[1:-1].replace('""', '"')
    return tok


def _ident(tok: str) -> str:
    return _unquote(tok) if tok.startswith('"') else tok.lower()


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


def _setting_value(tokens: list[str]) -> str | None:
    """Value tokens of SET (after TO/=) -> stored text; None means DEFAULT."""
    if not tokens or (len(tokens) == 1 and tokens[0].upper() in ("DEFAULT", "LOCAL")):
        return None
    items: list[str] = []
    cur: list[str] = []
    for tok in tokens:
        if tok == ",":
            items.append(" ".join(cur))
            cur = []
        else:
            cur.append(_unquote(tok))
    items.append(" ".join(cur))
    return ", ".join(items)


def _set(s: Session, sql: str, _formats: list[int]) -> ResultSet:
    w = _words(sql)[1:]
    if w and w[0].upper() in ("SESSION", "LOCAL") and not (len(w) > 1 and w[1].upper() in
                                                             ("CHARACTERISTICS", "AUTHORIZATION")):
        w = w[1:]
    if not w:
        raise PgError("42601", "syntax error at end of input")
    head = w[0].upper()
    second = w[1].upper() if len(w) > 1 else ""
    if head == "TRANSACTION" or (head == "SESSION" and second == "CHARACTERISTICS"):
        return command("SET")   # transaction modes: everything is read-only already
    if head == "ROLE" or (head == "SESSION" and second == "AUTHORIZATION"):
        raise PgError("42501", "permission denied to set role")
    if head == "TIME" and len(w) > 1 and w[1].upper() == "ZONE":
        s.set("timezone", _setting_value(w[2:]) or None)
        return command("SET")
    if head == "NAMES":
        s.set("client_encoding", _setting_value(w[1:]))
        return command("SET")
    if head == "SCHEMA":
        s.set("search_path", _setting_value(w[1:]))
        return command("SET")
    name = _ident(w[0])
    rest = w[1:]
    if not rest or rest[0].upper() not in ("TO", "="):
        raise PgError("42601", f"syntax error in SET {name}", hint="write SET name TO value")
    s.set(name, _setting_value(rest[1:]))
    return command("SET")


def _reset(s: Session, sql: str, _formats: list[int]) -> ResultSet:
    w = _words(sql)[1:]
    if not w:
        raise PgError("42601", "syntax error at end of input")
    if w[0].upper() == "ALL":
        s.reset_all()
    elif w[0].upper() == "TIME" and len(w) > 1:
        s.set("timezone", None)
    elif w[0].upper() in ("SESSION", "ROLE"):
        pass
    else:
        s.set(_ident(w[0]), None)
    return command("RESET")


def _show_name(w: list[str]) -> str:
    if not w:
        raise PgError("42601", "syntax error at end of input")
    up = [x.upper() for x in w]
    if up[:2] == ["TIME", "ZONE"]:
        return "TimeZone"
    if up[:3] == ["TRANSACTION", "ISOLATION", "LEVEL"]:
        return "transaction_isolation"
    if up[:2] == ["SESSION", "AUTHORIZATION"]:
        return "session_authorization"
    name = _ident(w[0])
    return CANONICAL.get(name, name)


def lapras_setting_error(name: str) -> PgError:
    """An unknown name under the proxy's reserved prefix (PostgreSQL's wording for a reserved prefix)."""
    known = ", ".join(sorted({**LAPRAS_SETTINGS, **LAPRAS_READ_ONLY}))
    return PgError("42704", f"unrecognized configuration parameter \"{name}\"",
                   detail="\"lapras\" is a reserved prefix.", hint=f"the proxy's settings are {known}")


def _show(s: Session, sql: str, formats: list[int]) -> ResultSet:
    name = _show_name(_words(sql)[1:])
    if name.lower().startswith("lapras.") and name.lower() not in LAPRAS_SETTINGS:
        raise lapras_setting_error(name)
    if name.lower() == "all":
        rows = [(k, v, LAPRAS_SETTINGS.get(k, "")) for k, v in sorted(s.settings.items())]
        return text_result([("name", types.TEXT), ("setting", types.TEXT), ("description", types.TEXT)],
                           rows, "SHOW", formats)
    value = s.get(name)
    if value is None:
        raise PgError("42704", f"unrecognized configuration parameter \"{name}\"")
    return text_result([(name, types.TEXT)], [(value,)], "SHOW", formats)


def current_setting_call(sql: str) -> tuple[str, str] | None:
    """(setting, column name) of `SELECT current_setting('x') [AS alias]`, else None."""
    from .router import _CURRENT_SETTING

    m = _CURRENT_SETTING.match(sql)
    if m is None:
        return None
    alias = m.group("alias")
    return m.group("name"), (_ident(alias) if alias else "current_setting")


def _current_setting(s: Session, sql: str, formats: list[int]) -> ResultSet:
    call = current_setting_call(sql)
    assert call is not None
    value = s.get(call[0])
    if value is None:
        raise PgError("42704", f"unrecognized configuration parameter \"{call[0]}\"")
    return text_result([(call[1], types.TEXT)], [(value,)], "SELECT 1", formats)


def _session_select(s: Session, sql: str, formats: list[int]) -> ResultSet:
    funcs = session_select(decode_escapes(sql))
    assert funcs is not None
    row = tuple(f(s) for _, f in funcs)
    return text_result([(name, types.TEXT) for name, _ in funcs], [row], "SELECT 1", formats)


def _warning(text: str) -> bytes:
    return backend.notice_response(text, "WARNING", "25001")


def _begin(s: Session, sql: str, _formats: list[int]) -> ResultSet:
    tag = "START TRANSACTION" if sql.lstrip().upper().startswith("START") else "BEGIN"
    if s.tx != "I":
        return command(tag, [_warning("there is already a transaction in progress")])
    s.conn.transaction_status = "T"
    s._tx_snapshot = dict(s.settings)
    return command(tag)


def _commit(s: Session, sql: str, _formats: list[int]) -> ResultSet:
    if s.tx == "I":
        return command("COMMIT", [backend.notice_response("there is no transaction in progress", "WARNING",
                                                          "25P01")])
    failed = s.tx == "E"
    s._end_transaction(commit=not failed)
    return command("ROLLBACK" if failed else "COMMIT")


def _rollback(s: Session, sql: str, _formats: list[int]) -> ResultSet:
    w = [x.upper() for x in _words(sql)]
    if "TO" in w:
        name = _ident(_words(sql)[-1])
        if name not in s.savepoints:
            raise PgError("3B001", f"savepoint \"{name}\" does not exist")
        del s.savepoints[s.savepoints.index(name) + 1:]
        s.conn.transaction_status = "T"
        return command("ROLLBACK")
    if s.tx == "I":
        return command("ROLLBACK", [backend.notice_response("there is no transaction in progress", "WARNING",
                                                            "25P01")])
    s._end_transaction(commit=False)
    return command("ROLLBACK")


def _savepoint(s: Session, sql: str, _formats: list[int]) -> ResultSet:
    w = _words(sql)
    if s.tx == "I":
        raise PgError("25P01", "SAVEPOINT can only be used in transaction blocks")
    if len(w) < 2:
        raise PgError("42601", "syntax error at end of input")
    s.savepoints.append(_ident(w[1]))
    return command("SAVEPOINT")


def _release(s: Session, sql: str, _formats: list[int]) -> ResultSet:
    w = _words(sql)
    if s.tx == "I":
        raise PgError("25P01", "RELEASE SAVEPOINT can only be used in transaction blocks")
    name = _ident(w[-1]) if len(w) > 1 else ""
    if name not in s.savepoints:
        raise PgError("3B001", f"savepoint \"{name}\" does not exist")
    del s.savepoints[s.savepoints.index(name):]
    return command("RELEASE")


def _discard(s: Session, sql: str, _formats: list[int]) -> ResultSet:
    w = [x.upper() for x in _words(sql)[1:]]
    what = w[0] if w else ""
    if what == "ALL":
        s.discard_all()
    elif what not in ("PLANS", "SEQUENCES", "TEMP", "TEMPORARY"):
        raise PgError("42601", "syntax error: DISCARD ALL | PLANS | SEQUENCES | TEMP")
    return command(f"DISCARD {'TEMP' if what == 'TEMPORARY' else what}")


def _deallocate(s: Session, sql: str, _formats: list[int]) -> ResultSet:
    w = _words(sql)[1:]
    if w and w[0].upper() == "PREPARE":
        w = w[1:]
    if not w:
        raise PgError("42601", "syntax error at end of input")
    if w[0].upper() == "ALL":
        s.statements.clear()
        return command("DEALLOCATE ALL")
    name = _unquote(w[0]) if w[0].startswith('"') else w[0]
    if name not in s.statements:
        name_l = name.lower()
        if name_l not in s.statements:
            raise PgError("26000", f"prepared statement \"{name}\" does not exist")
        name = name_l
    del s.statements[name]
    return command("DEALLOCATE")


_FETCH_DIR = re.compile(
    r"^\s*(?:FETCH|MOVE)\s+(?:(?P<dir>NEXT|PRIOR|FIRST|LAST|ALL|ABSOLUTE\s+[-+]?\d+|RELATIVE\s+[-+]?\d+|"
    r"FORWARD(?:\s+(?:ALL|\d+))?|BACKWARD(?:\s+(?:ALL|\d+))?|[-+]?\d+)\s+)?(?:(?:FROM|IN)\s+)?"
    r"(?P<name>\"(?:[^\"]|\"\")*\"|[\w$]+)\s*;?\s*$", re.I | re.S)


def _fetch_args(sql: str) -> tuple[str, int, str]:
    """(mode, count, cursor name): mode is 'rel' (count rows forward/backward) or 'abs' (absolute row)."""
    from .sqltext import strip_comments

    m = _FETCH_DIR.match(strip_comments(sql))
    if not m:
        raise PgError("42601", "syntax error in FETCH/MOVE", hint="write FETCH [count | ALL] FROM cursor")
    name = _ident(m.group("name"))
    d = (m.group("dir") or "NEXT").upper().split()
    big = 1 << 62
    if d[0] == "NEXT":
        return "rel", 1, name
    if d[0] == "PRIOR":
        return "rel", -1, name
    if d[0] == "FIRST":
        return "abs", 1, name
    if d[0] == "LAST":
        return "abs", -1, name
    if d[0] == "ALL":
        return "rel", big, name
    if d[0] == "ABSOLUTE":
        return "abs", int(d[1]), name
    if d[0] == "RELATIVE":
        return "relpos", int(d[1]), name
    if d[0] in ("FORWARD", "BACKWARD"):
        sign = 1 if d[0] == "FORWARD" else -1
        n = 1 if len(d) == 1 else big if d[1] == "ALL" else int(d[1])
        return "rel", sign * n, name
    return "rel", int(d[0]), name


def _fetch(s: Session, sql: str, formats: list[int]) -> ResultSet:
    is_move = sql.lstrip().upper().startswith("MOVE")
    mode, count, name = _fetch_args(sql)
    cur = s.cursors.get(name)
    if cur is None:
        raise PgError("34000", f"cursor \"{name}\" does not exist")
    rows = cur.result.rows
    n = len(rows)
    taken: list[bytes] = []
    if mode == "abs":
        target = count if count >= 0 else n + 1 + count
        target = max(0, min(target, n + 1))
        cur.position = target
        taken = [rows[target - 1]] if 1 <= target <= n else []
    elif mode == "relpos":
        target = max(0, min(cur.position + count, n + 1))
        cur.position = target
        taken = [rows[target - 1]] if 1 <= target <= n else []
    elif count >= 0:
        start = cur.position
        end = min(start + count, n)
        taken = rows[start:end]
        cur.position = end if end < n or count <= end - start else n + 1
        if start + count > n:
            cur.position = n + 1
    else:
        start = min(cur.position, n + 1)
        end = max(start + count, 0)
        taken = list(reversed(rows[max(end - 1, 0):start - 1])) if start > 1 else []
        cur.position = end
    tag = f"{'MOVE' if is_move else 'FETCH'} {len(taken)}"
    if is_move:
        return command(tag)
    return ResultSet(cur.result.fields, taken, tag, cur.result.formats)


def _close(s: Session, sql: str, _formats: list[int]) -> ResultSet:
    w = _words(sql)[1:]
    if not w:
        raise PgError("42601", "syntax error at end of input")
    if w[0].upper() == "ALL":
        s.cursors.clear()
        return command("CLOSE CURSOR ALL")
    name = _ident(w[0])
    if s.cursors.pop(name, None) is None:
        raise PgError("34000", f"cursor \"{name}\" does not exist")
    return command("CLOSE CURSOR")


def _noop(tag: str):
    return lambda s, sql, formats: command(tag)


_HANDLERS = {
    "SET": _set, "RESET": _reset, "SHOW": _show, "BEGIN": _begin, "START": _begin, "COMMIT": _commit,
    "END": _commit, "ROLLBACK": _rollback, "ABORT": _rollback, "SAVEPOINT": _savepoint,
    "RELEASE": _release, "DISCARD": _discard, "DEALLOCATE": _deallocate, "FETCH": _fetch, "MOVE": _fetch,
    "CLOSE": _close, "CURRENT_SETTING": _current_setting, "SESSION_SELECT": _session_select, "LISTEN": _noop("LISTEN"), "UNLISTEN": _noop("UNLISTEN"), "NOTIFY": _noop("NOTIFY"),
}

_DECLARE = re.compile(
    r"^\s*DECLARE\s+(?P<name>\"(?:[^\"]|\"\")*\"|[\w$]+)\s+(?P<opts>(?:\w+\s+)*?)CURSOR\s+"
    r"(?:(?P<hold>WITH|WITHOUT)\s+HOLD\s+)?FOR\s+(?P<query>.*)$", re.I | re.S)


def parse_declare(sql: str) -> tuple[str, bool, bool, str]:
    """(cursor name, binary, with hold, query) of a DECLARE statement."""
    from .sqltext import strip_comments

    m = _DECLARE.match(strip_comments(sql).strip().rstrip(";"))
    if not m:
        raise PgError("42601", "syntax error in DECLARE",
                      hint="write DECLARE name [BINARY] [NO SCROLL] CURSOR [WITH HOLD] FOR query")
    binary = "BINARY" in m.group("opts").upper().split()
    return _ident(m.group("name")), binary, (m.group("hold") or "").upper() == "WITH", m.group("query")


TYPE_OIDS = {**OID_BY_NAME, "unknown": 0}

_PREPARE = re.compile(r"^\s*PREPARE\s+(?P<name>\"(?:[^\"]|\"\")*\"|[\w$]+)\s*(?:\((?P<types>[^)]*)\))?\s*AS\s+"
                      r"(?P<body>.*)$", re.I | re.S)
_EXECUTE = re.compile(r"^\s*EXECUTE\s+(?P<name>\"(?:[^\"]|\"\")*\"|[\w$]+)\s*(?:\((?P<args>.*)\))?\s*$", re.I | re.S)


def parse_prepare(sql: str) -> tuple[str, list[int], str]:
    """(name, parameter type oids, statement) of SQL-level PREPARE."""
    from .sqltext import strip_comments

    m = _PREPARE.match(strip_comments(sql).strip().rstrip(";"))
    if not m:
        raise PgError("42601", "syntax error in PREPARE", hint="write PREPARE name [(type, ...)] AS query")
    oids = []
    for t in filter(None, (x.strip().lower() for x in (m.group("types") or "").split(","))):
        if t not in TYPE_OIDS:
            raise PgError("0A000", f"PREPARE parameter type \"{t}\" is not supported")
        oids.append(TYPE_OIDS[t])
    return _ident(m.group("name")), oids, m.group("body")


def _split_args(text: str) -> list[str]:
    out, depth, cur, i = [], 0, [], 0
    while i < len(text):
        c = text[i]
        if c == "'":
            j = i + 1
            while j < len(text):
                if text[j] == "'" and text[j + 1:j + 2] == "'":
                    j += 2
                    continue
                if text[j] == "'":
                    break
                j += 1
            cur.append(text[i:j + 1])
            i = j + 1
            continue
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        if c == "," and depth == 0:
            out.append("".join(cur).strip())
            cur = []
        else:
            cur.append(c)
        i += 1
    if cur or out:
        out.append("".join(cur).strip())
    return out


def parse_execute(sql: str) -> tuple[str, list[str | None]]:
    """(name, text-format arguments) of SQL-level EXECUTE; arguments must be literals."""
    from .sqltext import strip_comments

    m = _EXECUTE.match(strip_comments(sql).strip().rstrip(";"))
    if not m:
        raise PgError("42601", "syntax error in EXECUTE", hint="write EXECUTE name (literal, ...)")
    args: list[str | None] = []
    for a in _split_args(m.group("args") or ""):
        if a.upper() == "NULL":
            args.append(None)
        elif len(a) >= 2 and a[0] == a[-1] == "'":
            args.append(_unquote(a))
        elif re.fullmatch(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?|TRUE|FALSE", a, re.I):
            args.append(a)
        else:
            raise PgError("0A000", "EXECUTE arguments must be literals", hint=f"got {a!r}")
    return _ident(m.group("name")), args
