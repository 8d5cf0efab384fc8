"""Issue 25's Tableau-style corpus through a real proxy: the statements of tests/fixtures/wide_planning_config.py
(quoted mixed-case names, ``CAST(... AS DOUBLE PRECISION)`` and ``CAST(1 AS BIGINT)`` literals, GROUP BY
over 4, 5 and 8 text columns (the 8-column one beyond the list limit: its groups chosen by DP partition
selection), text ranges, IN lists up to 10,000 values, COUNT(DISTINCT user_id) by day, and GROUP BY over
integer and bigint identifiers declared ``keys = "private"``) over a 300-column table of generated rows in
the embedded PostgreSQL, sent with psycopg to `lapras-proxy serve`.

Each statement is answered (no refusal, no internal error); every key the proxy returns is one PostgreSQL
returns for the same text or, for a public domain's empty group, one PostgreSQL has no row for (its exact
answer 0; never for keys chosen by partition selection); every COUNT/SUM output lies within 6 stated
standard errors (SET lapras.show_stderr) of PostgreSQL's exact answer. The data hold no bounding bias (3
rows a user, values inside the declared ranges). False-failure rate: at most about 3,000 checked outputs
at 2e-9 each (6 sigma, two-sided Gaussian), below 1e-5.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from tests.fixtures import wide_planning_config as wide
from tests.fixtures.notices import notice_columns

pytestmark = pytest.mark.process

ROWS = 6000
STATEMENTS = wide.statements()
KEYS = {"count by 5 text columns": 5, "sum by 8 text columns (beyond the list limit)": 8,
        "detail table: 4 text columns, 9,333 groups": 4, "hour of day by segment": 2,
        "IN list of 10,000 values": 0, "filler: 3 text keys, 4 filters": 3}
SELECTED = {"sum by 8 text columns (beyond the list limit)", "GROUP BY an integer ID (zip)",
            "GROUP BY a bigint ID (NPI), text filter"}
CHECKED = ("cnt", "count", "sum", "u", "x")  # COUNT / SUM outputs (AVG states no single error)


@pytest.fixture(scope="module")
def wide_env(embedded_pg: Any, harness: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    dsn = harness.create_database(embedded_pg, "widetab")
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(wide.ddl())
        conn.execute(wide.fill_sql(ROWS))
    root = tmp_path_factory.mktemp("widetab")
    port = harness.free_port()
    cfg = root / "config.toml"
    cfg.write_text(wide.config_text(dsn, port, partition_fraction=0.2, epsilon=8.0, stream_length=60))
    proxy = harness.ProxyProcess(cfg, root / "state", port)
    with harness.proxy_beside_upstream(proxy, dsn, "wide") as (conn, exact):
        yield conn, exact, proxy


@pytest.mark.parametrize("label", list(STATEMENTS))
def test_tableau_statement_is_answered_within_its_stated_error(label: str, wide_env: Any) -> None:
    conn, exact, proxy = wide_env
    sql = STATEMENTS[label](1)
    notices: list[str] = []
    conn.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
    try:
        cur = conn.execute(sql)
        rows = cur.fetchall()
        names = [c.name for c in cur.description]
    except psycopg.Error as e:
        raise AssertionError(f"{label}: {e}\n" + "".join(proxy.output[-20:])) from None
    finally:
        conn._notice_handlers.clear()
    truth = exact.execute(sql).fetchall()
    n = KEYS.get(label, 1)
    want = {tuple(r[:n]): r[n:] for r in truth}
    got_keys = [tuple(r[:n]) for r in rows]
    if label in SELECTED:
        assert rows, label  # popular keys are held by hundreds of users: released
        assert set(got_keys) <= set(want), set(got_keys) - set(want)
    else:
        assert set(want) <= set(got_keys) or n == 0, set(want) - set(got_keys)
    if label == "GROUP BY an integer ID (zip)":
        assert all(isinstance(k[0], int) for k in got_keys) and set(got_keys) <= {(98101,), (10001,), (60601,), (94105,)}
    stated = {k.strip('"'): v for k, v in notice_columns(next(m for m in notices if "stderr=" in m)).items()}
    checked = 0
    for j, name in enumerate(names[n:], start=n):
        if not name.startswith(CHECKED) or name not in stated:
            continue
        errs = stated[name]
        for i, row in enumerate(rows):
            err = errs[i] if i < len(errs) else None
            if err is None or row[j] is None:
                continue
            true = want.get(got_keys[i], (None,) * (len(names) - n))[j - n]
            true = 0.0 if true is None else float(true)
            assert abs(float(row[j]) - true) <= 6 * err + 1e-6, (label, got_keys[i], name, row[j], true, err)
            checked += 1
    assert checked > 0, (label, names, notices)
