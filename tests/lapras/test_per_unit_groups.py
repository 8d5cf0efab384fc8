"""GROUP BY on a column declared ``per_unit`` (an attribute of the privacy unit) under ``bounding =
"statement"``: the statement is bounded one group per unit with up to k rows in it (g = 1, c = k), which
is enforced, not trusted. Checked here: which statements qualify, the sensitivity the engine calibrates on,
the rows the pushed-down SQL keeps (against the rule applied independently over PostgreSQL's own hashes,
and against PostgreSQL's own GROUP BY over each unit's k rows where the declaration is true), and a red
team over neighbouring databases: removing any unit, including ones whose "per-unit" value varies, or
adding a heavy one spread over every group, moves the answers by at most the stated sensitivity."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import psycopg
import pytest

import parser as sqlparser
from lapras import Engine
from lapras.exact import PostgresExactSource
from lapras.mechanisms.sensitivity import group_bound_norm, statement_sensitivity
from parser.model.schema import Attribute, Catalog, IntType, TableSchema
from parser.pushdown.bounding import bounding_seed, statement_groups
from tests.fixtures.engine_helpers import events_database, hashed_events

K, C, G, B = 10, 2, 3, 60.0
EVENTS = TableSchema("events", (Attribute("day", IntType(0, 363)), Attribute("kind", IntType(0, 4), per_unit=True),
                                Attribute("amount", IntType(0, 99))), privacy_unit="user_id",
                     max_rows_per_unit=K, max_rows_per_group=C, max_groups_per_unit=G)
"""``kind`` declared an attribute of the unit; c = 2 and g = 3 apply to every other GROUP BY."""
NOT_DECLARED = replace(EVENTS, attributes=tuple(replace(a, per_unit=False) for a in EVENTS.attributes), _by_name={})
CLAMPED = replace(EVENTS, max_sum_per_group=(("amount", B),))
PLAIN = replace(EVENTS, max_rows_per_group=None, max_groups_per_unit=None)  # c = g = k: the k bound alone
ROWLEVEL = replace(PLAIN, privacy_unit=None, max_rows_per_unit=1)


def _plan(sql: str, table: TableSchema = EVENTS):  # type: ignore[no-untyped-def]
    return sqlparser.plan_query(sql, Catalog((table,)))


def _groups(sql: str, table: TableSchema = EVENTS):  # type: ignore[no-untyped-def]
    return statement_groups(table, _plan(sql, table).queries)


def test_a_group_by_on_per_unit_columns_only_is_bounded_per_unit() -> None:
    by_kind = _groups("SELECT kind, count(*), avg(amount) FROM events WHERE day < 100 AND amount > 5 GROUP BY kind")
    assert by_kind is not None and by_kind.per_unit and by_kind.attr == "kind" and by_kind.count == 5
    assert (by_kind.rows(EVENTS), by_kind.units(EVENTS)) == (K, 1)
    # FILTER aggregates reading other columns inside each group: still grouped by kind only.
    filtered = _groups("SELECT kind, count(*), count(*) FILTER (WHERE day < 50) FROM events GROUP BY kind")
    assert filtered is not None and filtered.per_unit
    # The WHERE may pin any column: one set of it, not a split.
    assert _groups("SELECT kind, count(*) FROM events WHERE day = 7 GROUP BY kind").per_unit  # type: ignore[union-attr]
    # Another column splits the statement too: the table's c and g.
    both = _groups("SELECT kind, day, count(*) FROM events WHERE day < 10 GROUP BY kind, day")
    assert both is not None and not both.per_unit and both.attr == "day"
    assert (both.rows(EVENTS), both.units(EVENTS)) == (C, G)
    pivot = _groups("SELECT kind, count(*) FILTER (WHERE amount < 50), count(*) FILTER (WHERE amount >= 50) "
                    "FROM events GROUP BY kind")
    assert pivot is not None and not pivot.per_unit
    by_day = _groups("SELECT day, count(*) FROM events WHERE day < 30 GROUP BY day")
    assert by_day is not None and not by_day.per_unit
    # Not declared: the table's bounds; no GROUP BY: the k bound.
    undeclared = _groups("SELECT kind, count(*) FROM events GROUP BY kind", NOT_DECLARED)
    assert undeclared is not None and not undeclared.per_unit
    assert _groups("SELECT count(*) FROM events WHERE kind = 1") is None
    # c = g = k: per-unit groups would bound no tighter than the k bound: none (unless a SUM is clamped).
    assert _groups("SELECT kind, count(*) FROM events GROUP BY kind", PLAIN) is None
    clamped_only = replace(PLAIN, max_sum_per_group=(("amount", B),))
    grouped = _groups("SELECT kind, sum(amount) FROM events GROUP BY kind", clamped_only)
    assert grouped is not None and grouped.per_unit and grouped.clamps == (("amount", B),)


def _calibrated(table: TableSchema, sql: str):  # type: ignore[no-untyped-def]
    eng = Engine.__new__(Engine)
    eng.exact = PostgresExactSource("dbname=unused")  # no connection is opened: bounds are a function of the SQL
    q = list(_plan(sql, table).queries)
    return eng.calibration(table, q)


def test_the_sensitivity_is_k_times_the_column_norm_with_no_c_cut() -> None:
    """Counts by kind: per-unit k = 10 (as with no GROUP BY), not group_bound_norm(10, 2, 3) = sqrt(12);
    count and clamped sum by kind: counts k, each clamped sum scaled by min(B, k x 99) = B and adding 1 in
    g = 1 group: sqrt(100 + 1) (sqrt(12 + 3) when kind is not declared)."""
    sql = "SELECT kind, count(*) FROM events WHERE day < 250 GROUP BY kind"
    effective, sensitivity = _calibrated(EVENTS, sql)
    row = statement_sensitivity(ROWLEVEL, _plan(sql, ROWLEVEL).queries)
    assert sensitivity(effective, None) == pytest.approx(K * row) == pytest.approx(group_bound_norm(K, K, 1, 5))
    effective, sensitivity = _calibrated(NOT_DECLARED, sql)
    assert sensitivity(effective, None) == pytest.approx(np.sqrt(12))
    both = "SELECT kind, count(*), sum(amount) FROM events WHERE day < 250 GROUP BY kind"
    effective, sensitivity = _calibrated(CLAMPED, both)
    assert all(e.sensitivity == B for e in effective if e.value is not None)
    assert sensitivity(effective, None) == pytest.approx(np.sqrt(K * K + 1))
    undeclared = replace(NOT_DECLARED, max_sum_per_group=(("amount", B),))
    effective, sensitivity = _calibrated(undeclared, both)
    assert sensitivity(effective, None) == pytest.approx(np.sqrt(12 + 3))


HONEST, LIARS = 300, 100


def _rows() -> list[tuple[int, int, int, int]]:
    """300 units with one kind each and 1-25 rows (many above c and k), 100 whose "per-unit" kind varies
    (1-40 rows over 2-5 kinds)."""
    rng = np.random.default_rng(23)
    out = []
    for u in range(HONEST + LIARS):
        kinds = [int(rng.integers(0, 5))] if u < HONEST else list(rng.choice(5, int(rng.integers(2, 6)), replace=False))
        for _ in range(int(rng.integers(1, 26 if u < HONEST else 41))):
            out.append((u, int(rng.integers(0, 364)), int(rng.choice(kinds)), int(rng.integers(0, 100))))
    return out


@pytest.fixture(scope="module")
def db(embedded_pg) -> str:  # type: ignore[no-untyped-def]
    return events_database(embedded_pg, "perunit", _rows())


@pytest.fixture(scope="module")
def honest_db(embedded_pg) -> str:  # type: ignore[no-untyped-def]
    return events_database(embedded_pg, "perunit_honest", (r for r in _rows() if r[0] < HONEST))


def _kept_by_rule(dsn: str, where: str, clamp: float | None = None) -> dict[int, tuple[int, float]]:
    """(count, sum of amount) per kind under the per-unit rule applied here in Python to PostgreSQL's
    hashes: per unit, the kind first in the order of the hash of (unit ':' kind), then its k rows first
    in the order of the hash of the row's text; with ``clamp``, each unit's amounts times min(1, B / sum)."""
    rows, ghash = hashed_events(dsn, EVENTS, where, HONEST + LIARS)
    units: dict[int, list[tuple[int, str, int, int]]] = {}
    for u, kind, amount, h, text in rows:
        units.setdefault(u, []).append((h, text, kind, amount))
    out = {v: (0, 0.0) for v in range(5)}
    for u, mine in units.items():
        kind = min({r[2] for r in mine}, key=lambda v: (ghash[f"{u}:{v}"], str(v)))
        kept = sorted((r for r in mine if r[2] == kind), key=lambda r: (r[0], r[1]))[:K]
        total = sum(r[3] for r in kept)
        factor = min(1.0, clamp / total) if clamp is not None and total else 1.0
        n, s = out[kind]
        out[kind] = (n + len(kept), s + factor * total)
    return out


def _by_key(plan, got: np.ndarray) -> dict[int, list[float]]:  # type: ignore[no-untyped-def]
    return {key[0]: [float(got[i]) for i in slots] for key, slots in zip(plan.group_keys, plan.slots, strict=True)}


def test_the_sql_keeps_each_units_rows_in_one_group(db: str) -> None:
    """Every unit, those whose kind varies included, keeps rows in one kind only, at most k of them."""
    src = PostgresExactSource(db)
    for table, clamp in ((EVENTS, None), (CLAMPED, B)):
        for where in ("day < 200", "day >= 100 AND amount < 90", "TRUE"):
            plan = _plan(f"SELECT kind, count(*), sum(amount) FROM events WHERE {where} GROUP BY kind", table)
            groups = src.group_bounds(table, plan.queries)
            assert groups is not None and groups.per_unit
            got = _by_key(plan, src.answers(table, plan.queries))
            want = _kept_by_rule(db, where, clamp)
            for kind, values in got.items():
                np.testing.assert_allclose(values, want[kind], rtol=1e-9, err_msg=f"{where} {kind}")
    src.close()


def test_a_true_declaration_keeps_what_postgresql_counts_over_each_units_k_rows(honest_db: str) -> None:
    """Where each unit has one kind, the answers are PostgreSQL's own GROUP BY over each unit's k rows among
    those the WHERE keeps (no c cut: what the k bound alone keeps), and above the answers under c = 2,
    which cut every unit with more than 2 rows."""
    src = PostgresExactSource(honest_db)
    for where in ("day < 200", "TRUE"):
        sql = f"SELECT kind, count(*), sum(amount) FROM events WHERE {where} GROUP BY kind"
        plan = _plan(sql)
        got = _by_key(plan, src.answers(EVENTS, plan.queries))
        with psycopg.connect(honest_db, autocommit=True) as conn:
            want = {int(k): [float(n), float(s)] for k, n, s in conn.execute(
                f"SELECT kind, count(*), sum(amount) FROM (SELECT e.*, row_number() OVER (PARTITION BY user_id "
                f"ORDER BY hashtextextended(e::text, {bounding_seed(EVENTS)}), e::text) AS n FROM events e "
                f"WHERE {where}) AS t WHERE n <= {K} GROUP BY kind").fetchall()}
        assert got == want, where
        undeclared = _plan(sql, NOT_DECLARED)
        cut = _by_key(undeclared, src.answers(NOT_DECLARED, undeclared.queries))
        assert all(cut[k][0] < got[k][0] for k in got), where
    src.close()


def _answers(dsn: str, table: TableSchema, plan) -> np.ndarray:  # type: ignore[no-untyped-def]
    src = PostgresExactSource(dsn)
    try:
        return src.answers(table, plan.queries)
    finally:
        src.close()


def test_no_unit_moves_the_answers_by_more_than_the_stated_sensitivity(db: str) -> None:
    """Red team over neighbouring databases: for each unit of the 100 whose "per-unit" kind varies and of
    every fifth of the 300 whose kind is constant, the database without it. The answers' change, each divided by the noise
    scale its query is calibrated on, has L2 norm at most the sensitivity the engine states, and falls in
    one kind only; for count and clamped sum by kind that is at most k rows and B of sum."""
    sql = "SELECT kind, count(*), sum(amount) FROM events WHERE day < 300 GROUP BY kind"
    plan = _plan(sql, CLAMPED)
    effective, sensitivity = _calibrated(CLAMPED, sql)
    scales = np.array([e.sensitivity for e in effective])
    stated = sensitivity(effective, None)
    kinds = np.array([key[0] for key, slots in zip(plan.group_keys, plan.slots, strict=True) for _ in slots])
    order = np.argsort([i for slots in plan.slots for i in slots])
    kinds = kinds[order]  # the kind of each query, in query order
    src = PostgresExactSource(db)
    base = src.answers(CLAMPED, plan.queries)
    worst = 0.0
    with psycopg.connect(db, autocommit=True) as conn:
        for u in [*range(0, HONEST, 5), *range(HONEST, HONEST + LIARS)]:
            rows = conn.execute("DELETE FROM events WHERE user_id = %s RETURNING user_id, day, kind, amount",
                                (u,)).fetchall()
            try:
                diff = base - src.answers(CLAMPED, plan.queries)
            finally:
                with conn.cursor() as cur:
                    cur.executemany("INSERT INTO events VALUES (%s, %s, %s, %s)", rows)
            assert (diff >= -1e-9).all() and len(set(kinds[np.abs(diff) > 1e-9])) <= 1, u
            worst = max(worst, float(np.linalg.norm(diff / scales)))
            assert np.linalg.norm(diff / scales) <= stated + 1e-9, u
    assert worst > 0.9 * stated  # some unit comes close: the bound is tight, not vacuous
    np.testing.assert_allclose(src.answers(CLAMPED, plan.queries), base)  # every unit is back
    src.close()


def test_a_heavy_unit_spread_over_every_group_counts_in_one(db: str, embedded_pg) -> None:  # type: ignore[no-untyped-def]
    """Red team: a unit of 500 rows over every kind and day (its "per-unit" kind varies on every row) adds
    at most k rows and B of sum, to one kind only, under the per-unit bound; declared so or not, it never
    moves the answers by more than the stated sensitivity."""
    heavy = events_database(embedded_pg, "perunit_heavy", ((999999, i % 364, i % 5, i % 100) for i in range(1, 501)),
                            template="perunit")
    sql = "SELECT kind, count(*), sum(amount) FROM events WHERE day < 300 GROUP BY kind"
    for table in (CLAMPED, replace(NOT_DECLARED, max_sum_per_group=(("amount", B),))):
        plan = _plan(sql, table)
        effective, sensitivity = _calibrated(table, sql)
        diff = _answers(heavy, table, plan) - _answers(db, table, plan)
        assert (diff >= 0).all()
        assert np.linalg.norm(diff / np.array([e.sensitivity for e in effective])) <= sensitivity(effective, None) + 1e-9
        if table is CLAMPED:
            counts = [diff[slots[0]] for slots in plan.slots]
            sums = [diff[slots[1]] for slots in plan.slots]
            assert sorted(counts)[-1] == K and sum(counts) == K and max(sums) <= B + 1e-9


def test_the_declaration_survives_the_catalog_rewrites() -> None:
    """Partition selection's released keys and value lists replace a column's domain, not its declaration."""
    from parser.bind.partition import selected_table
    from parser.model.schema import TextType, with_value_lists

    table = TableSchema("t", (Attribute("region", TextType(values=("a", "b"), values_from="public.r.name"),
                                        per_unit=True),), privacy_unit="u", max_rows_per_unit=3)
    selected = selected_table(table, ["region"], [("x",), ("y",)])
    assert selected.attribute("region").per_unit  # type: ignore[union-attr]
    listed = with_value_lists(Catalog((table,)), {"public.r.name": ["c", "d"]}).tables[0]
    assert listed.attribute("region").domain.values == ("c", "d")  # type: ignore[union-attr]
    assert listed.attribute("region").per_unit  # type: ignore[union-attr]
