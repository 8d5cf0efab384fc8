"""Per-group contribution bounds (``max_rows_per_group`` c, ``max_groups_per_unit`` g, k in all) under
``bounding = "statement"``: the sensitivity factor against brute force, the groups a statement is cut
into, the rows the pushed-down SQL keeps against an independent implementation of the rule over
PostgreSQL's own hashes, and the noise the real engine adds against its calibrated sigma."""

from __future__ import annotations

import itertools
from dataclasses import replace

import numpy as np
import psycopg
import pytest
from scipy.stats import chi2

import lapras.exact
import parser as sqlparser
from lapras import Engine, EngineSettings, MemoryLedger, Prediction
from lapras.exact import PostgresExactSource
from lapras.mechanisms.sensitivity import group_bound_norm, statement_sensitivity
from parser.model.schema import Attribute, Catalog, IntType, TableSchema
from parser.pushdown.bounding import statement_groups
from tests.fixtures.engine_helpers import events_database, hashed_events

K, C, G = 10, 2, 2
EVENTS = TableSchema("events", (Attribute("day", IntType(0, 363)), Attribute("kind", IntType(0, 4)),
                                Attribute("amount", IntType(0, 99))), privacy_unit="user_id",
                     max_rows_per_unit=K, max_rows_per_group=C, max_groups_per_unit=G)
ROWLEVEL = replace(EVENTS, privacy_unit=None, max_rows_per_unit=1, max_rows_per_group=None, max_groups_per_unit=None)


def _brute(k: int, c: int, g: int, groups: int) -> float:
    best = 0
    for n in itertools.product(range(c + 1), repeat=groups):
        if sum(n) <= k and sum(1 for v in n if v) <= g:
            best = max(best, sum(v * v for v in n))
    return float(np.sqrt(best))


def test_group_bound_norm_is_the_brute_force_maximum() -> None:
    for k in range(1, 9):
        for c in range(1, 9):
            for g in range(1, 6):
                for groups in range(1, 6):
                    assert group_bound_norm(k, c, g, groups) == pytest.approx(_brute(k, c, g, groups)), (k, c, g, groups)
    assert group_bound_norm(10, 2, 2) == pytest.approx(np.sqrt(8))  # sqrt(g) c when g c <= k
    assert group_bound_norm(10, 10, 10) == 10  # c = g = k: the k bound
    assert group_bound_norm(10, 3, 5) == pytest.approx(np.sqrt(3 * 9 + 1))  # 3 + 3 + 3 + 1


def _plan(sql: str, table: TableSchema = EVENTS):  # type: ignore[no-untyped-def]
    return sqlparser.plan_query(sql, Catalog((table,)))


def test_the_statements_groups() -> None:
    by_kind = statement_groups(EVENTS, _plan("SELECT kind, count(*), avg(amount) FROM events WHERE day < 100 "
                                             "GROUP BY kind").queries)
    assert by_kind is not None and by_kind.attr == "kind" and by_kind.count == 5
    # 364 days, each one cell: the group key is the cell itself (no CASE).
    assert statement_groups(EVENTS, _plan("SELECT day, count(*) FROM events GROUP BY day").queries).count == 364  # type: ignore[union-attr]
    # No GROUP BY, FILTER aggregates reading overlapping cells, the default c = g = k: the k bound.
    assert statement_groups(EVENTS, _plan("SELECT count(*) FROM events WHERE kind = 1").queries) is None
    overlap = _plan("SELECT count(*) FILTER (WHERE day < 100), count(*) FILTER (WHERE day < 200) FROM events")
    assert statement_groups(EVENTS, overlap.queries) is None
    plain = replace(EVENTS, max_rows_per_group=None, max_groups_per_unit=None)
    assert statement_groups(plain, _plan("SELECT kind, count(*) FROM events GROUP BY kind", plain).queries) is None
    # The sensitivity: the largest column norm times group_bound_norm, never above k times it.
    q = _plan("SELECT kind, count(*), sum(amount) FROM events GROUP BY kind").queries
    row = statement_sensitivity(ROWLEVEL, q)
    assert statement_sensitivity(EVENTS, q, unit_norm=group_bound_norm(K, C, G, 5)) == pytest.approx(np.sqrt(8) * row)
    assert statement_sensitivity(EVENTS, q) == pytest.approx(K * row)


