"""Session commands: SET/RESET/SHOW, transaction control, DISCARD, DEALLOCATE, FETCH/MOVE/CLOSE, LISTEN,
and the SELECTs of session functions, answered from the session's state (``session.py``); nothing here
touches data. One handler per leading keyword (``_HANDLERS``), run by ``run_command``.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from parser.semantics.zones import session_setting
from pgcore.errors import Refusal

from ..protocol import backend, types
from ..protocol.backend import Field
from ..protocol.errors import PgError
from .results import ResultSet, command, encode_rows, format_for, session_zone, text_result
from .router import CURRENT_SETTING, Route
from .session import CANONICAL, LAPRAS_SETTINGS, Session, lapras_setting_error
from .session_funcs import session_select
from .sqltext import command_words as _words
from .sqltext import decode_escapes, strip_comments
from .sqltext import fold_ident as _ident
from .sqltext import unquote as _unquote

Handler = Callable[[Session, str, list[int]], ResultSet]


def run_command(s: Session, route: Route, formats: list[int] | None = None) -> ResultSet:
    """Run a session command (everything but PREPARE, EXECUTE and DECLARE, which need the executor)."""
    handler = _HANDLERS.get(route.command)
    if handler is None:
        raise PgError("0A000", f"{route.command} is not supported")
    return handler(s, route.sql, formats or [])


def show_columns(s: Session, sql: str) -> list[Field] | None:
    """RowDescription fields of SHOW/FETCH without running them (for Describe)."""
    m = current_setting_call(sql)
    if m is not None:
        return [backend.field(m[1], types.TEXT)]
    funcs = session_select(sql)
    if funcs is not None:
        return [backend.field(name, types.NAME if is_name else types.TEXT) for name, _, is_name in funcs]
    words = _words(sql)
    if words and words[0].upper() == "SHOW":
        name = _show_name(words[1:])
        if name.lower() == "all":
            return [backend.field(n, types.TEXT) for n in ("name", "setting", "description")]
        return [backend.field(name, types.TEXT)]
    if words and words[0].upper() == "FETCH":
        _, _, cname = _fetch_args(sql)
        cur = s.cursors.get(cname)
        if cur is None:
            raise PgError("34000", f"cursor \"{cname}\" does not exist")
        return cur.result.fields
    return None


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
    local = False
    if w and w[0].upper() in ("SESSION", "LOCAL") and not (len(w) > 1 and w[1].upper() in
                                                             ("CHARACTERISTICS", "AUTHORIZATION")):
        local, w = w[0].upper() == "LOCAL", w[1:]
    if not w:
        raise PgError("42601", "syntax error at end of input")
    head = w[0].upper()
    second = w[1].upper() if len(w) > 1 else ""
    if head == "TRANSACTION" or (head == "SESSION" and second == "CHARACTERISTICS"):
        return command("SET")   # transaction modes: everything is read-only already
    if head == "ROLE" or (head == "SESSION" and second == "AUTHORIZATION"):
        raise PgError("42501", "permission denied to set role")
    if head == "TIME" and len(w) > 1 and w[1].upper() == "ZONE":
        name, value = "timezone", _setting_value(w[2:]) or None
    elif head == "NAMES":
        name, value = "client_encoding", _setting_value(w[1:])
    elif head == "SCHEMA":
        name, value = "search_path", _setting_value(w[1:])
    else:
        name = _ident(w[0])
        rest = w[1:]
        if not rest or rest[0].upper() not in ("TO", "="):
            raise PgError("42601", f"syntax error in SET {name}", hint="write SET name TO value")
        value = _setting_value(rest[1:])
    if name == "timezone" and value is not None:
        value = _time_zone(value)
    if local and s.tx == "I":   # as PostgreSQL: a warning, and no effect
        return command("SET", [backend.notice_response("SET LOCAL can only be used in transaction blocks",
                                                       "WARNING", "25P01")])
    s.set(name, value, local=local)
    return command("SET")


def _time_zone(value: str) -> str:
    """The TimeZone a SET names, checked and spelt as PostgreSQL spells it (SHOW TimeZone)."""
    try:
        return session_setting(value).text
    except Refusal as r:
        raise PgError(r.sqlstate, r.message, hint=r.hint) from None


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
    m = CURRENT_SETTING.match(sql)
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
    row = tuple(f(s) for _, f, _ in funcs)
    return text_result([(name, types.NAME if is_name else types.TEXT) for name, _, is_name in funcs], [row],
                       "SELECT 1", formats)


def _warning(text: str) -> bytes:
    return backend.notice_response(text, "WARNING", "25001")


def _begin(s: Session, sql: str, _formats: list[int]) -> ResultSet:
    tag = "START TRANSACTION" if sql.lstrip().upper().startswith("START") else "BEGIN"
    if not s.begin():
        return command(tag, [_warning("there is already a transaction in progress")])
    return command(tag)


def _commit(s: Session, sql: str, _formats: list[int]) -> ResultSet:
    if s.tx == "I":
        return command("COMMIT", [backend.notice_response("there is no transaction in progress", "WARNING",
                                                          "25P01")])
    failed = s.tx == "E"
    s.end_transaction(commit=not failed)
    return command("ROLLBACK" if failed else "COMMIT")


def _rollback(s: Session, sql: str, _formats: list[int]) -> ResultSet:
    w = [x.upper() for x in _words(sql)]
    if "TO" in w:
        s.rollback_to(_ident(_words(sql)[-1]))
        return command("ROLLBACK")
    if s.tx == "I":
        return command("ROLLBACK", [backend.notice_response("there is no transaction in progress", "WARNING",
                                                            "25P01")])
    s.end_transaction(commit=False)
    return command("ROLLBACK")


def _savepoint(s: Session, sql: str, _formats: list[int]) -> ResultSet:
    w = _words(sql)
    if s.tx == "I":
        raise PgError("25P01", "SAVEPOINT can only be used in transaction blocks")
    if len(w) < 2:
        raise PgError("42601", "syntax error at end of input")
    s.add_savepoint(_ident(w[1]))
    return command("SAVEPOINT")


def _release(s: Session, sql: str, _formats: list[int]) -> ResultSet:
    w = _words(sql)
    s.release(_ident(w[-1]) if len(w) > 1 else "")
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
    rows = list(range(len(cur.result.rows)))   # row numbers: the rows are taken below, encoded at the end
    n = len(rows)
    taken: list[int] = []
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
    fields = cur.result.fields or []
    if cur.values is not None and formats and any(
            format_for(formats, i) != format_for(cur.result.formats, i) for i in range(len(fields))):
        # The FETCH's Bind asks for other formats than DECLARE's (psycopg's binary named cursors): as asked.
        encoded = encode_rows(fields, [cur.values[i] for i in taken], formats, session_zone(s.get("timezone")))
        return ResultSet(cur.result.fields, encoded, tag, list(formats))
    return ResultSet(cur.result.fields, [cur.result.rows[i] for i in taken], tag, cur.result.formats)


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


def _noop(tag: str) -> Handler:
    return lambda s, sql, formats: command(tag)


_HANDLERS: dict[str, Handler] = {
    "SET": _set, "RESET": _reset, "SHOW": _show, "BEGIN": _begin, "START": _begin, "COMMIT": _commit,
    "END": _commit, "ROLLBACK": _rollback, "ABORT": _rollback, "SAVEPOINT": _savepoint,
    "RELEASE": _release, "DISCARD": _discard, "DEALLOCATE": _deallocate, "FETCH": _fetch, "MOVE": _fetch,
    "CLOSE": _close, "CURRENT_SETTING": _current_setting, "SESSION_SELECT": _session_select, "LISTEN": _noop("LISTEN"), "UNLISTEN": _noop("UNLISTEN"), "NOTIFY": _noop("NOTIFY"),
}
