"""Dates and timestamps against PostgreSQL: random filters (every usual literal spelling, BETWEEN, ranges,
now()-relative), date_trunc / extract / ::date / epoch buckets, over hourly and daily cells whose rows fall
anywhere inside their cell; the plan's exact linear answers must equal PostgreSQL's own answer to the same
SQL (session TimeZone UTC), equal vectors must share a key, and bad input gets its SQLSTATE."""

from __future__ import annotations

import os
import random
from datetime import UTC, date, datetime, timedelta
from typing import Any

import numpy as np
import psycopg
import pytest
from hypothesis import strategies as st

from parser import Refusal, plan_query
from parser.coltypes import DateType, IntType, TextType, TimestampType, TimestamptzType
from parser.model.schema import Attribute, Catalog, TableSchema
from parser.pushdown.sql import answers_sql_batches
from tests.fixtures.databases import table_fixture
from tests.fixtures.exact_rows import Histograms, assert_matches_postgresql, rows_match
from tests.fixtures.parser_strategies import random_cases
from tests.fixtures.refusals import refused
from tests.fixtures.simulated import as_answered

EXAMPLES = int(os.environ.get("PARSER_TEMPORAL_EXAMPLES", "60"))
TS0, TS1 = datetime(2026, 1, 1), datetime(2026, 1, 31, 23)  # ts: hourly cells, January 2026
T0, T1 = datetime(2026, 2, 1), datetime(2026, 2, 1, 23, 59)  # t: minute cells over one day
D0, D1 = datetime(2026, 1, 1), datetime(2026, 6, 30)  # d: days, H1 2026

EV = TableSchema("ev", (
    Attribute("ts", TimestamptzType(TS0, TS1, "hour", nullable=True)),
    Attribute("t", TimestampType(T0, T1, "minute")),
    Attribute("d", DateType(D0, D1)),
    Attribute("cat", TextType(values=("a", "b", "c"))),
    Attribute("n", IntType(0, 9)),
))
CATALOG = Catalog((EV,))


