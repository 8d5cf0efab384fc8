"""Expressions over bound parameters (``$1::timestamp + interval '1 day'``, ``lower($1)``, ``COALESCE($1,
'x')``, ``$1 * 2``, ``<> ALL($1)``, ``COUNT(*) + $1``): what JDBC, node-postgres and psycopg send with
server-side binding. Each statement is planned once with untyped parameters and bound with values; its
exact linear answers (computed by PostgreSQL through the pushed-down SQL) and its column types equal what
the real PostgreSQL answers to the same statement PREPAREd with untyped parameters and EXECUTEd with the same
values over the same rows (``parser_splits``' rows: many at cell boundaries and one microsecond either side);
a statement PostgreSQL refuses at PREPARE is refused with the same SQLSTATE. No noise is drawn: no test has a
false-failure rate."""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import numpy as np
import psycopg
import pytest
from psycopg import sql as pgsql
from test_parser_splits import CATALOG, pay_database

from parser import Planner, Refusal
from parser.pushdown.sql import answers_sql_batches
from tests.fixtures.exact_rows import norm, rows_match

_NAMES = itertools.count()
CASES: list[tuple[str, list[Any]]] = [
    # Timestamp +/- interval: a date range picker's window, bounds on and inside the hourly cells.
    ("SELECT count(*) FROM pay WHERE ts >= $1::timestamp - interval '7 days' AND ts < $2::timestamp + interval '1 day'",
     ["2026-03-08", "2026-03-14"]),
    ("SELECT region, count(*) FROM pay WHERE ts < $1::timestamp + interval '1 day' GROUP BY region",
     ["2026-02-28 10:30"]),
    ("SELECT count(*), sum(amount) FROM pay WHERE ts BETWEEN $1::timestamp - interval '1 month' AND $1",
     ["2026-05-01"]),
    ("SELECT count(*) FROM pay WHERE tz > $1::timestamptz - interval '2 days'", ["2026-03-03 00:00:00+00"]),
    ("SELECT count(*) FROM pay WHERE d > $1::date - 7", ["2026-03-10"]),
    ("SELECT count(*) FROM pay WHERE ts::date >= $1::date - interval '1 day'", ["2026-02-10"]),
    # Arithmetic on a parameter: its type is the other operand's (integer here, numeric with 0.5).
    ("SELECT count(*) FROM pay WHERE n > $1 * 2", ["75"]),
    ("SELECT count(*) FROM pay WHERE amount >= $1 + 0.5", ["104.5"]),
    # Text functions and COALESCE on a parameter; ALL over an array parameter.
    ("SELECT count(*), sum(amount) FROM pay WHERE region = lower($1)", ["B"]),
    ("SELECT count(*) FROM pay WHERE region = COALESCE($1, 'a')", [None]),
    ("SELECT count(*) FROM pay WHERE region = COALESCE($1, 'a')", ["c"]),
    ("SELECT count(*) FROM pay WHERE lower(region) = lower($1)", ["C"]),
    ("SELECT count(*) FROM pay WHERE region <> ALL($1)", ["{a,b}"]),
    ("SELECT count(*) FROM pay WHERE region <> ALL($1)", ["{}"]),
    ("SELECT count(*) FROM pay WHERE region IN (lower($1), upper($2))", ["A", "c"]),
    # A column and a parameter in one predicate: evaluated on the cells once the value is bound.
    ("SELECT count(*) FROM pay WHERE strpos(region, $1) > 0", ["b"]),
    ("SELECT region, count(*) FROM pay WHERE ts < $1::timestamp AND strpos(upper(region), $2) = 1 GROUP BY region",
     ["2026-03-01", "C"]),
    ("SELECT count(*) FROM pay WHERE n + $1 >= 150", ["-50"]),
    ("SELECT count(*) FROM pay WHERE ts + $1 >= TIMESTAMP '2026-03-01'", ["1 day"]),
    # Several columns and a parameter: evaluated on their joint cells once the value is bound.
    ("SELECT count(*) FROM pay WHERE n + $1 > 100 * length(region)", ["1"]),
    ("SELECT region, count(*) FROM pay WHERE d > $1::date + length(region) GROUP BY region", ["2026-03-01"]),
    ("SELECT count(*) FILTER (WHERE n - $1 >= 100 * length(region)) FROM pay", ["100"]),
    # In FILTER and CASE WHEN conditions, and HAVING.
    ("SELECT count(*) FILTER (WHERE ts > $1::timestamp - interval '1 day'), count(*) FROM pay", ["2026-03-01 10:30"]),
    ("SELECT count(CASE WHEN ts > $1::timestamp - interval '1 day' THEN 1 END) FROM pay", ["2026-04-01"]),
    ("SELECT region, count(*) FROM pay GROUP BY region HAVING count(*) > $1 * 2", ["660"]),
    # In the target list: typed as PostgreSQL types them (bigint, integer, text).
    ("SELECT COUNT(*) + $1 FROM pay", ["3"]),
    ("SELECT $1 * 2 AS x, count(*) FROM pay", ["21"]),
    ("SELECT lower($1) AS l, COALESCE($2, 'x') AS c, count(*) FROM pay", ["AB", None]),
]


