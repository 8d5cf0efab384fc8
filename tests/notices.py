"""Reading the `lapras.show_stderr` NOTICE in wire tests: the standard errors it states, in its order.

The NOTICE lists, per aggregate column, its name and the standard error of each result row
(``stderr=[count: 2.6, 2.6; avg: 0.41, ...]``; docs/show_stderr.md); tests that only need the numbers
read them here, so the format is parsed in one place.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import psycopg

STDERR_RE = re.compile(r"stderr=\[([^\]]*)\]")


def notice_stderrs(notices: Iterable[str]) -> list[float]:
    """Every standard error the NOTICEs state, columns in order and rows within each (``null`` and the
    ``...`` of a cut list left out)."""
    out: list[float] = []
    for n in notices:
        for m in STDERR_RE.finditer(n):
            for column in m.group(1).split("; "):
                values = column.rsplit(": ", 1)[-1]
                out.extend(float(x) for x in values.split(", ") if x and x not in ("...", "null"))
    return out


def notice_columns(notice: str) -> dict[str, list[float | None]]:
    """One NOTICE's standard errors by output column name, rows in result order (``null`` as None; the
    ``...`` of a cut list left out)."""
    m = STDERR_RE.search(notice)
    assert m is not None, notice
    out: dict[str, list[float | None]] = {}
    for column in m.group(1).split("; "):
        name, values = column.rsplit(": ", 1)
        out[name] = [None if x == "null" else float(x) for x in values.split(", ") if x and x != "..."]
    return out


def stated_stderrs(dsn: str, sql: str) -> list[float]:
    """The standard errors the proxy at ``dsn`` states for ``sql``, run once on a new connection with
    ``lapras.show_stderr`` on (see notice_stderrs)."""
    notices: list[str] = []
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
        conn.execute("SET lapras.show_stderr = on")
        conn.execute(sql).fetchall()
    return notice_stderrs(notices)
