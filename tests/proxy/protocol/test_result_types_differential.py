"""Result column types equal PostgreSQL's: the RowDescription type OIDs of the proxy and of the upstream
PostgreSQL for the same statement, for every function and operator the parser evaluates
(parser/semantics/functions.py, parser/analysis/scalar_calls.py, scalar_time.py, the arithmetic of parser/scalar),
over the demo tables, as a group key and inside SUM. Describe only: nothing is read or charged."""

from __future__ import annotations

import re
from typing import Any

import psycopg
import pytest

from tests.fixtures.describe import described

pytestmark = pytest.mark.process

# One expression per function / operator and argument type the scalar evaluator computes.
EVENTS_EXPRS = [
    # temporal
    "extract(hour FROM ts)", "extract(dow FROM ts)", "extract(year FROM ts)",
    "EXTRACT(MONTH FROM ts)", "date_part('hour', ts)", "date_part('day', ts)", "date_trunc('day', ts)",
    "date_trunc('month', ts)", "to_char(ts, 'YYYY-MM')", "to_timestamp(duration_s)", "ts::date",
    "extract(day FROM ts::date)", "date_trunc('week', ts::date)",
    # text
    "lower(category)", "upper(country)", "length(category)", "strpos(category, 'a')",
    "substring(category, 1, 3)", "substring(category FROM 2)", "left(category, 2)", "right(category, 2)",
    "btrim(category)", "trim(category)", "ltrim(category)", "rtrim(category)", "replace(category, 'a', 'b')",
    "category || '-' || country", "concat(category, 1)", "starts_with(category, 's')",
    "split_part(category, '_', 1)", "reverse(country)", "category LIKE 's%'", "category ILIKE 'S%'",
    "category ~ 'a'", "category SIMILAR TO '%e'", "category NOT LIKE 'p%'",
    # numeric on integer, numeric and double precision arguments
    "sign(duration_s)", "sign(dec)", "sqrt(duration_s)", "sqrt(dec)", "power(duration_s, 2)",
    "power(dec, 2)", "ln(duration_s + 1)", "ln(dec + 1)", "exp(duration_s / 1000)", "exp(dec / 100)",
    "trunc(dec)", "trunc(dec, 1)", "trunc(duration_s)", "round(dec)", "round(dec, 1)",
    "round(duration_s)", "round(duration_s / 7.0, 2)", "floor(dec)", "floor(duration_s)", "ceil(dec)",
    "ceil(duration_s)", "ceiling(dec)", "abs(dec)", "abs(duration_s)", "coalesce(duration_s, 0)",
    "coalesce(dec, 0)", "nullif(duration_s, 0)", "greatest(duration_s, 10)", "least(dec, 10)",
    "greatest(dec, 1.5)", "sqrt(duration_s::float8)", "round(duration_s::float8)", "floor(dec::float8)",
    # arithmetic and casts
    "duration_s + 1", "duration_s * 1.5", "duration_s / 60", "duration_s / 60.0", "duration_s % 7",
    "dec * 2", "dec / 3", "-dec", "duration_s::numeric", "duration_s::float8", "dec::int",
    "duration_s::bigint", "dec::float8 / 2", "duration_s::text",
    "CASE WHEN duration_s > 60 THEN 1 ELSE 0 END", "CASE WHEN dec > 10 THEN dec ELSE 0 END",
    "CASE WHEN category = 'search' THEN 'yes' ELSE 'no' END",
]
ADULT_EXPRS = ["age / 10", "age % 10", "age * 2", "sign(age)", "round(age)", "age::float8 / 3", "abs(age - 40)",
               "greatest(age, sex)", "age BETWEEN 30 AND 39"]
NUMERIC_SUMS = ["amount", "duration_s", "amount * 2", "amount / 3", "-amount", "2 * amount + 1",
                "CASE WHEN amount > 10 THEN amount ELSE 0 END", "amount::float8"] + [
    e for e in EVENTS_EXPRS if any(w in e for w in ("duration_s", "dec"))
    and not any(w in e for w in ("::text", "'yes'", "to_timestamp", "LIKE", "~"))]
FLOAT_AVGS = ["amount::float8", "CAST(amount AS double precision)", "duration_s::float8",
              "CASE WHEN category = 'purchase' THEN amount::float8 END"]
"""AVG of a double precision value is double precision (Power BI's ``avg(cast(x as float8))``)."""
DEC = "(duration_s / 10.0)"
"""A numeric per-row value over declared cells (``dec`` in the lists; amount is a clamped measure, which
only SUM and AVG read, as a * amount + b)."""


def _described(dsn: str, sql: str) -> list[int] | str:
    """The type OIDs of a Describe of ``sql`` (Parse + Describe, never executed), or the SQLSTATE."""
    cols = described(dsn, sql)
    return cols if isinstance(cols, str) else [oid for _, oid in cols]


def _statements() -> list[tuple[str, str]]:
    out = [("events", f"SELECT {e} AS k, count(*) FROM events GROUP BY 1") for e in EVENTS_EXPRS]
    out += [("adult", f"SELECT {e} AS k, count(*) FROM adult GROUP BY 1") for e in ADULT_EXPRS]
    out += [("events", f"SELECT sum({e}) FROM events") for e in NUMERIC_SUMS]
    out += [("events", f"SELECT avg({e}) FROM events") for e in FLOAT_AVGS]
    return [(t, re.sub(r"\bdec\b", DEC, sql)) for t, sql in out]


def test_row_description_types_equal_postgresql(proxy: Any, adult_db: str) -> None:
    mismatched, refused = [], []
    for _, sql in _statements():
        theirs = _described(adult_db, sql)
        ours = _described(proxy.dsn(), sql)
        assert isinstance(theirs, list), (sql, theirs)
        if isinstance(ours, str):
            refused.append((sql, ours))  # a refusal is not a wrong type; listed below when unexpected
        elif ours != theirs:
            mismatched.append((sql, ours, theirs))
    assert not mismatched, "\n".join(f"{s}: proxy {o}, PostgreSQL {t}" for s, o, t in mismatched)
    # The proxy answers all of them (each is a function it evaluates over declared cells).
    assert not refused, "\n".join(f"{s}: {c}" for s, c in refused)


def test_executed_row_description_matches_describe(proxy: Any, adult_db: str) -> None:
    """An executed statement's RowDescription carries the same types as its Describe (the shape is known
    before any answer)."""
    sql = "SELECT extract(hour FROM ts) AS h, count(*) FROM events WHERE category = 'search' GROUP BY 1"
    with psycopg.connect(proxy.dsn(), autocommit=True) as conn:
        cur = conn.execute(sql)
        ours = [d.type_code for d in cur.description or []]
    with psycopg.connect(adult_db, autocommit=True) as conn:
        cur = conn.execute(sql)
        theirs = [d.type_code for d in cur.description or []]
    assert ours == theirs == [1700, 20]


@pytest.mark.xfail(strict=True, reason="known deviation (parser/plan/postprocess.py): AVG of an integer or numeric, and "
                   "arithmetic of noisy aggregates with decimal literals, are float8 where PostgreSQL says numeric")
def test_avg_and_noisy_decimal_arithmetic_types(proxy: Any, adult_db: str) -> None:
    for sql in ("SELECT avg(age) FROM adult", "SELECT count(*) * 1.5 FROM adult"):
        assert _described(proxy.dsn(), sql) == _described(adult_db, sql), sql
