"""BI tools' statement shapes through the real proxy: wrapped queries answered, shape probes answered with
columns and no row at no cost."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from tests.fixtures.notices import notice_columns, noticed
from tests.fixtures.parser_corpus import LOOKER_PIVOT


def _budget(conn: psycopg.Connection) -> dict[str, str]:
    return dict(conn.execute("SHOW lapras.budget").fetchall())  # type: ignore[arg-type]


def test_virtual_dataset_probe_spends_nothing(proxy) -> None:
    with noticed(proxy.dsn(), show_stderr=False) as (conn, notices):
        before = _budget(conn)
        # Superset probes a virtual dataset's SQL with LIMIT 1 for its columns and types.
        cur = conn.execute("SELECT age, race AS r, CAST(age AS TEXT) AS t FROM (SELECT * FROM adult WHERE sex = 1) "
                           "AS virtual_table LIMIT 1")
        assert [(d.name, d.type_code) for d in cur.description or []] == [("age", 23), ("r", 23), ("t", 25)]
        assert cur.fetchall() == []
        assert _budget(conn) == before
        assert any("returns its columns and no row" in n for n in notices)
        # A larger row read is still refused.
        try:
            conn.execute("SELECT age FROM (SELECT * FROM adult) AS virtual_table LIMIT 100")
            raise AssertionError("row-level read answered")
        except psycopg.errors.InsufficientPrivilege:
            pass


def test_power_bi_directquery_nesting_is_answered(proxy) -> None:
    sql = ('select "_"."race", "_"."a0" from (select "race", count(1) as "a0" from (select "$Table"."race" as '
           '"race", "$Table"."age" as "age" from "public"."adult" "$Table") "_" where "age" >= 40 group by "race") '
           '"_" where not "_"."a0" is null limit 1000001')
    with psycopg.connect(proxy.dsn(), autocommit=True) as conn:
        rows = conn.execute(sql).fetchall()
    assert [r[0] for r in rows] == [0, 1, 2, 3, 4]
    assert all(isinstance(r[1], int) for r in rows)


def test_value_picker_is_free_and_filtered_pie_has_only_its_slices(proxy_factory) -> None:
    proxy = proxy_factory(epsilon=1e4, stream_length=100_000, privacy_extra="partition_fraction = 0.0")  # no selection
    with psycopg.connect(proxy.dsn(), autocommit=True) as conn:
        before = _budget(conn)
        rows = conn.execute("SELECT DISTINCT race FROM adult ORDER BY race LIMIT 1000").fetchall()
        assert rows == [(v,) for v in range(5)]
        assert _budget(conn) == before
        try:
            conn.execute("SELECT DISTINCT race FROM adult WHERE sex = 1")
            raise AssertionError("filtered value list answered")
        except psycopg.errors.InsufficientPrivilege as e:
            assert "reveal which values occur" in str(e)
        pie = conn.execute("SELECT race AS race, COUNT(*) AS count FROM adult WHERE race IN (1, 2) "
                           "GROUP BY race ORDER BY count DESC LIMIT 100").fetchall()
        assert sorted(r[0] for r in pie) == [1, 2]


def test_median_and_percentiles_through_the_proxy(proxy_factory) -> None:
    """Answered from noisy tree counts through the engine at epsilon = 1: charged once, repeated free, each
    estimate near the exact value, the 95% interval shown under show_stderr."""
    proxy = proxy_factory(epsilon=1.0, delta=1e-3, stream_length=20)
    sql = ("SELECT sex, percentile_cont(0.5) WITHIN GROUP (ORDER BY age) AS med, min(age) AS lo, "
           "max(age) AS hi, percentile_disc(0.9) WITHIN GROUP (ORDER BY hours_per_week) AS p90 "
           "FROM adult GROUP BY sex ORDER BY sex")
    with noticed(proxy.dsn()) as (conn, notices):
        before = _budget(conn)
        rows = conn.execute(sql).fetchall()
        after_first = _budget(conn)
        assert after_first != before  # charged
        again = conn.execute(sql).fetchall()
        assert again == rows and _budget(conn) == after_first  # repeated free
    with psycopg.connect(proxy.upstream_dsn) as direct:
        exact = direct.execute(sql).fetchall()
    intervals = [n for n in notices if "95% interval" in n]
    assert len(intervals) >= 4, notices
    for ours, theirs in zip(rows, exact, strict=True):
        assert ours[0] == theirs[0]
        assert abs(ours[1] - float(theirs[1])) <= 3  # median age: interval half-width is about 1 year
        assert abs(ours[4] - theirs[4]) <= 5
    # DP MIN / MAX are the values past which the noisy counts show no rows beyond noise: only a sliver of
    # the group (here under 3%: the tails of a few hundred rows at the extreme ages) lies outside them.
    with psycopg.connect(proxy.upstream_dsn) as direct:
        for sex, _, lo, hi, _ in rows:
            (outside,) = direct.execute("SELECT avg((age < %s OR age > %s)::int) FROM adult WHERE sex = %s",
                                        (lo, hi, sex)).fetchone()  # type: ignore[misc]
            assert float(outside) < 0.03, (sex, lo, hi, outside)


SERIES_LIMITED = (
    "SELECT education_num AS education_num, race AS race, COUNT(*) AS count FROM public.adult "
    "JOIN (SELECT race AS race__, COUNT(*) AS mme_inner__ FROM public.adult WHERE age >= 30 GROUP BY race "
    "ORDER BY mme_inner__ DESC LIMIT 2) AS series_limit ON race = race__ "
    "WHERE age >= 30 GROUP BY education_num, race ORDER BY count DESC LIMIT 10000")


def test_superset_series_limit_is_two_dp_statements(proxy, adult_db: str) -> None:
    """Superset's series limit: the top-N subquery is answered first (noisy totals, charged), the chart
    query then restricted to those series (charged); the whole is repeated free."""
    with noticed(proxy.dsn()) as (conn, notices):
        rows = conn.execute(SERIES_LIMITED).fetchall()
        after = _budget(conn)
        assert conn.execute(SERIES_LIMITED).fetchall() == rows and _budget(conn) == after
        top = conn.execute("SELECT race AS \"race__\", COUNT(*) AS mme_inner__ FROM public.adult WHERE age >= 30 "
                           "GROUP BY race ORDER BY mme_inner__ DESC LIMIT 2").fetchall()
    assert {r[1] for r in rows} == {r[0] for r in top}  # the series the first statement released
    assert any("series limit" in n for n in notices)
    with psycopg.connect(adult_db) as direct:  # the session proxy's upstream; its budget makes noise tiny
        exact_top = direct.execute("SELECT race FROM adult WHERE age >= 30 GROUP BY race ORDER BY count(*) DESC "
                                   "LIMIT 2").fetchall()
    assert {r[0] for r in top} == {r[0] for r in exact_top}


TABLEAU_TOP_N = (
    'SELECT "adult"."education_num" AS "education_num", SUM(1) AS "cnt:adult_5C1B:ok" FROM "public"."adult" "adult" '
    'INNER JOIN (SELECT "adult"."race" AS "race", COUNT(1) AS "$__alias__0" FROM "public"."adult" "adult" '
    'WHERE ("adult"."age" >= 30) GROUP BY 1 ORDER BY 2 DESC LIMIT 2) "t0" ON ("adult"."race" = "t0"."race") '
    'WHERE ("adult"."age" >= 30) GROUP BY 1')


def test_tableau_top_n_filter_is_two_dp_statements(proxy, adult_db: str) -> None:
    """Tableau's top-N filter, its subquery written with positions (GROUP BY 1 ORDER BY 2 DESC LIMIT N), is
    split as Superset's series limit: the N races of the noisy totals, then the chart over them (it was
    refused with 0A000 'JOIN of a subquery'). The session proxy's budget makes noise tiny, so the races are
    the exact top 2 (as in the Superset test above) and the chart equals the same statement filtered on them."""
    with psycopg.connect(adult_db) as direct:
        top = [r[0] for r in direct.execute("SELECT race FROM adult WHERE age >= 30 GROUP BY race "
                                            "ORDER BY count(*) DESC LIMIT 2").fetchall()]
    with noticed(proxy.dsn()) as (conn, notices):
        rows = conn.execute(TABLEAU_TOP_N).fetchall()
        same = conn.execute('SELECT "adult"."education_num" AS "education_num", SUM(1) AS "cnt:adult_5C1B:ok" '
                            'FROM "public"."adult" "adult" WHERE ("adult"."age" >= 30) AND "adult"."race" IN '
                            f"({top[0]}, {top[1]}) GROUP BY 1").fetchall()
    assert any("series limit: 2 series" in n for n in notices), notices
    assert sorted(rows) == sorted(same) and len(rows) == 16


METABASE_CUMULATIVE = (
    'SELECT "public"."adult"."education_num" AS "education_num", count(*) AS "count", sum(count(*)) OVER (ORDER BY '
    '"public"."adult"."education_num" ASC ROWS UNBOUNDED PRECEDING) AS "cum_count" FROM "public"."adult" '
    'WHERE "public"."adult"."sex" = 1 GROUP BY "public"."adult"."education_num" '
    'ORDER BY "public"."adult"."education_num" ASC')


def test_metabase_cumulative_count_is_a_running_sum_of_the_released_counts(proxy) -> None:
    """Metabase's cumulative count (a window over the grouped rows, v50+) was refused with 0A000. It is
    post-processing of the released counts: after the plain breakout, the same statement with the window
    reads the same queries (free, repeated) and its column is the running sum of the counts it shows, typed
    numeric as PostgreSQL types sum(bigint) (deterministic: false-failure rate 0)."""
    plain = METABASE_CUMULATIVE.replace(
        ', sum(count(*)) OVER (ORDER BY "public"."adult"."education_num" ASC ROWS UNBOUNDED PRECEDING) AS '
        '"cum_count"', "")
    with noticed(proxy.dsn()) as (conn, notices):
        counts = conn.execute(plain).fetchall()
        notices.clear()
        cur = conn.execute(METABASE_CUMULATIVE)
        rows = cur.fetchall()
        assert [d.type_code for d in cur.description or []] == [23, 20, 1700]
    assert "outcome=repeat" in notices[0], notices
    stated = notice_columns(notices[0])
    assert set(stated["cum_count"]) == {None} and None not in stated["count"]  # a window states no error
    assert [r[:2] for r in rows] == counts and len(rows) == 16
    running = 0
    for _, n, cum in rows:
        running += n
        assert cum == running


def test_refused_series_limit_charges_nothing(proxy_factory: Any) -> None:
    """A series-limited chart whose outer part is refused (STDDEV is not answered): both parts are planned
    before the top-N part is charged, so the refusal leaves the ledger without a spend (it once released and
    charged the top-N totals the client never saw)."""
    px = proxy_factory(epsilon=1.0, stream_length=50)
    refused = SERIES_LIMITED.replace("COUNT(*) AS count FROM public.adult JOIN",
                                     "STDDEV(hours_per_week) AS count FROM public.adult JOIN")
    with psycopg.connect(px.dsn(), autocommit=True) as conn:
        with pytest.raises(psycopg.errors.FeatureNotSupported) as info:
            conn.execute(refused)
        assert "STDDEV" in str(info.value)
        assert conn.execute("SELECT 1").fetchone() == (1,)
    with psycopg.connect(px.upstream_dsn, autocommit=True) as up:
        assert up.execute("SELECT count(*) FROM lapras.spends").fetchone() == (0,)
        assert up.execute("SELECT count(*) FROM lapras.answers").fetchone() == (0,)


# Metabase's table sync (src/metabase/driver/postgres.clj, get-tables-sql, v50+), as HoneySQL formats it
# with the :ansi dialect and pgjdbc sends it: strings and numbers as parameters.
METABASE_GET_TABLES = (
    'SELECT "n"."nspname" AS "schema", "c"."relname" AS "name", CASE "c"."relkind" WHEN \'r\' THEN \'TABLE\' '
    "WHEN 'p' THEN 'PARTITIONED TABLE' WHEN 'v' THEN 'VIEW' WHEN 'f' THEN 'FOREIGN TABLE' "
    "WHEN 'm' THEN 'MATERIALIZED VIEW' ELSE NULL END AS \"type\", \"d\".\"description\" AS \"description\", "
    '"stat"."n_live_tup" AS "estimated_row_count" FROM "pg_catalog"."pg_class" AS "c" '
    'INNER JOIN "pg_catalog"."pg_namespace" AS "n" ON "c"."relnamespace" = "n"."oid" '
    'LEFT JOIN "pg_catalog"."pg_description" AS "d" ON ("c"."oid" = "d"."objoid") AND ("d"."objsubid" = %s) '
    "AND (\"d\".\"classoid\" = 'pg_class'::regclass) "
    'LEFT JOIN "pg_stat_user_tables" AS "stat" ON ("n"."nspname" = "stat"."schemaname") '
    'AND ("c"."relname" = "stat"."relname") '
    'WHERE ("c"."relnamespace" = "n"."oid") AND ("n"."nspname" !~ %s) AND ("n"."nspname" <> %s) '
    "AND c.relkind in ('r', 'p', 'v', 'f', 'm') AND (\"n\".\"nspname\" IN (%s)) "
    'ORDER BY "type" ASC, "schema" ASC, "name" ASC')


def test_pg_stat_user_tables_rewrite_keeps_aliases_and_reads_no_counter() -> None:
    from proxy.catalog.table_stats import figure_free_sql, rewrite

    replacement = figure_free_sql([("relid", "oid"), ("schemaname", "name"), ("relname", "name"),
                                   ("seq_scan", "bigint"), ("n_live_tup", "bigint"),
                                   ("last_analyze", "timestamp with time zone")])
    out = rewrite(METABASE_GET_TABLES.replace("%s", "$1"), replacement)
    assert "pg_stat_user_tables" not in out.replace('AS "stat"', "")
    assert 'AS "stat"' in out and "CAST(NULL AS BIGINT)" in out and "pg_stat_get" not in out
    bare = rewrite("SELECT relname, n_live_tup FROM pg_catalog.pg_stat_user_tables", replacement)
    assert "FROM (SELECT" in bare and "AS pg_stat_user_tables" in bare
    assert rewrite("SELECT 1 FROM pg_class", replacement) == "SELECT 1 FROM pg_class"
    assert rewrite("SELECT FROM pg_stat_user_tables ((", replacement).endswith("((")  # unparsable: as written


def test_metabase_table_sync_lists_tables_without_figures(proxy) -> None:
    """The exact get-tables query of Metabase's sync: every declared table, estimated_row_count NULL (no
    figure read); the view itself answers with NULL counters; the statistics behind it stay refused."""
    with psycopg.connect(proxy.dsn(), autocommit=True) as conn:
        rows = conn.execute(METABASE_GET_TABLES, (0, "^pg_", "information_schema", "public")).fetchall()
        assert {(r[0], r[1], r[2]) for r in rows} >= {("public", "adult", "TABLE"), ("public", "events", "TABLE")}
        assert all(r[4] is None for r in rows)
        again = conn.execute(METABASE_GET_TABLES, (0, "^pg_", "information_schema", "public")).fetchall()
        assert again == rows   # the second sync runs the rewrite the relay remembered
        stat = conn.execute("SELECT relname, seq_scan, n_live_tup, n_dead_tup, last_analyze FROM "
                            "pg_catalog.pg_stat_user_tables s WHERE s.schemaname = 'public' ORDER BY 1").fetchall()
        assert [r[0] for r in stat] == ["adult", "calendar", "events", "orders", "products", "stores"] and all(v is None for r in stat for v in r[1:])
        # Then, per table, its select-privilege probe (sql-jdbc simple-select-probe-query): no row, no spend.
        before = _budget(conn)
        for table in ("adult", "events"):
            assert conn.execute(f'SELECT TRUE AS "_" FROM "public"."{table}" WHERE 1 <> 1 LIMIT 0').fetchall() == []
        assert _budget(conn) == before
        for sql in ("SELECT pg_stat_get_live_tuples('adult'::regclass)", "SELECT * FROM pg_stat_all_tables",
                    'SELECT * FROM U&"pg\\005fstat_user_tables"'):
            try:
                conn.execute(sql)
                raise AssertionError(f"answered: {sql}")
            except psycopg.errors.InsufficientPrivilege:
                pass


def test_looker_pivot_is_post_processing_of_the_released_counts(proxy, adult_db: str) -> None:
    """Looker's pivot (four levels of ranks over the aggregate, filters between them) was 0A000. After the
    plain aggregate, it reads the same query (repeat, free): its groups and counts are the released ones, its
    ordering follows its row rank and its column names and types are PostgreSQL's (false-failure rate 0)."""
    inner = 'SELECT adult.race AS "adult.race", adult.sex AS "adult.sex", COUNT(*) AS "adult.count" ' \
            "FROM public.adult AS adult GROUP BY 1, 2"
    with noticed(proxy.dsn()) as (conn, notices):
        released = conn.execute(inner).fetchall()
        notices.clear()
        cur = conn.execute(LOOKER_PIVOT)
        rows = cur.fetchall()
        ours = [(d.name, d.type_code) for d in cur.description or []]
        prepared = conn.cursor()
        prepared.execute(LOOKER_PIVOT, prepare=True)  # Parse + Describe of a named statement, then Execute
        assert [(d.name, d.type_code) for d in prepared.description or []] == ours
        assert prepared.fetchall() == rows
    assert "outcome=repeat" in notices[0], notices
    assert sorted(r[:3] for r in rows) == sorted(released)
    assert [r[6] for r in rows] == sorted(r[6] for r in rows)
    with psycopg.connect(adult_db, autocommit=True) as up:
        pg = up.execute(LOOKER_PIVOT)
        assert ours == [(d.name, d.type_code) for d in pg.description or []]
        assert sorted(r[:2] for r in pg.fetchall()) == sorted(r[:2] for r in rows)


def test_nested_question_over_a_window_and_other_tables(proxy) -> None:
    """Two levels over an aggregate (a rank, then a filter on it) are answered; an outer level naming another
    table is refused as other joins of an aggregate are (deterministic: false-failure rate 0)."""
    sql = ("SELECT q.race, q.n FROM (SELECT s.race, s.n, row_number() OVER (ORDER BY s.n DESC) AS pos FROM "
           "(SELECT race, count(*) AS n FROM adult GROUP BY race) s) q WHERE q.pos <= 2 ORDER BY q.pos")
    with psycopg.connect(proxy.dsn(), autocommit=True) as conn:
        rows = conn.execute(sql).fetchall()
        assert len(rows) == 2 and rows[0][1] >= rows[1][1]
        with pytest.raises((psycopg.errors.FeatureNotSupported, psycopg.errors.InsufficientPrivilege)):
            conn.execute("SELECT q.race FROM (SELECT s.race, rank() OVER (ORDER BY s.n) AS k FROM (SELECT race, "
                         "count(*) AS n FROM adult GROUP BY race) s) q JOIN pg_catalog.pg_class c ON c.oid = q.k")
