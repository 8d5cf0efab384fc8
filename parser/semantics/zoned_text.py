"""A recorded statement's TimeZone carried with its text, for planning it again later (workload learning,
P, what-if): ``/* TimeZone=Europe/Berlin */ SELECT ...``. The statement history keeps the zone apart (its own
column); the predictor, whose models pass statements around as texts (templates, rendered progressions),
carries it as this leading comment, which sqlglot keeps through parsing and rendering. ``planned_in_zone``
plans such a text under its zone (``zones.using_setting``), as the session that asked it planned it;
a text without the comment is planned in UTC, as before. Never applied to what a client sends: a client's
comment is a comment, its zone is its session's TimeZone."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

from .zones import using_setting

_MARK = re.compile(r"\A\s*/\* TimeZone=([^*]+) \*/\s*")


def tagged(sql: str, zone: str | None) -> str:
    """``sql`` with its zone as a leading comment; unchanged for None (UTC) or a text already tagged."""
    if not zone or "*" in zone or _MARK.match(sql):
        return sql
    return f"/* TimeZone={zone} */ {sql}"


def untagged(sql: str) -> tuple[str | None, str]:
    """(the zone a tagged text names, or None; the text without the comment)."""
    m = _MARK.match(sql)
    return (m.group(1), sql[m.end():]) if m is not None else (None, sql)


@contextmanager
def planned_in_zone(sql: str) -> Iterator[str]:
    """The text to plan, while its recorded zone is the session's (a zone this host cannot read raises the
    Refusal ``SET TIME ZONE`` would: the statement could not be planned as it was asked)."""
    zone, body = untagged(sql)
    with using_setting(zone):
        yield body
