"""The BI-tool corpus of issue 18: a test schema with odd names and every column type, its generated data,
its config, about 170 statements in the forms Tableau, Power BI, Looker and Metabase send, each with its
expected classification, and a runner that sends them through a real proxy and compares the answers with
PostgreSQL's exact ones. Shared by tests/test_bi_corpus_wire.py and benchmarks/corpus_share.py.

Where the forms come from (read for their structure; every statement is written here for this schema):
- Tableau: the Connector SDK's TDVT logical tests (tableau/connector-plugin-sdk, tdvt/tdvt/logicaltests:
  Filter.QFilter-Null / -NotNull, Filter.Date_In, Query.Filter.IsNULL, Filter.TopN-context, the calcs
  date parts) and the PostgreSQL dialect's function forms: `SUM(1) AS "cnt:...:ok"`, aggregates named
  `"sum:<field>:ok"`, `CAST(EXTRACT(YEAR FROM x) AS BIGINT)`, `DATE_TRUNC('MONTH', CAST(x AS DATE))`,
  `GROUP BY 1`, `HAVING (COUNT(1) > 0)`, `(NOT (x IS NULL))`, `STRPOS(CAST(x AS TEXT), ...) > 0`,
  `"Custom SQL Query"` subqueries, MIN/MAX pairs for quick-filter ranges, top-N as an INNER JOIN.
- Metabase: the PostgreSQL driver (metabase/metabase, src/metabase/driver/postgres.clj: `date_trunc`, date
  columns cast back `CAST(date_trunc('month', d) AS date)`, `CAST(extract(year from x) AS integer)`, the
  day-of-week offset, weeks starting Sunday) and the SQL query processor (fully qualified
  `"public"."t"."col" AS "col"`, `count(*) AS "count"`, `sum(...) AS "sum"`, `-- Metabase::` comments,
  `<>` filters that keep NULLs, `LIKE '%x%'` / `lower(x) LIKE` for contains, field-values queries with
  `GROUP BY ... ORDER BY ... ASC LIMIT`, nested questions as `(...) AS "source"`, `LIMIT 2000` raw tables).
- Looker: the LookML reference (docs: dimension_group timeframes `DATE(x)`,
  `TO_CHAR(DATE_TRUNC('month', x), 'YYYY-MM')`, `EXTRACT(YEAR FROM x)::integer`; measure types `sum` as
  `COALESCE(SUM(x), 0)`, `count` as `COUNT(*)`, `count_distinct`, `average`, `median`; `yesno` dimensions as
  `CASE WHEN x THEN 'Yes' ELSE 'No' END`; `tier` dimensions as CASE ladders; filters wrapped
  `(( x ) >= ((TIMESTAMP '...')))`; labels `AS "view.field"`; `ORDER BY 2 DESC LIMIT 500`; derived tables as
  WITH).
- Power BI DirectQuery (Microsoft's documentation of query folding for the PostgreSQL connector, as
  captured by its "View native query"): nested `from (select ... from "public"."t" "$Table") "_"`,
  `count(1) as "a0"`, `where not "_"."a0" is null`, `limit 1000001`, slicers as `select "rows"."c" from
  (... group by ...) "rows"`, date filters as `>= date '...'` / `timestamp '...'`.

Classification per statement (``expect``): ``answer`` (an aggregate answered within its stated error),
``values`` (a value list: answered from the public domain or refused with a stated reason), or a SQLSTATE
(refused). ``needs`` names the parts the statement waits for (#18 parts, and gaps no part covers yet:
``bin-edges``, a float bin edge such as 0.2
that the declared width 0.1 does not hit exactly; ``distinct-private``, COUNT(DISTINCT) of a column whose
keys are private, answered since it counts stored values); while a part is in ``PENDING`` its
statements may also be refused with a proper SQLSTATE (recorded, reported by the benchmark).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

PENDING: frozenset[str] = frozenset()
"""#18 parts not on main yet: their statements may be refused (tightened as each lands)."""

TABLE = "Sales_3"
ROWS = 20_000

COLUMNS: dict[str, tuple[str, str]] = {
    # name: (PostgreSQL type, config.toml declaration)
    "Row ID": ("bigint", '{ type = "bigint", min = 1, max = 100000, bins = 5000 }'),
    "Number of Records": ("integer", '{ type = "int", min = 1, max = 1 }'),
    "Quantity": ("integer", '{ type = "int", min = 1, max = 14 }'),
    "Agep (bin)": ("smallint", '{ type = "smallint", min = 0, max = 9 }'),
    "FB.": ("integer", '{ type = "int", min = 0, max = 50, nullable = true }'),
    "Größe cm": ("integer", '{ type = "int", min = 140, max = 210, nullable = true }'),
    "Region": ("text", '{ type = "text", values = ["Central", "East", "South", "West"] }'),
    "City": ("text", '{ type = "text", values = ["Chicago", "Houston", "Detroit", "New York City", '
                     '"Philadelphia", "Boston", "Atlanta", "Miami", "Dallas", "Los Angeles", "San Francisco", '
                     '"Seattle"] }'),
    "Ship Mode": ("text", '{ type = "text", values = ["First Class", "Same Day", "Second Class", '
                          '"Standard Class"], nullable = true }'),
    "twitter#user#screen_name": ("text", '{ type = "text", values = ["@alpha", "@beta", "@gamma"], '
                                         'nullable = true }'),
    "Sales": ("numeric(12,2)", '{ type = "numeric", min = 0, max = 5000, bins = 250 }'),
    "Profit": ("numeric(12,2)", '{ type = "numeric", min = -2000, max = 3000, bins = 500 }'),
    "Discount": ("double precision", '{ type = "float", min = 0, max = 0.8, bins = 0.1 }'),
    "Order Date": ("date", '{ type = "date", min = 2022-01-01, max = 2025-12-31 }'),
    "Ship Date: Local": ("timestamp", '{ type = "timestamp", min = 2022-01-01T00:00:00, '
                                      'max = 2026-01-31T23:59:59, resolution = "day" }'),
    "Created (UTC)": ("timestamptz", '{ type = "timestamptz", min = 2025-01-01T00:00:00Z, '
                                     'max = 2025-12-31T23:59:59Z, resolution = "hour" }'),
    "Returned?": ("boolean", '{ type = "boolean", nullable = true }'),
    # Customer names have no public list: their keys come from DP partition selection.
    "Customer Name": ("text", '{ type = "text", keys = "private" }'),
}
CITIES = {"Central": ["Chicago", "Houston", "Detroit"], "East": ["New York City", "Philadelphia", "Boston"],
          "South": ["Atlanta", "Miami", "Dallas"], "West": ["Los Angeles", "San Francisco", "Seattle"]}


def q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def ddl() -> str:
    cols = ", ".join(f"{q(n)} {t}" for n, (t, _) in COLUMNS.items())
    return f"CREATE TABLE public.{q(TABLE)} ({cols})"