def ev_rows(n: int = 4000, seed: int = 11) -> list[tuple[Any, ...]]:
    """Rows inside the declared ranges, anywhere inside their cells (seconds and microseconds too)."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        ts = None if rng.random() < 0.05 else (
            datetime(2026, 1, 1, tzinfo=UTC) + timedelta(seconds=rng.randrange(31 * 86400), microseconds=rng.randrange(10**6)))
        t = T0 + timedelta(seconds=rng.randrange(86400), microseconds=rng.randrange(10**6))
        d = date(2026, 1, 1) + timedelta(days=rng.randrange(181))
        out.append((ts, t, d, rng.choice("abc"), rng.randrange(10)))
    return out


ev_conn = table_fixture("parser_ev", "ev (ts timestamptz, t timestamp, d date, cat text, n integer)", ev_rows,
                        setup=["SET TimeZone = 'UTC'"])


@pytest.fixture(scope="module")
def ev_hist(ev_conn: psycopg.Connection) -> Histograms:
    return Histograms(ev_conn, EV)


# -- random statements ------------------------------------------------------------------------------

def _spell_date(d: date, rnd: random.Random) -> str:
    s = d.isoformat()
    return rnd.choice([f"'{s}'", f"DATE '{s}'", f"'{s}'::date", f"CAST('{s}' AS date)",
                       f"TO_DATE('{s}', 'YYYY-MM-DD')"])


def _spell_ts(ts: datetime, rnd: random.Random, tz: bool) -> str:
    plain = ts.strftime("%Y-%m-%d %H:%M:%S")
    iso = ts.strftime("%Y-%m-%dT%H:%M:%S") + ("Z" if tz else "")
    kind = "timestamptz" if tz else "timestamp"
    options = [f"'{plain}'", f"'{iso}'", f"TIMESTAMP '{plain}'", f"'{plain}'::{kind}", f"CAST('{iso}' AS {kind})",
               f"TO_TIMESTAMP('{plain}', 'YYYY-MM-DD HH24:MI:SS')"]
    if ts.hour == 0 and ts.minute == 0:
        options.append(_spell_date(ts.date(), rnd))
    return rnd.choice(options)


def _ts_filter(rnd: random.Random) -> str:
    a = TS0 - timedelta(days=3) + timedelta(hours=rnd.randrange(24 * 36))
    b = a + timedelta(hours=rnd.randrange(1, 24 * 20))
    forms = (
        lambda: f"ts >= {_spell_ts(a, rnd, True)} AND ts < {_spell_ts(b, rnd, True)}",
        lambda: f"ts < {_spell_ts(b, rnd, True)}",
        lambda: f"NOT (ts >= {_spell_ts(a, rnd, True)})",
        lambda: f"ts::date BETWEEN {_spell_date(a.date(), rnd)} AND {_spell_date(b.date(), rnd)}",
    )
    return forms[rnd.randrange(len(forms))]()  # each form spells its literals only when drawn


def _t_filter(rnd: random.Random) -> str:
    a = T0 + timedelta(minutes=rnd.randrange(1440))
    b = a + timedelta(minutes=rnd.randrange(1, 600))
    return f"t >= {_spell_ts(a, rnd, False)} AND t < {_spell_ts(b, rnd, False)}"


def _d_filter(rnd: random.Random) -> str:
    a = date(2025, 12, 20) + timedelta(days=rnd.randrange(200))
    b = a + timedelta(days=rnd.randrange(0, 60))
    forms = (
        lambda: f"d BETWEEN {_spell_date(a, rnd)} AND {_spell_date(b, rnd)}",
        lambda: f"d {rnd.choice(['<', '<=', '>', '>=', '=', '<>'])} {_spell_date(a, rnd)}",
        lambda: f"d IN ({_spell_date(a, rnd)}, {_spell_date(b, rnd)})",
        lambda: f"extract({rnd.choice(['month', 'dow', 'isodow', 'week', 'quarter', 'doy'])} from d) = {rnd.randrange(1, 7)}",
        lambda: f"d >= current_date - {rnd.randrange(300, 360)}",
    )
    return forms[rnd.randrange(len(forms))]()


_BUCKETS = [
    "date_trunc('{u}', ts)", "date_trunc('{u}', t)", "date_trunc('{u}', d)", "extract({f} from ts)",
    "extract({f} from d)", "date_part('{f}', t)", "ts::date", "CAST(t AS date)", "d",
    "floor(extract(epoch from ts) / {n}) * {n}",
]


@st.composite
def temporal_queries(draw: st.DrawFn) -> tuple[str, int]:
    rnd = random.Random(draw(st.integers(0, 2**32)))
    filters = [f(rnd) for f in (_ts_filter, _t_filter, _d_filter) if rnd.random() < 0.45]
    if rnd.random() < 0.3:
        filters.append(f"cat = '{rnd.choice('abc')}'")
    agg = rnd.choice(["count(*)", "count(ts)", "sum(n)", "avg(n)"])
    keys: list[str] = []
    if rnd.random() < 0.7:
        b = rnd.choice(_BUCKETS)
        unit = rnd.choice(["day", "week", "month", "quarter", "year"] + (["hour"] if "d)" not in b else []))
        field = rnd.choice(["year", "quarter", "month", "week", "day", "dow", "isodow", "doy"]
                           + (["hour"] if "from d" not in b else []))
        keys.append(b.format(u=unit, f=field, n=rnd.choice([3600, 86400, 7 * 86400])))
    where = f" WHERE {' AND '.join(filters)}" if filters else ""
    if not keys:
        return f"SELECT {agg} FROM ev{where}", 0
    group = " GROUP BY 1" if rnd.random() < 0.5 else f" GROUP BY {keys[0]}"
    return f"SELECT {keys[0]} AS k, {agg} FROM ev{where}{group}", 1


def exact_rows(sql: str, conn: psycopg.Connection,
               params: list[Any] | None = None) -> tuple[list[tuple[Any, ...]], Any]:
    """The plan's rows from its linear queries' exact answers, computed by PostgreSQL through the pushed-down
    cell expressions (answers_sql: what the engine asks the upstream database)."""
    plan = plan_query(sql, CATALOG, params)
    values: list[float] = []
    for batch in answers_sql_batches(plan.table_schema, list(plan.queries)):
        values.extend(float(v) for v in conn.execute(batch).fetchone() or ())
    return plan.rows(np.array(values)), plan


@random_cases(EXAMPLES, case=temporal_queries())
def test_random_temporal_queries_match_postgresql(case: tuple[str, int], ev_conn: psycopg.Connection) -> None:
    assert_matches_postgresql(case, ev_conn, exact_rows)


def test_every_bucket_of_the_declared_range_is_returned(ev_conn: psycopg.Connection, ev_hist: Histograms) -> None:
    rows, plan = exact_rows("SELECT date_trunc('day', ts), count(*) FROM ev GROUP BY 1", ev_conn)
    days = [r[0] for r in rows if r[0] is not None]
    assert days == [datetime(2026, 1, 1, tzinfo=UTC) + timedelta(days=i) for i in range(31)]
    assert rows[-1][0] is None  # ts is nullable: its NULL group comes last, as PostgreSQL sorts it
    months = exact_rows("SELECT date_trunc('month', d)::date AS m, count(*) FROM ev GROUP BY 1", ev_conn)[0]
    assert [r[0] for r in months] == [date(2026, m, 1) for m in range(1, 7)]
    # The marginal histogram read through marginal_sql holds every row in its cell.
    assert ev_hist[("d",)].sum() == ev_hist[("ts",)].sum() == len(ev_rows())


# An expression over a column compared with a parameter, as JDBC and BI tools send date pickers
# (CAST(ts AS DATE) >= ?): the parameter takes the expression's type, as PostgreSQL infers it. Each is
# sent with its parameters as text (the text protocol) and as Python values (binary drivers).
EXPR_PARAMS = [
    ("SELECT count(*) FROM ev WHERE ts::date >= $1", ["2026-01-09"], [date(2026, 1, 9)]),
    ("SELECT count(*) FROM ev WHERE CAST(ts AS date) = $1", ["2026-01-09"], [date(2026, 1, 9)]),
    ("SELECT count(*), sum(n) FROM ev WHERE CAST(ts AS DATE) BETWEEN $1 AND $2", ["2026-01-03", "2026-01-20"],
     [date(2026, 1, 3), date(2026, 1, 20)]),
    ("SELECT count(*) FROM ev WHERE date_trunc('day', t) < $1", ["2026-02-01 00:00:00"], [datetime(2026, 2, 1)]),
    ("SELECT count(*) FROM ev WHERE extract(hour from t) >= $1", ["12"], [12]),
    ("SELECT count(*) FROM ev WHERE n + 1 > $1 AND cat = $2", ["4", "b"], [4, "b"]),
    ("SELECT count(*) FROM ev WHERE n * 2 <= $1::int", ["7"], [7]),
    ("SELECT count(*) FROM ev WHERE upper(cat) = $1", ["B"], ["B"]),
    ("SELECT count(*) FROM ev WHERE upper(cat) IN ($1, $2)", ["A", "C"], ["A", "C"]),
    ("SELECT count(*) FROM ev WHERE $1 < d::timestamp", ["2026-03-01 00:00:00"], [datetime(2026, 3, 1)]),
    ("SELECT cat, count(*) FROM ev WHERE (n > 5) = $1 GROUP BY cat", ["true"], [True]),
    ("SELECT count(*) FROM ev WHERE ts::date >= $1", [None], [None]),
    # col = ANY($1) with a list: psycopg's IN list under server-side binding (its text and typed forms)
    ("SELECT count(*) FROM ev WHERE cat = ANY($1)", ["{a,c}"], [["a", "c"]]),
    ("SELECT count(*) FROM ev WHERE n > ANY($1) AND d = ANY($2)", ["{3,7}", "{2026-01-05,2026-02-01}"],
     [[3, 7], [date(2026, 1, 5), date(2026, 2, 1)]]),
    ("SELECT count(*) FROM ev WHERE NOT (cat = ANY($1))", ['{"b",NULL}'], [["b", None]]),
    ("SELECT count(*) FROM ev WHERE cat <> ANY($1)", ["{}"], [[]]),
]


@pytest.mark.parametrize("sql,text,typed", EXPR_PARAMS)
def test_expressions_compared_with_parameters_match_postgresql(sql: str, text: list[Any], typed: list[Any],
                                                               ev_conn: psycopg.Connection) -> None:
    n_keys = 1 if "GROUP BY" in sql else 0
    theirs = ev_conn.execute(sql.replace("$1", "%s").replace("$2", "%s"), typed).fetchall()  # type: ignore[arg-type]
    for params in (text, typed):
        ours, _ = exact_rows(sql, ev_conn, params)
        problem = rows_match(ours, theirs, n_keys, ordered=False)
        assert problem is None, f"{sql} {params}\n{problem}"


def test_expression_parameters_are_typed_and_checked() -> None:
    from parser.planner import describe

    assert describe("SELECT count(*) FROM ev WHERE ts::date >= $1", CATALOG).param_types == (1082,)
    assert describe("SELECT count(*) FROM ev WHERE upper(cat) = $1 AND n + 1 > $2", CATALOG).param_types == (25, 23)
    with pytest.raises(Refusal) as bad:  # a value that is not a date: PostgreSQL's 22007 family, before a run
        plan_query("SELECT count(*) FROM ev WHERE ts::date >= $1", CATALOG, ["not a date"])
    assert bad.value.sqlstate.startswith("22")
    with pytest.raises(Refusal) as cut:  # the expression must still take one value a cell
        plan_query("SELECT count(*) FROM ev WHERE extract(minute from ts) = $1", CATALOG, ["5"])
    assert cut.value.sqlstate == "0A000" and "cuts the cells" in cut.value.message


@pytest.mark.parametrize("sql", [
    "SELECT to_char(ts, 'YYYY-MM') AS k, count(*) FROM ev GROUP BY 1",
    "SELECT to_char(ts, 'YYYY-MM-DD') AS k, count(*) FROM ev GROUP BY 1",
    "SELECT to_char(ts, 'YYYY-MM-DD HH24') AS k, count(*) FROM ev GROUP BY 1",
    "SELECT to_char(ts, 'IYYY-IW') AS k, sum(n) FROM ev GROUP BY 1",
    "SELECT to_char(t, 'HH24:MI') AS k, count(*) FROM ev GROUP BY 1",
    "SELECT to_char(t, 'HH12') AS k, count(*) FROM ev GROUP BY 1",
    "SELECT count(*) FROM ev WHERE to_char(ts, 'YYYY-MM-DD') = '2026-01-09'",
    "SELECT to_char(d::timestamp + interval '30 minutes', 'HH24:MI') AS k, count(*) FROM ev GROUP BY 1",
])
def test_to_char_of_timestamps_in_whole_cells_matches_postgresql(sql: str, ev_conn: psycopg.Connection) -> None:
    """to_char of a timestamp column whose fields are no finer than its cells (an analyst's monthly
    to_char(ts, 'YYYY-MM')) groups whole cells: answered, equal to PostgreSQL's."""
    ours, _ = exact_rows(sql, ev_conn)
    problem = rows_match(ours, ev_conn.execute(sql).fetchall(), 1 if "GROUP BY" in sql else 0, ordered=False)
    assert problem is None, f"{sql}\n{problem}"


