"""Hand-written corpus: what analysts and BI tools (Metabase, Superset, Tableau, Grafana) send for counts and
sums over a protected table, each with its expected outcome ("ok" or the refusal's SQLSTATE).

Entries are (sql, expected, params); statements over ``hr.people`` exercise nullable and text domains.
"""

from __future__ import annotations

from typing import Any

OK = "ok"
Entry = tuple[str, str, list[Any]]

METABASE: list[Entry] = [
    ('SELECT count(*) AS "count" FROM "public"."adult"', OK, []),
    ('-- Metabase:: userID: 1 queryType: MBQL queryHash: 3f1c\nSELECT count(*) AS "count" FROM "public"."adult" '
     'WHERE "public"."adult"."sex" = 1', OK, []),
    ('/* Superset: chart 12 */ SELECT race AS race, COUNT(*) AS count FROM public.adult GROUP BY race LIMIT 100',
     OK, []),
    ('SELECT "public"."adult"."sex" AS "sex", count(*) AS "count" FROM "public"."adult" '
     'GROUP BY "public"."adult"."sex" ORDER BY "public"."adult"."sex" ASC', OK, []),
    ('SELECT sum("public"."adult"."hours_per_week") AS "sum" FROM "public"."adult" '
     'WHERE "public"."adult"."race" = 1', OK, []),
    ('SELECT avg("public"."adult"."age") AS "avg" FROM "public"."adult" '
     'WHERE ("public"."adult"."age" >= 30 AND "public"."adult"."age" < 40)', OK, []),
    ('SELECT count(*) AS "count" FROM "public"."adult" '
     'WHERE ("public"."adult"."race" = 1 OR "public"."adult"."race" = 2)', OK, []),
    ('SELECT "public"."adult"."race" AS "race", "public"."adult"."sex" AS "sex", count(*) AS "count" '
     'FROM "public"."adult" GROUP BY "public"."adult"."race", "public"."adult"."sex" '
     'ORDER BY "public"."adult"."race" ASC, "public"."adult"."sex" ASC', OK, []),
    ('SELECT count(*) AS "count" FROM "public"."adult" WHERE "public"."adult"."age" BETWEEN 30 AND 40', OK, []),
    ('SELECT count(*) AS "count" FROM "public"."adult" WHERE NOT ("public"."adult"."race" = 1)', OK, []),
    ('SELECT count(*) AS "count" FROM "public"."adult" '
     'WHERE ("public"."adult"."race" <> 1 OR "public"."adult"."race" IS NULL)', OK, []),
    ('SELECT "public"."adult"."income_gt_50k" AS "income_gt_50k", avg("public"."adult"."hours_per_week") AS "avg" '
     'FROM "public"."adult" GROUP BY "public"."adult"."income_gt_50k" '
     'ORDER BY "public"."adult"."income_gt_50k" ASC', OK, []),
    ('SELECT "public"."adult"."education_num" AS "education_num", count(*) AS "count" FROM "public"."adult" '
     'WHERE "public"."adult"."sex" = 0 GROUP BY "public"."adult"."education_num" '
     'ORDER BY "count" DESC, "public"."adult"."education_num" ASC LIMIT 1048575', OK, []),
    ('SELECT sum("public"."adult"."capital_gain") AS "sum", sum("public"."adult"."capital_loss") AS "sum_2" '
     'FROM "public"."adult"', OK, []),
    ('SELECT count(*) AS "count" FROM "public"."adult" WHERE "public"."adult"."workclass" IN (1, 2, 3)', OK, []),
    ('SELECT count(*) AS "count" FROM "public"."adult" WHERE "public"."adult"."workclass" NOT IN (1, 2, 3)',
     OK, []),
    ('SELECT count(*) AS "count" FROM "public"."adult" '
     'WHERE ("public"."adult"."hours_per_week" > 40 AND "public"."adult"."income_gt_50k" = 1)', OK, []),
    ('SELECT "public"."adult"."relationship" AS "relationship", sum("public"."adult"."hours_per_week") AS "sum", '
     'count(*) AS "count" FROM "public"."adult" GROUP BY "public"."adult"."relationship" '
     'ORDER BY "public"."adult"."relationship" ASC', OK, []),
    ('SELECT count(*) AS "count" FROM "public"."adult" WHERE "public"."adult"."native_country" IS NOT NULL',
     OK, []),
    ('SELECT "public"."adult"."marital_status" AS "marital_status", count(*) AS "count" FROM "public"."adult" '
     'WHERE "public"."adult"."age" > 60 GROUP BY "public"."adult"."marital_status" '
     'ORDER BY "public"."adult"."marital_status" ASC', OK, []),
    ('SELECT count(distinct "public"."adult"."age") AS "count" FROM "public"."adult"', OK, []),
    ('SELECT "source"."sex" AS "sex", count(*) AS "count" FROM (SELECT "public"."adult"."sex" AS "sex" '
     'FROM "public"."adult") AS "source" GROUP BY "source"."sex"', OK, []),  # a Metabase model: inlined
    ('SELECT (floor((("public"."adult"."age" - 17.0) / 10.0)) * 10.0) + 17.0 AS "age", count(*) AS "count" '
     'FROM "public"."adult" GROUP BY (floor((("public"."adult"."age" - 17.0) / 10.0)) * 10.0) + 17.0 '
     'ORDER BY (floor((("public"."adult"."age" - 17.0) / 10.0)) * 10.0) + 17.0 ASC', OK, []),
    ('SELECT floor(("public"."adult"."hours_per_week" / 12.5)) * 12.5 AS "hours_per_week", '
     'avg("public"."adult"."age") AS "avg" FROM "public"."adult" '
     'GROUP BY floor(("public"."adult"."hours_per_week" / 12.5)) * 12.5 '
     'ORDER BY floor(("public"."adult"."hours_per_week" / 12.5)) * 12.5 ASC', OK, []),
    ('SELECT "public"."adult"."age" AS "age", "public"."adult"."sex" AS "sex" FROM "public"."adult" LIMIT 2000',
     "42501", []),
    ('SELECT min("public"."adult"."age") AS "min", max("public"."adult"."age") AS "max" FROM "public"."adult"',
     OK, []),  # order statistics from tree counts
    ('SELECT "public"."adult"."race" AS "race" FROM "public"."adult" GROUP BY "public"."adult"."race" '
     'ORDER BY "public"."adult"."race" ASC', OK, []),  # value list: the public domain
    ('SELECT count(*) AS "count" FROM "public"."adult" '
     'LEFT JOIN "public"."countries" "c" ON "public"."adult"."native_country" = "c"."id"', "0A000", []),
    ('SELECT "public"."adult".* FROM "public"."adult" LIMIT 2000', "42501", []),
    ('SELECT sum(CASE WHEN "public"."adult"."income_gt_50k" = 1 THEN 1 ELSE 0.0 END) AS "count-where" '
     'FROM "public"."adult"', OK, []),
    ('SELECT sum(CASE WHEN "public"."adult"."sex" = 0 THEN "public"."adult"."hours_per_week" ELSE 0.0 END) '
     'AS "sum-where" FROM "public"."adult"', OK, []),
    ('SELECT sum(CASE WHEN "public"."adult"."race" = 1 THEN 1 ELSE 0.0 END) / count(*) AS "share" '
     'FROM "public"."adult"', OK, []),
]

