"""BI tools' statement shapes through the real proxy: wrapped queries answered, shape probes answered with
columns and no row at no cost."""

from __future__ import annotations

import psycopg


def _budget(conn: psycopg.Connection) -> dict[str, str]:
    return dict(conn.execute("SHOW lapras.budget").fetchall())  # type: ignore[arg-type]


def test_virtual_dataset_probe_spends_nothing(proxy) -> None:
    with psycopg.connect(proxy.dsn(), autocommit=True) as conn:
        before = _budget(conn)
        # Superset probes a virtual dataset's SQL with LIMIT 1 for its columns and types.
        cur = conn.execute("SELECT age, race AS r, CAST(age AS TEXT) AS t FROM (SELECT * FROM adult WHERE sex = 1) "
                           "AS virtual_table LIMIT 1")
        assert [(d.name, d.type_code) for d in cur.description or []] == [("age", 23), ("r", 23), ("t", 25)]
        assert cur.fetchall() == []
        assert _budget(conn) == before
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


def test_value_picker_is_free_and_filtered_pie_has_only_its_slices(proxy) -> None:
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