def fill_sql(rows: int = ROWS) -> str:
    """Deterministic rows (setseed): skewed regions and cities, NULLs in the nullable columns, measures
    spread over their bins, dates over four years."""
    city = "(ARRAY[" + ", ".join(
        "ARRAY[" + ", ".join(f"'{c}'" for c in CITIES[r]) + "]" for r in ("Central", "East", "South", "West")
    ) + "])"
    return f"""
SELECT setseed(0.18);
INSERT INTO public.{q(TABLE)}
SELECT g, 1, 1 + (r1 * 14)::int % 14, (r2 * 10)::int % 10,
       CASE WHEN r3 < 0.1 THEN NULL ELSE (r3 * 51)::int % 51 END,
       CASE WHEN r4 < 0.05 THEN NULL ELSE 140 + (r4 * 70)::int END,
       (ARRAY['Central', 'East', 'South', 'West'])[reg],
       {city}[reg][1 + (r5 * 3)::int % 3],
       CASE WHEN r6 < 0.08 THEN NULL ELSE (ARRAY['First Class', 'Same Day', 'Second Class', 'Standard Class'])
            [1 + (r6 * 4)::int % 4] END,
       CASE WHEN r7 < 0.3 THEN NULL ELSE (ARRAY['@alpha', '@beta', '@gamma'])[1 + (r7 * 3)::int % 3] END,
       round((r8 * r8 * 4800)::numeric, 2), round(((r9 - 0.3) * 2000)::numeric, 2), floor(r1 * r2 * 8) / 10.0,
       date '2022-01-01' + (r10 * 1460)::int,
       timestamp '2022-01-03 08:00' + (r10 * 1460)::int * interval '1 day' + (r11 * 20)::int * interval '1 hour',
       timestamptz '2025-01-01 00:00+00' + (r10 * 364 * 24)::int * interval '1 hour'
                                          + (r11 * 59)::int * interval '1 minute',
       CASE WHEN r12 < 0.05 THEN NULL ELSE r12 < 0.2 END,
       'Customer ' || (1 + floor(r13 * r13 * 400))::int
FROM (SELECT g, random() r1, random() r2, random() r3, random() r4, random() r5, random() r6, random() r7,
             random() r8, random() r9, random() r10, random() r11, random() r12, random() r13,
             1 + (random() * random() * 4)::int % 4 AS reg
      FROM generate_series(1, {rows}) g) s;
"""


def config_toml(dsn: str, port: int, *, epsilon: float = 1.0, delta: float = 1e-6,
                stream_length: int = 300) -> str:
    cols = "\n".join(f"{q(n)} = {spec}" for n, (_, spec) in COLUMNS.items() if spec)
    return (f'[server]\nlisten = "127.0.0.1:{port}"\ndatabase = "bi"\nstatement_timeout_s = 120.0\n'
            f'queries_per_minute = 100000\n\n[upstream]\ndsn = "{dsn}"\n\n'
            '[[users]]\nname = "analyst"\nauth = "trust"\n\n'
            f"[privacy]\nepsilon = {epsilon!r}\ndelta = {delta!r}\nstream_length = {stream_length}\n"
            "regression_fraction = 0.0\npartition_fraction = 0.3\npartition_selections = 8\n\n"
            f'[tables.{q(TABLE)}]\nschema = "public"\n\n[tables.{q(TABLE)}.columns]\n{cols}\n')


# --------------------------------------------------------------------------------------------- statements


@dataclass(frozen=True)
class Stmt:
    tool: str
    shape: str
    sql: str
    expect: str                                  # "answer" | "values" | a SQLSTATE
    needs: frozenset[str] = field(default_factory=frozenset)

    @property
    def aggregate(self) -> bool:
        return self.expect == "answer"


def _s(tool: str, shape: str, sql: str, expect: str = "answer", *needs: str) -> Stmt:
    text = "\n".join(" ".join(line.split()) for line in sql.strip().splitlines())  # comments end at a newline
    return Stmt(tool, shape, text, expect, frozenset(needs) | {"names"})


# Tableau ---------------------------------------------------------------------------------------------
TT = f'"public".{q(TABLE)} {q(TABLE)}'


def tc(col: str) -> str:
    return f"{q(TABLE)}.{q(col)}"