SUPERSET: list[Entry] = [
    ("SELECT COUNT(*) AS count FROM public.adult LIMIT 50000", OK, []),
    ("SELECT sex AS sex, COUNT(*) AS count FROM public.adult GROUP BY sex ORDER BY count DESC LIMIT 10000", OK, []),
    ("SELECT COUNT(*) AS count FROM public.adult WHERE race IN (1, 2) LIMIT 50000", OK, []),
    ('SELECT race AS race, SUM(hours_per_week) AS "SUM(hours_per_week)" FROM public.adult GROUP BY race '
     'ORDER BY "SUM(hours_per_week)" DESC LIMIT 100', OK, []),
    ('SELECT AVG(age) AS "AVG(age)" FROM public.adult WHERE sex = 1 AND education_num >= 10', OK, []),
    ("SELECT relationship AS relationship, COUNT(*) AS count FROM public.adult WHERE relationship NOT IN (0) "
     "GROUP BY relationship ORDER BY count DESC LIMIT 5", OK, []),
    ("SELECT race AS race, sex AS sex, COUNT(*) AS count FROM public.adult GROUP BY race, sex "
     "ORDER BY count DESC LIMIT 10000", OK, []),
    ('SELECT income_gt_50k AS income_gt_50k, AVG(hours_per_week) AS "AVG(hours_per_week)", COUNT(*) AS count '
     'FROM public.adult WHERE age >= 25 AND age < 65 GROUP BY income_gt_50k LIMIT 10000', OK, []),
    ('SELECT SUM(capital_gain) AS "SUM(capital_gain)" FROM public.adult WHERE income_gt_50k = 1 LIMIT 50000', OK, []),
    ("SELECT workclass AS workclass, COUNT(*) AS count FROM public.adult WHERE workclass IS NOT NULL "
     "GROUP BY workclass ORDER BY count DESC LIMIT 10 OFFSET 0", OK, []),
    ("SELECT education_num AS education_num, COUNT(*) AS count FROM public.adult GROUP BY education_num "
     "HAVING COUNT(*) > 500 ORDER BY education_num LIMIT 10000", OK, []),
    ('SELECT sex AS sex, SUM(hours_per_week) / COUNT(*) AS "hours per head" FROM public.adult GROUP BY sex '
     'LIMIT 10000', OK, []),
    ("SELECT COUNT(*) AS count FROM (SELECT * FROM public.adult) AS virtual_table LIMIT 50000", OK, []),  # virtual dataset: inlined
    ("SELECT sex AS sex, COUNT(DISTINCT race) AS count_distinct FROM public.adult GROUP BY sex", OK, []),
    ("SELECT PERCENTILE_CONT(0.5) WITHIN GROUP (ORDER BY age) AS median_age FROM public.adult", OK, []),
    ("SELECT * FROM public.adult LIMIT 100", "42501", []),
    ("SELECT age, hours_per_week FROM public.adult LIMIT 10000", "42501", []),
    ('SELECT race AS race, MAX(hours_per_week) AS "MAX(hours_per_week)" FROM public.adult GROUP BY race', OK,
     []),
    ("SELECT STDDEV(age) AS sd FROM public.adult", "0A000", []),
    ("WITH t AS (SELECT * FROM public.adult) SELECT COUNT(*) FROM t", OK, []),  # CTE: inlined
]

