"""The SQL surface lapras.linear_regression(...)."""

from __future__ import annotations

import pytest

from lapras.regression.sqlcall import RegressionCall, RegressionError, parse_regression_call


def test_basic_call() -> None:
    c = parse_regression_call("SELECT * FROM lapras.linear_regression('adult', 'hours_per_week', "
                              "'age, education_num, sex', 'ihm')")
    assert c == RegressionCall("adult", "hours_per_week", ("age", "education_num", "sex"), "ihm")


def test_optional_arguments_case_alias() -> None:
    c = parse_regression_call("select term, estimate from LAPRAS.Linear_Regression('public.Adult', 'Y', "
                              "'a,b', 'FastMix', 0.5, 1e-9) AS r;")
    assert c is not None
    assert (c.schema, c.table, c.y, c.xs, c.method, c.epsilon, c.delta) == (
        "public", "adult", "y", ("a", "b"), "fast_ihm", 0.5, 1e-9)
    assert parse_regression_call("SELECT * FROM lapras.linear_regression('t', 'y', 'x')").method == "ihm"  # type: ignore[union-attr]


def test_names_are_read_as_sql_names() -> None:
    c = parse_regression_call("""SELECT * FROM lapras.linear_regression('"Tableau Extract"."Sales_3"', """
                              """'"Profit, €"', 'Age, "Number of Records", "a.b"')""")
    assert c is not None
    assert (c.schema, c.table, c.y, c.xs) == ("Tableau Extract", "Sales_3", "Profit, €",
                                              ("age", "Number of Records", "a.b"))


@pytest.mark.parametrize("sql", ["SELECT 1", "SELECT count(*) FROM adult", "SELECT linear_regression FROM t",
                                 "SELECT * FROM other.linear_regression('a', 'b', 'c')"])
def test_not_a_regression(sql: str) -> None:
    assert parse_regression_call(sql) is None


@pytest.mark.parametrize("sql,state", [
    ("SELECT * FROM lapras.linear_regression('a', 'y', 'x', 'bogus')", "22023"),
    ("SELECT * FROM lapras.linear_regression('a', 'y', 'x', 'ihm', -1)", "22023"),
    ("SELECT * FROM lapras.linear_regression('a', 'y', 'x', 'ihm', 'big')", "22023"),
    ("SELECT * FROM lapras.linear_regression('a', 'y', 'x', 'ihm', 1, 2)", "22023"),
    ("SELECT * FROM lapras.linear_regression('a', 'y')", "22023"),
    ("SELECT * FROM lapras.linear_regression('a', 'y', '')", "22023"),
    ("SELECT * FROM lapras.linear_regression('a', 'y', 'x, y')", "22023"),
    ("SELECT * FROM lapras.linear_regression('a', 'y', 'x') WHERE term = 'x'", "0A000"),
    ("SELECT * FROM lapras.linear_regression('a', 'y', 'x') JOIN t ON true", "0A000"),
    ("SELECT secret FROM lapras.linear_regression('a', 'y', 'x')", "0A000"),
    ("SELECT * FROM lapras.linear_regression('a', 'y', 'x'); SELECT 1", "0A000"),
    ("SELECT * FROM lapras.linear_regression('a', 'y', x)", "22023"),
    ("SELECT * FROM lapras.linear_regression('a.b.c', 'y', 'x')", "42602"),
    ("SELECT * FROM lapras.linear_regression('a', 'y; z', 'x')", "42602"),
    ("SELECT * FROM lapras.linear_regression('a', 'y', 'x,, z')", "42602"),
])
def test_refusals(sql: str, state: str) -> None:
    with pytest.raises(RegressionError) as ei:
        parse_regression_call(sql)
    assert ei.value.sqlstate == state and ei.value.message
