"""A 300-column BI extract as Tableau sees it (issue 25): mixed-case quoted names, text lists of 3 to 60
values, numeric/double with bins, smallint, int, date, hourly timestamp, boolean and time columns, a
privacy unit, and the statements Tableau sends over it. Used by benchmarks/wide_planning.py and
tests/parser/test_wide_planning.py."""

from __future__ import annotations

from collections.abc import Callable

N_COLUMNS = 300
CITIES = [f"City {chr(65 + i % 26)}{i:02d}" for i in range(60)]
NAMES = [f"{first} {last}" for first in ("Ann", "Bob", "Cid", "Dee", "Eve", "Fay") for last in
         ("Adams", "Baker", "Clark", "Davis", "Evans", "Fox", "Green", "Hill", "Irwin", "Jones")]
STATES = [f"State {i:02d}" for i in range(50)]
NAMED = [
    ("Region", "text", '{ type = "text", values = ["Central", "East", "South", "West"] }'),
    ("Category", "text", '{ type = "text", values = ["Furniture", "Office Supplies", "Technology"] }'),
    ("Sub-Category", "text", "{ type = \"text\", values = [" + ", ".join(f'"Sub {i:02d}"' for i in range(17)) + "] }"),
    ("Segment", "text", '{ type = "text", values = ["Consumer", "Corporate", "Home Office"] }'),
    ("Ship Mode", "text", '{ type = "text", values = ["First Class", "Same Day", "Second Class", "Standard Class"] }'),
    ("State", "text", "{ type = \"text\", values = [" + ", ".join(f'"{s}"' for s in STATES) + "] }"),
    ("City", "text", "{ type = \"text\", values = [" + ", ".join(f'"{s}"' for s in CITIES) + "], nullable = true }"),
    ("Customer Name", "text", "{ type = \"text\", values = [" + ", ".join(f'"{s}"' for s in NAMES) + "] }"),
    ("Sales", "numeric(12,2)", '{ type = "numeric", min = 0, max = 10000, bins = 100 }'),
    ("Profit", "double precision", '{ type = "float", min = -5000, max = 5000, bins = 100 }'),
    ("Discount", "double precision", '{ type = "float", min = 0, max = 1, bins = 0.1 }'),
    ("Quantity", "smallint", '{ type = "smallint", min = 1, max = 14 }'),
    ("Row ID", "integer", '{ type = "int", min = 0, max = 99999 }'),
    ("Order Date", "date", "{ type = \"date\", min = 2025-01-01, max = 2025-12-31 }"),
    ("Ship Date", "date", "{ type = \"date\", min = 2025-01-01, max = 2026-01-31 }"),
    ("Event Time", "timestamp", '{ type = "timestamp", min = 2025-01-01T00:00:00, max = 2025-12-31T23:00:00, '
                                'resolution = "hour" }'),
    ("Order Hour", "time", '{ type = "time", resolution = "hour" }'),
    ("Returned", "boolean", '{ type = "boolean", nullable = true }'),
    ("Zip", "integer", '{ type = "int", keys = "private" }'),
    ("NPI", "bigint", '{ type = "bigint", keys = "private" }'),
]
FILLER = (
    ("Attr", "text", '{ type = "text", values = ["Alpha", "Beta", "Gamma", "Delta", "Epsilon"], nullable = true }'),
    ("Amount", "numeric(12,2)", '{ type = "numeric", min = 0, max = 1000, bins = 50 }'),
    ("Rate", "double precision", '{ type = "float", min = 0, max = 1, bins = 0.125 }'),
    ("Level", "smallint", '{ type = "smallint", min = 0, max = 20 }'),
    ("Day", "date", "{ type = \"date\", min = 2024-01-01, max = 2025-12-31 }"),
    ("Stamp", "timestamp", '{ type = "timestamp", min = 2025-01-01T00:00:00, max = 2025-12-31T23:00:00, '
                           'resolution = "day" }'),
    ("Flag", "boolean", '{ type = "boolean", nullable = true }'),
    ("Clock", "time", '{ type = "time", resolution = "hour" }'),
    ("Code", "text", "{ type = \"text\", values = [" + ", ".join(f'"C{i:02d}"' for i in range(40)) + "] }"),
)


def columns(id_keys: bool = True) -> list[tuple[str, str, str]]:
    """(name, PostgreSQL type, declaration) of the table's 300 columns (``id_keys=False``: without the
    identifier columns, for a parser that predates them)."""
    out = [c for c in NAMED if id_keys or "keys" not in c[2]]
    j = 0
    while len(out) < N_COLUMNS:
        name, pg, spec = FILLER[j % len(FILLER)]
        out.append((f"{name} {j}", pg, spec))
        j += 1
    return out