TABLEAU: list[Entry] = [
    ('SELECT "adult"."sex" AS "sex", SUM(1) AS "cnt:adult_5C1B:ok" FROM "public"."adult" "adult" GROUP BY 1', OK, []),
    ('SELECT SUM(CAST("adult"."age" AS BIGINT)) AS "sum:age:ok" FROM "public"."adult" "adult" HAVING (COUNT(1) > 0)',
     OK, []),
    ('SELECT "adult"."race" AS "race", AVG(CAST("adult"."hours_per_week" AS DOUBLE PRECISION)) AS '
     '"avg:hours_per_week:ok" FROM "public"."adult" "adult" WHERE ("adult"."sex" = 1) GROUP BY 1', OK, []),
    ('SELECT COUNT(1) AS "x__alias__0" FROM "public"."adult" "adult" '
     'WHERE (("adult"."age" >= 30) AND ("adult"."age" <= 39))', OK, []),
    ('SELECT SUM(CAST(1 AS BIGINT)) AS "sum:Number of Records:ok" FROM "public"."adult" "adult"', OK, []),
    ('SELECT "adult"."workclass" AS "workclass", "adult"."income_gt_50k" AS "income_gt_50k", '
     'SUM(1) AS "cnt:adult:ok" FROM "public"."adult" "adult" GROUP BY 1, 2', OK, []),
    ('SELECT "adult"."education_num" AS "education_num", SUM("adult"."capital_gain") AS "sum:capital_gain:ok" '
     'FROM "public"."adult" "adult" WHERE ("adult"."education_num" IN (9, 10, 13)) GROUP BY 1', OK, []),
    ('SELECT SUM(1) AS "cnt:adult:ok" FROM "public"."adult" "adult" '
     'WHERE ((NOT ("adult"."race" IN (0, 4))) AND ("adult"."sex" = 0))', OK, []),
    ('SELECT "adult"."income_gt_50k" AS "income_gt_50k" FROM "public"."adult" "adult" GROUP BY 1', OK, []),  # values
    ('SELECT MIN("adult"."age") AS "TEMP(attr:age:qk)(2593)(0)", MAX("adult"."age") AS "TEMP(attr:age:qk)(3)(0)" '
     'FROM "public"."adult" "adult" HAVING (COUNT(1) > 0)', OK, []),
    ('SELECT COUNT(DISTINCT "adult"."native_country") AS "ctd:native_country:ok" FROM "public"."adult" "adult"',
     OK, []),
    ('SELECT "adult"."sex" AS "sex", SUM(("adult"."capital_gain" - "adult"."capital_loss")) AS "sum:net:ok" '
     'FROM "public"."adult" "adult" GROUP BY 1', OK, []),  # per-row values: split over capital_loss's cells
    ('SELECT SUM(CAST(("adult"."hours_per_week" * 52) AS BIGINT)) AS "sum:yearly:ok" '
     'FROM "public"."adult" "adult"', OK, []),
    ('SELECT "adult"."sex" AS "sex", SUM(1) AS "cnt:adult:ok" FROM "public"."adult" "adult" '
     'INNER JOIN "public"."regions" "regions" ON ("adult"."native_country" = "regions"."id") GROUP BY 1',
     "0A000", []),
]

