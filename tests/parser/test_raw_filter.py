"""The plain-column conditions pushed-down SQL reads rows with (``ColumnType.raw_sql``) hold exactly for
the rows whose cell expressions fall in the cells, checked on PostgreSQL over stored values the domains
clip or fold: below and above the range, NULLs, unlisted text, instants between cells."""

from __future__ import annotations

import random
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

import psycopg
import pytest

from parser.coltypes import DateType, IntType, NumericType, TextType, TimestampType, TimestamptzType
from parser.model.linear import LinearQuery
from parser.model.schema import Attribute, TableSchema
from parser.pushdown.cellsql import attr_condition, cell_expr
from parser.pushdown.sql import answers_sql
from pgcore.identifiers import quote_ident
from tests.fixtures.databases import table_fixture

_T0 = datetime(2026, 3, 1)
DOMAINS: dict[str, tuple[str, Any]] = {
    "i": ("integer", IntType(0, 9)),
    "i_null": ("integer", IntType(-3, 3, nullable=True)),
    "t": ("text", TextType(values=("a", "b", "c", "d"))),
    "t_null": ("text", TextType(values=("a", "b", "c"), nullable=True)),
    "ts": ("timestamp", TimestampType(_T0, _T0 + timedelta(hours=9), "hour")),
    "tz_null": ("timestamptz", TimestamptzType(_T0, _T0 + timedelta(days=5), "day", nullable=True)),
    "d": ("date", DateType(_T0, _T0 + timedelta(days=7), "day")),
    "n": ("numeric", NumericType(0.0, 100.0, (0.0, 10.0, 25.0, 50.0, 100.0))),
}
TABLE = TableSchema("raw_cells", tuple(Attribute(n, dom) for n, (_, dom) in DOMAINS.items()))


def _value(name: str, rng: random.Random) -> Any:
    if rng.random() < 0.1:
        return None
    if name.startswith("i"):
        return rng.randint(-8, 14)
    if name.startswith("t") and not name.startswith("ts") and not name.startswith("tz"):
        return rng.choice(["a", "b", "c", "d", "e", ""])
    if name in ("ts", "tz_null", "d"):
        t = _T0 + timedelta(minutes=rng.randint(-3 * 24 * 60, 12 * 24 * 60))
        return t.date() if name == "d" else (t.replace(tzinfo=UTC) if name == "tz_null" else t)
    return Decimal(rng.randint(-2000, 13000)) / 100


def raw_rows() -> list[list[Any]]:
    rng = random.Random(3)
    return [[_value(n, rng) for n in DOMAINS] for _ in range(4000)]


raw_conn = table_fixture("parser_raw_cells",
                         "raw_cells (" + ", ".join(f"{quote_ident(n)} {t}" for n, (t, _) in DOMAINS.items()) + ")",
                         raw_rows, setup=["SET TimeZone = 'UTC'"])


def _random_ranges(size: int, rng: random.Random) -> list[tuple[int, int]]:
    cells = sorted(rng.sample(range(size), rng.randint(1, size)))
    out: list[tuple[int, int]] = []
    for c in cells:
        if out and out[-1][1] == c - 1:
            out[-1] = (out[-1][0], c)
        else:
            out.append((c, c))
    return out


@pytest.mark.parametrize("name", list(DOMAINS))
def test_raw_condition_holds_exactly_for_the_cells(name: str, raw_conn: psycopg.Connection) -> None:
    attr = TABLE.attribute(name)
    assert attr is not None
    rng = random.Random(name)
    useful = 0
    for _ in range(40):
        ranges = _random_ranges(attr.domain.size, rng)
        raw = attr.domain.raw_sql(quote_ident(name), ranges)
        if raw is None:
            continue
        cell = attr_condition(attr, ranges)
        missed, extra, kept, total = raw_conn.execute(
            f"SELECT count(*) FILTER (WHERE ({cell}) AND NOT COALESCE({raw}, false)), "
            f"count(*) FILTER (WHERE COALESCE({raw}, false) AND NOT COALESCE({cell}, false)), "
            f"count(*) FILTER (WHERE COALESCE({raw}, false)), count(*) FROM raw_cells").fetchone()
        assert missed == 0, (name, ranges, raw)
        assert extra == 0 or not attr.domain.raw_exact, (name, ranges, raw)
        useful += kept < total
    assert name == "n" or useful > 0  # the filter drops rows for most cell sets


def _box(rng: random.Random) -> tuple[tuple[str, tuple[tuple[int, int], ...]], ...]:
    names = sorted(rng.sample(list(DOMAINS), rng.randint(1, 3)))
    return tuple((n, tuple(_random_ranges(DOMAINS[n][1].size, rng))) for n in names)


def test_answers_with_plain_conditions_equal_those_over_cell_expressions(raw_conn: psycopg.Connection) -> None:
    """answers_sql (plain conditions where exact, a WHERE led by them) equals the same answers computed
    over cell expressions only, for single queries and for batches (whose WHERE is the union)."""
    rng = random.Random(11)
    queries = []
    for _ in range(60):
        boxes = tuple(_box(rng) for _ in range(rng.randint(1, 2)))
        marginal = tuple(sorted({n for b in boxes for n, _ in b}))
        queries.append(LinearQuery(TABLE.name, TABLE.schema, marginal, boxes))
    batches = [[q] for q in queries[:20]] + [queries[i : i + 8] for i in range(20, 60, 8)]
    for batch in batches:
        sql, cells = answers_sql(TABLE, batch), answers_sql(TABLE, batch, cells_only=True)
        assert not any(cell_expr(a) in sql for a in TABLE.attributes)  # every type here has a plain form
        assert raw_conn.execute(sql).fetchone() == raw_conn.execute(cells).fetchone(), sql


def test_timestamptz_bound_is_the_utc_instant() -> None:
    dom = DOMAINS["tz_null"][1]
    assert dom.raw_sql('"x"', [(1, 2)]) == "\"x\" >= TIMESTAMPTZ '2026-03-02 00:00:00+00' AND \"x\" < TIMESTAMPTZ '2026-03-04 00:00:00+00'"
    assert dom.raw_sql('"x"', [(6, 6)]) == '"x" IS NULL'
    assert DOMAINS["d"][1].raw_sql('"d"', [(0, 1)]) == "(\"d\" IS NULL OR \"d\" < DATE '2026-03-03')"
    assert date(2026, 3, 3) == (_T0 + timedelta(days=2)).date()