def _tableau() -> list[Stmt]:
    t = "tableau"
    out = []
    for dim in ("Region", "Ship Mode", "Returned?", "Agep (bin)", "twitter#user#screen_name"):
        out.append(_s(t, "sum", f'SELECT {tc(dim)} AS {q(dim)}, SUM({tc("Sales")}) AS "sum:Sales:ok" '
                                f"FROM {TT} GROUP BY 1"))
    for meas in ("Quantity", "Profit", "Discount", "Row ID", "FB."):
        out.append(_s(t, "sum", f'SELECT SUM({tc(meas)}) AS "sum:{meas}:ok" FROM {TT} HAVING (COUNT(1) > 0)'))
    out += [
        _s(t, "count", f'SELECT SUM(CAST({tc("Number of Records")} AS BIGINT)) AS "sum:Number of Records:ok" '
                       f"FROM {TT} HAVING (COUNT(1) > 0)"),
        _s(t, "count", f'SELECT {tc("Region")} AS "Region", SUM(1) AS "cnt:Sales_3_5C1B:ok" FROM {TT} GROUP BY 1'),
        _s(t, "count", f'SELECT COUNT({tc("FB.")}) AS "cnt:FB.:ok" FROM {TT} HAVING (COUNT(1) > 0)'),
        _s(t, "avg", f'SELECT {tc("Ship Mode")} AS "Ship Mode", AVG(CAST({tc("Quantity")} AS DOUBLE PRECISION)) '
                     f"AS \"avg:Quantity:ok\" FROM {TT} WHERE ({tc('Region')} IN ('East', 'West')) GROUP BY 1"),
        _s(t, "avg", f'SELECT AVG({tc("Discount")}) AS "avg:Discount:ok" FROM {TT} HAVING (COUNT(1) > 0)'),
        _s(t, "date logic", f'SELECT CAST(EXTRACT(YEAR FROM {tc("Order Date")}) AS BIGINT) AS "yr:Order Date:ok", '
                            f'SUM({tc("Sales")}) AS "sum:Sales:ok" FROM {TT} GROUP BY 1'),
        _s(t, "date logic", f'SELECT SUM({tc("Profit")}) AS "sum:Profit:ok" FROM {TT} '
                            f"WHERE (CAST(EXTRACT(YEAR FROM {tc('Order Date')}) AS BIGINT) >= 2023) "
                            "HAVING (COUNT(1) > 0)"),
        _s(t, "date logic", f'SELECT CAST(EXTRACT(QUARTER FROM {tc("Order Date")}) AS BIGINT) AS "qr:Order Date:ok", '
                            f'SUM(1) AS "cnt:Sales_3_5C1B:ok" FROM {TT} GROUP BY 1'),
        _s(t, "date logic", f"SELECT CAST(DATE_TRUNC('MONTH', CAST({tc('Order Date')} AS DATE)) AS DATE) AS "
                            f'"tmn:Order Date:ok", SUM({tc("Sales")}) AS "sum:Sales:ok" FROM {TT} '
                            f"WHERE ({tc('Order Date')} >= DATE '2024-01-01') GROUP BY 1"),
        _s(t, "date logic", f"SELECT CAST(DATE_TRUNC('DAY', {tc('Created (UTC)')}) AS DATE) AS "
                            f'"tdy:Created (UTC):ok", SUM(1) AS "cnt:Sales_3_5C1B:ok" FROM {TT} '
                            f"WHERE (({tc('Created (UTC)')} >= TIMESTAMP '2025-03-01 00:00:00') AND "
                            f"({tc('Created (UTC)')} < TIMESTAMP '2025-03-08 00:00:00')) GROUP BY 1"),
        _s(t, "date logic", f"SELECT SUM({tc('Quantity')}) AS \"sum:Quantity:ok\" FROM {TT} WHERE "
                            f"(({tc('Order Date')} >= DATE '2023-01-01') AND ({tc('Order Date')} <= DATE '2023-12-31'))"
                            " HAVING (COUNT(1) > 0)"),
        _s(t, "date logic", f"SELECT CAST(EXTRACT(MONTH FROM {tc('Ship Date: Local')}) AS BIGINT) AS "
                            f'"mn:Ship Date: Local:ok", AVG({tc("Sales")}) AS "avg:Sales:ok" FROM {TT} GROUP BY 1'),
        _s(t, "IS NULL", f'SELECT SUM(1) AS "cnt:Sales_3_5C1B:ok" FROM {TT} WHERE ({tc("Ship Mode")} IS NULL) '
                         "HAVING (COUNT(1) > 0)"),
        _s(t, "IS NULL", f'SELECT {tc("Region")} AS "Region", SUM({tc("FB.")}) AS "sum:FB.:ok" FROM {TT} '
                         f'WHERE (NOT ({tc("FB.")} IS NULL)) GROUP BY 1'),
        _s(t, "IN list", f"SELECT {tc('City')} AS \"City\", SUM({tc('Sales')}) AS \"sum:Sales:ok\" FROM {TT} "
                         f"WHERE ({tc('City')} IN ('Boston', 'Chicago', 'Miami', 'Seattle')) GROUP BY 1"),
        _s(t, "IN list", f"SELECT SUM(1) AS \"cnt:Sales_3_5C1B:ok\" FROM {TT} WHERE ({tc('Größe cm')} IN ("
                         + ", ".join(str(v) for v in range(150, 200)) + ")) HAVING (COUNT(1) > 0)"),
        _s(t, "IN list", f"SELECT {tc('Ship Mode')} AS \"Ship Mode\", SUM(1) AS \"cnt:Sales_3_5C1B:ok\" FROM {TT} "
                         f"WHERE (({tc('Ship Mode')} IN ('First Class', 'Same Day')) OR ({tc('Ship Mode')} IS NULL)) "
                         "GROUP BY 1"),
        _s(t, "CASE/LIKE", f"SELECT (CASE WHEN ({tc('Quantity')} >= 5) THEN 'Bulk' ELSE 'Single' END) AS "
                           f'"Calculation_0172", SUM({tc("Profit")}) AS "sum:Profit:ok" FROM {TT} GROUP BY 1'),
        _s(t, "CASE/LIKE", f"SELECT SUM({tc('Sales')}) AS \"sum:Sales:ok\" FROM {TT} WHERE "
                           f"(STRPOS(CAST({tc('City')} AS TEXT), CAST('an' AS TEXT)) > 0) HAVING (COUNT(1) > 0)"),
        _s(t, "CASE/LIKE", f"SELECT {tc('Region')} AS \"Region\", SUM(CAST((CASE WHEN {tc('Returned?')} THEN 1 "
                           "ELSE 0 END) AS BIGINT)) AS \"sum:Calculation_ret:ok\" FROM " + TT + " GROUP BY 1"),
        _s(t, "two keys", f"SELECT {tc('Region')} AS \"Region\", {tc('Returned?')} AS \"Returned?\", "
                          f"SUM({tc('Sales')}) AS \"sum:Sales:ok\" FROM {TT} GROUP BY 1, 2"),
        _s(t, "min/max", f"SELECT MIN({tc('Quantity')}) AS \"TEMP(attr:Quantity:qk)(1)(0)\", MAX({tc('Quantity')}) "
                         f"AS \"TEMP(attr:Quantity:qk)(2)(0)\" FROM {TT} HAVING (COUNT(1) > 0)"),
        _s(t, "min/max", f"SELECT MIN({tc('Order Date')}) AS \"TEMP(attr:Order Date:qk)(1)(0)\", "
                         f"MAX({tc('Order Date')}) AS \"TEMP(attr:Order Date:qk)(2)(0)\" FROM {TT} HAVING (COUNT(1) > 0)"),
        _s(t, "min/max", f"SELECT {tc('Region')} AS \"Region\", MAX({tc('Sales')}) AS \"max:Sales:ok\" FROM {TT} "
                         "GROUP BY 1"),
        _s(t, "percentile", f"SELECT PERCENTILE_CONT(0.5) WITHIN GROUP (ORDER BY {tc('Quantity')}) AS "
                            f"\"med:Quantity:ok\" FROM {TT} HAVING (COUNT(1) > 0)"),
        _s(t, "count distinct", f"SELECT COUNT(DISTINCT {tc('City')}) AS \"ctd:City:ok\" FROM {TT} "
                                "HAVING (COUNT(1) > 0)", "answer", "distinct"),
        _s(t, "count distinct", f"SELECT {tc('Region')} AS \"Region\", COUNT(DISTINCT {tc('Ship Mode')}) AS "
                                f"\"ctd:Ship Mode:ok\" FROM {TT} GROUP BY 1", "answer", "distinct"),
        _s(t, "value list", f"SELECT {tc('Region')} AS \"Region\" FROM {TT} GROUP BY 1 ORDER BY 1 ASC", "values"),
        _s(t, "value list", f"SELECT {tc('Returned?')} AS \"Returned?\" FROM {TT} GROUP BY 1", "values"),
        _s(t, "filtered value list", f"SELECT {tc('City')} AS \"City\" FROM {TT} WHERE ({tc('Region')} = 'East') "
                                     "GROUP BY 1", "values", "partition"),
        _s(t, "filtered value list", f"SELECT {tc('Customer Name')} AS \"Customer Name\" FROM {TT} "
                                     "GROUP BY 1", "values", "partition"),
        _s(t, "subquery", f"SELECT \"Custom SQL Query\".\"Region\" AS \"Region\", SUM(\"Custom SQL Query\".\"Sales\") "
                          f"AS \"sum:Sales:ok\" FROM (SELECT * FROM {q(TABLE)} WHERE \"Discount\" >= 0.2) "
                          "\"Custom SQL Query\" GROUP BY 1", "answer", "bin-edges"),
        _s(t, "join", f"SELECT {tc('City')} AS \"City\", SUM({tc('Sales')}) AS \"sum:Sales:ok\" FROM {TT} "
                      f"INNER JOIN (SELECT {tc('City')} AS \"City\", SUM({tc('Sales')}) AS \"$__alias__0\" FROM {TT} "
                      "GROUP BY 1 ORDER BY 2 DESC LIMIT 5) \"t0\" ON ("
                      f"{tc('City')} = \"t0\".\"City\") GROUP BY 1", "0A000"),
        _s(t, "row-level", f"SELECT {tc('Sales')} AS \"Sales\", {tc('City')} AS \"City\" FROM {TT}", "42501"),
        _s(t, "other aggregate", f"SELECT STDDEV_SAMP({tc('Sales')}) AS \"std:Sales:ok\" FROM {TT} "
                                 "HAVING (COUNT(1) > 0)", "0A000"),
    ]
    return out