@pytest.mark.parametrize("sql", [
    # Tableau's week starting Sunday: the day minus its day of week, an integer times an interval.
    "SELECT (DATE_TRUNC('DAY', ts) + (-(CAST(EXTRACT(DOW FROM ts) AS BIGINT)) * INTERVAL '1 DAY')) AS k, "
    "count(*) FROM ev GROUP BY 1",
    "SELECT count(*) FROM ev WHERE ts >= TIMESTAMPTZ '2026-01-10 00:00+00' + 2 * INTERVAL '1 day 3 hours'",
    "SELECT count(*) FROM ev WHERE d < DATE '2026-03-01' + INTERVAL '1 week' * 3",
    # Looker's relative date filters: each bound a scalar subquery that reads no table.
    "SELECT cat AS k, count(*) FROM ev WHERE ((( ts ) >= ((SELECT (DATE_TRUNC('day', TIMESTAMPTZ "
    "'2026-01-20 10:00+00') + (-6 || ' day')::INTERVAL))) AND ( ts ) < ((SELECT ((DATE_TRUNC('day', "
    "TIMESTAMPTZ '2026-01-20 10:00+00') + (-6 || ' day')::INTERVAL) + (7 || ' day')::INTERVAL))))) GROUP BY 1",
    "SELECT sum(n) FROM ev WHERE d >= (SELECT DATE '2026-02-01') AND n < (SELECT 5)",
])
def test_bi_tools_time_arithmetic_matches_postgresql(sql: str, ev_conn: psycopg.Connection) -> None:
    """An integer times an interval (Tableau's week start) and ``(SELECT expr)`` bounds (Looker's relative
    date filters) are the values PostgreSQL computes: answered, equal to its answer over the same rows
    (no noise: false-failure rate 0)."""
    ours, _ = exact_rows(sql, ev_conn)
    problem = rows_match(ours, ev_conn.execute(sql).fetchall(), 1 if "GROUP BY" in sql else 0, ordered=False)
    assert problem is None, f"{sql}\n{problem}"


