"""Text order through the real proxy follows the upstream database's collation: an upstream cluster whose
database sorts by en_US.UTF-8 (mixed case and accents interleave: a < A < ä < b, unlike byte order)
answers ``<``, ``>=``, ``BETWEEN``, GREATEST and ORDER BY over a declared text column as PostgreSQL does
under that collation, not as byte order would. The locale is compiled into a temporary directory
(localedef; the cluster reads it through LOCPATH); the test is skipped where glibc's locale sources are
missing. Noise: each count is checked within 5 of its reported standard errors (+1 for rounding): a false
failure has probability below 1e-6 per check (Gaussian tails), the orders differing by 50 rows or more."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from proxy.upstream.embedded import EmbeddedPostgres
from tests.fixtures.notices import notice_stderrs, noticed

pytestmark = pytest.mark.process

VALUES = ["apple", "Apple", "banana", "Banana", "éclair", "Eclair", "mango", "Mango", "zebra", "Zebra", "Ärger"]
EXTRA = ("[tables.people]\n[tables.people.columns]\n"
         f"name = {{ type = 'text', values = {json.dumps(VALUES, ensure_ascii=False)} }}\n"
         "n = { type = 'int', min = 0, max = 9 }\n")


def _stderrs(notices: list[str]) -> list[float]:
    return notice_stderrs(notices)


@pytest.fixture(scope="module")
def en_us_cluster(tmp_path_factory: Any) -> Iterator[EmbeddedPostgres]:
    if shutil.which("localedef") is None or not Path("/usr/share/i18n/locales/en_US").exists():
        pytest.skip("glibc's localedef and locale sources are needed to build en_US.UTF-8")
    locales = Path(tempfile.mkdtemp(prefix="lapras-locales-"))
    os.chmod(locales, 0o755)
    subprocess.run(["localedef", "-i", "en_US", "-f", "UTF-8", str(locales / "en_US.UTF-8")], check=False,
                   capture_output=True, timeout=120)
    if not (locales / "en_US.UTF-8" / "LC_COLLATE").exists():
        pytest.skip("localedef could not build en_US.UTF-8")
    old = os.environ.get("LOCPATH")
    os.environ["LOCPATH"] = str(locales)  # the postmaster inherits it
    root = Path(tempfile.mkdtemp(prefix="lapras-collation-"))
    pg = EmbeddedPostgres(root)
    try:
        pg.start()
    finally:
        if old is None:
            os.environ.pop("LOCPATH", None)
        else:
            os.environ["LOCPATH"] = old
    try:
        yield pg
    finally:
        pg.destroy()
        shutil.rmtree(root, ignore_errors=True)
        shutil.rmtree(locales, ignore_errors=True)


@pytest.fixture(scope="module")
def people_proxy(en_us_cluster: EmbeddedPostgres, default_config: Any, tmp_path_factory: Any,
                 harness: Any) -> Iterator[Any]:
    with psycopg.connect(en_us_cluster.dsn(), autocommit=True) as admin:
        admin.execute("CREATE DATABASE people TEMPLATE template0 LOCALE 'en_US.UTF-8'")
    dsn = en_us_cluster.dsn("people")
    harness.fill_demo_tables(dsn, default_config)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE people (name text, n integer)")
        conn.execute("INSERT INTO people SELECT v, g %% 10 FROM unnest(%s::text[]) WITH ORDINALITY AS t(v, i), "
                     "generate_series(1, 50 * i::int) AS g", (VALUES,))
    port = harness.free_port()
    root = tmp_path_factory.mktemp("collation")
    yield from harness.serve_config(root, harness.make_test_config(dsn, port, epsilon=1e4, stream_length=100_000,
                                                                   extra=EXTRA), port, dsn)


@pytest.mark.parametrize("where", ["name >= 'M'", "name < 'b'", "name BETWEEN 'a' AND 'E'", "name > 'éclair'",
                                   "name <= 'Apple'", "NOT (name >= 'B' AND name < 'Mango')"])
def test_text_ranges_follow_the_database_collation(people_proxy: Any, where: str) -> None:
    with psycopg.connect(people_proxy.upstream_dsn) as direct:  # type: ignore[attr-defined]
        exact = direct.execute(f"SELECT count(*) FROM people WHERE {where}").fetchone()[0]  # type: ignore[index]
        in_c = where.replace("name", 'name COLLATE "C"')
        byte_order = direct.execute(f"SELECT count(*) FROM people WHERE {in_c}").fetchone()[0]  # type: ignore[index]
    assert exact != byte_order  # the statement tells the two orders apart
    assert abs(exact - byte_order) >= 50
    with noticed(people_proxy.dsn()) as (conn, notices):
        got = conn.execute(f"SELECT count(*) FROM people WHERE {where}").fetchone()[0]  # type: ignore[index]
    sd = max(_stderrs(notices))
    assert abs(got - exact) <= 5 * sd + 1, (where, got, exact, byte_order, sd)


def test_order_by_and_greatest_follow_the_database_collation(people_proxy: Any) -> None:
    with psycopg.connect(people_proxy.upstream_dsn) as direct:  # type: ignore[attr-defined]
        order = [r[0] for r in direct.execute("SELECT name FROM people GROUP BY 1 ORDER BY 1").fetchall()]
        greatest = dict(direct.execute("SELECT greatest(name, 'b'), count(*) FROM people GROUP BY 1").fetchall())
    with psycopg.connect(people_proxy.dsn(), autocommit=True) as conn:
        got = [r[0] for r in conn.execute("SELECT name, count(*) FROM people GROUP BY 1 ORDER BY 1").fetchall()]
        assert got == order and order != sorted(order)
        ours = dict(conn.execute("SELECT greatest(name, 'b') AS g, count(*) FROM people GROUP BY 1").fetchall())
    assert set(ours) == set(greatest)


def test_min_max_of_text_follow_the_database_collation(people_proxy: Any) -> None:
    """MIN / MAX of a text column: the first / last declared value in the database's order whose count is
    clearly above noise (every value here holds 50 rows or more, far beyond it)."""
    with psycopg.connect(people_proxy.upstream_dsn) as direct:  # type: ignore[attr-defined]
        exact = direct.execute("SELECT MIN(name), MAX(name) FROM people WHERE n < 5").fetchone()
        in_c = direct.execute('SELECT MIN(name COLLATE "C"), MAX(name COLLATE "C") FROM people WHERE n < 5').fetchone()
    assert exact != in_c
    with psycopg.connect(people_proxy.dsn(), autocommit=True) as conn:
        got = conn.execute("SELECT MIN(name), MAX(name) FROM people WHERE n < 5").fetchone()
    assert got == exact