GRAFANA: list[Entry] = [
    ('SELECT race AS "metric", count(*) AS "value" FROM adult GROUP BY 1 ORDER BY 1', OK, []),
    ('SELECT sex::text AS metric, sum(hours_per_week) AS value FROM adult GROUP BY sex ORDER BY 1', OK, []),
    ("SELECT count(*) AS value FROM adult WHERE race IN (0, 1, 2) AND 1 = 1", OK, []),
    ("SELECT count(*) AS value FROM adult WHERE workclass = ANY(ARRAY[1, 2])", OK, []),
    ("SELECT count(*) AS value FROM adult WHERE workclass <> ANY(ARRAY[1, 2])", OK, []),
    ("SELECT count(*) AS value FROM adult WHERE workclass <> ALL(ARRAY[1, 2])", OK, []),
    ("SELECT count(*) AS value FROM adult WHERE age < ANY(ARRAY[30, 40]) AND age >= ALL(ARRAY[20, 25])", OK, []),
    ("SELECT count(*) FROM adult WHERE age = 30.5::int", OK, []),
    ('SELECT income_gt_50k AS "metric", avg(age) AS "value" FROM adult WHERE sex IN (0, 1) GROUP BY 1 ORDER BY 1',
     OK, []),
    ("SELECT relationship AS metric, count(*) AS value FROM adult WHERE TRUE GROUP BY relationship ORDER BY 2 DESC",
     OK, []),
    # now() is read once per statement and resolved to a constant (it was refused before dates existed).
    ("SELECT count(*) AS value FROM adult WHERE age > 30 AND now() > '2000-01-01T00:00:00Z'", OK, []),
    ("SELECT age AS time, hours_per_week AS value FROM adult ORDER BY 1", "42501", []),
    ("SELECT count(*) AS value FROM adult WHERE age > $1", OK, [40]),
    ("SELECT sex AS metric, count(*) AS value FROM adult WHERE race = $1 AND age BETWEEN $2 AND $3 GROUP BY 1",
     OK, ["1", "30", "50"]),
    ("SELECT count(*) FROM adult WHERE workclass IN ($1, $2, $3)", OK, [1, 2, 3]),
    ("SELECT count(*) FROM adult WHERE age >= $1::int4 AND age < $2::integer", OK, ["30", "40"]),
    ("SELECT race, count(*) FROM adult GROUP BY race ORDER BY 2 DESC LIMIT $1", OK, [3]),
]