# Metabase --------------------------------------------------------------------------------------------
MT = f'"public".{q(TABLE)}'


def mc(col: str) -> str:
    return f"{MT}.{q(col)}"


def _mb_group(dim_sql: str, label: str, agg: str, where: str = "", prefix: str = "") -> str:
    w = f" WHERE {where}" if where else ""
    return (f"{prefix}SELECT {dim_sql} AS {q(label)}, {agg} FROM {MT}{w} GROUP BY {dim_sql} "
            f"ORDER BY {dim_sql} ASC")


def _metabase() -> list[Stmt]:
    t = "metabase"
    tag = "-- Metabase:: userID: 1 queryType: MBQL queryHash: 5e0c2a\n"
    out = [
        _s(t, "count", f'SELECT count(*) AS "count" FROM {MT}'),
        _s(t, "count", _mb_group(mc("Region"), "Region", 'count(*) AS "count"', prefix=tag)),
        _s(t, "count", _mb_group(mc("Returned?"), "Returned?", 'count(*) AS "count"')),
        _s(t, "sum", _mb_group(mc("Ship Mode"), "Ship Mode", f'sum({mc("Sales")}) AS "sum"')),
        _s(t, "sum", f'SELECT sum({mc("Profit")}) AS "sum" FROM {MT} WHERE {mc("Region")} = \'East\''),
        _s(t, "sum", _mb_group(mc("twitter#user#screen_name"), "twitter#user#screen_name",
                               f'sum({mc("Quantity")}) AS "sum"')),
        _s(t, "avg", _mb_group(mc("Region"), "Region", f'avg({mc("Discount")}) AS "avg"')),
        _s(t, "avg", f'SELECT avg({mc("Größe cm")}) AS "avg" FROM {MT}'),
        _s(t, "min/max", f'SELECT min({mc("Quantity")}) AS "min", max({mc("Quantity")}) AS "max" FROM {MT}'),
        _s(t, "min/max", _mb_group(mc("Region"), "Region", f'max({mc("Created (UTC)")}) AS "max"')),
        _s(t, "count", f'SELECT sum(CASE WHEN {mc("Returned?")} = TRUE THEN 1 ELSE 0.0 END) AS "count-where" '
                       f"FROM {MT}"),
        _s(t, "avg", f'SELECT sum(CASE WHEN {mc("Region")} = \'West\' THEN 1 ELSE 0.0 END) / count(*) AS "share" '
                     f"FROM {MT}"),
        _s(t, "count distinct", f'SELECT count(distinct {mc("City")}) AS "count" FROM {MT}', "answer", "distinct"),
        _s(t, "count distinct", _mb_group(mc("Region"), "Region", f'count(distinct {mc("Ship Mode")}) AS "count"'),
           "answer", "distinct"),
        _s(t, "date logic", _mb_group(f"date_trunc('month', {mc('Created (UTC)')})", "Created (UTC)",
                                      'count(*) AS "count"',
                                      where=f"{mc('Created (UTC)')} >= timestamp with time zone '2025-01-01 00:00:00.000Z' "
                                            f"AND {mc('Created (UTC)')} < timestamp with time zone "
                                            "'2025-07-01 00:00:00.000Z'")),
        _s(t, "date logic", _mb_group(f"CAST(date_trunc('month', {mc('Order Date')}) AS date)", "Order Date",
                                      f'sum({mc("Sales")}) AS "sum"')),
        _s(t, "date logic", _mb_group(f"CAST(date_trunc('quarter', {mc('Order Date')}) AS date)", "Order Date",
                                      'count(*) AS "count"')),
        _s(t, "date logic", _mb_group(f"CAST(extract(year from {mc('Order Date')}) AS integer)", "Order Date",
                                      f'avg({mc("Profit")}) AS "avg"')),
        _s(t, "date logic", _mb_group(f"CAST(extract(dow from {mc('Created (UTC)')}) AS integer) + 1",
                                      "Created (UTC)", 'count(*) AS "count"')),
        _s(t, "date logic", _mb_group(f"CAST(extract(hour from {mc('Created (UTC)')}) AS integer)",
                                      "Created (UTC)", 'count(*) AS "count"')),
        _s(t, "date logic", _mb_group(f"CAST((CAST(date_trunc('week', CAST(({mc('Order Date')} + INTERVAL '1 day') "
                                      "AS date)) AS date) + INTERVAL '-1 day') AS date)", "Order Date",
                                      'count(*) AS "count"',
                                      where=f"{mc('Order Date')} >= CAST('2025-01-01' AS date) AND "
                                            f"{mc('Order Date')} < CAST('2025-04-01' AS date)")),
        _s(t, "date logic", _mb_group(f"CAST({mc('Ship Date: Local')} AS date)", "Ship Date: Local",
                                      'count(*) AS "count"',
                                      where=f"{mc('Ship Date: Local')} >= timestamp '2024-06-01 00:00:00.000' AND "
                                            f"{mc('Ship Date: Local')} < timestamp '2024-06-15 00:00:00.000'")),
        _s(t, "date logic", f'SELECT count(*) AS "count" FROM {MT} WHERE {mc("Order Date")} >= '
                            f"CAST((NOW() + INTERVAL '-30 day') AS date) AND {mc('Order Date')} < CAST(NOW() AS date)"),
        _s(t, "date logic", f'SELECT sum({mc("Sales")}) AS "sum" FROM {MT} WHERE {mc("Order Date")} BETWEEN '
                            "'2024-01-01' AND '2024-06-30'"),
        _s(t, "IS NULL", f'SELECT count(*) AS "count" FROM {MT} WHERE {mc("Ship Mode")} IS NULL'),
        _s(t, "IS NULL", _mb_group(mc("Region"), "Region", 'count(*) AS "count"',
                                   where=f"{mc('twitter#user#screen_name')} IS NOT NULL")),
        _s(t, "IS NULL", f'SELECT count(*) AS "count" FROM {MT} WHERE ({mc("Ship Mode")} IS NULL OR '
                         f"{mc('Ship Mode')} = '')"),
        _s(t, "IN list", _mb_group(mc("City"), "City", f'sum({mc("Sales")}) AS "sum"',
                                   where=f"{mc('City')} IN ('Boston', 'Miami', 'Seattle')")),
        _s(t, "IN list", f'SELECT count(*) AS "count" FROM {MT} WHERE (({mc("Region")} <> \'East\') OR '
                         f"({mc('Region')} IS NULL))"),
        _s(t, "IN list", f'SELECT sum({mc("Sales")}) AS "sum" FROM {MT} WHERE {mc("Quantity")} BETWEEN 2 AND 5'),
        _s(t, "IN list", f'SELECT count(*) AS "count" FROM {MT} WHERE {mc("Returned?")} = TRUE'),
        _s(t, "CASE/LIKE", f'SELECT count(*) AS "count" FROM {MT} WHERE {mc("City")} LIKE \'%an%\''),
        _s(t, "CASE/LIKE", f'SELECT count(*) AS "count" FROM {MT} WHERE lower({mc("City")}) LIKE \'%san%\''),
        _s(t, "CASE/LIKE", f'SELECT sum({mc("Profit")}) AS "sum" FROM {MT} WHERE {mc("City")} LIKE \'New%\''),
        _s(t, "CASE/LIKE", _mb_group(f"(floor(({mc('Sales')} / 500.0)) * 500.0)", "Sales", 'count(*) AS "count"')),
        _s(t, "CASE/LIKE", _mb_group(f"(floor((({mc('Größe cm')} - 140.0) / 10.0)) * 10.0) + 140.0", "Größe cm",
                                     'count(*) AS "count"')),
        _s(t, "subquery", f'SELECT "source"."Region" AS "Region", sum("source"."Sales") AS "sum" FROM (SELECT '
                          f'{mc("Region")} AS "Region", {mc("Sales")} AS "Sales" FROM {MT} WHERE '
                          f'{mc("Returned?")} = FALSE) AS "source" GROUP BY "source"."Region" ORDER BY '
                          '"source"."Region" ASC'),
        _s(t, "value list", f'SELECT {mc("Ship Mode")} AS "Ship Mode" FROM {MT} GROUP BY {mc("Ship Mode")} '
                            f'ORDER BY {mc("Ship Mode")} ASC LIMIT 5000', "values"),
        _s(t, "value list", f'SELECT {mc("City")} AS "City" FROM {MT} GROUP BY {mc("City")} '
                            f'ORDER BY {mc("City")} ASC LIMIT 1000', "values"),
        _s(t, "filtered value list", f'SELECT {mc("City")} AS "City" FROM {MT} WHERE {mc("Region")} = \'East\' '
                                     f'GROUP BY {mc("City")} ORDER BY {mc("City")} ASC LIMIT 1000', "values",
           "partition"),
        _s(t, "filtered value list", f'SELECT {mc("Customer Name")} AS "Customer Name" FROM {MT} '
                                     f'GROUP BY {mc("Customer Name")} ORDER BY {mc("Customer Name")} ASC LIMIT 1000',
           "values", "partition"),
        _s(t, "row-level", f'SELECT {mc("Row ID")} AS "Row ID", {mc("Sales")} AS "Sales" FROM {MT} LIMIT 2000',
           "42501"),
        _s(t, "other aggregate", f'SELECT stddev_pop({mc("Sales")}) AS "stddev" FROM {MT}', "0A000"),
        _s(t, "window", _mb_group(mc("Region"), "Region", f'sum(sum({mc("Sales")})) OVER (ORDER BY {mc("Region")} '
                                  'ROWS UNBOUNDED PRECEDING) AS "sum"'), "0A000"),
    ]
    return out


