"""The admin console, as PgBouncer's: SHOW STATS | CLIENTS | SERVERS | CONFIG | VERSION | EPOCHS, RELOAD,
PAUSE, RESUME, SHUTDOWN, typed in any session of a user with `admin = true` (no separate database).

Every command checks the role first, in one place (`run_admin`, `admin_columns`): an analyst gets 42501
for each, before anything is read (PgBouncer's CVEs were commands that skipped that check). What the
commands show is what the threat model lets the operator see: sessions, activity, settings and the
ledger's per-epoch budget; never a secret, never data. The server supplies the figures through
`AdminControl`; this module only parses, checks and shapes rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from ..protocol import backend, types
from ..protocol.backend import Field
from ..protocol.errors import PgError
from .results import ResultSet, command, text_result

Rows = list[tuple[object, ...]]

SHOW_COLUMNS: dict[str, tuple[str, ...]] = {
    "STATS": ("worker", "user", "statements", "dp_answers", "metadata", "refused", "errors", "cancelled",
              "total_ms", "avg_ms"),
    "CLIENTS": ("worker", "pid", "user", "database", "addr", "port", "tls", "state", "connect_time",
                "request_time", "statements", "application_name"),
    "SERVERS": ("worker", "type", "database", "host", "max", "in_use", "idle", "waiting"),
    "CONFIG": ("key", "value", "changeable", "pending"),
    "VERSION": ("version",),
    "EPOCHS": ("epoch", "started_at", "ended_at", "accounting", "budget_epsilon", "budget_delta",
               "spent_epsilon", "spent_delta", "remaining_epsilon", "answers_served", "stopped"),
}
ACTIONS = ("RELOAD", "PAUSE", "RESUME", "SHUTDOWN")
RELOAD_COLUMNS = ("key", "old", "new", "takes_effect")


class AdminControl(Protocol):
    """What the server offers the console (with workers, the server gathers every worker's figures)."""

    def is_admin(self, user: str) -> bool: ...
    async def show(self, what: str) -> Rows: ...
    async def reload(self) -> tuple[Rows, list[str]]: ...
    async def pause(self) -> None: ...
    def resume(self) -> None: ...
    def shutdown(self) -> None: ...


def admin_command(words: Sequence[str]) -> str | None:
    """The console command of a statement's leading words (upper-case), or None: `SHOW STATS`, `RELOAD`...

    Only exact forms are commands, so `SHOW search_path` and everything else keep their meaning."""
    if len(words) == 2 and words[0] == "SHOW" and words[1] in SHOW_COLUMNS:
        return f"SHOW {words[1]}"
    if len(words) == 1 and words[0] in ACTIONS:
        return words[0]
    return None


def _check(control: AdminControl | None, user: str, cmd: str) -> AdminControl:
    if control is None:
        raise PgError("0A000", f"{cmd} is not available here")
    if not control.is_admin(user):
        raise PgError("42501", f"permission denied for {cmd}: the admin console is for admin users",
                      hint="users with admin = true in config.toml may run it")
    return control


def admin_columns(control: AdminControl | None, user: str, cmd: str) -> list[Field] | None:
    """RowDescription of a console command, for Describe (role checked as for running it)."""
    _check(control, user, cmd)
    if cmd.startswith("SHOW "):
        return [backend.field(name, types.TEXT) for name in SHOW_COLUMNS[cmd[5:]]]
    if cmd == "RELOAD":
        return [backend.field(name, types.TEXT) for name in RELOAD_COLUMNS]
    return None


async def run_admin(control: AdminControl | None, user: str, cmd: str, formats: list[int]) -> ResultSet:
    """Run one console command for ``user``; 42501 unless the user is an admin."""
    ctl = _check(control, user, cmd)
    if cmd.startswith("SHOW "):
        what = cmd[5:]
        rows = [tuple("" if v is None else str(v) for v in r) for r in await ctl.show(what)]
        return text_result([(n, types.TEXT) for n in SHOW_COLUMNS[what]], rows, "SHOW", formats)
    if cmd == "RELOAD":
        changes, notes = await ctl.reload()
        res = text_result([(n, types.TEXT) for n in RELOAD_COLUMNS],
                          [tuple(str(v) for v in r) for r in changes], "RELOAD", formats)
        res.notices.extend(backend.notice_response(n) for n in notes)
        return res
    if cmd == "PAUSE":
        await ctl.pause()
        return command("PAUSE")
    if cmd == "RESUME":
        ctl.resume()
        return command("RESUME")
    ctl.shutdown()
    return command("SHUTDOWN")