@pytest.fixture(scope="module")
def db(embedded_pg) -> str:  # type: ignore[no-untyped-def]
    """600 units with 1-30 rows over the year and the kinds, so many units exceed c, g or k."""
    rng = np.random.default_rng(5)
    return events_database(embedded_pg, "groupbounds",
                           ((u, int(rng.integers(0, 364)), int(rng.integers(0, 5)), int(rng.integers(0, 100)))
                            for u in range(600) for _ in range(int(rng.integers(1, 31)))))


def _kept_per_unit(dsn: str, where: str, c: int = C, g: int = G,
                   k: int | None = K) -> list[tuple[list[int], list[tuple[int, str, int, int]]]]:
    """Each unit's kept kinds and kept rows (hash, text, kind, amount) under the per-group rule, applied
    here in Python to PostgreSQL's hashes of each row's text and of each unit's group keys (unit ':' the
    group's first cell): c rows in each of g kinds, then (``k`` not None) k in all."""
    rows, ghash = hashed_events(dsn, EVENTS, where, 599)
    units: dict[int, list[tuple[int, str, int, int]]] = {}
    for u, kind, amount, h, text in rows:
        units.setdefault(u, []).append((h, text, kind, amount))
    out = []
    for u, mine in units.items():
        kinds = sorted({r[2] for r in mine}, key=lambda v: (ghash[f"{u}:{v}"], str(v)))[:g]
        per = [r for v in kinds for r in sorted((r for r in mine if r[2] == v), key=lambda r: (r[0], r[1]))[:c]]
        out.append((kinds, sorted(per, key=lambda r: (r[0], r[1]))[:k]))
    return out


def _kept_by_rule(dsn: str, where: str) -> dict[int, tuple[int, int]]:
    """(count, sum of amount) per kind over the rows the per-group rule keeps."""
    out = {v: (0, 0) for v in range(5)}
    for _, kept in _kept_per_unit(dsn, where):
        for _, _, kind, amount in kept:
            n, s = out[kind]
            out[kind] = (n + 1, s + amount)
    return out


def test_the_sql_keeps_the_rows_the_rule_keeps(db: str) -> None:
    src = PostgresExactSource(db)
    for where in ("day < 200", "day >= 100 AND amount < 90", "TRUE"):
        plan = _plan(f"SELECT kind, count(*), sum(amount) FROM events WHERE {where} GROUP BY kind")
        assert src.group_bounds(EVENTS, plan.queries) is not None
        got = src.answers(EVENTS, plan.queries)
        want = _kept_by_rule(db, where)
        for key, slots in zip(plan.group_keys, plan.slots, strict=True):
            assert [got[i] for i in slots] == list(want[key[0]]), where
        # Each unit in at most g groups with at most c rows each: at most g c rows in all.
        assert sum(n for n, _ in want.values()) <= 600 * G * C
    src.close()


def _engine(table: TableSchema, dsn: str) -> Engine:
    return Engine(Catalog((table,)), MemoryLedger(), PostgresExactSource(dsn),
                  EngineSettings(split="equal", rho_estimate=0.5, joint_max_cells=0),
                  predictions=lambda _catalog: Prediction([], 12, 0.5))