@pytest.mark.parametrize("sql", [
    *(f"SELECT to_char({value}, '{fmt}') AS k, count(*) FROM ev GROUP BY 1" for value, fmt in (
        ("ts", "YYYY-MM-DD HH24:MI"), ("ts", "MI"), ("ts + interval '30 minutes'", "HH24"), ("t", "SS"))),
    "SELECT count(*) FROM ev WHERE to_char(t, 'HH24:MI:SS') = '10:00:00'",
])
def test_to_char_finer_than_the_cells_is_refused(sql: str) -> None:
    r = refused(sql, CATALOG)
    assert r.sqlstate == "0A000" and "cuts the cells" in r.message


# -- canonical keys ---------------------------------------------------------------------------------

SAME_VECTOR = [
    ["SELECT count(*) FROM ev WHERE ts >= '2026-01-05' AND ts < '2026-01-12'",
     "SELECT count(*) FROM ev WHERE ts >= TIMESTAMP '2026-01-05 00:00' AND ts < DATE '2026-01-12'",
     "SELECT count(*) FROM ev WHERE ts BETWEEN '2026-01-05T00:00:00Z' AND '2026-01-11T23:59:59.999999Z'",
     "SELECT count(*) FROM ev WHERE date_trunc('week', ts) = '2026-01-05'",
     "SELECT count(*) FROM ev WHERE extract(week from ts) = 2",
     "SELECT count(*) FROM ev WHERE ts::date >= '2026-01-05' AND CAST(ts AS date) <= '2026-01-11'"],
    ["SELECT count(*) FROM ev WHERE d > '2026-03-01'",
     "SELECT count(*) FROM ev WHERE d >= DATE '2026-03-02'",
     "SELECT count(*) FROM ev WHERE d >= TO_DATE('20260302', 'YYYYMMDD')",
     "SELECT count(*) FROM ev WHERE d >= '2026-03-01'::date + 1",
     "SELECT count(*) FROM ev WHERE d >= '2026-03-01'::date + INTERVAL '1 day'"],
]