# Looker ----------------------------------------------------------------------------------------------
LT = f'"public".{q(TABLE)} AS sales_3'


def lc(col: str) -> str:
    return f"sales_3.{q(col)}"


def _lk(dims: list[tuple[str, str]], measures: list[tuple[str, str]], where: str = "", order: str = "",
        with_: str = "", source: str = LT) -> str:
    sel = ", ".join([f"{e} AS {q('sales_3.' + n)}" for e, n in dims] + [f"{e} AS {q('sales_3.' + n)}"
                                                                         for e, n in measures])
    w = f" WHERE {where}" if where else ""
    g = " GROUP BY " + ", ".join(str(i + 1) for i in range(len(dims))) if dims else ""
    o = order or (f" ORDER BY {len(dims) + 1} DESC" if dims and measures else "")
    return f"{with_}SELECT {sel} FROM {source}{w}{g}{o} LIMIT 500"


def _looker() -> list[Stmt]:
    t = "looker"
    tier = (f"CASE WHEN {lc('Sales')} < 0 THEN '0' WHEN {lc('Sales')} >= 0 AND {lc('Sales')} < 500 THEN '1' "
            f"WHEN {lc('Sales')} >= 500 AND {lc('Sales')} < 1000 THEN '2' WHEN {lc('Sales')} >= 1000 THEN '3' "
            "ELSE '4' END")
    yesno = f"CASE WHEN {lc('Returned?')} THEN 'Yes' ELSE 'No' END"
    year = f"(EXTRACT(YEAR FROM {lc('Order Date')} ))::integer"
    month = f"TO_CHAR(DATE_TRUNC('month', {lc('Created (UTC)')} ), 'YYYY-MM')"
    out = [
        _s(t, "count", _lk([], [("COUNT(*)", "count")])),
        _s(t, "count", _lk([(lc("Region"), "region")], [("COUNT(*)", "count")])),
        _s(t, "sum", _lk([(lc("Region"), "region")], [(f"COALESCE(SUM({lc('Sales')}), 0)", "total_sales")])),
        _s(t, "sum", _lk([(lc("Ship Mode"), "ship_mode")], [(f"COALESCE(SUM({lc('Profit')}), 0)", "total_profit"),
                                                             ("COUNT(*)", "count")])),
        _s(t, "sum", _lk([], [(f"COALESCE(SUM({lc('Quantity')}), 0)", "total_quantity")],
                         where=f"({lc('Region')}) = 'South'")),
        _s(t, "sum", _lk([(lc("City"), "city")], [(f"COALESCE(SUM({lc('Sales')}), 0)", "total_sales")],
                         where=f"({lc('Region')}) IN ('East', 'West')")),
        _s(t, "sum", _lk([(lc("Agep (bin)"), "agep_bin")], [(f"COALESCE(SUM({lc('Discount')}), 0)", "total_discount")],
                         order=" ORDER BY 1")),
        _s(t, "avg", _lk([(lc("Region"), "region")], [(f"AVG({lc('Sales')})", "average_sales")])),
        _s(t, "avg", _lk([], [(f"AVG({lc('Quantity')})", "average_quantity")],
                         where=f"({lc('Returned?')} ) IS NOT NULL")),
        _s(t, "min/max", _lk([], [(f"MIN({lc('Order Date')})", "first_order"), (f"MAX({lc('Order Date')})",
                                                                                 "last_order")])),
        _s(t, "min/max", _lk([(lc("Region"), "region")], [(f"MIN({lc('Quantity')})", "min_quantity")])),
        _s(t, "percentile", _lk([(lc("Region"), "region")],
                                [(f"PERCENTILE_CONT(0.5) WITHIN GROUP (ORDER BY {lc('Quantity')})", "median_quantity")])),
        _s(t, "count distinct", _lk([], [(f"COUNT(DISTINCT {lc('City')})", "count_cities")]), "answer", "distinct"),
        _s(t, "count distinct", _lk([(lc("Region"), "region")], [(f"COUNT(DISTINCT {lc('Customer Name')})",
                                                                  "count_customers")]), "answer", "distinct",
           "partition", "distinct-private"),
        _s(t, "date logic", _lk([(year, "order_year")], [("COUNT(*)", "count")], order=" ORDER BY 1 DESC")),
        _s(t, "date logic", _lk([(month, "created_month")], [(f"COALESCE(SUM({lc('Sales')}), 0)", "total_sales")],
                                where=f"(({lc('Created (UTC)')} ) >= ((TIMESTAMP '2025-01-01')) AND "
                                      f"({lc('Created (UTC)')} ) < ((TIMESTAMP '2026-01-01')))",
                                order=" ORDER BY 1 DESC"), "answer", "rowexpr"),
        _s(t, "date logic", _lk([(f"DATE({lc('Created (UTC)')} )", "created_date")], [("COUNT(*)", "count")],
                                where=f"(({lc('Created (UTC)')} ) >= ((TIMESTAMP '2025-12-01')) AND "
                                      f"({lc('Created (UTC)')} ) < ((TIMESTAMP '2025-12-08')))",
                                order=" ORDER BY 1 DESC"), "answer", "rowexpr"),
        _s(t, "date logic", _lk([(f"TO_CHAR(DATE_TRUNC('quarter', {lc('Order Date')} ), 'YYYY-MM')", "order_quarter")],
                                [(f"COALESCE(SUM({lc('Profit')}), 0)", "total_profit")], order=" ORDER BY 1 DESC"),
           "answer", "rowexpr"),
        _s(t, "date logic", _lk([(f"(DATE_TRUNC('week', {lc('Order Date')} ))::date", "order_week")],
                                [("COUNT(*)", "count")],
                                where=f"(({lc('Order Date')} ) >= ((DATE '2025-03-03')) AND "
                                      f"({lc('Order Date')} ) < ((DATE '2025-04-28')))", order=" ORDER BY 1 DESC")),
        _s(t, "date logic", _lk([], [("COUNT(*)", "count")],
                                where=f"(({lc('Order Date')} ) >= ((DATE_TRUNC('year', DATE_TRUNC('day', "
                                      "CURRENT_TIMESTAMP)) + (-1 || ' year')::INTERVAL)) AND "
                                      f"({lc('Order Date')} ) < ((DATE_TRUNC('year', DATE_TRUNC('day', "
                                      "CURRENT_TIMESTAMP)))))"), "answer", "rowexpr"),
        _s(t, "date logic", _lk([(lc("Region"), "region")], [("COUNT(*)", "count")],
                                where=f"(({lc('Ship Date: Local')} ) >= ((TIMESTAMP '2023-07-01')) AND "
                                      f"({lc('Ship Date: Local')} ) < ((TIMESTAMP '2023-10-01')))")),
        _s(t, "CASE/LIKE", _lk([(tier, "sales_tier")], [("COUNT(*)", "count")], order=" ORDER BY 1")),
        _s(t, "CASE/LIKE", _lk([(yesno, "is_returned")], [(f"COALESCE(SUM({lc('Sales')}), 0)", "total_sales")])),
        _s(t, "CASE/LIKE", _lk([], [("COUNT(*)", "count")], where=f"({lc('City')} ) ILIKE '%an%'")),
        _s(t, "CASE/LIKE", _lk([(lc("Region"), "region")], [(f"COALESCE(SUM({lc('Sales')}), 0)", "total_sales")],
                               where=f"NOT ({lc('Returned?')} ) OR ({lc('Returned?')} ) IS NULL")),
        _s(t, "IS NULL", _lk([(lc("twitter#user#screen_name"), "screen_name")], [("COUNT(*)", "count")],
                             where=f"({lc('twitter#user#screen_name')}) IS NOT NULL")),
        _s(t, "IS NULL", _lk([], [(f"COALESCE(SUM({lc('FB.')}), 0)", "total_fb")],
                             where=f"({lc('Größe cm')}) IS NULL")),
        _s(t, "IN list", _lk([(lc("Ship Mode"), "ship_mode")], [("COUNT(*)", "count")],
                             where=f"({lc('Ship Mode')}) IN ('First Class', 'Second Class', 'Standard Class')")),
        _s(t, "IN list", _lk([], [("COUNT(*)", "count")],
                             where=f"({lc('Quantity')} >= 3 AND {lc('Quantity')} <= 9)")),
        _s(t, "HAVING", _lk([(lc("City"), "city")], [(f"COALESCE(SUM({lc('Sales')}), 0)", "total_sales")],
                            order=f" HAVING (COALESCE(SUM({lc('Sales')}), 0) > 100000) ORDER BY 2 DESC")),
        _s(t, "two keys", _lk([(lc("Region"), "region"), (lc("Ship Mode"), "ship_mode")],
                              [("COUNT(*)", "count")])),
        _s(t, "subquery", _lk([("sales_summary.\"Region\"", "region")], [("COUNT(*)", "count")],
                              with_=f"WITH sales_summary AS (SELECT \"Region\", \"Sales\" FROM \"public\".{q(TABLE)} "
                                    "WHERE \"Quantity\" >= 2) ", source="sales_summary")),
        _s(t, "value list", f"SELECT {lc('Region')} AS \"sales_3.region\" FROM {LT} GROUP BY 1 ORDER BY 1 LIMIT 500",
           "values"),
        _s(t, "filtered value list", f"SELECT {lc('City')} AS \"sales_3.city\" FROM {LT} WHERE "
                                     f"({lc('Region')}) = 'Central' GROUP BY 1 ORDER BY 1 LIMIT 500", "values",
           "partition"),
        _s(t, "filtered value list", f"SELECT {lc('Ship Mode')} AS \"sales_3.ship_mode\" FROM {LT} WHERE "
                                     f"({lc('Ship Mode')}) ILIKE '%class%' GROUP BY 1 ORDER BY 1 LIMIT 500", "values",
           "rowexpr"),
        _s(t, "row-level", f"SELECT {lc('Row ID')} AS \"sales_3.row_id\", {lc('City')} AS \"sales_3.city\" FROM {LT} "
                           "ORDER BY 1 LIMIT 500", "42501"),
        _s(t, "join", f"SELECT a.\"Region\" AS \"sales_3.region\", COUNT(*) AS \"sales_3.count\" FROM {MT} AS a "
                      f"LEFT JOIN {MT} AS b ON a.\"Row ID\" = b.\"Row ID\" GROUP BY 1 ORDER BY 2 DESC LIMIT 500",
           "0A000"),
    ]
    return out


