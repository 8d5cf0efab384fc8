"""Per-row expressions over measures inside SUM / AVG / COUNT (parser/analysis/measure_expr.py): each plans
to a SUM pushed down as written over the clamped columns, whose exact answer equals PostgreSQL's own answer
to the statement over the clamped values (differential, rows well outside the clamp ranges included), and
whose sensitivity is the interval-arithmetic bound of |value| over the clamp ranges: never below the
largest |value| a row reaches in PostgreSQL (soundness), and equal to the hand-computed bound. Expressions
that could raise an error on some value (division by a range holding 0, sqrt of a negative range) are
refused naming the part."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import pytest

from parser import plan_query
from parser.coltypes import from_config
from parser.model.schema import Attribute, Catalog, TableSchema
from parser.pushdown.sql import answers_sql
from tests.fixtures.databases import table_fixture
from tests.fixtures.refusals import refused

TABLE = TableSchema("m", (
    Attribute("x", from_config({"type": "numeric", "min": -50, "max": 200})),
    Attribute("y", from_config({"type": "numeric", "min": 0, "max": 80, "nullable": True})),
    Attribute("f", from_config({"type": "float", "min": 0, "max": 100, "bins": 10})),
    Attribute("c", from_config({"type": "text", "values": ["a", "b", "c"]})),
    Attribute("k", from_config({"type": "int", "min": 1, "max": 5})),
))
CAT = Catalog((TABLE,))
# The table as PostgreSQL reads it through the declared domains: measures clamped (a stored NULL of a
# non-nullable one at its min), other columns at their cell values.
CLAMPED = ("(SELECT LEAST(GREATEST(COALESCE(x, -50), -50), 200) AS x, "
           "CASE WHEN y IS NOT NULL THEN LEAST(GREATEST(y, 0), 80) END AS y, "
           "LEAST(GREATEST(COALESCE(f, 0), 0), 100) AS f, CASE WHEN c IN ('a', 'b', 'c') THEN c ELSE 'a' END AS c, "
           "LEAST(GREATEST(COALESCE(k, 1), 1), 5) AS k FROM m) AS m")

CASES = [  # (aggregate, its sensitivity computed by hand: interval arithmetic, per bin for f)
    ("SUM(ABS(x))", 200), ("SUM(x * x)", 40000), ("SUM(x - y)", 200), ("SUM(y - x)", 200),
    ("SUM(CASE WHEN x > 0 THEN x ELSE 0 END)", 200), ("SUM(CASE WHEN x < 10 THEN -x END)", 200),
    ("SUM(CAST(x AS DOUBLE PRECISION) / NULLIF(2, 0))", 100), ("SUM(x / 4)", None), ("SUM(CAST(x AS INT))", 200),
    ("SUM(COALESCE(y, x) * 2)", 400), ("SUM(GREATEST(x, y))", 200), ("SUM(ROUND(x / 3, 1))", 67),
    ("SUM(sqrt(y))", math.sqrt(80)), ("SUM(f * f - 2 * f)", 9820), ("SUM(x * k)", 1000),
    ("SUM(CASE WHEN c = 'b' THEN x * x ELSE y END)", 40000), ("SUM(x % 7)", 7), ("SUM(power(x, 2) + y)", 40080),
    ("AVG(x - y)", None), ("AVG(ABS(x))", None), ("COUNT(NULLIF(x, 0))", 1), ("SUM(x * y) / COUNT(*)", None),
]


def m_rows() -> Iterator[tuple[Any, ...]]:
    for i in range(2500):
        x = (i * 37) % 400 - 120  # -120 .. 279: beyond both ends of [-50, 200]
        y = None if i % 11 == 0 else (i * 13) % 120 - 10
        yield (x if i % 97 else None, y, ((i * 7) % 130) - 5.5, "abcd"[i % 4], (i % 8))


mdb = table_fixture("measureexpr", "m (x numeric, y numeric, f float8, c text, k int)", m_rows)


@pytest.mark.parametrize("agg, sens", CASES)
def test_exact_answers_equal_postgresql_over_clamped_values(agg: str, sens: float | None, mdb: Any) -> None:
    sql = f"SELECT c, {agg} AS v FROM m GROUP BY 1"
    plan = plan_query(sql, CAT)
    row = mdb.execute(answers_sql(TABLE, plan.queries)).fetchone()
    ours = {r[0]: r[1] for r in plan.rows([float(v) for v in row])}
    theirs = dict(mdb.execute(sql.replace("FROM m", f"FROM {CLAMPED}")).fetchall())
    assert set(ours) == set(theirs)
    for k, v in theirs.items():
        assert float(ours[k]) == pytest.approx(float(v), rel=1e-9, abs=1e-6 if "AVG" not in agg else 0.5), (k, ours[k], v)


@pytest.mark.parametrize("agg, sens", [c for c in CASES if c[1] is not None])
def test_sensitivity_is_the_interval_bound_and_sound(agg: str, sens: float, mdb: Any) -> None:
    plan = plan_query(f"SELECT {agg} FROM m", CAT)
    measured = [q for q in plan.queries if q.value is not None]
    assert measured and max(q.sensitivity for q in measured) == pytest.approx(sens, rel=1e-12)
    inner = agg[agg.index("(") + 1:agg.rindex(")")]
    reached = mdb.execute(f"SELECT max(abs({inner})) FROM {CLAMPED}").fetchone()[0]
    if not agg.startswith("COUNT"):
        assert float(reached) <= sens + 1e-9


@pytest.mark.parametrize("agg, words", [
    ("SUM(x / y)", "division by a value that may be 0"), ("SUM(sqrt(x))", "square root"),
    ("SUM(x / (k - 3))", "division by a value that may be 0"), ("SUM(ln(y + 1))", "ln() over a measure"),
])
def test_unbounded_expressions_are_refused(agg: str, words: str) -> None:
    r = refused(f"SELECT {agg} FROM m", CAT)
    assert r.sqlstate == "0A000" and words in r.message, r.message


def test_affine_forms_keep_their_shared_measurements() -> None:
    """a * x + b stays post-processing of SUM(x) and COUNT (one key with plain SUM(x))."""
    keys = {q.key for q in plan_query("SELECT SUM(2 * x + 1), SUM(x) FROM m", CAT).queries}
    assert keys == {"public.m|sum(x)|all", "public.m|count|all"}


def test_group_by_a_binned_measure_is_one_group_a_bin(mdb: Any) -> None:
    """GROUP BY f (bins of 10 over [0, 100]): one group a bin keyed by its lower edge, the last bin closed at
    max, equal to PostgreSQL's grouping of the clamped values by bin."""
    sql = "SELECT f, COUNT(*) AS n, SUM(x) AS s FROM m GROUP BY 1"
    plan = plan_query(sql, CAT)
    row = mdb.execute(answers_sql(TABLE, plan.queries)).fetchone()
    ours = {float(r[0]): (r[1], float(r[2])) for r in plan.rows([float(v) for v in row])}
    theirs = {float(k): (n, float(s)) for k, n, s in mdb.execute(
        f"SELECT LEAST(floor(f / 10) * 10, 90), COUNT(*), SUM(x) FROM {CLAMPED} GROUP BY 1").fetchall()}
    assert ours.keys() == {float(10 * i) for i in range(10)} and ours == theirs  # exact answers, no noise