@pytest.mark.parametrize("group", SAME_VECTOR)
def test_equal_vectors_share_one_key(group: list[str]) -> None:
    keys = {sql: [q.key for q in plan_query(sql, CATALOG).queries] for sql in group}
    assert len({tuple(k) for k in keys.values()}) == 1, keys


def test_now_is_resolved_per_statement_to_a_constant() -> None:
    """'Last 7 days' asked twice on one day is one query (the key holds the resolved cells, not now())."""
    a = plan_query("SELECT count(*) FROM ev WHERE d >= current_date - 7", CATALOG)
    b = plan_query("SELECT count(*) FROM ev WHERE d >= CAST(now() AS date) - INTERVAL '7 days'", CATALOG)
    assert a.queries[0].key == b.queries[0].key
    today = datetime.now(UTC).date()
    assert f"d={{{(today - timedelta(days=7)).isoformat()}" in a.queries[0].key or a.queries[0].is_zero


# -- bad input ------------------------------------------------------------------------------------

@pytest.mark.parametrize("sql", [
    # Literals inside a cell: the statement's cells are split at them (parser/bind/splits.py), as written.
    "SELECT count(*) FROM ev WHERE ts >= '2026-01-21 10:30'",
    "SELECT count(*) FROM ev WHERE ts <= '2026-01-21'",
    "SELECT count(*) FROM ev WHERE ts = '2026-01-21 10:00'",
    "SELECT count(*) FROM ev WHERE t >= '2026-02-01 10:30:30'",
    "SELECT count(*) FROM ev WHERE ts > TIMESTAMP '2026-01-21 10:00' - INTERVAL '90 minutes'",
])
def test_literals_inside_cells_match_postgresql(sql: str, ev_conn: psycopg.Connection) -> None:
    ours, plan = exact_rows(sql, ev_conn)
    assert rows_match(ours, ev_conn.execute(sql).fetchall(), 0, ordered=False) is None, sql