@pytest.fixture(scope="module")
def pay_conn(embedded_pg: Any) -> Iterator[psycopg.Connection]:
    yield from pay_database(embedded_pg, "parser_param_exprs")


def _postgres(conn: psycopg.Connection, sql: str, params: list[Any],
              declared: tuple[str, ...] = ()) -> tuple[list[tuple[Any, ...]], list[int]]:
    """PostgreSQL's rows and column types for ``sql`` PREPAREd with untyped parameters (or ``declared`` ones)."""
    name = pgsql.Identifier(f"param_exprs_{next(_NAMES)}")
    types = pgsql.SQL("({})".format(", ".join(declared)) if declared else "")
    conn.execute(pgsql.SQL("PREPARE {}{} AS {}").format(name, types, pgsql.SQL(sql)),
                 prepare=False)
    try:
        cur = conn.execute(_execute(name, params), prepare=False)
        return cur.fetchall(), [d.type_code for d in cur.description or ()]
    finally:
        conn.execute(pgsql.SQL("DEALLOCATE {}").format(name), prepare=False)


def _execute(name: pgsql.Identifier, params: list[Any]) -> pgsql.Composed:
    """EXECUTE name(values...), without the parentheses when there is no value (PostgreSQL's syntax)."""
    if not params:
        return pgsql.SQL("EXECUTE {}").format(name)
    return pgsql.SQL("EXECUTE {}({})").format(name, pgsql.SQL(", ").join(pgsql.Literal(p) for p in params))


def _ours(sql: str, params: list[Any], conn: psycopg.Connection,
          declared: tuple[int, ...] = ()) -> tuple[list[tuple[Any, ...]], Any]:
    plan = Planner(CATALOG).plan(sql, params, declared=declared)
    values: list[float] = []
    for batch in answers_sql_batches(plan.table_schema, list(plan.queries)):
        values.extend(float(v) for v in conn.execute(batch).fetchone() or ())
    return [tuple(norm(v) for v in r) for r in plan.rows(np.array(values))], plan


@pytest.mark.parametrize(("sql", "params"), CASES)
def test_parameter_expressions_are_answered_as_postgresql_answers(sql: str, params: list[Any],
                                                                  pay_conn: psycopg.Connection) -> None:
    ours, plan = _ours(sql, params, pay_conn)
    theirs, types = _postgres(pay_conn, sql, params)
    assert rows_match(ours, theirs, len(plan.template.groups), ordered=False) is None, (sql, ours, theirs)
    assert [c.type_oid for c in plan.columns] == types


def test_one_template_serves_every_binding(pay_conn: psycopg.Connection) -> None:
    """The statement is analysed once; each execution only binds (and each value answers as PostgreSQL)."""
    planner = Planner(CATALOG)
    sql = "SELECT count(*) FROM pay WHERE ts >= $1::timestamp AND ts < $1::timestamp + interval '1 day'"
    template = planner.template(sql)
    for day in ("2026-01-31", "2026-03-01 10:30", "2026-06-30"):
        plan = planner.plan(sql, [day])
        assert plan.template.where is template.where  # the cached template (its table cut at a split)
        values = [float(v) for v in pay_conn.execute(answers_sql_batches(plan.table_schema, list(plan.queries))[0])
                  .fetchone() or ()]
        assert plan.rows(np.array(values))[0][0] == _postgres(pay_conn, sql, [day])[0][0][0]


