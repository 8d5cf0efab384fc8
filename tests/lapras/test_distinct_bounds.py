"""The sensitivity of COUNT(DISTINCT) statements (``derived_sensitivity``, ``parser.bind.distinct_caps``):
one unit adds at most min(g, values a cell's rows can hold) to a cell and g in all. Checked against brute
force on small domains, against a real PostgreSQL with a neighbouring table (one unit added with its
worst-case rows, and an adversary's), and against the noise the engine releases."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime
from typing import Any

import numpy as np
import pytest
from scipy.stats import chi2

import parser as sqlparser
from lapras.exact import PostgresExactSource
from lapras.mechanisms.sensitivity import capped_norm, derived_sensitivity, statement_sensitivity
from parser.bind.distinct_caps import unit_change_caps
from parser.coltypes.numeric import NumericType
from parser.coltypes.temporal import TimestampType
from parser.model.linear import make_linear_query, space_of
from parser.model.schema import Attribute, Catalog, IntType, TableSchema, TextType
from tests.fixtures.engine_helpers import CachedExactSource, events_database, fresh_engine, light_units

SMALL = TableSchema("ev", (Attribute("day", IntType(0, 2)), Attribute("kind", IntType(0, 2)),
                           Attribute("cat", TextType(values=("a", "b")))),
                    privacy_unit="user_id", max_rows_per_unit=10, max_groups_per_unit=3)
ROWS = list(itertools.product(range(3), range(3), ("a", "b")))  # every cell of SMALL: (day, kind, cat)
Row = tuple[int, int, str]

# (statement, rows it keeps, a row's group key (None: in no group), the value a row counts ("u": the unit))
CASES: list[tuple[str, Callable[[Row], bool], Callable[[Row], Any], Callable[[Row], Any]]] = [
    ("SELECT COUNT(DISTINCT kind) FROM ev", lambda r: True, lambda r: (), lambda r: r[1]),
    ("SELECT COUNT(DISTINCT kind) FROM ev WHERE kind <> 1", lambda r: r[1] != 1, lambda r: (), lambda r: r[1]),
    ("SELECT day, COUNT(DISTINCT kind) FROM ev GROUP BY day", lambda r: True, lambda r: (r[0],), lambda r: r[1]),
    ("SELECT day, COUNT(DISTINCT cat) FROM ev WHERE kind > 0 GROUP BY day", lambda r: r[1] > 0,
     lambda r: (r[0],), lambda r: r[2]),
    ("SELECT kind, COUNT(DISTINCT kind) FROM ev GROUP BY kind", lambda r: True, lambda r: (r[1],), lambda r: r[1]),
    ("SELECT day, cat, COUNT(DISTINCT kind) FROM ev GROUP BY day, cat", lambda r: True,
     lambda r: (r[0], r[2]), lambda r: r[1]),
    ("SELECT day, COUNT(DISTINCT kind) FROM ev WHERE (day = 0 AND kind = 1) OR day > 0 GROUP BY day",
     lambda r: (r[0] == 0 and r[1] == 1) or r[0] > 0, lambda r: (r[0],), lambda r: r[1]),
    ("SELECT day, COUNT(DISTINCT kind) FILTER (WHERE cat = 'a') FROM ev GROUP BY day", lambda r: r[2] == "a",
     lambda r: (r[0],), lambda r: r[1]),
    ("SELECT day / 2, COUNT(DISTINCT day) FROM ev GROUP BY 1", lambda r: True, lambda r: (r[0] // 2,),
     lambda r: r[0]),
    ("SELECT kind, COUNT(DISTINCT day) FROM ev WHERE day < 2 OR kind = 2 GROUP BY kind",
     lambda r: r[0] < 2 or r[1] == 2, lambda r: (r[1],), lambda r: r[0]),
    ("SELECT day, COUNT(DISTINCT user_id) FROM ev GROUP BY day", lambda r: True, lambda r: (r[0],), lambda r: "u"),
    ("SELECT COUNT(DISTINCT user_id) FROM ev WHERE cat = 'b'", lambda r: r[2] == "b", lambda r: (), lambda r: "u"),
]


def _moves(keys: list[tuple[Any, ...]], rows: list[Row], key: Callable[[Row], Any],
           value: Callable[[Row], Any]) -> np.ndarray:
    """Per group, how many values the rows ``rows`` of one new unit add to it (no other unit there)."""
    held: dict[Any, set[Any]] = {}
    for r in rows:
        held.setdefault(key(r), set()).add(value(r))
    return np.array([len(held.get(k, ())) for k in keys], dtype=np.float64)


def _brute(sql: str, g: int, keep: Callable[[Row], bool], key: Callable[[Row], Any],
           value: Callable[[Row], Any]) -> tuple[float, np.ndarray, list[Any]]:
    """The largest L2 move of the statement's answers over every set of at most g rows of one new unit (a unit
    with more rows keeps g of its (group, value) pairs, each held by some g of its rows), and each group's
    largest move alone: the statement's semantics, not the code's."""
    plan = sqlparser.plan_query(sql, Catalog((replace(SMALL, max_groups_per_unit=g),)))
    keys = [tuple(k) for k in plan.group_keys]
    rows = [r for r in ROWS if keep(r)]
    best, alone = 0.0, np.zeros(len(keys))
    for n in range(1, g + 1):
        for s in itertools.combinations(rows, n):
            x = _moves(keys, list(s), key, value)
            best, alone = max(best, float(np.linalg.norm(x))), np.maximum(alone, x)
    return best, alone, keys


@pytest.mark.parametrize("sql, keep, key, value", CASES)
def test_the_sensitivity_is_the_brute_force_largest_move(sql: str, keep: Any, key: Any, value: Any) -> None:
    """Deterministic (false-failure rate 0): for g = 1..4 the computed sensitivity equals the largest move of
    the answers over every row set of one new unit (the bound is sound and tight); each cell's cap is its
    largest move alone; and the brute force over every integer change vector within those caps and a total
    g gives the same maximum (the greedy of ``capped_norm`` is that maximum)."""
    for g in range(1, 5):
        table = replace(SMALL, max_groups_per_unit=g)
        plan = sqlparser.plan_query(sql, Catalog((table,)))
        best, alone, keys = _brute(sql, g, keep, key, value)
        assert statement_sensitivity(table, plan.queries) == pytest.approx(best), (sql, g)
        src = plan.queries[0].source
        axes = len(src.attributes)
        # Caps of the queried cells, from the statement and the domain only, against each group alone.
        by_query = {plan.queries[s[0]].key: i for i, s in enumerate(plan.slots)}
        live = [q for q in plan.queries if not q.is_zero]
        cells = np.array([[dict(q.boxes[0])[f"g{j}"][0][0] for j in range(axes)] for q in live],
                         dtype=np.int64).reshape(len(live), axes)
        caps = unit_change_caps(src, cells)
        np.testing.assert_array_equal(caps, [alone[by_query[q.key]] for q in live])
        # Every integer x with 0 <= x <= caps and sum x <= g: the largest norm, by enumeration.
        feasible = max(math.sqrt(sum(v * v for v in x)) for x in itertools.product(*(range(int(c) + 1) for c in caps))
                       if sum(x) <= g)
        assert feasible == pytest.approx(best)
        assert capped_norm(caps, g) == pytest.approx(best)
        assert best <= g  # never above the former bound, g times the column norm


def test_a_column_whose_cells_hold_many_values_keeps_g() -> None:
    """Deterministic (false-failure rate 0): an hourly timestamp's or a binned number's cells hold many stored
    values, so a unit may add g of them to one group whatever the domain: the general bound g."""
    wide = replace(SMALL, attributes=(*SMALL.attributes,
                                      Attribute("ts", TimestampType(lo=datetime(2026, 1, 1), hi=datetime(2026, 1, 1, 2),
                                                                    resolution="hour")),
                                      Attribute("x", NumericType(lo=0, hi=10, edges=(0, 5, 10)))),
                   max_groups_per_unit=12)
    for sql in ("SELECT COUNT(DISTINCT ts) FROM ev", "SELECT day, COUNT(DISTINCT x) FROM ev GROUP BY day"):
        plan = sqlparser.plan_query(sql, Catalog((wide,)))
        assert statement_sensitivity(wide, plan.queries) == pytest.approx(12)
    plan = sqlparser.plan_query("SELECT COUNT(DISTINCT cat) FROM ev", Catalog((wide,)))
    assert statement_sensitivity(wide, plan.queries) == pytest.approx(2)


def test_overlapping_counts_keep_the_general_bound_and_disjoint_sums_are_exact() -> None:
    """Deterministic (false-failure rate 0): queries over the derived histogram that sum several cells. Over
    disjoint cell sets the greedy over their summed caps is the enumerated maximum; over overlapping sets the
    general bound g x the largest column norm applies, and is above the enumerated maximum."""
    table = replace(SMALL, max_groups_per_unit=4)
    plan = sqlparser.plan_query("SELECT day, cat, COUNT(DISTINCT kind) FROM ev GROUP BY day, cat",
                                Catalog((table,)))
    src = plan.queries[0].source
    sp = space_of(src)
    grid = np.array(list(itertools.product(*(range(a.domain.size) for a in src.attributes))))  # cat x day
    caps = dict(zip(map(tuple, grid), unit_change_caps(src, grid), strict=True))
    assert set(caps.values()) == {3}

    def query(cells: list[tuple[int, int]]):  # type: ignore[no-untyped-def]
        pred = sp.any_of([sp.all_of([sp.cells("g0", [(a, a)]), sp.cells("g1", [(b, b)])]) for a, b in cells])
        return replace(make_linear_query(src, sp, pred), source=src)

    def enumerated(sets: list[list[tuple[int, int]]]) -> float:
        cells = sorted(caps)
        best = 0.0
        for x in itertools.product(*(range(caps[c] + 1) for c in cells)):
            if sum(x) <= 4:
                xs = dict(zip(cells, x, strict=True))
                best = max(best, math.sqrt(sum(sum(xs[c] for c in s) ** 2 for s in sets)))
        return best

    disjoint = [[(0, 0), (1, 0)], [(0, 1)], [(1, 2)]]
    assert derived_sensitivity(src, [query(s) for s in disjoint]) == pytest.approx(enumerated(disjoint))
    assert enumerated(disjoint) == pytest.approx(4)  # all 4 in the first set's two cells
    overlapping = [[(0, 0), (1, 0)], [(1, 0), (0, 1)]]
    bound = derived_sensitivity(src, [query(s) for s in overlapping])
    assert bound == pytest.approx(4 * math.sqrt(2))  # g x the column norm of cell (1, 0)
    assert enumerated(overlapping) <= bound + 1e-9


# --- against a real PostgreSQL --------------------------------------------------------------------------

K, G = 10, 12
EVENTS = TableSchema("events", (Attribute("day", IntType(0, 363)), Attribute("kind", IntType(0, 4)),
                                Attribute("amount", IntType(0, 99))), privacy_unit="user_id",
                     max_rows_per_unit=K, max_groups_per_unit=G)
ROWLEVEL = replace(EVENTS, privacy_unit=None, max_rows_per_unit=1, max_groups_per_unit=None)
STATEMENTS = {
    "distinct kinds": ("SELECT COUNT(DISTINCT kind) FROM events WHERE day >= 360", 5.0),
    "kinds by day": ("SELECT day, COUNT(DISTINCT kind) FROM events WHERE day >= 360 GROUP BY day",
                     math.sqrt(5**2 + 5**2 + 2**2)),
    "kinds by kind": ("SELECT kind, COUNT(DISTINCT kind) FROM events WHERE day >= 300 GROUP BY kind", math.sqrt(5)),
    "days by kind": ("SELECT kind, COUNT(DISTINCT day) FROM events WHERE day >= 300 GROUP BY kind", float(G)),
    "users by day": ("SELECT day, COUNT(DISTINCT user_id) FROM events WHERE day >= 300 GROUP BY day",
                     math.sqrt(G)),
}
NEW = 999_999


@pytest.fixture(scope="module")
def crowd(embedded_pg) -> str:  # type: ignore[no-untyped-def]
    """600 light units on days before 360 (the days after are left for the new unit's own values)."""
    rng = np.random.default_rng(17)
    return events_database(embedded_pg, "distinctbounds", [r for r in light_units(rng, 0) if r[1] < 360])


def _neighbour(embedded_pg: Any, name: str, rows: list[tuple[int, int, int, int]]) -> str:
    return events_database(embedded_pg, name, rows, template="distinctbounds")


WORST = [(NEW, 360 + i // 5, i % 5, 0) for i in range(12)]  # 5 + 5 + 2 (day, kind) pairs: g
ADVERSARY = [(NEW, d, kind, a) for d in range(290, 364) for kind in (-7, 0, 1, 2, 3, 4, 5, 9, 40, 10**6)
             for a in (0, 50)]  # every late day, kinds outside the declared 0..4 too, 1,480 rows


def test_one_unit_moves_the_bounded_answers_by_at_most_the_sensitivity(crowd: str, embedded_pg: Any) -> None:
    """Red team, deterministic (false-failure rate 0): one unit added to a real table moves each statement's
    exact bounded answers (what the noise is added to) by at most the computed sensitivity in L2, whether its
    rows are the worst case for the statement (5 kinds on each of two days no other unit has, 2 on a third:
    12 pairs = g) or an adversary's 1,480 rows over every late day with stored kinds outside the declared 0..4 (read as
    their cells, clipped, as every aggregate reads them: counted as stored they would add 10 kinds a day).
    The worst case reaches the bound where it is below g: the bound is tight there."""
    worst_db = _neighbour(embedded_pg, "distinctbounds_worst", WORST)
    adversary_db = _neighbour(embedded_pg, "distinctbounds_adv", ADVERSARY)
    base, worst, adv = (PostgresExactSource(d) for d in (crowd, worst_db, adversary_db))
    try:
        for name, (sql, want) in STATEMENTS.items():
            plan = sqlparser.plan_query(sql, Catalog((EVENTS,)))
            sens = statement_sensitivity(EVENTS, plan.queries)
            assert sens == pytest.approx(want), name
            before = base.answers(EVENTS, plan.queries)
            moved = [np.linalg.norm(other.answers(EVENTS, plan.queries) - before) for other in (worst, adv)]
            assert max(moved) <= sens + 1e-9, (name, moved, sens)
            if name in ("distinct kinds", "kinds by day"):
                assert moved[0] == pytest.approx(sens), name  # the worst case: x = (5, 5, 2)
        plan = sqlparser.plan_query(STATEMENTS["kinds by day"][0], Catalog((EVENTS,)))
        moved = worst.answers(EVENTS, plan.queries) - base.answers(EVENTS, plan.queries)
        assert sorted(moved[moved != 0]) == [2, 5, 5]
    finally:
        for s in (base, worst, adv):
            s.close()


@pytest.mark.slow
def test_released_noise_has_the_scale_of_the_tighter_sensitivity(crowd: str) -> None:
    """Distinct kinds by day over 7 days (kinds 0..4, g = 12): the stated standard error is sqrt(5^2 + 5^2 +
    2^2) = 7.35 times that of one row-level count per day (sensitivity 1) released at the same point of the
    stream (deterministic), not g = 12 times; and over 300 independent epochs (released - bounded exact) /
    stated stderr is chi-square with 2,100 degrees of freedom: the released noise has the stated scale
    (two-sided, false-failure rate 1e-4)."""
    sql = "SELECT day, COUNT(DISTINCT kind) FROM events WHERE day BETWEEN 300 AND 306 GROUP BY day"
    plan = sqlparser.plan_query(sql, Catalog((EVENTS,)))
    ref = sqlparser.plan_query("SELECT day, COUNT(*) FROM events WHERE day BETWEEN 300 AND 306 GROUP BY day",
                               Catalog((ROWLEVEL,)))
    exact, ref_exact = CachedExactSource(crowd), CachedExactSource(crowd)
    truth = exact.answers(EVENTS, plan.queries)
    ratio = math.sqrt(54)
    stat, df = 0.0, 0
    for _ in range(300):
        a = fresh_engine(EVENTS, exact).answer(plan, "u")
        b = fresh_engine(ROWLEVEL, ref_exact).answer(ref, "u")
        np.testing.assert_allclose(a.stderrs, ratio * b.stderrs, rtol=1e-9)
        stat += float((((a.values - truth) / a.stderrs) ** 2).sum())
        df += len(truth)
    assert chi2.ppf(0.5e-4, df) < stat < chi2.ppf(1 - 0.5e-4, df)