@pytest.mark.parametrize(("sql", "state", "words"), [
    ("SELECT date_trunc('minute', ts), count(*) FROM ev GROUP BY 1", "0A000", "one hour"),
    ("SELECT count(*) FROM ev WHERE extract(minute from ts) = 5", "0A000", "one hour"),
    ("SELECT count(*) FROM ev WHERE d > '2026-02-30'", "22008", "out of range"),
    ("SELECT count(*) FROM ev WHERE d > '2026-13-01'", "22008", "out of range"),
    ("SELECT count(*) FROM ev WHERE d > 'last tuesday'", "22007", "invalid input syntax for type date"),
    ("SELECT count(*) FROM ev WHERE ts > 'soon'", "22007", "timestamp with time zone"),
    ("SELECT count(*) FROM ev WHERE n > INTERVAL '1 day'", "42883", "interval"),
    ("SELECT count(*) FROM ev WHERE n + INTERVAL '1 day' > 3", "42883", "integer + interval"),
    ("SELECT count(*) FROM ev WHERE d > 5", "42883", "date = integer"),
    ("SELECT count(*) FROM ev WHERE created_at > now()", "42703", "created_at"),
    ("SELECT sum(ts) FROM ev", "42883", "sum(timestamptz)"),
    ("SELECT count(*) FROM ev WHERE ts > TIMESTAMP '2026-01-02' + INTERVAL '1 day' * 1.5", "0A000",
     "interval * numeric"),
    ("SELECT count(*) FROM ev WHERE ts > TIMESTAMP '2026-01-02' + INTERVAL '1 day' * INTERVAL '1 day'", "42883",
     "interval * interval"),
    ("SELECT count(*) FROM ev WHERE ts > (SELECT max(ts) FROM ev)", "0A000", "subquery"),
])
def test_bad_temporal_input_gets_its_sqlstate(sql: str, state: str, words: str) -> None:
    r = refused(sql, CATALOG)
    assert r.sqlstate == state, (sql, r)
    assert words in r.message + " " + (r.hint or ""), (sql, r.message, r.hint)
    if state == "0A000":
        assert r.hint, sql


# -- order statistics (MIN, MAX, percentile_disc) ---------------------------------------------------

ORDER_STATS = ("SELECT cat, MIN(d), MAX(d), MIN(ts), MAX(ts), MIN(t), MAX(t), "
               "percentile_disc(0.5) WITHIN GROUP (ORDER BY d), percentile_disc(0.9) WITHIN GROUP (ORDER BY ts) "
               "FROM ev GROUP BY cat")


def _block_value(dom: Any, exact: Any, last: bool) -> Any:
    """What MIN (``last`` False) or MAX returns for the exact value ``exact`` of ``dom`` before noise: the
    first (last) cell of the tree leaf holding ``exact``'s cell (a leaf is one cell up to 512 cells)."""
    from parser.plan.quantile import build_tree

    c = dom.index_of(exact)
    lo, hi = next(leaf for leaf in build_tree(dom.base_size).leaves if leaf[0] <= c <= leaf[1])
    return dom.value_at(hi if last else lo)