@pytest.mark.parametrize(("sql", "params"), [
    # An untyped parameter next to an interval is an interval (PostgreSQL's resolution): no timestamp >= interval.
    ("SELECT count(*) FROM pay WHERE ts >= $1 - interval '7 days'", ["2026-03-01"]),
    ("SELECT count(*) FROM pay WHERE ts < $1 + interval '1 day'", ["2026-03-01"]),
    # date + unknown: date + integer or date + interval? (42725)
    ("SELECT count(*) FROM pay WHERE d + $1 > DATE '2026-03-01'", ["3"]),
])
def test_what_postgresql_refuses_is_refused_alike(sql: str, params: list[Any], pay_conn: psycopg.Connection) -> None:
    with pytest.raises(Refusal) as ours:
        Planner(CATALOG).plan(sql, params)
    with pytest.raises(psycopg.Error) as theirs:
        _postgres(pay_conn, sql, params)
    assert ours.value.sqlstate == theirs.value.sqlstate, (ours.value.message, str(theirs.value))
    assert ours.value.sqlstate in ("42883", "42725")


def test_a_bound_value_cutting_a_cell_is_refused_at_bind() -> None:
    """``n + $1 >= 150`` reads whole bins of 100 for $1 = -50, not for $1 = 3: the latter is refused (0A000)
    with nothing measured, as the literal ``n + 3 >= 150`` is."""
    planner = Planner(CATALOG)
    sql = "SELECT count(*) FROM pay WHERE n + $1 >= 150"
    planner.plan(sql, ["-50"])
    for sql_, params in ((sql, ["3"]), ("SELECT count(*) FROM pay WHERE n + 3 >= 150", [])):
        with pytest.raises(Refusal) as err:
            planner.plan(sql_, params)
        assert err.value.sqlstate == "0A000" and "cuts the cells of column n" in err.value.message


def test_a_bound_value_cutting_joint_cells_is_refused_at_bind() -> None:
    """``n + $1 > 100 * length(region)`` (two columns) reads whole bins of n for $1 = 1, not for $1 = 3: the
    latter is refused at Bind (0A000), as the literal is; Describe, without a value, answers."""
    planner = Planner(CATALOG)
    sql = "SELECT count(*) FROM pay WHERE n + $1 > 100 * length(region)"
    assert planner.describe(sql).param_types == (23,)  # integer: the other operand's type, as PostgreSQL says
    planner.plan(sql, ["1"])
    for sql_, params in ((sql, ["3"]), ("SELECT count(*) FROM pay WHERE n + 3 > 100 * length(region)", [])):
        with pytest.raises(Refusal) as err:
            planner.plan(sql_, params)
        assert err.value.sqlstate == "0A000" and "cuts the cells of column n" in err.value.message


def test_a_bad_value_fails_at_bind_as_in_postgresql(pay_conn: psycopg.Connection) -> None:
    sql = "SELECT count(*) FROM pay WHERE ts < $1::timestamp + interval '1 day'"
    with pytest.raises(Refusal) as ours:
        Planner(CATALOG).plan(sql, ["yesterday-ish"])
    with pytest.raises(psycopg.Error) as theirs:
        _postgres(pay_conn, sql, ["yesterday-ish"])
    assert ours.value.sqlstate == theirs.value.sqlstate, (ours.value.message, str(theirs.value))


@pytest.mark.parametrize(("sql", "params", "names", "oids"), [
    ("SELECT count(*) FROM pay WHERE ts >= $1 - interval '7 days' AND ts < $2 + interval '1 day'",
     ["2026-03-08 10:30", "2026-03-14"], ("timestamp", "timestamp"), (1114, 1114)),
    ("SELECT count(*) FROM pay WHERE tz > $1 - interval '2 days'", ["2026-03-03 00:00:00+00"], ("timestamptz",),
     (1184,)),
    ("SELECT count(*) FROM pay WHERE d >= $1 - 3", ["2026-03-10"], ("date",), (1082,)),
    ("SELECT $1 * 2 AS x, count(*) FROM pay", ["21"], ("bigint",), (20,)),
    ("SELECT count(*) FROM pay WHERE region = lower($1)", ["B"], ("varchar",), (1043,)),
])
def test_declared_parameter_types_are_read_as_postgresql_reads_them(
        sql: str, params: list[Any], names: tuple[str, ...], oids: tuple[int, ...], pay_conn: psycopg.Connection) -> None:
    """With the types the client declared at Parse (psycopg declares a datetime's, JDBC an int's), ``$1 -
    interval '7 days'`` is a timestamp's arithmetic, as in PostgreSQL."""
    ours, plan = _ours(sql, params, pay_conn, oids)
    theirs, types = _postgres(pay_conn, sql, params, names)
    assert rows_match(ours, theirs, len(plan.template.groups), ordered=False) is None, (sql, ours, theirs)
    assert [c.type_oid for c in plan.columns] == types