ANALYST: list[Entry] = [
    ("select count(*) from adult where age between 30 and 39 and sex = 1;", OK, []),
    ("SELECT COUNT(*) FROM adult", OK, []),
    ("SELECT COUNT(*) FROM adult WHERE race = 1", OK, []),
    ("SELECT COUNT(*) FROM adult WHERE relationship = 3 AND race = 3", OK, []),
    ("SELECT COUNT(*) FROM adult WHERE relationship = 0 AND age >= 46 AND age BETWEEN 55 AND 63", OK, []),
    ("SELECT COUNT(*) FROM adult WHERE sex = 1 AND workclass = 7 AND sex = 1", OK, []),
    ("SELECT AVG(age) FROM adult WHERE race = 1", OK, []),
    ("SELECT income_gt_50k, COUNT(*) FROM adult WHERE relationship = 2 AND hours_per_week >= 22 "
     "GROUP BY income_gt_50k", OK, []),
    ("SELECT sex, SUM(hours_per_week) FROM adult WHERE race = 1 GROUP BY sex", OK, []),
    ("SELECT income_gt_50k, AVG(age) FROM adult WHERE education_num = 3 GROUP BY income_gt_50k", OK, []),
    ("select count(*) from adult where race = 0 and hours_per_week >= 30 and hours_per_week = 6", OK, []),
    ("SELECT income_gt_50k, SUM(hours_per_week) FROM adult\nWHERE workclass = 4 GROUP BY income_gt_50k", OK, []),
    ("SELECT sex, AVG(age) FROM adult WHERE relationship = 0 AND age = 52 AND age >= 81 GROUP BY sex", OK, []),
    ("SELECT race, SUM(hours_per_week) FROM adult WHERE relationship = 3 AND income_gt_50k = 1 "
     "AND income_gt_50k = 0 GROUP BY race", OK, []),
    ("SELECT race, count(1) FROM adult WHERE age = 43 AND workclass = 4 AND income_gt_50k = 1 GROUP BY race", OK, []),
    ("SELECT COUNT(*)\nFROM adult\nWHERE education_num BETWEEN 1\n  AND 7", OK, []),
    ("SELECT COUNT(*) FILTER (WHERE sex = 1) AS men, COUNT(*) FILTER (WHERE sex = 0) AS women FROM adult", OK, []),
    ("SELECT SUM(capital_gain) - SUM(capital_loss) AS net FROM adult", OK, []),
    ("SELECT 100.0 * COUNT(*) FILTER (WHERE income_gt_50k = 1) / COUNT(*) AS pct FROM adult", OK, []),
    ("SELECT education_num, COUNT(*) FROM adult GROUP BY education_num HAVING COUNT(*) > 1000 ORDER BY 2 DESC",
     OK, []),
    ("SELECT COUNT(*) FROM adult WHERE age > $1 AND sex = $2", OK, [40, 1]),
    ("SELECT count(*), sum(age), avg(age) FROM adult WHERE age NOT BETWEEN 20 AND 60", OK, []),
    ("SELECT count(*) FROM adult WHERE NOT (age < 30 OR age > 50)", OK, []),
    ("SELECT count(*) FROM adult WHERE age IS NULL", OK, []),
    ("SELECT count(*) FROM adult WHERE age IN (20, 30, NULL)", OK, []),
    ("SELECT count(*) FROM adult WHERE age NOT IN (20, 30, NULL)", OK, []),
    ("SELECT count(*) FROM adult WHERE age = NULL", OK, []),
    ("SELECT count(*) FROM adult WHERE age > 1000", OK, []),
    ("SELECT count(*) FROM adult WHERE age > -5", OK, []),
    ("SELECT count(*) FROM adult WHERE age < 30.5", OK, []),
    ("SELECT count(*) FROM adult WHERE age = 30.0", OK, []),
    ("SELECT count(*) FROM adult WHERE age = '30'", OK, []),
    ("SELECT count(*) FROM adult WHERE age = '30'::int", OK, []),
    ("SELECT count(*) FROM adult WHERE age::bigint = 30", OK, []),
    ("SELECT count(*) FROM adult WHERE 30 < age", OK, []),
    ("SELECT count(*) FROM adult WHERE age BETWEEN SYMMETRIC 40 AND 30", OK, []),
    ("SELECT count(*) FROM adult WHERE age BETWEEN 40 AND 30", OK, []),
    ("SELECT count(*) FROM adult WHERE age IS DISTINCT FROM 30", OK, []),
    ("SELECT count(*) FROM adult WHERE age IS NOT DISTINCT FROM 30", OK, []),
    ("SELECT count(*) FROM adult WHERE (race = 1 OR race = 2) AND (sex = 0 OR age < 25)", OK, []),
    ("SELECT count(*) FROM adult WHERE race = 1 OR sex = 1 OR age > 80", OK, []),
    ("SELECT COUNT(age), COUNT(race) FROM adult", OK, []),
    ("SELECT COUNT(NULL) FROM adult", OK, []),
    ("SELECT sum(age) / count(*) AS mean_int, avg(age) AS mean FROM adult", OK, []),
    ("SELECT count(*) * 2 FROM adult", OK, []),
    ("SELECT -count(*) FROM adult", OK, []),
    ("SELECT sum(age)::float8 / count(*) FROM adult", OK, []),
    ("SELECT round(avg(age)) FROM adult", OK, []),
    ("SELECT ROUND(AVG(age)::numeric, 1) FROM adult", OK, []),
    ("SELECT coalesce(sum(age), 0) FROM adult WHERE age > 200", OK, []),
    ("SELECT abs(sum(capital_gain) - sum(capital_loss)) FROM adult", OK, []),
    ("SELECT 'total' AS label, count(*) FROM adult", OK, []),
    ("SELECT count(*) AS n FROM adult AS a WHERE a.sex = 1", OK, []),
    ("SELECT count(*) AS n FROM adult t WHERE t.age > 40 AND T.sex = 0", OK, []),
    ("SELECT count(*) FROM ADULT WHERE AGE > 40", OK, []),
    ('SELECT COUNT(*) FROM "adult" WHERE "age" > 40', OK, []),
    ("SELECT count(*) FROM public.adult WHERE adult.age > 40", OK, []),
    ("SELECT count(*) FROM public.adult WHERE public.adult.age > 40", OK, []),
    ("SELECT sex, race, count(*) FROM adult GROUP BY race, sex ORDER BY sex, race", OK, []),
    ("SELECT sex AS s, count(*) AS n FROM adult GROUP BY s ORDER BY n DESC", OK, []),
    ("SELECT count(*) FROM adult GROUP BY sex", OK, []),
    ("SELECT sex, count(*) FROM adult GROUP BY 1 HAVING sum(age) > 100000", OK, []),
    ("SELECT sex, count(*) FROM adult GROUP BY 1 ORDER BY sum(age) DESC", OK, []),
    ("SELECT race, count(*) FROM adult GROUP BY race ORDER BY race DESC LIMIT 2 OFFSET 1", OK, []),
    ("SELECT race, count(*) FROM adult GROUP BY race ORDER BY race FETCH FIRST 3 ROWS ONLY", OK, []),
    ("SELECT race, count(*) FROM adult GROUP BY race HAVING count(*) BETWEEN 100 AND 5000", OK, []),
    ("SELECT race, count(*) FROM adult GROUP BY race HAVING race IN (1, 2)", OK, []),
    ("SELECT race, avg(hours_per_week) FROM adult WHERE age < 30 GROUP BY race HAVING avg(hours_per_week) > 30",
     OK, []),
    ("SELECT count(*) FROM adult LIMIT ALL", OK, []),
    ("SELECT count(*) FROM adult LIMIT 0", OK, []),
    ("SELECT native_country, count(*) FROM adult WHERE native_country < 10 GROUP BY native_country", OK, []),
    ("SELECT count(*) FROM adult WHERE capital_gain > 0 AND capital_loss = 0", OK, []),
    ("SELECT sum(hours_per_week) FROM adult WHERE hours_per_week = 0", OK, []),
    ("SELECT sum(sex) FROM adult", OK, []),
    ("SELECT count(*) FROM adult WHERE occupation IN (1, 3, 5, 7, 9, 11, 13) AND fnlwgt < 50", OK, []),
    ("SELECT marital_status, relationship, count(*), avg(age) FROM adult GROUP BY 1, 2", OK, []),
    ("SELECT count(*) FROM adult WHERE NOT NOT (race = 2)", OK, []),
    ("SELECT count(*) FROM adult WHERE race = 2 AND NOT race = 2", OK, []),
    ("SELECT count(*) FROM adult WHERE FALSE", OK, []),
    ("SELECT count(*) FROM adult WHERE NULL", OK, []),
    ("SELECT count(*) FROM adult WHERE sex = 1 AND 1 = 0", OK, []),
    ("SELECT count(*) FROM adult WHERE hours_per_week >= 40 AND hours_per_week <= 40", OK, []),
    ("SELECT COUNT(*) FILTER (WHERE age > 60), SUM(age) FILTER (WHERE sex = 1) FROM adult WHERE race = 0", OK, []),
    # refusals an analyst hits
    ("SELECT * FROM adult", "42501", []),
    ("SELECT age FROM adult", "42501", []),
    ("SELECT age, sex FROM adult WHERE race = 1", "42501", []),
    ("SELECT DISTINCT race FROM adult", OK, []),  # value list: the public domain
    ("SELECT * FROM adult WHERE age > 80 LIMIT 10", "42501", []),
    ("SELECT age FROM adult ORDER BY age DESC LIMIT 1", "42501", []),
    ("SELECT count(*) FROM adult a JOIN adult b ON a.age = b.age", "0A000", []),
    ("SELECT count(*) FROM adult, adult b", "0A000", []),
    ("SELECT count(*) FROM adult WHERE age IN (SELECT age FROM adult WHERE sex = 1)", "0A000", []),
    ("SELECT count(*) FROM adult WHERE EXISTS (SELECT 1 FROM adult WHERE age > 89)", "0A000", []),
    ("SELECT (SELECT count(*) FROM adult)", "0A000", []),
    ("SELECT count(*) FROM adult UNION ALL SELECT count(*) FROM adult", "0A000", []),
    ("SELECT count(*) OVER () FROM adult", "0A000", []),
    ("SELECT race, row_number() OVER (ORDER BY race) FROM adult GROUP BY race", "0A000", []),
    ("SELECT min(age) FROM adult", OK, []),
    ("SELECT max(capital_gain) FROM adult WHERE sex = 1", OK, []),
    ("SELECT percentile_disc(0.9) WITHIN GROUP (ORDER BY hours_per_week) FROM adult", OK, []),
    ("SELECT variance(age) FROM adult", "0A000", []),
    ("SELECT string_agg(race::text, ',') FROM adult", "0A000", []),
    ("SELECT array_agg(age) FROM adult", "0A000", []),
    ("SELECT count(DISTINCT race) FROM adult", OK, []),
    ("SELECT sum(DISTINCT age) FROM adult", "0A000", []),
    ("SELECT sum(age * 2) FROM adult", OK, []),  # 2 * SUM(age): per-row values over declared cells
    ("SELECT avg(age + hours_per_week) FROM adult", OK, []),  # split over the 74 cells of age
    ("SELECT sum(CASE WHEN sex = 1 THEN age ELSE 0 END) FROM adult", OK, []),
    ("SELECT sum(CASE WHEN sex = 1 THEN 1 ELSE 0 END) AS men, sum(CASE WHEN sex = 0 THEN 1 ELSE 0 END) AS women "
     "FROM adult", OK, []),
    ("SELECT race, count(CASE WHEN age > 60 THEN 1 END) FROM adult GROUP BY race", OK, []),
    ("SELECT avg(CASE WHEN income_gt_50k = 1 THEN 1.0 ELSE 0.0 END) AS share FROM adult", OK, []),
    ("SELECT sum(CASE race WHEN 1 THEN 10 WHEN 2 THEN 20 ELSE hours_per_week END) FROM adult", OK, []),
    ("SELECT avg(CASE WHEN age < 30 THEN hours_per_week END) FROM adult WHERE sex = 1", OK, []),
    ("SELECT sum(CASE WHEN age > 30 THEN 'x' ELSE 0 END) FROM adult", "22P02", []),
    ("SELECT count(*) FROM adult WHERE age > hours_per_week", OK, []),  # over the product of their cells
    ("SELECT count(*) FROM adult WHERE age + 1 > 30", OK, []),  # per-row predicate over one attribute
    ("SELECT count(*) FROM adult WHERE abs(age - 40) < 5", OK, []),
    ("SELECT age / 10, count(*) FROM adult GROUP BY age / 10", OK, []),
    ("SELECT age / 10 * 10 AS decade, count(*), sum(hours_per_week) FROM adult GROUP BY 1 ORDER BY 1", OK, []),
    ("SELECT CASE WHEN age < 30 THEN 'young' WHEN age < 60 THEN 'middle' ELSE 'senior' END AS band, count(*) "
     "FROM adult GROUP BY 1", OK, []),
    ("SELECT CASE WHEN age < 30 THEN 'young' WHEN age >= 60 THEN 'senior' END AS band, sex, count(*) "
     "FROM adult WHERE race = 1 GROUP BY 1, 2 HAVING count(*) > 0 ORDER BY 1, 2", OK, []),
    ("SELECT CASE education_num WHEN 9 THEN 'hs' WHEN 13 THEN 'ba' ELSE 'other' END, avg(age) FROM adult "
     "GROUP BY CASE education_num WHEN 9 THEN 'hs' WHEN 13 THEN 'ba' ELSE 'other' END", OK, []),
    ("SELECT round(age / 5.0) * 5 AS a5, count(*) FROM adult WHERE sex = 0 GROUP BY a5", OK, []),
    # GROUP BY expressions over several columns: evaluated on their joint cells (analysis/joint.py).
    ("SELECT age - hours_per_week, count(*) FROM adult GROUP BY 1", OK, []),
    ("SELECT CASE WHEN age < 30 AND sex = 1 THEN 'young m' ELSE 'other' END AS g, count(*), avg(hours_per_week) "
     "FROM adult GROUP BY 1", OK, []),
    ("SELECT race + sex AS k, sum(age) FROM adult WHERE sex = 1 GROUP BY race + sex ORDER BY 1", OK, []),
    ("SELECT race, race + sex AS k, count(*) FROM adult GROUP BY race, race + sex", OK, []),
    ("SELECT concat(dept, '-', city) AS k, count(*), sum(score) FROM hr.people GROUP BY 1 ORDER BY 1", OK, []),
    ("SELECT dept || '/' || level AS k, count(*) FROM hr.people WHERE level > 1 GROUP BY dept || '/' || level",
     OK, []),
    ("SELECT CASE WHEN city IS NULL THEN 'unknown' WHEN score > 5 THEN city ELSE dept END, count(*) "
     "FROM hr.people GROUP BY 1", OK, []),
    ("SELECT native_country * 1000 + education_num * 100 + hours_per_week, count(*) FROM adult GROUP BY 1",
     "54000", []),
    ("SELECT random() > 0.5, count(*) FROM adult GROUP BY 1", "0A000", []),
    ("SELECT race, count(*) FROM adult GROUP BY ROLLUP (race)", "0A000", []),
    ("SELECT count(*) FROM adult TABLESAMPLE SYSTEM (10)", "0A000", []),
    ("SELECT count(*) FROM adult WHERE age LIKE '3%'", "42883", []),  # integer ~~ unknown, as PostgreSQL says
    ("SELECT DISTINCT count(*) FROM adult", "0A000", []),
    ("SELECT native_country, education_num, hours_per_week, count(*) FROM adult GROUP BY 1, 2, 3", "54000", []),
    # errors PostgreSQL itself raises, with its SQLSTATE
    ("SELECT COUNT(* FROM adult", "42601", []),
    ("SELECT COUNT(*)\nFROM adult\nWHERE age >", "42601", []),
    ("SELECT COUNT(*)\nFROM adult\nWHERE age = = 3\n  AND sex = 1", "42601", []),
    ("SELECT sex,\n       COUNT(*)\nFROM adult\nGROUP sex", "42601", []),
    ("SELECT COUNT(*) FROM adult WHERE", "42601", []),
    ("SELECT COUNT(*) FROM adult WHERE age >", "42601", []),
    ("SELECT COUNT(*) FROM adult WHERE age = = 3", "42601", []),
    ("SELECT COUNT(*) FROM adult GROUP race", "42601", []),
    ("SELECT COUNT(*) FROM adult WHERE (age > 3", "42601", []),
    ("SELECT COUNT(*),, sum(age) FROM adult", "42601", []),
    ("SELECT COUNT(*) FROM adult WHERE salary > 1", "42703", []),
    ("SELECT SUM(salary) FROM adult", "42703", []),
    ('SELECT "Age", COUNT(*) FROM adult GROUP BY "Age"', "42703", []),
    ("SELECT count(*) FROM adult GROUP BY zip", "42703", []),
    ("SELECT count(*) FROM adult a WHERE b.age = 3", "42P01", []),
    ("SELECT count(*) FROM adult a WHERE adult.age = 3", "42P01", []),
    ("SELECT age, COUNT(*) FROM adult", "42803", []),
    ("SELECT race, COUNT(*) FROM adult GROUP BY sex", "42803", []),
    ("SELECT COUNT(*) FROM adult WHERE COUNT(*) > 1", "42803", []),
    ("SELECT SUM(COUNT(*)) FROM adult", "42803", []),
    ("SELECT COUNT(*) FROM adult WHERE sex = true", "42883", []),
    ("SELECT COUNT(*) FROM adult WHERE age = 'abc'", "22P02", []),
    ("SELECT COUNT(*) FROM adult WHERE age = '30.5'", "22P02", []),
    ("SELECT race, count(*) FROM adult GROUP BY 5", "42P10", []),
    ("SELECT count(*) FROM adult LIMIT -1", "2201W", []),
    ("DELETE FROM adult WHERE age > 80", "25006", []),
    ("UPDATE adult SET age = 30", "25006", []),
    ("INSERT INTO adult (age) VALUES (30)", "25006", []),
    ("DROP TABLE adult", "25006", []),
]

