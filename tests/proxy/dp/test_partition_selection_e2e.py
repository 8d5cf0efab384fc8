"""DP partition selection through the real proxy (real sockets, the embedded PostgreSQL): GROUP BY a
``keys = "private"`` column and a filtered value list release only keys held by many units, each
selection charged once in the ledger before it is released, reused by later statements, and replayed
after a restart without a new draw or charge."""

from __future__ import annotations

import random
import re
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from proxy.replay.runner import parse_provenance
from tests.fixtures.databases import fill_table

pytestmark = pytest.mark.process

TABLE = """
[tables.shops]
schema = "public"
privacy_unit = "user_id"
max_rows_per_unit = 4
max_groups_per_unit = 2
[tables.shops.columns]
city = { type = "text", keys = "private" }
state = { type = "text", values = ["WA", "OR"] }
tier = { type = "text", values = ["bronze", "silver", "gold", "platinum"] }
amount = { type = "int", min = 0, max = 100 }
"""

POPULAR = {"Seattle": ("WA", 500), "Spokane": ("WA", 350), "Tacoma": ("WA", 300), "Portland": ("OR", 400)}
RARE = [f"Rare town {i}" for i in range(40)]  # each held by a single user


@pytest.fixture(scope="module")
def shops_proxy(harness: Any, embedded_pg: Any, default_config: Any,
                tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    rc = harness
    dsn = rc.demo_database(embedded_pg, default_config, "shops")
    rng = random.Random(18)
    rows = []
    user = 0
    for city, (state, users) in POPULAR.items():
        for _ in range(users):
            user += 1
            tier = rng.choice(["bronze", "silver", "gold"])
            rows += [(user, city, state, rng.randrange(101), tier) for _ in range(rng.randrange(1, 4))]
            if rng.random() < 0.3:  # some users also shop in a second city (max_groups_per_unit = 2 keeps both)
                other = rng.choice(list(POPULAR))
                rows.append((user, other, POPULAR[other][0], rng.randrange(101), tier))
    for i, city in enumerate(RARE):
        user += 1
        rows += [(user, city, "WA", 10, "platinum" if i < 3 else "gold")] * 3  # three platinum users
    with psycopg.connect(dsn, autocommit=True) as conn:
        fill_table(conn, "shops (user_id bigint, city text, state text, amount integer, tier text)", rows)
    root = tmp_path_factory.mktemp("shops")
    port = rc.free_port()
    cfg = root / "config.toml"
    # Per selection about (0.5, 1e-6); the stream keeps plenty for the aggregates.
    cfg.write_text(rc.make_test_config(dsn, port, epsilon=8.0, delta=1e-5, stream_length=20, extra=TABLE,
                                       privacy_extra="partition_fraction = 0.25\npartition_selections = 4"))
    p = rc.ProxyProcess(cfg, root / "state", port)
    p.upstream_dsn = dsn
    p.start()
    yield p
    p.stop()


def _ledger(p: Any) -> tuple[list[tuple[Any, ...]], int]:
    with psycopg.connect(p.upstream_dsn, autocommit=True) as conn:
        parts = conn.execute("SELECT key, keys FROM lapras.partitions ORDER BY key").fetchall()
        spends = conn.execute("SELECT count(*) FROM lapras.spends WHERE part = 'partition'").fetchone()
    return parts, int(spends[0])


def test_group_by_private_keys_releases_popular_keys_only(shops_proxy: Any) -> None:
    with psycopg.connect(shops_proxy.dsn(), autocommit=True) as conn:
        conn.execute("SET lapras.show_stderr = on")
        notices: list[str] = []
        conn.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
        rows = conn.execute("SELECT city, COUNT(*) FROM shops GROUP BY city ORDER BY city").fetchall()
        assert [r[0] for r in rows] == sorted(POPULAR)  # no single-user town
        exact = {c: n for c, n in psycopg.connect(shops_proxy.upstream_dsn).execute(
            "SELECT city, count(*) FROM shops GROUP BY city").fetchall()}
        for city, n in rows:
            assert abs(n - exact[city]) < 0.25 * exact[city], (city, n, exact[city])
        assert any("partition selection" in m and "rho=" in m for m in notices), notices
        # Its (epsilon, delta) reading is finite (a fixed 4 x delta once printed epsilon = inf).
        stated = next(m for m in notices if "partition selection" in m)
        eps = re.search(r"\(epsilon, delta\) = \(([^,]+), ", stated)
        assert eps is not None and 0 < float(eps.group(1)) < 10, stated
        parts, spends = _ledger(shops_proxy)
        assert len(parts) == 1 and spends == 1
        budget = dict(conn.execute("SHOW lapras.budget").fetchall())
        assert budget["partition.selections_left"] == "3" and float(budget["partition.spent.epsilon"]) > 0
        assert float(budget["partition.spent.epsilon"]) <= float(budget["partition.budget.epsilon"])
        assert sorted(k[0] for k in parts[0][1]) == sorted(POPULAR)
        # The same keys serve later statements over them, with no new selection.
        again = conn.execute("SELECT state, city, SUM(amount) FROM shops GROUP BY city, state").fetchall()
        assert {r[1] for r in again} == set(POPULAR)
        assert _ledger(shops_proxy)[1] == 1


def test_filtered_value_list_is_its_own_selection(shops_proxy: Any) -> None:
    with psycopg.connect(shops_proxy.dsn(), autocommit=True) as conn:
        before = _ledger(shops_proxy)[1]
        # EXPLAIN states what the selection will cost, and charges nothing.
        plan = [r[0] for r in conn.execute("EXPLAIN SELECT city FROM shops WHERE state = 'WA' GROUP BY city")]
        assert "DP partition selection" in plan[0] and any("rho =" in ln and "(epsilon, delta)" in ln for ln in plan)
        assert any("not selected yet" in ln for ln in plan), plan
        assert _ledger(shops_proxy)[1] == before
        rows = conn.execute("SELECT \"city\" FROM shops WHERE \"state\" = 'WA' GROUP BY \"city\"").fetchall()
        assert sorted(r[0] for r in rows) == ["Seattle", "Spokane", "Tacoma"]
        assert _ledger(shops_proxy)[1] == before + 1
        # Another spelling of the same filter is the same selection: no charge.
        rows2 = conn.execute("SELECT city FROM shops WHERE state IN ('WA') GROUP BY 1").fetchall()
        assert sorted(r[0] for r in rows2) == ["Seattle", "Spokane", "Tacoma"]
        assert _ledger(shops_proxy)[1] == before + 1
        plan = [r[0] for r in conn.execute("EXPLAIN SELECT city, COUNT(*) FROM shops WHERE state = 'WA' GROUP BY city")]
        assert any("selected earlier in this epoch: 3 keys" in ln for ln in plan), plan
        assert any("DP aggregate over public.shops: 3 linear queries" in ln for ln in plan), plan
        # A value list of a public column filtered on another: only values many users hold under the filter
        # (the few platinum users are not enough), one more selection.
        tiers = conn.execute("SELECT DISTINCT tier FROM shops WHERE state = 'WA'").fetchall()
        assert sorted(r[0] for r in tiers) == ["bronze", "gold", "silver"]
        assert _ledger(shops_proxy)[1] == before + 2
        # Unfiltered (or filtered on itself) it stays the public domain, free.
        assert len(conn.execute("SELECT tier FROM shops GROUP BY tier").fetchall()) == 4
        assert _ledger(shops_proxy)[1] == before + 2
        # Conditions on the private column itself are refused, and the connection keeps serving.
        with pytest.raises(psycopg.errors.FeatureNotSupported):
            conn.execute("SELECT COUNT(*) FROM shops WHERE city = 'Seattle'")
        assert conn.execute("SELECT COUNT(*) FROM shops WHERE state = 'OR'").fetchone() is not None


def test_selections_replay_after_restart(shops_proxy: Any) -> None:
    q = "SELECT city, COUNT(*) FROM shops GROUP BY city ORDER BY city"
    with psycopg.connect(shops_proxy.dsn(), autocommit=True) as conn:
        first = conn.execute(q).fetchall()
    parts, spends = _ledger(shops_proxy)
    shops_proxy.stop()
    shops_proxy.start()
    with psycopg.connect(shops_proxy.dsn(), autocommit=True) as conn:
        assert conn.execute(q).fetchall() == first  # the stored keys and the stored answers
        rows = conn.execute("SELECT city FROM shops WHERE state = 'WA' GROUP BY city").fetchall()
        assert sorted(r[0] for r in rows) == ["Seattle", "Spokane", "Tacoma"]
        tiers = conn.execute("SELECT tier FROM shops WHERE state = 'WA' GROUP BY tier").fetchall()
        assert sorted(r[0] for r in tiers) == ["bronze", "gold", "silver"]
    assert _ledger(shops_proxy) == (parts, spends)  # nothing drawn or charged again


def test_count_distinct_over_selected_and_private_keys(shops_proxy: Any) -> None:
    """COUNT(DISTINCT user_id) per released city (each user in at most g = 2 cities, as here: the bounded
    figure is PostgreSQL's), and COUNT(DISTINCT city) per state, a private-keys column's stored values
    counted (each user holds at most g (state, city) pairs: sensitivity 2), both within 5 stated stderrs."""

    with psycopg.connect(shops_proxy.dsn(), autocommit=True) as conn:
        conn.execute("SET lapras.show_stderr = on")
        notices: list[str] = []
        conn.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
        users = conn.execute("SELECT city, COUNT(DISTINCT user_id) FROM shops GROUP BY city ORDER BY city").fetchall()
        cities = conn.execute("SELECT state, COUNT(DISTINCT city) FROM shops GROUP BY state ORDER BY state").fetchall()
    sds = [max(parse_provenance([n])[1]) for n in notices if "stderr=[" in n]
    assert len(sds) >= 2 and all(0 < s < 20 for s in sds)
    with psycopg.connect(shops_proxy.upstream_dsn) as conn:
        exact_users = dict(conn.execute("SELECT city, count(DISTINCT user_id) FROM shops GROUP BY city").fetchall())
        exact_cities = dict(conn.execute("SELECT state, count(DISTINCT city) FROM shops GROUP BY state").fetchall())
    assert [r[0] for r in users] == sorted(POPULAR)  # only the released keys
    for city, n in users:
        assert abs(n - exact_users[city]) <= 5 * sds[-2] + 1, (city, n, exact_users[city])
    assert [r[0] for r in cities] == ["OR", "WA"] and exact_cities == {"OR": 1, "WA": 3 + len(RARE)}
    for state, n in cities:
        assert abs(n - exact_cities[state]) <= 5 * sds[-1] + 1, (state, n, exact_cities[state])


def test_filter_clause_on_private_keys_is_refused_and_charges_nothing(shops_proxy: Any) -> None:
    """`COUNT(*) FILTER (WHERE city LIKE 'S%')` over a private-keys column: the column has no cells before a
    selection, so the FILTER once read nothing and answered an exact, data-independent 0 (and `IS NULL`
    every row). Refused as WHERE is (0A000), nothing spent, the session keeps serving."""
    with psycopg.connect(shops_proxy.upstream_dsn, autocommit=True) as up:
        (before,) = up.execute("SELECT count(*) FROM lapras.spends").fetchone()  # type: ignore[misc]
    with psycopg.connect(shops_proxy.dsn(), autocommit=True) as conn:
        for sql in ("SELECT COUNT(*) FILTER (WHERE city LIKE 'S%') FROM shops",
                    "SELECT count(*) FILTER (WHERE city IS NULL) FROM shops",
                    "SELECT state, SUM(amount) FILTER (WHERE upper(city) = 'SEATTLE') FROM shops GROUP BY state"):
            with pytest.raises(psycopg.errors.FeatureNotSupported) as info:
                conn.execute(sql)
            assert "private keys" in str(info.value), sql
        assert conn.execute("SELECT COUNT(*) FILTER (WHERE state = 'OR') FROM shops").fetchone() is not None
    with psycopg.connect(shops_proxy.upstream_dsn, autocommit=True) as up:
        (after,) = up.execute("SELECT count(*) FROM lapras.spends").fetchone()  # type: ignore[misc]
    assert after <= before + 1  # the last statement's release only


def test_huge_budget_selects_filtered_value_lists(harness: Any, embedded_pg: Any, default_config: Any,
                                                  tmp_path: Any) -> None:
    """At epsilon = 1e5 a selection's event delta, delta e^-epsilon, once rounded to 0 and every filtered
    value list (Power BI's slicer shape) was XX000 from the threshold's calibration; the part is now spent at
    the largest epsilon whose delta share stays representable (sound: a guarantee at a smaller epsilon holds
    at the configured one). Popular towns are held by >= 300 users and rare ones by one, so at this budget
    the released set is exact except with probability far below 1e-12: false-failure rate under 1e-12."""
    dsn = harness.demo_database(embedded_pg, default_config, "shops_huge")
    rows = [(1000 * i + u, c, s, 10, "gold") for i, (c, (s, n)) in enumerate(POPULAR.items()) for u in range(n)]
    rows += [(10_000 + i, c, "WA", 10, "gold") for i, c in enumerate(RARE)]
    with psycopg.connect(dsn, autocommit=True) as conn:
        fill_table(conn, "shops (user_id bigint, city text, state text, amount integer, tier text)", rows)
    p = harness.start_test_proxy(tmp_path, dsn, epsilon=1e5, delta=1e-5, stream_length=100, extra=TABLE,
                                 privacy_extra="partition_fraction = 0.25\npartition_selections = 4")
    try:
        with psycopg.connect(p.dsn(), autocommit=True) as conn:
            slicer = ('select "rows"."city" as "city" from (select "_"."city" from "public"."shops" "_" '
                      "where \"_\".\"state\" = 'WA' group by \"_\".\"city\") \"rows\" limit 1000001")
            got = sorted(r[0] for r in conn.execute(slicer).fetchall())
            assert got == ["Seattle", "Spokane", "Tacoma"]
            plan = [r[0] for r in conn.execute("EXPLAIN SELECT city FROM shops WHERE state = 'OR' GROUP BY city")]
            assert "DP partition selection" in plan[0], plan
            budget = dict(conn.execute("SHOW lapras.budget").fetchall())
            assert float(budget["partition.spent.epsilon"]) <= float(budget["partition.budget.epsilon"])
    finally:
        p.stop()
