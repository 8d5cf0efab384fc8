"""Expressions over bound parameters through the real proxy, with psycopg's server-side binding (the
unnamed statement, then a named prepared one): a date range picker's ``ts >= $1::timestamptz - interval
'7 days'``, ``category = lower($1)``, ``COUNT(*) + $1``, and ``$1 - interval '7 days'`` with the
parameter's type declared at Parse. They were refused with 0A000 although the same
statements with literals are answered. A bound statement is the same linear query as its literal twin, so it
is answered from the ledger with the literal's released value (no new noise; nothing statistical here)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest

pytestmark = pytest.mark.process



def test_bound_expressions_answer_as_their_literal_twins(proxy: Any) -> None:
    with psycopg.connect(proxy.dsn(), autocommit=True) as conn:
        literal = conn.execute(
            "SELECT COUNT(*) FROM events WHERE ts >= '2026-03-01 00:00:00+00' AND ts < '2026-03-09 00:00:00+00' "
            "AND category = 'search'").fetchone()
        bound_sql = ("SELECT COUNT(*) FROM events WHERE ts >= %s::timestamptz - interval '7 days' "
                     "AND ts < %s::timestamptz + interval '1 day' AND category = lower(%s)")
        for prepare in (False, True):
            for params in ((datetime(2026, 3, 8, tzinfo=UTC), datetime(2026, 3, 8, tzinfo=UTC), "SEARCH"),
                           ("2026-03-08 00:00:00+00", "2026-03-08 00:00:00+00", "Search")):
                assert conn.execute(bound_sql, params, prepare=prepare).fetchone() == literal, (prepare, params)
        # psycopg declares a datetime's type (timestamptz) at Parse: ``$1 - interval`` is then timestamptz -
        # interval, as PostgreSQL reads it (untyped, it is interval - interval: the test below).
        day = datetime(2026, 3, 8, tzinfo=UTC)
        for prepare in (False, True):
            assert conn.execute("SELECT COUNT(*) FROM events WHERE ts >= %s - interval '7 days' "
                                "AND ts < %s + interval '1 day' AND category = 'search'", (day, day),
                                prepare=prepare).fetchone() == literal
        total = conn.execute("SELECT COUNT(*) FROM events").fetchone()
        assert total is not None
        for prepare in (False, True):
            row = conn.execute("SELECT COUNT(*) + %s FROM events", ("3",), prepare=prepare).fetchone()
            assert row is not None and row[0] == total[0] + 3 and isinstance(row[0], int)  # bigint, as PostgreSQL
            row = conn.execute("SELECT COALESCE(%s, 'all') AS label, COUNT(*) FROM events", (None,)).fetchone()
            assert row == ("all", total[0])
        other = conn.execute("SELECT COUNT(*) FROM events WHERE category NOT IN ('search', 'share')").fetchone()
        assert conn.execute("SELECT COUNT(*) FROM events WHERE category <> ALL(%s)",
                            (["search", "share"],)).fetchone() == other


def test_an_untyped_parameter_next_to_an_interval_is_refused_as_postgresql_refuses_it(proxy: Any) -> None:
    """PostgreSQL resolves ``$1 - interval '7 days'`` with an untyped ``$1`` as interval - interval: a
    timestamp compared with it is 42883 there, and here."""
    with psycopg.connect(proxy.dsn(), autocommit=True) as conn:
        with pytest.raises(psycopg.errors.UndefinedFunction, match="operator does not exist"):
            conn.execute("SELECT COUNT(*) FROM events WHERE ts >= %s - interval '7 days'", ("2026-03-08",),
                         prepare=True)


def test_a_bound_granularity_answers_as_the_literal_unit(proxy: Any) -> None:
    """``date_trunc(%s, ts)`` in GROUP BY (a granularity picker, bound): the literal unit's statement."""
    with psycopg.connect(proxy.dsn(), autocommit=True) as conn:
        for unit in ("month", "quarter"):
            literal = conn.execute(f"SELECT date_trunc('{unit}', ts) AS t, COUNT(*) FROM events GROUP BY 1 "
                                   "ORDER BY 1").fetchall()
            for prepare in (False, True):
                bound = conn.execute("SELECT date_trunc(%s, ts) AS t, COUNT(*) FROM events GROUP BY 1 ORDER BY 1",
                                     (unit,), prepare=prepare).fetchall()
                assert bound == literal and len(bound) == {"month": 12, "quarter": 4}[unit], (unit, prepare)
