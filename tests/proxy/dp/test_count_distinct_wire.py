"""COUNT(DISTINCT) end to end on the demo `events` table (privacy_unit = user_id, k = 10, g = 4): a real
client over a real socket to the real proxy. Answers are integers within 5 stated standard errors of the
exact bounded figure the engine computes on PostgreSQL (each user's rows bounded to k, each user counted
in at most g groups or holding at most g (group, value) pairs), which is never above PostgreSQL's own
COUNT(DISTINCT); repeats replay; what is refused gets 0A000 and a hint, and the connection keeps serving."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from proxy.replay.runner import parse_provenance
from tests.fixtures.exact_rows import exact_plan_rows
from tests.fixtures.notices import noticed
from tests.fixtures.refusals import wire_refusal

STATEMENTS = [
    "SELECT category, COUNT(DISTINCT user_id) AS users FROM events GROUP BY category",
    "SELECT country, COUNT(DISTINCT user_id) FROM events WHERE ts >= '2026-01-01' AND ts < '2026-02-01' "
    "GROUP BY country",
    "SELECT COUNT(DISTINCT user_id), COUNT(*) FROM events WHERE category = 'purchase'",
    "SELECT category, COUNT(DISTINCT country) AS countries FROM events GROUP BY 1",
    "SELECT country, COUNT(DISTINCT amount) FROM events WHERE category = 'refund' GROUP BY country",
    "SELECT COUNT(DISTINCT ts) FROM events WHERE ts >= '2026-03-01' AND ts < '2026-03-08'",
    # Looker's filtered count_distinct measure and Tableau's COUNTD(IF ... THEN [User ID] END): a CASE whose
    # other branches are NULL is COUNT(DISTINCT ...) FILTER (WHERE its condition).
    "SELECT events.country AS \"events.country\", COUNT(DISTINCT CASE WHEN (events.category = 'purchase') THEN "
    "events.user_id  ELSE NULL END) AS \"events.buyers\" FROM public.events AS events GROUP BY 1 ORDER BY 2 DESC "
    "LIMIT 500",
    "SELECT COUNT(DISTINCT (CASE WHEN \"events\".\"amount\" >= 100 THEN \"events\".\"user_id\" ELSE NULL END)) "
    "AS \"ctd:big_spenders:ok\" FROM \"public\".\"events\" \"events\" HAVING (COUNT(1) > 0)",
    "SELECT category, COUNT(DISTINCT CASE WHEN duration_s > 60 THEN country END) FROM events GROUP BY 1",
]


@pytest.mark.parametrize("sql", STATEMENTS)
def test_count_distinct_over_the_wire(sql: str, proxy: Any, adult_db: str, default_config: Any) -> None:
    plan, exact = exact_plan_rows(sql, default_config.catalog, adult_db)
    with noticed(proxy.dsn()) as (conn, notices):
        got = conn.execute(sql).fetchall()
        again = conn.execute(sql).fetchall()
    with psycopg.connect(adult_db) as conn:
        raw = conn.execute(sql.replace("COUNT(DISTINCT", "count(DISTINCT")).fetchall()
    assert again == got  # replayed from the ledger
    sd = max(parse_provenance(notices)[1])
    assert 0 < sd < 50
    assert len(got) == len(exact) == len(raw)
    keyed = {r[:-1] if len(r) > 1 and isinstance(r[0], str) else (): r for r in exact}
    for row in got:
        assert all(isinstance(v, int) for v in row if not isinstance(v, str))
        want = keyed[row[:-1] if isinstance(row[0], str) else ()]
        for g, w in zip(row, want, strict=True):
            if not isinstance(g, str):
                assert abs(g - w) <= 5 * sd + 1, (row, want, sd)
    raw_by = {r[0] if isinstance(r[0], str) else (): r for r in raw}
    for row in exact:
        ref = raw_by[row[0] if isinstance(row[0], str) else ()]
        assert all(e <= r for e, r in zip(row, ref, strict=True) if not isinstance(e, str))  # bounded <= all


@pytest.mark.parametrize("sql, part", [
    ("SELECT COUNT(DISTINCT lower(category)) FROM events", "lower"),
    ("SELECT SUM(DISTINCT duration_s) FROM events", "SUM(DISTINCT"),
    ("SELECT COUNT(DISTINCT (category, country)) FROM events", "DISTINCT"),
    ("SELECT COUNT(DISTINCT CASE WHEN category = 'purchase' THEN user_id ELSE 0 END) FROM events", "CASE"),
    ("SELECT COUNT(DISTINCT CASE WHEN category = 'purchase' THEN user_id WHEN category = 'share' THEN country END) "
     "FROM events", "CASE"),
])
def test_unsound_distinct_is_refused_and_the_connection_serves_on(sql: str, part: str, proxy: Any) -> None:
    with wire_refusal(proxy.dsn(), sql) as (conn, err):
        assert err.sqlstate == "0A000"
        assert part in str(err) and err.diag.message_hint
        (n,) = conn.execute("SELECT COUNT(DISTINCT user_id) FROM events").fetchone()  # type: ignore[misc]
        assert isinstance(n, int)


def test_count_distinct_of_a_case_is_the_filtered_count(proxy: Any) -> None:
    """``COUNT(DISTINCT CASE WHEN p THEN user_id END)`` asks the same linear query as ``COUNT(DISTINCT
    user_id) FILTER (WHERE p)``: after one, the other is replayed from the ledger, equal and free
    (deterministic: false-failure rate 0)."""
    filtered = "SELECT COUNT(DISTINCT user_id) FILTER (WHERE category = 'signup' AND country = 'SE') FROM events"
    case = ("SELECT COUNT(DISTINCT CASE WHEN category = 'signup' AND country = 'SE' THEN user_id ELSE NULL END) "
            "FROM events")
    with noticed(proxy.dsn()) as (conn, notices):
        first = conn.execute(filtered).fetchall()
        notices.clear()
        second = conn.execute(case).fetchall()
    assert second == first
    assert parse_provenance(notices)[0] == ["free"] and "outcome=repeat" in notices[0], notices
