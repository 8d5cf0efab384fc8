"""The events generator on a real PostgreSQL: shape, declared ranges, heavy users, and that a split by user
(as shards do) gives back exactly the single-database table."""

from __future__ import annotations

from datetime import UTC, datetime

import psycopg
import pytest

from proxy.upstream.events_data import (
    CATEGORIES,
    COUNTRIES,
    EventsSpec,
    create_events_table,
    ensure_events_table,
    fill_events,
)

END = datetime(2026, 12, 2, tzinfo=UTC)


def test_default_table_shape_and_ranges(fresh_db: str) -> None:
    assert ensure_events_table(fresh_db, EventsSpec(end=END))
    assert not ensure_events_table(fresh_db, EventsSpec(end=END))       # present: left alone
    with psycopg.connect(fresh_db) as conn:
        types = dict(conn.execute(
            "SELECT column_name, data_type || coalesce('(' || numeric_precision || ',' || numeric_scale || ')', '')"
            " FROM information_schema.columns WHERE table_name = 'events'").fetchall())
        assert types == {"user_id": "bigint(64,0)", "ts": "timestamp with time zone", "category": "text",
                         "country": "text", "amount": "numeric(10,2)", "duration_s": "integer(32,0)"}
        n, users, lo, hi, cats, countries, amin, amax, dmin, dmax = conn.execute(
            "SELECT count(*), count(DISTINCT user_id), min(ts), max(ts), count(DISTINCT category),"
            " count(DISTINCT country), min(amount), max(amount), min(duration_s), max(duration_s)"
            " FROM events").fetchone()
        assert n == 200_000 and users >= 10_000
        assert datetime(2026, 1, 1, tzinfo=UTC) <= lo < datetime(2026, 1, 2, tzinfo=UTC)
        assert datetime(2026, 11, 30, tzinfo=UTC) < hi < END                # up to the generation day
        assert cats == len(CATEGORIES) == 8 and countries == len(COUNTRIES) == 20
        assert 0 <= amin and amax <= 500 and 0 <= dmin and dmax <= 3600
        # A long tail of heavy users: the heaviest has >= 50x the median user's events.
        top, median = conn.execute(
            "SELECT max(c), percentile_disc(0.5) WITHIN GROUP (ORDER BY c)"
            " FROM (SELECT count(*) AS c FROM events GROUP BY user_id) s").fetchone()
        assert top >= 50 * median
        # Money only where a kind carries it; a user keeps one country.
        assert conn.execute("SELECT count(*) FROM events WHERE category = 'page_view' AND amount <> 0"
                            ).fetchone()[0] == 0
        assert conn.execute("SELECT max(c) FROM (SELECT count(DISTINCT country) c FROM events GROUP BY user_id) s"
                            ).fetchone()[0] == 1


def test_split_by_user_reassembles_the_table(fresh_db: str) -> None:
    spec = EventsSpec(rows=30_000, users=2_000, end=END)
    with psycopg.connect(fresh_db, autocommit=True) as conn:
        create_events_table(conn, "public", "whole")
        assert fill_events(conn, spec, "public", "whole") == 30_000
        create_events_table(conn, "part", "events")
        kept = sum(fill_events(conn, spec, "part", "events", keep=f"user_id % 3 = {r}") for r in range(3))
        assert kept == 30_000
        for a, b in (("public.whole", "part.events"), ("part.events", "public.whole")):
            diff = conn.execute(f"SELECT count(*) FROM (TABLE {a} EXCEPT ALL TABLE {b}) d").fetchone()[0]
            assert diff == 0


@pytest.mark.parametrize(("end", "days"), [(datetime(2025, 6, 1, tzinfo=UTC), 1),
                                           (datetime(2030, 1, 1, tzinfo=UTC), 365)])
def test_span_stays_in_the_declared_year(end: datetime, days: int) -> None:
    start, stop = EventsSpec(end=end).span
    assert start == datetime(2026, 1, 1, tzinfo=UTC) and (stop - start).days == days
