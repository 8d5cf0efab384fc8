"""The SQL each BI tool sends, answered by the real parser and engine (Gaussian noise at epsilon = 1 over a
stream of these statements) and compared with PostgreSQL's exact answers on the same text: every value
with a stated standard error is within 4.5 of them (plus rounding) of the exact value; refusals carry the
right SQLSTATE.

Shapes follow the tools' public sources, read for their structure:
- Superset: `superset/db_engine_specs/postgres.py` (time grains, LIMIT handling), `connectors/sqla/models.py`
  (`FROM (...) AS virtual_table` for virtual datasets, `<expr> AS <label>` metrics, `LIMIT 10000`/`50000`
  row limits, the median metric as `percentile_cont(0.5) WITHIN GROUP`), filter value pickers
  (`SELECT DISTINCT col ... LIMIT 1000`).
- Metabase: the PostgreSQL driver and MBQL compiler (`"public"."t"."col" AS "col"`, `count(*) AS "count"`,
  `-- Metabase::` comments, models nested as `(...) AS "source"`, binning as floor((x - min) / w) * w + min,
  `LIMIT 1048575`, `sum(CASE WHEN ... THEN ... ELSE 0.0 END)` for share / count-where).
- Grafana: the PostgreSQL data source's macro engine (`$__unixEpochGroupAlias(col, '10')` ->
  `floor(col/10)*10 AS "time"`, `$__unixEpochFilter(col)` -> `col >= a AND col <= b`), variable queries, the
  visual query builder (`SELECT col, count(x) FROM t GROUP BY col LIMIT 50`).
- Power BI DirectQuery (documented folding for the PostgreSQL connector): `select ... from (select ... from
  "public"."t" "$Table") "_" ... group by ...` with `not "_"."a0" is null` and `limit 1000001`.
- Tableau: TDVT / connector SDK query shapes (`SUM(1) AS "cnt:t:ok"`, `CAST(... AS BIGINT)`, `GROUP BY 1`,
  `HAVING (COUNT(1) > 0)`, `"Custom SQL Query"` subqueries, MIN/MAX for axis ranges).
The `events` table (timestamps) is added once its types land; these statements run on `adult`.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import numpy as np
import psycopg
import pytest

import parser as sqlparser
from lapras.engine import Engine
from lapras.exact import PostgresExactSource
from lapras.ledger.memory import MemoryLedger
from lapras.settings import EngineSettings
from parser import Refusal
from parser.plan.postprocess import Agg, Scaled
from parser.plan.quantile import Quantile
from parser.scalar import Key

OK = "ok"
SUPERSET = [
    ("SELECT race AS race, COUNT(*) AS count FROM public.adult GROUP BY race ORDER BY count DESC LIMIT 10000", OK),
    ("SELECT COUNT(*) AS count FROM public.adult WHERE sex IN (1) LIMIT 50000", OK),
    ("SELECT sex AS sex, SUM(hours_per_week) AS \"SUM(hours_per_week)\" FROM public.adult GROUP BY sex "
     "ORDER BY \"SUM(hours_per_week)\" DESC LIMIT 10000", OK),
    ("SELECT race AS race, COUNT(*) AS count FROM public.adult WHERE race IN (1, 2, 4) GROUP BY race "
     "ORDER BY count DESC LIMIT 100", OK),  # pie with an IN filter: only its slices
    ("SELECT education_num AS education_num, AVG(age) AS \"AVG(age)\" FROM (SELECT * FROM public.adult "
     "WHERE income_gt_50k = 1) AS virtual_table GROUP BY education_num LIMIT 10000", OK),
    ("SELECT COUNT(*) AS count FROM (SELECT age, sex FROM public.adult WHERE age >= 30) AS virtual_table "
     "WHERE sex = 0", OK),
    ("SELECT race AS race, percentile_cont(0.5) WITHIN GROUP (ORDER BY hours_per_week) AS \"MEDIAN(hours)\" "
     "FROM public.adult GROUP BY race LIMIT 10000", OK),
    ("SELECT DISTINCT race AS race FROM public.adult LIMIT 1000", OK),  # native filter values
    ("SELECT * FROM (SELECT age, race FROM public.adult WHERE sex = 1) AS virtual_table LIMIT 1", OK),  # probe
    ("SELECT DISTINCT race FROM public.adult WHERE sex = 1 LIMIT 1000", "42501"),
    ("SELECT age FROM public.adult LIMIT 10000", "42501"),  # SQL Lab browsing rows
]
METABASE = [
    ('SELECT count(*) AS "count" FROM "public"."adult"', OK),
    ('-- Metabase:: userID: 1 queryType: MBQL queryHash: 9a1f\nSELECT "public"."adult"."sex" AS "sex", '
     'count(*) AS "count" FROM "public"."adult" GROUP BY "public"."adult"."sex" ORDER BY "public"."adult"."sex" ASC',
     OK),
    ('SELECT "public"."adult"."race" AS "race", avg("public"."adult"."hours_per_week") AS "avg" FROM '
     '"public"."adult" WHERE "public"."adult"."age" BETWEEN 25 AND 45 GROUP BY "public"."adult"."race" '
     'ORDER BY "public"."adult"."race" ASC', OK),
    ('SELECT ((floor((("public"."adult"."age" - 17.0) / 10.0)) * 10.0) + 17.0) AS "age", count(*) AS "count" '
     'FROM "public"."adult" GROUP BY ((floor((("public"."adult"."age" - 17.0) / 10.0)) * 10.0) + 17.0) '
     'ORDER BY ((floor((("public"."adult"."age" - 17.0) / 10.0)) * 10.0) + 17.0) ASC', OK),
    ('SELECT sum(CASE WHEN "public"."adult"."income_gt_50k" = 1 THEN 1 ELSE 0.0 END) AS "count-where" '
     'FROM "public"."adult"', OK),
    ('SELECT "source"."sex" AS "sex", sum("source"."hours_per_week") AS "sum" FROM (SELECT '
     '"public"."adult"."sex" AS "sex", "public"."adult"."hours_per_week" AS "hours_per_week" FROM "public"."adult" '
     'WHERE "public"."adult"."race" = 4) AS "source" GROUP BY "source"."sex" ORDER BY "source"."sex" ASC', OK),
    ('SELECT "public"."adult"."workclass" AS "workclass" FROM "public"."adult" GROUP BY "public"."adult"."workclass" '
     'ORDER BY "public"."adult"."workclass" ASC LIMIT 1048575', OK),  # field values
    ('SELECT min("public"."adult"."age") AS "min", max("public"."adult"."age") AS "max" FROM "public"."adult"', OK),
    ('SELECT "public"."adult"."age" AS "age", "public"."adult"."sex" AS "sex" FROM "public"."adult" LIMIT 2000',
     "42501"),
    ('SELECT count(distinct "public"."adult"."age") AS "count" FROM "public"."adult"', OK),
]
GRAFANA = [
    ('SELECT floor(age/10)*10 AS "time", count(*) AS "value" FROM adult WHERE age >= 20 AND age <= 80 '
     'GROUP BY 1 ORDER BY 1', OK),
    ('SELECT floor(hours_per_week/5)*5 AS "time", race AS metric, count(*) FROM adult GROUP BY 1, 2 ORDER BY 1', OK),
    ("SELECT DISTINCT race FROM adult", OK),  # dashboard variable
    ("SELECT race, count(age) FROM adult GROUP BY race LIMIT 50", OK),  # visual query builder
    ("SELECT sum(capital_gain) AS value FROM adult WHERE education_num IN (13, 14, 15)", OK),
    ("SELECT avg(age) FROM adult WHERE race = ANY(ARRAY[1, 2])", OK),
    ("SELECT age AS \"time\", hours_per_week AS value FROM adult ORDER BY 1", "42501"),
]
POWER_BI = [
    ('select "_"."race", "_"."a0" from (select "race", count(1) as "a0" from (select "$Table"."race" as "race" '
     'from "public"."adult" "$Table") "_" group by "race") "_" where not "_"."a0" is null limit 1000001', OK),
    ('select "_"."sex", "_"."a0", "_"."a1" from (select "sex", sum("hours_per_week") as "a0", count(1) as "a1" '
     'from (select "$Table"."sex" as "sex", "$Table"."hours_per_week" as "hours_per_week", "$Table"."age" as '
     '"age" from "public"."adult" "$Table") "_" where "age" >= 40 group by "sex") "_" where not "_"."a0" is null '
     'or not "_"."a1" is null limit 1000001', OK),
    ('select count(1) as "a0" from (select "$Table"."race" as "race" from "public"."adult" "$Table") "_" '
     'where "race" in (0, 3)', OK),
    ('select "rows"."race" as "race" from (select "_"."race" from "public"."adult" "_" group by "_"."race") '
     '"rows" limit 1000001', OK),  # slicer values
    ('select "_"."age" from "public"."adult" "_" limit 1000001', "42501"),
]
TABLEAU = [
    ('SELECT "adult"."sex" AS "sex", SUM(1) AS "cnt:adult_5C1B:ok" FROM "public"."adult" "adult" GROUP BY 1', OK),
    ('SELECT SUM(CAST("adult"."age" AS BIGINT)) AS "sum:age:ok" FROM "public"."adult" "adult" '
     'HAVING (COUNT(1) > 0)', OK),
    ('SELECT "adult"."race" AS "race", AVG(CAST("adult"."hours_per_week" AS DOUBLE PRECISION)) AS '
     '"avg:hours_per_week:ok" FROM "public"."adult" "adult" WHERE ("adult"."sex" = 1) GROUP BY 1', OK),
    ('SELECT MIN("adult"."age") AS "TEMP(attr:age:qk)(1)(0)", MAX("adult"."age") AS "TEMP(attr:age:qk)(2)(0)" '
     'FROM "public"."adult" "adult" HAVING (COUNT(1) > 0)', OK),
    ('SELECT "Custom SQL Query"."race" AS "race", SUM(1) AS "cnt:Custom_SQL_Query:ok" FROM (SELECT race, age '
     'FROM adult WHERE age < 40) "Custom SQL Query" GROUP BY 1', OK),
    ('SELECT "adult"."education_num" AS "education_num" FROM "public"."adult" "adult" GROUP BY 1 ORDER BY 1 ASC',
     OK),
    ('SELECT PERCENTILE_CONT(0.5) WITHIN GROUP (ORDER BY "adult"."age") AS "med:age:ok" FROM "public"."adult" '
     '"adult"', OK),
    ('SELECT "adult"."sex" AS "sex" FROM "public"."adult" "adult" WHERE ("adult"."age" >= 60) GROUP BY 1',
     "42501"),
    ('SELECT COUNT(DISTINCT "adult"."native_country") AS "ctd:native_country:ok" FROM "public"."adult" "adult"',
     OK),
    ('SELECT "adult"."race" AS "race" FROM "public"."adult" "adult" LEFT JOIN (SELECT "race", SUM(1) AS "n" FROM '
     '"public"."adult" GROUP BY 1) "t0" ON "adult"."race" = "t0"."race" GROUP BY 1', "0A000"),
]
CORPUS = [(tool, sql, want) for tool, part in (("superset", SUPERSET), ("metabase", METABASE), ("grafana", GRAFANA),
                                               ("powerbi", POWER_BI), ("tableau", TABLEAU)) for sql, want in part]


def test_corpus_size() -> None:
    assert len(CORPUS) >= 40
    assert {t for t, _, _ in CORPUS} == {"superset", "metabase", "grafana", "powerbi", "tableau"}


@pytest.fixture(scope="module")
def engine(adult_db: str, default_config: Any) -> Engine:
    settings = EngineSettings(epsilon=1.0, delta=1e-3, stream_length=len(CORPUS), regression_fraction=0.0)
    return Engine(default_config.catalog, MemoryLedger(), PostgresExactSource(adult_db), settings,
                  rng=np.random.default_rng(2026))


def _num(v: Any) -> Any:
    return float(v) if isinstance(v, Decimal) else v


@pytest.mark.parametrize("tool,sql,want", CORPUS, ids=lambda v: str(v)[:50])
def test_bi_statement(tool: str, sql: str, want: str, engine: Engine, adult_db: str, default_config: Any) -> None:
    planner = sqlparser.Planner(default_config.catalog)
    if want != OK:
        with pytest.raises(Refusal) as info:
            planner.plan(sql)
        assert info.value.sqlstate == want, info.value.message
        return
    plan = planner.plan(sql)
    answer = engine.answer(plan, "bi")
    ours = plan.rows(answer.values, answer.stderrs, with_stderr=True)
    with psycopg.connect(adult_db) as conn:
        cur = conn.execute(sql)  # type: ignore[call-overload]
        theirs = [tuple(_num(v) for v in r) for r in cur.fetchall()]
        names = [d.name for d in cur.description or []]
    assert [c.name for c in plan.columns] == names
    width = len(plan.columns)
    keys = sum(1 for e in plan.template.outputs if isinstance(e, Key))
    exact = {r[:keys]: r for r in theirs}
    if keys == 0 and not plan.template.aggs:
        assert ours == []  # a shape probe: columns, no row
        return
    if not plan.template.aggs:
        assert set(exact) <= {r[:keys] for r in ours}  # a value list: the declared domain
        return
    checked = 0
    for row in ours:
        values, errs = row[:width], row[width:]
        truth = exact.get(values[:keys])
        if truth is None:
            continue  # an empty group (kept: it is not excluded by the WHERE text)
        for v, e, t in zip(values[keys:], errs[keys:], truth[keys:], strict=True):
            if e is None or v is None or t is None:
                continue
            assert abs(float(v) - float(t)) <= 4.5 * float(e) + 1.0, (sql, row, truth)
            checked += 1
    # Outputs that state a standard error: counts, sums and percentiles (AVG and other ratios, conditional
    # sums over several slots and MIN / MAX state none).
    stated = any(isinstance(e, Agg | Scaled) or (isinstance(e, Quantile) and e.kind in ("cont", "disc"))
                 for e in plan.template.outputs[keys:])
    assert checked > 0 or not stated, sql