# Power BI --------------------------------------------------------------------------------------------
PT = f'"public".{q(TABLE)} "$Table"'


def _pbi_inner(cols: Iterable[str]) -> str:
    return "(select " + ", ".join(f'"$Table".{q(c)} as {q(c)}' for c in cols) + f" from {PT}) \"_\""


def _pbi_group(dims: list[str], aggs: list[str], cols: list[str], where: str = "") -> str:
    names = [q(d) for d in dims]
    inner_sel = ", ".join(names + [f'{a} as "a{i}"' for i, a in enumerate(aggs)])
    w = f" where {where}" if where else ""
    g = f" group by {', '.join(names)}" if dims else ""
    outer = ", ".join([f'"_".{n}' for n in names] + [f'"_"."a{i}"' for i in range(len(aggs))])
    notnull = " or ".join(f'not "_"."a{i}" is null' for i in range(len(aggs)))
    return (f'select {outer} from (select {inner_sel} from {_pbi_inner(cols)}{w}{g}) "_" '
            f"where {notnull} limit 1000001")


def _powerbi() -> list[Stmt]:
    t = "powerbi"
    out = [
        _s(t, "count", _pbi_group(["Region"], ["count(1)"], ["Region"])),
        _s(t, "count", f'select count(1) as "a0" from {_pbi_inner(["Region"])} where "Region" in (\'East\', \'South\')'),
        _s(t, "sum", _pbi_group(["Region"], ['sum("Sales")'], ["Region", "Sales"])),
        _s(t, "sum", _pbi_group(["Ship Mode"], ['sum("Profit")', "count(1)"], ["Ship Mode", "Profit"])),
        _s(t, "sum", _pbi_group(["City"], ['sum("Quantity")'], ["City", "Quantity", "Region"],
                                where="\"Region\" = 'West'")),
        _s(t, "sum", _pbi_group(["Returned?"], ['sum("Sales")'], ["Returned?", "Sales"])),
        _s(t, "sum", _pbi_group([], ['sum("Row ID")'], ["Row ID"])),
        _s(t, "sum", _pbi_group(["Agep (bin)"], ['sum("Discount")'], ["Agep (bin)", "Discount"])),
        _s(t, "avg", _pbi_group(["Region"], ['avg("Sales")'], ["Region", "Sales"])),
        _s(t, "avg", _pbi_group([], ['avg("Größe cm")'], ["Größe cm"])),
        _s(t, "min/max", _pbi_group([], ['min("Quantity")', 'max("Quantity")'], ["Quantity"])),
        _s(t, "min/max", _pbi_group([], ['min("Order Date")', 'max("Order Date")'], ["Order Date"])),
        _s(t, "min/max", _pbi_group(["Region"], ['max("Sales")'], ["Region", "Sales"])),
        _s(t, "count distinct", _pbi_group([], ['count(distinct("City"))'], ["City"]), "answer", "distinct"),
        _s(t, "count distinct", _pbi_group(["Region"], ['count(distinct("Customer Name"))'],
                                           ["Region", "Customer Name"]), "answer", "distinct", "partition",
           "distinct-private"),
        _s(t, "date logic", _pbi_group(["Region"], ['sum("Sales")'], ["Region", "Sales", "Order Date"],
                                       where="\"Order Date\" >= date '2024-01-01' and \"Order Date\" < date '2025-01-01'")),
        _s(t, "date logic", _pbi_group(["Region"], ["count(1)"], ["Region", "Created (UTC)"],
                                       where="\"Created (UTC)\" >= timestamp '2025-06-01 00:00:00' and "
                                             "\"Created (UTC)\" < timestamp '2025-07-01 00:00:00'")),
        _s(t, "date logic", _pbi_group(["Ship Date: Local"], ["count(1)"], ["Ship Date: Local"],
                                       where="\"Ship Date: Local\" >= timestamp '2025-02-01 00:00:00' and "
                                             "\"Ship Date: Local\" < timestamp '2025-02-08 00:00:00'")),
        _s(t, "date logic", _pbi_group(["Order Date"], ['sum("Sales")'], ["Order Date", "Sales"],
                                       where="\"Order Date\" >= date '2025-12-01'")),
        _s(t, "date logic", f'select date_part(\'year\', "_"."Order Date") as "c0", count(1) as "a0" from '
                            f'{_pbi_inner(["Order Date"])} group by date_part(\'year\', "_"."Order Date") '
                            "limit 1000001"),
        _s(t, "IS NULL", _pbi_group(["Region"], ["count(1)"], ["Region", "Ship Mode"],
                                    where='not "Ship Mode" is null')),
        _s(t, "IS NULL", _pbi_group([], ["count(1)"], ["FB."], where='"FB." is null')),
        _s(t, "IN list", _pbi_group(["City"], ['sum("Sales")'], ["City", "Sales"],
                                    where="\"City\" in ('Atlanta', 'Boston', 'Chicago', 'Dallas', 'Detroit')")),
        _s(t, "IN list", _pbi_group(["Quantity"], ["count(1)"], ["Quantity"],
                                    where='"Quantity" in (1, 2, 3, 5, 8, 13)')),
        _s(t, "IN list", _pbi_group(["twitter#user#screen_name"], ["count(1)"], ["twitter#user#screen_name"],
                                    where="\"twitter#user#screen_name\" in ('@alpha', '@gamma') or "
                                          "\"twitter#user#screen_name\" is null")),
        _s(t, "CASE/LIKE", _pbi_group([], ['sum("Sales")'], ["City", "Sales"], where="\"City\" like '%on%'")),
        _s(t, "CASE/LIKE", _pbi_group([], ["count(1)"], ["City"], where="strpos(\"City\", 'San') = 1")),
        _s(t, "two keys", _pbi_group(["Region", "Returned?"], ['sum("Profit")'], ["Region", "Returned?", "Profit"])),
        _s(t, "HAVING", f'select "_"."Region", "_"."a0" from (select "Region", sum("Sales") as "a0" from '
                        f'{_pbi_inner(["Region", "Sales"])} group by "Region") "_" where "_"."a0" > 1000000 '
                        "limit 1000001"),
        _s(t, "value list", f'select "rows"."Region" as "Region" from (select "_"."Region" from {MT} "_" '
                            'group by "_"."Region") "rows" limit 1000001', "values"),
        _s(t, "value list", f'select "rows"."Ship Mode" as "Ship Mode" from (select "_"."Ship Mode" from {MT} "_" '
                            'group by "_"."Ship Mode") "rows" order by "Ship Mode" limit 1000001', "values"),
        _s(t, "filtered value list", f'select "rows"."City" as "City" from (select "_"."City" from {MT} "_" '
                                     "where \"_\".\"Region\" = 'Central' group by \"_\".\"City\") \"rows\" limit 1000001",
           "values", "partition"),
        _s(t, "filtered value list", f'select "rows"."Customer Name" as "Customer Name" from (select '
                                     f'"_"."Customer Name" from {MT} "_" group by "_"."Customer Name") "rows" '
                                     "limit 1000001", "values", "partition"),
        _s(t, "row-level", f'select "$Table"."Row ID", "$Table"."Sales" from {PT} limit 1000001', "42501"),
        _s(t, "join", f'select "_"."Region", "_"."a0" from (select "t0"."Region", count(1) as "a0" from {MT} "t0" '
                      f'inner join {MT} "t1" on "t0"."Row ID" = "t1"."Row ID" group by "t0"."Region") "_" '
                      "limit 1000001", "0A000"),
    ]
    return out