PEOPLE: list[Entry] = [
    ("SELECT count(*) FROM hr.people", OK, []),
    ("SELECT city, count(*) FROM hr.people GROUP BY city", OK, []),
    ("SELECT count(*) FROM hr.people WHERE city = 'Berlin'", OK, []),
    ("SELECT count(*) FROM hr.people WHERE city <> 'Berlin'", OK, []),
    ("SELECT count(*) FROM hr.people WHERE city IS NULL", OK, []),
    ("SELECT count(*) FROM hr.people WHERE city IS NOT NULL AND dept IN ('eng', 'ops')", OK, []),
    ("SELECT count(*) FROM hr.people WHERE city NOT IN ('Lyon', NULL)", OK, []),
    ("SELECT count(*) FROM hr.people WHERE NOT (city = 'Oslo')", OK, []),
    ("SELECT count(city), count(score), count(*) FROM hr.people", OK, []),
    ("SELECT sum(score), avg(score) FROM hr.people WHERE dept = 'eng'", OK, []),
    ("SELECT dept, sum(score) FROM hr.people WHERE score < 0 GROUP BY dept", OK, []),
    ("SELECT count(*) FROM hr.people WHERE score IS DISTINCT FROM 3", OK, []),
    ("SELECT level, avg(score) FROM hr.people WHERE city = 'Paris' GROUP BY level", OK, []),
    ("SELECT count(*) FROM hr.people WHERE city = $1", OK, ["Lyon"]),
    ("SELECT count(*) FROM hr.people WHERE city < 'M'", OK, []),  # code point order: the C database's collation
    ("SELECT sum(city) FROM hr.people", "42883", []),
    ("SELECT count(*) FROM hr.people WHERE city = 1", "42883", []),
]

CORPUS: list[Entry] = METABASE + SUPERSET + TABLEAU + GRAFANA + ANALYST + PEOPLE