def test_a_fresh_statement_finds_its_groups_once(db: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The engine's calibration and the exact source's rows come from one ``statement_groups`` call."""
    calls: list[int] = []
    real = lapras.exact.statement_groups
    monkeypatch.setattr(lapras.exact, "statement_groups", lambda t, qs: calls.append(len(qs)) or real(t, qs))
    eng = _engine(EVENTS, db)
    answer = eng.answer(_plan("SELECT kind, count(*) FROM events WHERE day < 50 GROUP BY kind"))
    assert answer.outcome == "bad" and calls == [5]
    eng.close()


@pytest.mark.slow
def test_the_noise_of_a_per_group_bounded_statement_is_its_calibrated_sigma(db: str) -> None:
    """Through the real engine and PostgreSQL, count and SUM(amount) by kind with per-group bounds and the
    sum clamped to B = 60 per unit and group: each count's stated standard error is sqrt(8 + 2) / sqrt(2)
    times the row-level one (counts: sqrt(g) c = sqrt(8); clamped sums: 1 in each of g = 2 groups; the
    row-level statement's column norm: sqrt(2)), each sum's that times 60 / 99 (scaled by B, not by the
    row maximum 99); and the sum of (error / stated stderr)^2 over 40 independent epochs of 10 answers,
    errors from the bounded and clamped exact answers, is chi-square with 400 degrees of freedom
    (two-sided, false-failure rate 1e-4)."""
    sql = "SELECT kind, count(*), sum(amount) FROM events WHERE day < 250 GROUP BY kind"
    truth_src = PostgresExactSource(db)
    plan = _plan(sql, CLAMPED)
    truth = truth_src.answers(CLAMPED, plan.queries)
    is_sum = np.array([q.value is not None for q in plan.queries])
    ratio = np.where(is_sum, np.sqrt(5) * B / 99, np.sqrt(5))
    stat, df = 0.0, 0
    for _ in range(40):
        unit, row = _engine(CLAMPED, db), _engine(ROWLEVEL, db)
        a = unit.answer(_plan(sql, CLAMPED), "u")
        b = row.answer(_plan(sql, ROWLEVEL), "u")
        assert a.outcome == "bad"
        np.testing.assert_allclose(a.stderrs, ratio * b.stderrs, rtol=1e-9)
        stat += float((((a.values - truth) / a.stderrs) ** 2).sum())
        df += len(truth)
        unit.close()
        row.close()
    assert chi2.ppf(0.5e-4, df) < stat < chi2.ppf(1 - 0.5e-4, df)
    truth_src.close()


def test_one_heavy_unit_moves_the_answers_by_at_most_its_bounds(db: str, embedded_pg) -> None:  # type: ignore[no-untyped-def]
    """Red team: neighbouring databases, with and without one unit of 500 rows spread over every kind and
    day. Its effect on a per-group bounded GROUP BY is at most c in each group and in at most g groups
    (L2 at most group_bound_norm), on a clamped SUM at most B in each of at most g groups; on the same
    statement without per-group bounds at most k in all; no other unit's rows change."""
    heavy = events_database(embedded_pg, "groupbounds_heavy",
                            ((999999, i % 364, i % 5, i % 100) for i in range(1, 501)), template="groupbounds")
    plan = _plan("SELECT kind, sum(amount) FROM events WHERE day < 300 GROUP BY kind", CLAMPED)
    without, with_ = PostgresExactSource(db), PostgresExactSource(heavy)
    diff = with_.answers(CLAMPED, plan.queries) - without.answers(CLAMPED, plan.queries)
    assert (diff >= 0).all() and diff.max() <= B + 1e-9 and (diff > 0).sum() <= G  # its sum in a kind: at most B
    without.close()
    with_.close()
    plain = replace(EVENTS, max_rows_per_group=None, max_groups_per_unit=None)
    for table, bound in ((EVENTS, group_bound_norm(K, C, G, 5)), (plain, float(K))):
        plan = _plan("SELECT kind, count(*) FROM events WHERE day < 300 GROUP BY kind", table)
        without, with_ = PostgresExactSource(db), PostgresExactSource(heavy)
        diff = with_.answers(table, plan.queries) - without.answers(table, plan.queries)
        assert (diff >= 0).all() and np.linalg.norm(diff) <= bound + 1e-9
        if table is EVENTS:
            assert diff.max() <= C and (diff > 0).sum() <= G and np.linalg.norm(diff) == pytest.approx(bound)
        else:
            assert diff.sum() == K
        without.close()
        with_.close()


B = 60.0
CLAMPED = replace(EVENTS, max_sum_per_group=(("amount", B),))


def _clamped_by_rule(dsn: str, where: str) -> dict[int, tuple[int, float]]:
    """(count, clamped sum of amount) per kind: the rows the per-group rule keeps, then each unit's amounts
    in a kind times min(1, B / their sum)."""
    out = {v: (0, 0.0) for v in range(5)}
    for kinds, kept in _kept_per_unit(dsn, where):
        for v in kinds:
            amounts = [r[3] for r in kept if r[2] == v]
            total = sum(abs(a) for a in amounts)
            factor = min(1.0, B / total) if total else 1.0
            n, s = out[v]
            out[v] = (n + len(amounts), s + factor * sum(amounts))
    return out


def test_a_clamped_sum_is_each_units_group_sum_clamped(db: str) -> None:
    src = PostgresExactSource(db)
    for where in ("day < 200", "TRUE"):
        plan = _plan(f"SELECT kind, count(*), sum(amount) FROM events WHERE {where} GROUP BY kind", CLAMPED)
        groups = src.group_bounds(CLAMPED, plan.queries)
        assert groups is not None and groups.clamps == (("amount", B),) and groups.per_group == 1
        got = src.answers(CLAMPED, plan.queries)
        want = _clamped_by_rule(db, where)
        for key, slots in zip(plan.group_keys, plan.slots, strict=True):
            np.testing.assert_allclose([got[i] for i in slots], want[key[0]], rtol=1e-9, err_msg=where)
    # Only SUM(amount) of a GROUP BY: with c = g = k (no row bounds per group) the clamp alone applies.
    only = replace(CLAMPED, max_rows_per_group=None, max_groups_per_unit=None)
    plan = _plan("SELECT kind, sum(amount) FROM events GROUP BY kind", only)
    assert src.group_bounds(only, plan.queries) is not None
    assert src.group_bounds(only, _plan("SELECT sum(amount) FROM events", only).queries) is None  # one group
    src.close()


def test_the_engine_scales_a_clamped_sum_by_b_and_adds_its_groups() -> None:
    """Sensitivity of count and clamped sum by kind: counts sqrt(g) c = sqrt(8) (column norm 1 without
    the sum), sums 1 (normalised by B = 60 < c x 99) in min(g, k, 5) = 2 groups: sqrt(8 + 2)."""
    src = PostgresExactSource("dbname=unused")  # no connection is opened: bounds are a function of the SQL
    eng = Engine.__new__(Engine)
    eng.exact = src
    q = _plan("SELECT kind, count(*), sum(amount) FROM events WHERE day < 250 GROUP BY kind", CLAMPED).queries
    effective, sensitivity = eng.calibration(CLAMPED, list(q))
    sums = [e for e in effective if e.value is not None]
    assert sums and all(e.sensitivity == B for e in sums)
    assert sensitivity(effective, None) == pytest.approx(np.sqrt(10))
    assert sensitivity([e for e in effective if e.value is None], None) == pytest.approx(np.sqrt(8))
    assert sensitivity(sums, None) == pytest.approx(np.sqrt(2))


def test_no_group_is_the_one_every_unit_leaves_out(db: str) -> None:
    """With g = 1 each unit keeps one of its kinds, drawn per unit: every kind keeps a fair share of the
    units (the draw was once by the kind alone, so every unit kept the same kind). Both bounds: the
    rows of a GROUP BY (``grouped_rows_sql``) and the units present of COUNT(DISTINCT) (``unit_cells_sql``).
    Deterministic (seeded hashes of fixed data): 600 units, about 120 a kind; the bound is loose."""
    from parser.pushdown.bounding import grouped_rows_sql
    from parser.pushdown.sql import cell_expr, unit_cells_sql

    one = replace(EVENTS, max_groups_per_unit=1)
    groups = statement_groups(one, _plan("SELECT kind, count(*) FROM events GROUP BY kind", one).queries)
    assert groups is not None
    rows = f"SELECT kind, count(DISTINCT user_id) FROM ({grouped_rows_sql(one, None, groups)}) AS r GROUP BY kind"
    units = f"SELECT c0, count(*) FROM ({unit_cells_sql(one, [cell_expr(one.attribute('kind'))])}) AS u GROUP BY c0"  # type: ignore[arg-type]
    with psycopg.connect(db, autocommit=True) as conn:
        for sql in (rows, units):
            per_kind = [n for _, n in conn.execute(sql).fetchall()]
            assert len(per_kind) == 5 and sum(per_kind) == 600 and min(per_kind) > 80, (sql, per_kind)


WIDE = replace(EVENTS, max_rows_per_group=5, max_groups_per_unit=5)  # g c = 25 > k = 10


def test_a_group_by_keeps_c_rows_in_each_of_g_groups_with_no_total_k(db: str, embedded_pg) -> None:  # type: ignore[no-untyped-def]
    """Red team, g c = 25 above k = 10 (issue 23: k bounds statements without groups; a GROUP BY's bound
    follows from g and c, so a year read by month keeps c rows a month). The pushed-down rows are the
    rule's (c = 5 rows in each of g = 5 kinds, no cut to k); a unit with 500 rows over every kind moves the
    counts by exactly c in each of the 5 kinds, L2 sqrt(g) c = 11.18, above k, and that is the sensitivity
    the engine calibrates on (never capped at k); a statement without groups still keeps k rows."""
    heavy = events_database(embedded_pg, "groupbounds_heavy_wide",
                            ((999999, i % 364, i % 5, i % 100) for i in range(1, 501)), template="groupbounds")
    src = PostgresExactSource(db)
    plan = _plan("SELECT kind, count(*) FROM events WHERE day < 300 GROUP BY kind", WIDE)
    groups = src.group_bounds(WIDE, plan.queries)
    assert groups is not None and groups.total(WIDE) == 25
    got = src.answers(WIDE, plan.queries)
    want = {v: 0 for v in range(5)}
    for _, kept in _kept_per_unit(db, "day < 300", c=5, g=5, k=None):
        for _, _, kind, _ in kept:
            want[kind] += 1
    assert [int(got[s[0]]) for s in plan.slots] == [want[key[0]] for key in plan.group_keys]
    assert max(len(kept) for _, kept in _kept_per_unit(db, "day < 300", c=5, g=5, k=None)) > K  # k cut nothing
    with_ = PostgresExactSource(heavy)
    diff = with_.answers(WIDE, plan.queries) - got
    assert (diff == 5).all() and np.linalg.norm(diff) == pytest.approx(np.sqrt(5) * 5)
    total = _plan("SELECT count(*) FROM events WHERE day < 300", WIDE)
    assert with_.answers(WIDE, total.queries)[0] - src.answers(WIDE, total.queries)[0] == K
    eng = Engine.__new__(Engine)
    eng.exact = PostgresExactSource("dbname=unused")  # bounds are a function of the SQL: no connection
    effective, sensitivity = eng.calibration(WIDE, list(plan.queries))
    assert sensitivity(effective, None) == pytest.approx(np.sqrt(5) * 5) and np.sqrt(5) * 5 > K
    src.close()
    with_.close()


def test_without_a_declared_c_a_group_by_keeps_k_in_all() -> None:
    """Only g (and a clamped SUM) declared, c unset: the total stays k (``GroupAxis.total`` = min(g c, k)
    with c = k), so counts by kind keep the k bound's sensitivity, N(10, 10, 3) = 10, not sqrt(3) x 10."""
    only_g = replace(EVENTS, max_rows_per_group=None, max_groups_per_unit=3, max_sum_per_group=(("amount", B),))
    q = _plan("SELECT kind, count(*), sum(amount) FROM events GROUP BY kind", only_g).queries
    groups = statement_groups(only_g, q)
    assert groups is not None and groups.total(only_g) == K
    eng = Engine.__new__(Engine)
    eng.exact = PostgresExactSource("dbname=unused")
    effective, sensitivity = eng.calibration(only_g, list(q))
    counts = [e for e in effective if e.value is None]
    assert sensitivity(counts, None) == pytest.approx(K)