def config_text(dsn: str, port: int, partition_fraction: float = 0.1, epsilon: float = 1.0,
                stream_length: int = 200, id_keys: bool = True) -> str:
    cols = "\n".join(f'"{c}" = {spec}' for c, _, spec in columns(id_keys))
    return (f'[server]\nlisten = "127.0.0.1:{port}"\ndatabase = "wide"\nstatement_timeout_s = 120.0\n'
            f'queries_per_minute = 100000\n\n[upstream]\ndsn = "{dsn}"\n\n'
            '[[users]]\nname = "analyst"\nauth = "trust"\n\n'
            f"[privacy]\nepsilon = {epsilon!r}\ndelta = 1e-6\nstream_length = {stream_length}\n"
            f"regression_fraction = 0.0\npartition_fraction = {partition_fraction}\npartition_selections = 8\n\n"
            '[tables."Extract"]\nschema = "public"\nprivacy_unit = "user_id"\nmax_rows_per_unit = 10\n'
            f'max_groups_per_unit = 4\n\n[tables."Extract".columns]\n{cols}\n')


def ddl() -> str:
    cols = ", ".join(f'"{c}" {t}' for c, t, _ in columns())
    return f'CREATE TABLE "Extract" (user_id bigint, {cols})'


def _fill_expr(j: int, name: str, pg: str, spec: str) -> str:
    """A generated value of column ``j`` for row ``g``: within the declared domain, text keys correlated
    (``g % 7`` picks them) so a many-column GROUP BY holds a few popular combinations."""
    import tomllib

    d = tomllib.loads("x = " + spec)["x"]
    if name == "Zip":  # four popular ZIP codes and one single-user ZIP in every 50 rows
        return "CASE WHEN g % 50 = 0 THEN 90000 + g ELSE (ARRAY[98101, 10001, 60601, 94105])[1 + g % 4] END"
    if name == "NPI":
        return "CASE WHEN g % 40 = 0 THEN 2000000000 + g ELSE 1000000000 + g % 3 END"
    kind = d["type"]
    if kind == "text":
        vals = ", ".join("'" + v.replace("'", "''") + "'" for v in d["values"])
        return f"(ARRAY[{vals}])[1 + ((g % 7) * {j + 1}) % {len(d['values'])}]"
    if kind in ("int", "smallint"):
        return f"({d['min']} + (g * 31 + {j}) % {d['max'] - d['min'] + 1})::{pg}"
    if kind in ("numeric", "float"):
        return f"({d['min']} + ((g * 37 + {j}) % 1000) / 1000.0 * {d['max'] - d['min']})::{pg}"
    if kind == "date":
        days = (d["max"] - d["min"]).days + 1
        return f"DATE '{d['min']}' + ((g * 13 + {j}) % {days})"
    if kind == "timestamp":
        hours = int((d["max"] - d["min"]).total_seconds() // 3600) + 1
        return f"TIMESTAMP '{d['min']}' + ((g * 7 + {j}) % {hours}) * interval '1 hour'"
    if kind == "time":
        return f"make_time((g + {j}) % 24, 0, 0)"  # on the hour: GROUP BY the column groups by its cells
    if kind == "boolean":
        return f"(g + {j}) % 3 = 0"
    raise AssertionError(kind)


def fill_sql(rows: int) -> str:
    """INSERT of ``rows`` generated rows, 3 a user (so a user is in at most 3 groups of anything)."""
    cols = columns()
    names = ", ".join(f'"{c}"' for c, _, _ in cols)
    exprs = ", ".join(_fill_expr(j, c, pg, spec) for j, (c, pg, spec) in enumerate(cols))
    return f'INSERT INTO "Extract" (user_id, {names}) SELECT g / 3, {exprs} FROM generate_series(1, {rows}) AS g'


T = '"Extract"."{}"'


def _c(name: str) -> str:
    return T.format(name)


def statements() -> dict[str, Callable[[int], str]]:
    """Label -> statement of run ``i`` (a fresh literal each run, so no plan cache answers)."""
    src = 'FROM "public"."Extract" "Extract"'
    five = ", ".join(_c(n) for n in ("Region", "Category", "Sub-Category", "Segment", "Ship Mode"))
    eight = ", ".join(_c(n) for n in ("Region", "Category", "Sub-Category", "Segment", "Ship Mode", "State",
                                      "City", "Customer Name"))
    ids = ", ".join(str((k * 7) % 100000) for k in range(10_000))
    return {
        "sum(CAST AS DOUBLE) by region, date range": lambda i: (
            f'SELECT {_c("Region")} AS "Region", SUM(CAST({_c("Sales")} AS DOUBLE PRECISION)) AS "sum:Sales:ok" {src} '
            f"WHERE ({_c('Order Date')} >= DATE '2025-01-01' AND {_c('Order Date')} < DATE '2025-{1 + i % 11:02d}-01') "
            "GROUP BY 1"),
        "count by 5 text columns": lambda i: (
            f'SELECT {five}, SUM(CAST(1 AS BIGINT)) AS "cnt:Extract:ok" {src} '
            f"WHERE {_c('Quantity')} >= {1 + i % 5} GROUP BY 1, 2, 3, 4, 5"),
        "sum by 8 text columns (beyond the list limit)": lambda i: (
            f'SELECT {eight}, SUM({_c("Profit")}) AS "sum:Profit:ok" {src} '
            f"WHERE {_c('Discount')} < {0.1 * (1 + i % 9):.1f} GROUP BY 1, 2, 3, 4, 5, 6, 7, 8"),
        "detail table: 4 text columns, 9,333 groups": lambda i: (
            f'SELECT {_c("City")}, {_c("Sub-Category")}, {_c("Segment")}, {_c("Category")}, '
            f'SUM({_c("Sales")}) AS "sum:Sales:ok", SUM(CAST(1 AS BIGINT)) AS "cnt" {src} '
            f"WHERE {_c('Order Date')} < DATE '2025-{2 + i % 10:02d}-01' GROUP BY 1, 2, 3, 4"),
        "text range filter": lambda i: (
            f'SELECT {_c("Category")} AS "Category", COUNT(*) AS "cnt" {src} '
            f"WHERE ({_c('Customer Name')} >= '{chr(65 + i % 6)}' AND {_c('Customer Name')} <= 'Fay Z') GROUP BY 1"),
        "IN list of cities, CAST literal": lambda i: (
            f'SELECT {_c("State")} AS "State", AVG(CAST({_c("Profit")} AS DOUBLE PRECISION)) AS "avg:Profit:ok", '
            f'SUM(CAST({1 + i} AS DOUBLE PRECISION)) AS "x" {src} '
            f"WHERE ({_c('City')} IN ({', '.join(repr(c) for c in CITIES[i % 5: i % 5 + 25])})) GROUP BY 1"),
        "month of date, boolean filter": lambda i: (
            f"SELECT DATE_TRUNC('month', CAST({_c('Order Date')} AS TIMESTAMP)) AS \"tmn:Order Date:ok\", "
            f'SUM({_c("Sales")}) AS "sum:Sales:ok" {src} WHERE ({_c("Returned")} = {"TRUE" if i % 2 else "FALSE"}) '
            f"AND {_c('Quantity')} <= {14 - i % 10} GROUP BY 1"),
        "hour of day by segment": lambda i: (
            f'SELECT {_c("Order Hour")} AS "Order Hour", {_c("Segment")}, COUNT(*) {src} '
            f"WHERE {_c('Order Hour')} >= TIME '{i % 12:02d}:00' GROUP BY 1, 2"),
        "COUNT(DISTINCT user_id) by day over a year": lambda i: (
            f"SELECT DATE_TRUNC('day', {_c('Event Time')}) AS \"day\", COUNT(DISTINCT \"Extract\".\"user_id\") AS \"u\" "
            f"{src} WHERE {_c('Quantity')} >= {1 + i % 10} GROUP BY 1"),
        "IN list of 10,000 values": lambda i: (
            f'SELECT COUNT(*) AS "cnt" {src} WHERE {_c("Row ID")} IN ({ids}) AND {_c("Quantity")} > {i % 10}'),
        "text BETWEEN, CAST AS DOUBLE": lambda i: (
            f'SELECT {_c("Segment")} AS "Segment", SUM(CAST({_c("Quantity")} AS DOUBLE PRECISION)) AS "sum:q" {src} '
            f"WHERE ({_c('City')} BETWEEN 'City B' AND 'City {chr(70 + i % 10)}') GROUP BY 1"),
        "GROUP BY an integer ID (zip)": lambda i: (
            f'SELECT {_c("Zip")} AS "Zip", SUM(CAST(1 AS BIGINT)) AS "cnt:Extract:ok" {src} '
            f"WHERE {_c('Quantity')} >= {1 + i % 3} GROUP BY 1"),
        "GROUP BY a bigint ID (NPI), text filter": lambda i: (
            f'SELECT {_c("NPI")} AS "NPI", SUM({_c("Sales")}) AS "sum:Sales:ok" {src} '
            f"WHERE {_c('Region')} <> 'North {i}' GROUP BY 1"),
        "filler: 3 text keys, 4 filters": lambda i: (
            f'SELECT {_c("Attr 0")}, {_c("Code 8")}, {_c("Flag 6")}, SUM({_c("Amount 1")}), AVG({_c("Rate 2")}) '
            f"{src} WHERE {_c('Level 3')} BETWEEN {i % 5} AND 15 AND {_c('Day 4')} >= DATE '2024-06-01' "
            f"AND {_c('Stamp 5')} < TIMESTAMP '2025-0{1 + i % 8}-01 00:00:00' AND {_c('Attr 9')} <> 'Beta' "
            "GROUP BY 1, 2, 3"),
    }