def test_temporal_order_statistics_match_postgresql_before_noise(ev_conn: psycopg.Connection,
                                                                 ev_hist: Histograms) -> None:
    """From exact tree counts, MIN/MAX of a column of at most 512 cells (d: 181 days) and percentile_disc
    of d equal PostgreSQL's (MIN and MAX are percentile_disc(0.001) and (0.999): parser.plan.quantile.P_EXTREME);
    over more cells (ts: 744 hours, t: 1440 minutes; leaves of 2 and 3 cells) MIN is the first cell of the
    leaf holding PostgreSQL's value, MAX the last cell of the leaf holding its value. Values come as the
    column's type on the wire: date, timestamptz, timestamp."""
    from pgcore.pgtypes import DATE, TIMESTAMP, TIMESTAMPTZ

    plan = plan_query(ORDER_STATS, CATALOG)
    assert [c.type_oid for c in plan.columns[1:]] == [DATE, DATE, TIMESTAMPTZ, TIMESTAMPTZ, TIMESTAMP, TIMESTAMP,
                                                      DATE, TIMESTAMPTZ]
    ours = {r[0]: r[1:] for r in plan.rows(np.array([ev_hist.answer(q) for q in plan.queries]))}
    doms = {a.name: a.domain for a in EV.attributes}
    theirs = ev_conn.execute(as_answered(ORDER_STATS)).fetchall()
    assert len(theirs) == 3
    for cat, dmin, dmax, tsmin, tsmax, tmin, tmax, dmed, tsp90 in theirs:
        got = ours[cat]
        assert got[:2] == (dmin, dmax), cat
        assert got[2] == _block_value(doms["ts"], tsmin, False) <= tsmin, cat
        assert got[3] == _block_value(doms["ts"], tsmax, True), cat
        assert tsmax < got[3] + timedelta(hours=1)
        assert got[4] == _block_value(doms["t"], tmin, False) <= tmin, cat
        assert got[5] == _block_value(doms["t"], tmax, True), cat
        assert got[6] == dmed, cat
        # a cell of the (two-hour) leaf holding PostgreSQL's value: the rank is placed within the leaf
        assert _block_value(doms["ts"], tsp90, False) <= got[7] <= _block_value(doms["ts"], tsp90, True), cat