CORPUS: tuple[Stmt, ...] = tuple(_tableau() + _metabase() + _looker() + _powerbi())
TOOLS = ("tableau", "metabase", "looker", "powerbi")


# -------------------------------------------------------------------------------------------------- runner


@dataclass
class Result:
    stmt: Stmt
    outcome: str                 # "answered" | "values" | "refused"
    sqlstate: str = ""
    message: str = ""
    checked: int = 0             # outputs compared with PostgreSQL within their stated error
    misses: list[str] = field(default_factory=list)
    seconds: float = 0.0         # through the proxy (set by benchmarks/corpus_share.py)

    @property
    def within_error(self) -> bool:
        return self.outcome == "answered" and not self.misses


def _norm(v: Any) -> Any:
    if isinstance(v, Decimal | float) and not isinstance(v, bool):
        return round(float(v), 6)
    if isinstance(v, datetime):
        return (v.astimezone(UTC).replace(tzinfo=None) if v.tzinfo else v).isoformat()
    if isinstance(v, date):
        return v.isoformat()
    return v



def _stated(notices: list[str]) -> float | None:
    """The largest per-query standard error the proxy states (SET lapras.show_stderr = on)."""
    from proxy.replay.runner import parse_provenance

    errs = parse_provenance(notices)[1]
    return max(errs) if errs else None


