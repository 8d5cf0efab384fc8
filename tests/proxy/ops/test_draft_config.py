"""`lapras-proxy draft-config` against the real embedded PostgreSQL: a table of every column type is drafted;
the placeholder draft is refused by check-config (naming each TODO), the --from-data draft passes it (with
the warning on stderr) and a proxy started on it answers a query close to PostgreSQL's exact answer."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import psycopg
import pytest

from proxy.config import ConfigError, load_config
from proxy.ops.cli import main
from proxy.ops.draft_config import draft

TABLE = "orders_draft"
DDL = f"""
CREATE TABLE {TABLE} (
    id bigint NOT NULL, qty int NOT NULL, price numeric(10, 2), score double precision,
    region varchar(10) NOT NULL, note text, ordered date NOT NULL, seen timestamptz, local_ts timestamp,
    paid boolean, big bigint, token uuid
);
INSERT INTO {TABLE}
SELECT g, g % 7, (g % 500) / 4.0, g * 0.5, (ARRAY['East', 'West', 'North'])[g % 3 + 1], 'note ' || g,
       date '2025-01-01' + g % 365, timestamptz '2025-01-01 00:00Z' + g * interval '7 minutes',
       timestamp '2025-03-01' + g * interval '1 hour', CASE WHEN g % 5 = 0 THEN NULL ELSE g % 2 = 0 END,
       g * 98765432::bigint, NULL
FROM generate_series(1, 3000) g;
"""


def _config(dsn: str, port: int, tables: str) -> str:
    # A large budget: the test is about answering at all, the noise is checked elsewhere.
    return (f'[server]\nlisten = "127.0.0.1:{port}"\ndatabase = "drafted"\n\n[upstream]\ndsn = "{dsn}"\n\n'
            '[[users]]\nname = "analyst"\nauth = "trust"\n\n[privacy]\nepsilon = 100.0\ndelta = 1e-5\n\n' + tables)


@pytest.fixture(scope="module")
def draft_db(embedded_pg: Any, harness: Any) -> str:
    dsn = harness.create_database(embedded_pg, "draft")
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(DDL)  # type: ignore[call-overload]
    return dsn


def test_placeholder_draft_maps_every_type_and_fails_check_config(draft_db: str, tmp_path: Path,
                                                                  harness: Any) -> None:
    text = draft(draft_db, TABLE)
    cols = tomllib.loads(text)["tables"][TABLE]["columns"]
    assert {k: v["type"] for k, v in cols.items()} == {
        "id": "bigint", "qty": "int", "price": "numeric", "score": "float", "region": "text", "note": "text",
        "ordered": "date", "seen": "timestamptz", "local_ts": "timestamp", "paid": "boolean", "big": "bigint"}
    assert "token" not in cols and "# token: uuid has no proxy column type" in text
    assert cols["price"]["nullable"] and "nullable" not in cols["qty"]  # from NOT NULL, not from the data
    assert cols["id"]["keys"] == "private" and "an identifier (by its name)" in text  # keys, not a measure
    assert "check-config refuses" in text
    path = tmp_path / "draft.toml"
    path.write_text(_config(draft_db, harness.free_port(), text))
    with pytest.raises(ConfigError) as err:
        load_config(path)
    flagged = {p.split(":")[0].split(".")[3] for p in err.value.problems}
    assert flagged == set(cols) - {"paid", "id"}, err.value.problems  # all but the boolean and the id need a domain


def test_from_data_draft_passes_check_config_and_answers(draft_db: str, tmp_path: Path, harness: Any,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    # draft-config and check-config through the command's main() in this process (a subprocess each would
    # add seconds of imports and prove nothing more: test_cli runs the real process); the proxy is real.
    capsys.readouterr()
    assert main(["draft-config", "--dsn", draft_db, "--table", TABLE, "--from-data", "--max-values", "10"]) == 0
    done = capsys.readouterr()
    assert "PUBLIC" in done.err and "warning" in done.err
    cols = tomllib.loads(done.out)["tables"][TABLE]["columns"]
    assert cols["qty"] == {"type": "int", "min": 0, "max": 6}
    assert cols["region"]["values"] == ["East", "North", "West"]
    assert cols["note"] == {"type": "text", "keys": "private", "nullable": True}  # 3,000 values: no list
    # "big" (g * 98765432, one value a row) is an identifier by its distinct values: keys, not a range
    assert cols["big"] == {"type": "bigint", "keys": "private", "nullable": True} and "distinct values in" in done.out
    assert cols["seen"]["resolution"] == "hour" and cols["local_ts"]["resolution"] == "hour"
    port = harness.free_port()
    cfg = tmp_path / "config.toml"
    cfg.write_text(_config(draft_db, port, done.out))
    code = main(["check-config", "--config", str(cfg)])
    check = capsys.readouterr()
    assert code == 0 and "OK" in check.out, check.err
    sql = (f"SELECT region, COUNT(*), SUM(price) FROM {TABLE} WHERE ordered >= '2025-07-01' AND paid "
           "GROUP BY region ORDER BY region")
    with psycopg.connect(draft_db) as conn:
        exact = conn.execute(sql).fetchall()  # type: ignore[call-overload]
    proxy = harness.ProxyProcess(cfg, tmp_path / "state", port)
    proxy.start()
    try:
        with psycopg.connect(proxy.dsn(dbname="drafted", password=None), autocommit=True) as conn:
            got = conn.execute(sql).fetchall()  # type: ignore[call-overload]
    finally:
        proxy.stop()
    assert [r[0] for r in got] == [r[0] for r in exact]
    for (_, n, s), (_, n0, s0) in zip(got, exact, strict=True):
        # epsilon = 100 over a stream of 200: the noise is a few percent of these groups' counts and sums.
        assert abs(n - n0) < 0.25 * n0 and abs(float(s) - float(s0)) < 0.25 * float(s0)


def test_odd_names_are_quoted_toml_keys(draft_db: str) -> None:
    with psycopg.connect(draft_db, autocommit=True) as conn:
        conn.execute('CREATE TABLE "Sales 3" ("Number of Records" int NOT NULL, "FB." numeric, '
                     '"twitter#user#screen_name" text, "Agep (bin)" int, "Größe: cm" int, """q""" boolean)')
    text = draft(draft_db, "Sales 3")
    cols = tomllib.loads(text)["tables"]["Sales 3"]["columns"]
    assert list(cols) == ["Number of Records", "FB.", "twitter#user#screen_name", "Agep (bin)", "Größe: cm",
                          '"q"']
    assert text == draft(draft_db, 'public."Sales 3"')  # the name as SQL finds the same table


def test_odd_names_from_data_pass_check_config(draft_db: str, tmp_path: Path, harness: Any) -> None:
    with psycopg.connect(draft_db, autocommit=True) as conn:
        conn.execute('CREATE TABLE "Orders (EU)" ("Order #" int NOT NULL, "Région" text, "Net €" numeric)')
        conn.execute('INSERT INTO "Orders (EU)" SELECT g, (ARRAY[\'Île-de-France\', \'Bayern\'])[g % 2 + 1], g '
                     "FROM generate_series(1, 50) g")
    path = tmp_path / "odd.toml"
    path.write_text(_config(draft_db, harness.free_port(), draft(draft_db, "Orders (EU)", from_data=True)))
    table = load_config(path).catalog.tables[0]
    assert table.name == "Orders (EU)"
    assert [a.name for a in table.attributes] == ["Order #", "Région", "Net €"]