def test_released_temporal_min_max_land_on_the_exact_cell(ev_hist: Histograms) -> None:
    """With little noise (sigma 0.05 per tree count, a large epsilon) every draw's MIN and MAX equal the
    noise-free answer (the extreme leaf may hold a single row: t has about one a minute per category); with
    more (sigma 5) percentile_disc's 95% interval, whole cells from the first instant of its low cell to the
    last of its high cell, covers PostgreSQL's exact value in >= 80% of 60 draws (a true 95% coverage falls
    under 80% with probability < 1e-4).

    False-failure rate below 2e-4 in all: the coverage part's < 1e-4, and the first part's below 1e-8. At
    sigma 0.1 a draw differed from the noise-free answer 2 times in 3,000 (a count's margin to its threshold
    at least 3.2 standard deviations); at 0.05 every margin is twice as many, so a draw differs with
    probability below 1e-10 and 30 draws below 1e-8 (measured: 0 of 20,000 draws)."""
    plan = plan_query(ORDER_STATS, CATALOG)
    exact = np.array([ev_hist.answer(q) for q in plan.queries])
    clean = plan.rows(exact)
    rng = np.random.default_rng(18)
    for _ in range(30):
        noisy = plan.rows(exact + rng.normal(0.0, 0.05, size=exact.shape))
        assert [r[:7] for r in noisy] == [r[:7] for r in clean]
    truth = {(r[0], i): v for r in ev_hist.conn.execute(ORDER_STATS).fetchall() for i, v in ((0, r[7]), (1, r[8]))}
    hits = dict.fromkeys(truth, 0)
    sigma = 5.0
    for _ in range(60):
        noisy = exact + rng.normal(0.0, sigma, size=exact.shape)
        rows = [r for r in plan.intervals(noisy, np.full(exact.shape, sigma)) if r[0] == "percentile_disc"]
        assert len(rows) == 6  # d's three groups, then ts's
        for n, (_name, key, est, lo, hi) in enumerate(rows):
            t = truth[(key[0], n // 3)]
            assert lo is not None and hi is not None and type(est) is type(t)
            hits[(key[0], n // 3)] += int(lo <= t <= hi)  # type: ignore[operator]
    assert all(h >= 48 for h in hits.values()), hits


@pytest.mark.parametrize("sql, pg_sql", [
    ("SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY d) FROM ev", None),
    ("SELECT percentile_cont(0.25) WITHIN GROUP (ORDER BY ts) FROM ev", None),
    ("SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY t DESC) FROM ev", None),
    ("SELECT MEDIAN(d) FROM ev", "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY d) FROM ev"),
])
def test_interpolated_percentile_of_a_date_is_refused_as_postgresql_does(sql: str, pg_sql: str | None,
                                                                         ev_conn: psycopg.Connection) -> None:
    """percentile_cont is defined over double precision and interval only: PostgreSQL answers 42883 for a
    date or timestamp, and so does the proxy, with the same words (MEDIAN, which PostgreSQL lacks, reads as
    percentile_cont(0.5) and is refused the same way), pointing to percentile_disc."""
    with pytest.raises(psycopg.errors.UndefinedFunction) as pg:
        ev_conn.execute(pg_sql or sql)
    with pytest.raises(Refusal) as err:
        plan_query(sql, CATALOG)
    assert err.value.sqlstate == "42883"
    pg_words = str(pg.value).splitlines()[0].removeprefix("function ")
    assert pg_words.split(" does not exist")[0] in err.value.message, (err.value.message, str(pg.value))
    assert "percentile_disc" in (err.value.hint or "")


# -- the engine's exact source: groups of scattered cells answered from the marginal -----------------

@pytest.mark.parametrize("sql", [
    "SELECT extract(hour from ts) AS h, count(*) FROM ev GROUP BY 1",
    "SELECT CAST(extract(hour from ts) AS integer) + 1 AS h, count(*) FROM ev WHERE ts >= '2026-01-10' GROUP BY 1",
    "SELECT extract(hour from ts) AS h, count(*) FROM ev WHERE cat <> 'b' AND n < 7 GROUP BY 1",
    "SELECT cat, count(*) FROM ev WHERE extract(hour from ts) IN (3, 7, 22) GROUP BY 1",
])
def test_scattered_groups_read_through_the_marginal_match_postgresql(sql: str, ev_conn: psycopg.Connection) -> None:
    """A group that is hundreds of scattered cells (every day's 03:00) is answered from one pushed-down
    GROUP BY over the cells, not one range condition per cell: the same answers as the per-query SQL and
    as PostgreSQL's own."""
    from lapras.exact import MARGINAL_MIN_QUERIES, MARGINAL_MIN_RANGES, PostgresExactSource, statement_ranges

    plan = plan_query(sql, CATALOG)
    queries = list(plan.queries)
    assert len(queries) < MARGINAL_MIN_QUERIES and statement_ranges(queries) >= MARGINAL_MIN_RANGES
    src = PostgresExactSource(ev_conn.info.dsn)
    try:
        read = {"marginal": 0}
        marginal = src.marginal

        def counted(table: Any, attrs: Any) -> Any:
            read["marginal"] += 1
            return marginal(table, attrs)

        src.marginal = counted  # type: ignore[method-assign]
        got = src.answers(EV, queries)
    finally:
        src.close()
    assert read["marginal"] == 1
    per_query, _ = exact_rows(sql, ev_conn)
    assert plan.rows(got) == per_query
    problem = rows_match(plan.rows(got), ev_conn.execute(sql).fetchall(), 1, ordered=False)
    assert problem is None, f"{sql}\n{problem}"