def run_one(stmt: Stmt, proxy_conn: Any, exact_conn: Any, planner: Any, sigmas: float = 5.0) -> Result:
    """Send ``stmt`` through the proxy; classify it; compare answered COUNT/SUM outputs with PostgreSQL."""
    import psycopg

    notices: list[str] = []
    handler: Callable[[Any], None] = lambda d: notices.append(d.message_primary or "")  # noqa: E731
    proxy_conn.add_notice_handler(handler)
    try:
        cur = proxy_conn.execute(stmt.sql)
        rows = cur.fetchall()
        names = [d.name for d in cur.description or []]
    except psycopg.Error as exc:
        return Result(stmt, "refused", exc.sqlstate or "", str(exc).strip().splitlines()[0] if str(exc) else "")
    finally:
        proxy_conn.remove_notice_handler(handler)
    cur = exact_conn.execute(stmt.sql)
    exact = cur.fetchall()
    if stmt.expect == "values" or not _has_aggregate(planner, stmt.sql):
        res = Result(stmt, "values")
        got = {tuple(_norm(v) for v in r) for r in rows}
        truth = {tuple(_norm(v) for v in r) for r in exact}
        if "partition" in stmt.needs:
            # DP partition selection releases values that occur (the frequent ones), never made-up ones.
            if not got or got - truth:
                res.misses.append(f"selected values {sorted(got - truth)[:3]} do not occur (or none released)")
        elif truth - got:
            res.misses.append(f"value list misses {sorted(truth - got)[:3]}")
        return res
    res = Result(stmt, "answered")
    sigma = _stated(notices)
    mults = _stderr_multipliers(planner, stmt.sql, len(names))
    keys = _n_keys(planner, stmt.sql)
    truth = {tuple(_norm(v) for v in r[:keys]): r for r in exact}
    for row in rows:
        t = truth.get(tuple(_norm(v) for v in row[:keys]))
        if t is None:
            continue  # a group with no row in the data (the proxy returns the public domain's groups)
        for j in range(keys, len(row)):
            m = mults[j] if j < len(mults) else None
            if m is None or sigma is None or row[j] is None or t[j] is None:
                continue
            bound = sigmas * sigma * m + 1.0
            res.checked += 1
            if abs(float(row[j]) - float(t[j])) > bound:
                res.misses.append(f"{names[j]} {row[:keys]}: {row[j]} vs exact {t[j]} (bound {bound:.3g})")
    return res


def _plan(planner: Any, sql: str) -> Any:
    try:
        return planner.plan(sql)
    except Exception:
        return None


def _has_aggregate(planner: Any, sql: str) -> bool:
    plan = _plan(planner, sql)
    return plan is None or bool(plan.template.aggs)


def _n_keys(planner: Any, sql: str) -> int:
    from parser.scalar import Key

    plan = _plan(planner, sql)
    return 0 if plan is None else sum(1 for e in plan.template.outputs if isinstance(e, Key))


def _stderr_multipliers(planner: Any, sql: str, width: int) -> list[float | None]:
    """Per output column: the factor between its standard error and one query's (None: no stated error,
    as for AVG, ratios, MIN/MAX and percentiles), from the same plan the proxy makes."""
    import numpy as np

    plan = _plan(planner, sql)
    if plan is None:
        return [None] * width
    n = len(plan.queries)
    try:
        rows = plan.rows(np.zeros(n), np.ones(n), with_stderr=True)
    except Exception:
        return [None] * width
    out: list[float | None] = []
    for j in range(width):
        errs = [r[width + j] for r in rows if r[width + j] is not None and math.isfinite(r[width + j])]
        out.append(max(errs) if errs else None)
    return out


def passes(r: Result) -> tuple[bool, str]:
    """Whether a result meets its statement's classification (a pending part may also refuse it)."""
    s = r.stmt
    pending = bool(s.needs & PENDING)
    if r.outcome == "refused" and r.sqlstate in ("", "XX000", "08P01"):
        return False, f"refused without a proper SQLSTATE: {r.sqlstate} {r.message}"
    if s.expect == "answer":
        if r.outcome == "answered":
            return (not r.misses, "; ".join(r.misses))
        return (pending, f"expected an answer, got {r.outcome} {r.sqlstate} {r.message}")
    if s.expect == "values":
        if r.outcome == "values":
            return (not r.misses, "; ".join(r.misses))
        ok = r.outcome == "refused" and bool(r.message)
        return (ok, f"value list refused without a reason: {r.sqlstate}")
    if r.outcome == "refused":
        return (r.sqlstate == s.expect, f"expected SQLSTATE {s.expect}, got {r.sqlstate} {r.message}")
    return (False, f"expected SQLSTATE {s.expect}, got {r.outcome}")