@pytest.mark.parametrize("unit", ["day", "week", "month", "quarter", "year", "hour"])
def test_a_bound_granularity_groups_as_postgresql_groups(unit: str, pay_conn: psycopg.Connection) -> None:
    """``date_trunc($1, ts)`` in GROUP BY (a granularity picker): one template per unit, as PostgreSQL groups."""
    for sql in ("SELECT date_trunc($1, ts) AS t, count(*), sum(amount) FROM pay WHERE ts < $2::timestamp "
                "GROUP BY 1 ORDER BY 1",
                "SELECT region, date_trunc($1, ts), count(*) FROM pay WHERE ts < $2::timestamp "
                "GROUP BY region, date_trunc($1, ts)"):
        params = [unit, "2026-02-15"]
        ours, plan = _ours(sql, params, pay_conn)
        theirs, types = _postgres(pay_conn, sql, params)
        assert rows_match(ours, theirs, len(plan.template.groups), ordered=False) is None, (sql, ours[:3], theirs[:3])
        assert [c.type_oid for c in plan.columns] == types


def test_a_bound_granularity_is_planned_once_per_value() -> None:
    planner = Planner(CATALOG)
    sql = "SELECT date_trunc($1, ts) AS t, count(*) FROM pay GROUP BY 1"
    assert planner.describe(sql).param_types == (25,)  # text, as PostgreSQL describes it
    first = planner.plan(sql, ["month"])
    assert planner.plan(sql, ["day"]).n_groups == 181 and first.n_groups == 6
    assert planner.template(sql, params=["month"]).groups is first.template.groups  # cached, not re-analysed
    with pytest.raises(Refusal) as err:  # a unit finer than the hourly cells is refused, as the literal is
        planner.plan(sql, ["minute"])
    assert err.value.sqlstate == "0A000" and "cuts the cells of column ts" in err.value.message


@pytest.mark.parametrize(("sql", "params"), [
    ("SELECT lower($1), upper($2::text), coalesce($1, 'x'), count(*) FROM pay", ["A", "b"]),
    ("SELECT upper(region), date_trunc('month', ts), to_char(ts, 'YYYY'), count(*) FROM pay GROUP BY 1, 2, 3", []),
    ("SELECT round(sum(amount), 1), round(avg(n), 2), trim(region), length(region), count(*) FROM pay GROUP BY 3, 4",
     []),
    ("SELECT date_part('month', ts), extract(month FROM ts), ltrim(region), count(*) FROM pay GROUP BY 1, 2, 3", []),
])
def test_unaliased_columns_are_named_as_postgresql_names_them(sql: str, params: list[Any],
                                                               pay_conn: psycopg.Connection) -> None:
    """A function call's column is named after the function (FigureColname): lower($1) is ``lower``."""
    plan = Planner(CATALOG).plan(sql, params)
    name = pgsql.Identifier(f"param_exprs_{next(_NAMES)}")
    pay_conn.execute(pgsql.SQL("PREPARE {} AS {}").format(name, pgsql.SQL(sql)), prepare=False)
    try:
        cur = pay_conn.execute(_execute(name, params), prepare=False)
        assert [c.name for c in plan.columns] == [d.name for d in cur.description or ()]
    finally:
        pay_conn.execute(pgsql.SQL("DEALLOCATE {}").format(name), prepare=False)


@pytest.mark.parametrize("sql", [
    "SELECT count(*)::numeric / 3 FROM pay", "SELECT sum(n)::numeric / count(*) FROM pay",
    "SELECT avg(n)::numeric(10,2) FROM pay", "SELECT round(avg(n), 2) FROM pay",
    "SELECT region, round(sum(amount) / count(*), 1) FROM pay GROUP BY 1", "SELECT count(*)::numeric(12) FROM pay",
])
def test_numeric_arithmetic_of_aggregates_is_numeric(sql: str, pay_conn: psycopg.Connection) -> None:
    """An explicit numeric (a cast, round(x, n)) of noisy aggregates stays numeric, as PostgreSQL types it,
    its values decimals (numeric(10,2): two places) equal to PostgreSQL's on the exact answers."""
    ours, plan = _ours(sql, [], pay_conn)
    theirs, types = _postgres(pay_conn, sql, [])
    assert [c.type_oid for c in plan.columns] == types
    assert rows_match(ours, theirs, len(plan.template.groups), ordered=False) is None, (sql, ours, theirs)
    values = [v for r in plan.rows(np.full(len(plan.queries), 7.0)) for v in r[-1:]]
    assert all(isinstance(v, Decimal) for v in values), values
    if "(10,2)" in sql or ", 2)" in sql:
        assert all(v.as_tuple().exponent == -2 for v in values), values


@pytest.mark.parametrize("zone", ["UTC", "+02", "Europe/Paris", "America/New_York"])
def test_a_bound_zone_groups_as_postgresql_groups(zone: str, pay_conn: psycopg.Connection) -> None:
    """``date_trunc('day', ts AT TIME ZONE $1)`` in GROUP BY (a viewer's zone): one template per zone, the
    days PostgreSQL groups by; the parameter is text, as PostgreSQL describes it."""
    for sql in ("SELECT date_trunc('day', ts AT TIME ZONE $1) AS d, count(*) FROM pay WHERE ts < $2::timestamp "
                "GROUP BY 1 ORDER BY 1",
                "SELECT date_trunc('month', timezone($1, ts)), count(*) FROM pay GROUP BY 1"):
        params = [zone, "2026-02-15"][:len(set(re.findall(r"\$\d", sql)))]
        ours, plan = _ours(sql, params, pay_conn)
        theirs, types = _postgres(pay_conn, sql, params)
        assert rows_match(ours, theirs, len(plan.template.groups), ordered=False) is None, (sql, ours[:3], theirs[:3])
        assert [c.type_oid for c in plan.columns] == types
    assert Planner(CATALOG).describe(sql).param_types == (25,)


def test_a_bound_zone_that_cuts_cells_is_refused_as_its_literal() -> None:
    """A zone whose offset is not whole hours cuts ts's hourly cells: refused (0A000) at Bind as the literal
    zone is; an unknown zone is PostgreSQL's 22023."""
    planner = Planner(CATALOG)
    sql = "SELECT date_trunc('day', ts AT TIME ZONE $1) AS d, count(*) FROM pay GROUP BY 1"
    for zone, state in (("Asia/Kolkata", "0A000"), ("Nowhere/Land", "22023")):
        with pytest.raises(Refusal) as bound:
            planner.plan(sql, [zone])
        with pytest.raises(Refusal) as literal:
            planner.plan(sql.replace("$1", f"'{zone}'"), [])
        assert bound.value.sqlstate == literal.value.sqlstate == state, bound.value.message


@pytest.mark.parametrize("sql", [
    "SELECT CASE WHEN n >= $1 THEN 'big' ELSE 'small' END AS k, count(*) FROM pay GROUP BY 1",
    "SELECT width_bucket(n, $1, 1000, 5) AS b, count(*) FROM pay GROUP BY 1",
    "SELECT n + $1 > 100 * length(region) AS k, count(*) FROM pay GROUP BY 1",
])
def test_a_parameter_in_a_group_key_other_than_a_truncation_unit_is_refused_alike(sql: str) -> None:
    """Only ``date_trunc($1, ts)``'s unit shapes the groups per value; a parameter elsewhere in a GROUP BY
    key is refused the same way at Describe (no value) and at Bind (a value), never answered at one and
    refused at the other."""
    planner = Planner(CATALOG)
    with pytest.raises(Refusal) as described:
        planner.describe(sql)
    with pytest.raises(Refusal) as bound:
        planner.plan(sql, ["200"])
    assert described.value.sqlstate == bound.value.sqlstate == "0A000"
    assert described.value.message == bound.value.message
    assert described.value.message.startswith("a parameter ($1) in the GROUP BY expression")


def test_numeric_division_has_postgresqls_scale(pay_conn: psycopg.Connection) -> None:
    """numeric / numeric carries PostgreSQL's digits (select_div_scale: 16 significant at least, the operands'
    scales, half away from zero), so count(*)::numeric / 3 prints as PostgreSQL prints it."""
    from decimal import Decimal as D

    from parser.semantics.values import numeric_div

    pairs = [("20000", "3"), ("1551463", "20000"), ("1", "3"), ("0.001", "7"), ("-5", "3"), ("2.5", "0.01"),
             ("0", "3"), ("10", "4"), ("123456789012345678901234567890", "7"), ("99999", "1"), ("2", "-3.000")]
    for a, b in pairs:
        theirs = pay_conn.execute(f"SELECT ({a}::numeric / {b}::numeric)::text").fetchone()[0]  # type: ignore[index]
        assert format(numeric_div(D(a), D(b)), "f") == theirs, (a, b)
