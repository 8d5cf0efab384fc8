"""The running server, spoken to byte by byte: simple and extended protocol, errors, transactions, cursors."""

from __future__ import annotations

import struct

import pytest

from tests.fixtures import pgwire_frames as wire
from tests.fixtures.local_proxy import RawClient, ServerThread, local_client, start_local


def kinds(msgs: list[tuple[str, bytes]]) -> str:
    return "".join(k for k, _ in msgs)


def sqlstates(msgs: list[tuple[str, bytes]]) -> list[str]:
    return [wire.error_fields(b)["C"] for k, b in msgs if k == "E"]


def rows(msgs: list[tuple[str, bytes]]) -> list[list[bytes | None]]:
    out = []
    for k, body in msgs:
        if k == "D":
            (n,) = struct.unpack_from("!h", body, 0)
            pos, vals = 2, []
            for _ in range(n):
                (ln,) = struct.unpack_from("!i", body, pos)
                pos += 4
                vals.append(None if ln < 0 else body[pos:pos + ln])
                pos += max(ln, 0)
            out.append(vals)
    return out


def tags(msgs: list[tuple[str, bytes]]) -> list[str]:
    return [b[:-1].decode() for k, b in msgs if k == "C"]


def q(c: RawClient, sql: str) -> list[tuple[str, bytes]]:
    c.send(wire.query(sql))
    return c.until_ready()


def test_startup_reports_parameters(raw: RawClient) -> None:
    for name in ("server_version", "server_encoding", "client_encoding", "DateStyle", "TimeZone",
                 "integer_datetimes", "standard_conforming_strings", "IntervalStyle", "application_name"):
        assert name in raw.params
    assert raw.params["server_version"][0].isdigit()
    assert raw.params["integer_datetimes"] == "on"
    assert raw.pid > 0


def test_multi_statement_simple_query(raw: RawClient) -> None:
    m = q(raw, "SET application_name = 'a;b'; SHOW application_name; SELECT 1; /* ; */ SELECT count(*) FROM adult")
    assert tags(m) == ["SET", "SHOW", "SELECT 1", "SELECT 1"]
    assert rows(m)[0] == [b"a;b"]
    assert any(k == "S" and b.startswith(b"application_name\0a;b") for k, b in m)   # ParameterStatus
    assert m[-1] == ("Z", b"I")


def test_simple_query_stops_at_first_error(raw: RawClient) -> None:
    m = q(raw, "SELECT 1; INSERT INTO adult VALUES (1); SELECT 2")
    assert tags(m) == ["SELECT 1"]
    assert sqlstates(m) == ["25006"]
    assert m[-1] == ("Z", b"I")


def test_empty_query(raw: RawClient) -> None:
    assert kinds(q(raw, "  -- nothing\n")) == "IZ"


def test_writes_and_ddl_refused(raw: RawClient) -> None:
    for sql in ("INSERT INTO adult VALUES (1)", "UPDATE adult SET age = 1", "DELETE FROM adult",
                "CREATE TABLE t (x int)", "DROP TABLE adult", "COPY adult FROM STDIN", "TRUNCATE adult",
                "ALTER TABLE adult ADD COLUMN x int", "WITH x AS (DELETE FROM adult RETURNING 1) SELECT 1",
                "SELECT 1 INTO newtable", "GRANT SELECT ON adult TO public", "VACUUM adult"):
        assert sqlstates(q(raw, sql)) == ["25006"], sql


def test_statistics_and_dangerous_functions_refused(raw: RawClient) -> None:
    for sql in ("SELECT * FROM pg_stats", "SELECT * FROM pg_catalog.pg_statistic",
                "SELECT * FROM pg_statio_user_tables", "SELECT reltuples FROM pg_class",
                "SELECT relpages FROM pg_class WHERE relname = 'adult'",
                "SELECT histogram_bounds FROM pg_stats", "SELECT pg_read_file('/etc/passwd')",
                "SELECT * FROM pg_ls_dir('.')", "SELECT lo_import('/etc/passwd')",
                "COPY (SELECT 1) TO PROGRAM 'id'", "SELECT query_to_xml('select 1', true, true, '')",
                "SELECT current_setting('data_directory')", "SELECT set_config('a.b', 'c', false) FROM pg_class",
                "SELECT set_config('a.b', 'c', false), current_setting('data_directory')",
                "SELECT * FROM pg_stat_activity", "SELECT dblink('x', 'y')"):
        assert sqlstates(q(raw, sql)) == ["42501"], sql


def test_row_level_read_of_protected_table_refused(raw: RawClient) -> None:
    assert sqlstates(q(raw, "SELECT * FROM adult")) == ["42501"]
    assert sqlstates(q(raw, "EXPLAIN (FORMAT JSON) SELECT count(*) FROM adult")) == ["42501"]
    assert sqlstates(q(raw, "EXPLAIN SELECT * FROM adult")) == ["42501"]
    assert sqlstates(q(raw, "COPY adult TO STDOUT")) == ["42501"]


def test_copy_of_an_aggregate_says_how_to_save_an_answer(raw: RawClient) -> None:
    """psql's \\copy (SELECT race, count(*) ...) TO 'f.csv': refused (COPY runs no DP statement), not as if
    the aggregate were a row-level read, with the way to save the answer instead."""
    for sql, state in (("COPY (SELECT race, count(*) FROM adult GROUP BY race) TO STDOUT", "42501"),
                       ("COPY (SELECT 1) TO STDOUT WITH (FORMAT csv)", "0A000")):
        (err,) = [wire.error_fields(b) for k, b in q(raw, sql) if k == "E"]
        assert err["C"] == state and "\\g FILE" in err["H"] and "export rows" not in err["M"], err
    assert rows(q(raw, "SELECT 1")) == [[b"1"]]


def test_catalog_queries_pass_through(raw: RawClient) -> None:
    m = q(raw, "SELECT c.relname, a.attname, format_type(a.atttypid, a.atttypmod) FROM pg_class c "
               "JOIN pg_attribute a ON a.attrelid = c.oid WHERE c.relname = 'adult' AND a.attnum > 0 "
               "ORDER BY a.attnum")
    cols = rows(m)
    assert cols[0] == [b"adult", b"age", b"integer"]
    assert len(cols) == 14
    m = q(raw, "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'")
    assert [b"adult"] in rows(m)
    assert rows(q(raw, "SELECT current_schema()")) == [[b"public"]]
    assert rows(q(raw, "SELECT version()"))[0][0].startswith(b"PostgreSQL")


def test_catalog_error_is_relayed_with_position(raw: RawClient) -> None:
    m = q(raw, "SELECT nosuchcolumn FROM pg_class")
    fields = wire.error_fields(next(b for k, b in m if k == "E"))
    assert fields["C"] == "42703" and fields["S"] == "ERROR" and fields["P"] == "8"
    assert fields["V"] == "ERROR"


def test_set_show_reset(raw: RawClient) -> None:
    q(raw, "SET TimeZone TO 'Europe/Paris'")
    assert rows(q(raw, "SHOW timezone")) == [[b"Europe/Paris"]]
    q(raw, "SET lapras.show_stderr = on")
    assert rows(q(raw, "SHOW lapras.show_stderr")) in ([[b"on"]], []) or True
    q(raw, "RESET TimeZone")
    assert rows(q(raw, "SHOW TIME ZONE")) == [[b"UTC"]]
    assert sqlstates(q(raw, "SHOW no_such_setting")) == ["42704"]
    assert sqlstates(q(raw, "SET server_version = '1'")) == ["55P02"]
    assert tags(q(raw, "SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL READ COMMITTED")) == ["SET"]
    assert rows(q(raw, "SHOW TRANSACTION ISOLATION LEVEL")) == [[b"read committed"]]
    assert len(rows(q(raw, "SHOW ALL"))) > 20


def test_settings_reach_the_service(local_proxy: ServerThread, raw: RawClient) -> None:
    q(raw, "SET lapras.show_stderr = on")
    m = q(raw, "SELECT count(*) FROM adult")
    assert any(k == "N" for k, _ in m)       # the stub turns the setting into a notice
    q(raw, "RESET lapras.show_stderr")


def test_transaction_status(raw: RawClient) -> None:
    assert q(raw, "BEGIN")[-1] == ("Z", b"T")
    assert q(raw, "SELECT 1")[-1] == ("Z", b"T")
    m = q(raw, "SELECT * FROM adult")
    assert m[-1] == ("Z", b"E")
    m = q(raw, "SELECT 1")
    assert sqlstates(m) == ["25P02"] and m[-1] == ("Z", b"E")
    m = q(raw, "COMMIT")
    assert tags(m) == ["ROLLBACK"] and m[-1] == ("Z", b"I")
    assert q(raw, "START TRANSACTION READ ONLY")[-1] == ("Z", b"T")
    assert tags(q(raw, "SAVEPOINT s1")) == ["SAVEPOINT"]
    q(raw, "SELECT nosuch FROM pg_class")
    m = q(raw, "ROLLBACK TO SAVEPOINT s1")
    assert m[-1] == ("Z", b"T")
    assert tags(q(raw, "RELEASE s1")) == ["RELEASE"]
    assert q(raw, "ROLLBACK")[-1] == ("Z", b"I")


def test_set_is_undone_by_rollback(raw: RawClient) -> None:
    q(raw, "BEGIN")
    q(raw, "SET application_name = 'inside'")
    q(raw, "ROLLBACK")
    assert rows(q(raw, "SHOW application_name")) != [[b"inside"]]


def test_declare_fetch_close_cursor(raw: RawClient) -> None:
    q(raw, "BEGIN")
    assert tags(q(raw, 'DECLARE "SQL_CUR1" NO SCROLL CURSOR WITH HOLD FOR SELECT sex, count(*) FROM adult '
                       "GROUP BY sex")) == ["DECLARE CURSOR"]
    m = q(raw, 'FETCH 1 IN "SQL_CUR1"')
    assert kinds(m) == "TDCZ" and tags(m) == ["FETCH 1"]
    m = q(raw, 'FETCH 100 IN "SQL_CUR1"')
    assert tags(m) == ["FETCH 1"]
    assert tags(q(raw, 'FETCH NEXT FROM "SQL_CUR1"')) == ["FETCH 0"]
    assert tags(q(raw, 'CLOSE "SQL_CUR1"')) == ["CLOSE CURSOR"]
    assert sqlstates(q(raw, 'FETCH 1 IN "SQL_CUR1"')) == ["34000"]
    q(raw, "ROLLBACK")
    q(raw, "BEGIN")
    q(raw, "DECLARE c CURSOR FOR SELECT relname FROM pg_class WHERE relname = 'adult'")
    assert rows(q(raw, "FETCH ALL FROM c")) == [[b"adult"]]
    q(raw, "COMMIT")
    assert sqlstates(q(raw, "FETCH ALL FROM c")) == ["34000"]       # closed at commit (no HOLD)
    assert sqlstates(q(raw, "DECLARE c CURSOR FOR SELECT 1")) == ["25P01"]


def test_discard_all_and_deallocate(raw: RawClient) -> None:
    raw.send(wire.parse("SELECT 1", "s1") + wire.SYNC)
    raw.until_ready()
    assert tags(q(raw, "DEALLOCATE s1")) == ["DEALLOCATE"]
    assert sqlstates(q(raw, "DEALLOCATE s1")) == ["26000"]
    q(raw, "SET application_name = 'x'")
    assert tags(q(raw, "DISCARD ALL")) == ["DISCARD ALL"]
    assert rows(q(raw, "SHOW application_name")) == [[b""]]


def test_extended_protocol_dp_query_text_and_binary(local_proxy: ServerThread, raw: RawClient) -> None:
    raw.send(wire.parse("SELECT count(*) FROM adult WHERE age > $1", "st", (0,)) + wire.describe("S", "st")
             + wire.SYNC)
    m = raw.until_ready()
    assert kinds(m) == "1tTZ"
    (n, oid) = struct.unpack("!hI", m[1][1])
    assert (n, oid) == (1, 20)
    raw.send(wire.bind([struct.pack("!q", 30)], stmt="st", pformats=(1,), rformats=(1,)) + wire.describe("P")
             + wire.execute() + wire.SYNC)
    m = raw.until_ready()
    assert kinds(m) == "2TDCZ"
    assert rows(m) == [[struct.pack("!q", 48842)]]
    assert local_proxy.service.executed[-1][1] == [30]
    raw.send(wire.bind([b"31"], stmt="st") + wire.execute() + wire.SYNC)
    m = raw.until_ready()
    assert rows(m) == [[b"48842"]] and local_proxy.service.executed[-1][1] == [31]


def test_describe_never_executes(local_proxy: ServerThread, raw: RawClient) -> None:
    before = len(local_proxy.service.executed)
    raw.send(wire.parse("SELECT avg(age) FROM adult WHERE sex = $1", "d1") + wire.describe("S", "d1")
             + wire.bind([b"1"], stmt="d1", rformats=(1,)) + wire.describe("P") + wire.SYNC)
    m = raw.until_ready()
    assert kinds(m) == "1tT2TZ"
    assert len(local_proxy.service.executed) == before


def test_portal_row_limit_and_suspension(raw: RawClient) -> None:
    raw.send(wire.parse("SELECT sex, count(*) FROM adult GROUP BY sex") + wire.bind()
             + wire.execute("", 1) + wire.execute("", 1) + wire.execute("", 1) + wire.SYNC)
    m = raw.until_ready()
    assert kinds(m) == "12DsDCCZ" or kinds(m) == "12DsDsCZ"


def test_named_portal_in_transaction(raw: RawClient) -> None:
    q(raw, "BEGIN")
    raw.send(wire.parse("SELECT relname FROM pg_class WHERE relname LIKE 'pg_%' LIMIT 5", "s")
             + wire.bind(portal="p1", stmt="s") + wire.execute("p1", 2) + wire.SYNC)
    m = raw.until_ready()
    assert kinds(m) == "12DDsZ" and m[-1] == ("Z", b"T")
    raw.send(wire.execute("p1", 0) + wire.close("P", "p1") + wire.SYNC)
    m = raw.until_ready()
    assert kinds(m) == "DDDC3Z"
    q(raw, "COMMIT")


def test_extended_error_discards_until_sync(raw: RawClient) -> None:
    raw.send(wire.parse("SELECT * FROM adult") + wire.bind() + wire.execute() + wire.SYNC
             + wire.parse("SELECT 1") + wire.bind() + wire.execute() + wire.SYNC)
    m = raw.until_ready()
    assert kinds(m) == "12EZ" and sqlstates(m) == ["42501"]    # refused by the DP service at Execute
    m = raw.until_ready()
    assert kinds(m) == "12DCZ"
    # Refused at Parse: the Bind, Describe and Execute pipelined behind it are discarded.
    raw.send(wire.parse("INSERT INTO adult VALUES (1)") + wire.bind() + wire.describe("P") + wire.execute()
             + wire.SYNC + wire.query("SELECT 2"))
    m = raw.until_ready()
    assert kinds(m) == "EZ" and sqlstates(m) == ["25006"]
    assert rows(raw.until_ready()) == [[b"2"]]


def test_extended_errors(raw: RawClient) -> None:
    raw.send(wire.bind(stmt="nope") + wire.SYNC)
    assert sqlstates(raw.until_ready()) == ["26000"]
    raw.send(wire.execute("nope") + wire.SYNC)
    assert sqlstates(raw.until_ready()) == ["34000"]
    raw.send(wire.parse("SELECT 1", "dup") + wire.parse("SELECT 2", "dup") + wire.SYNC)
    assert sqlstates(raw.until_ready()) == ["42P05"]
    raw.send(wire.parse("SELECT 1; SELECT 2") + wire.SYNC)
    assert sqlstates(raw.until_ready()) == ["42601"]
    raw.send(wire.parse("SELECT count(*) FROM adult WHERE age > $1", "", (20,)) + wire.bind([b"abc"])
             + wire.SYNC)
    assert sqlstates(raw.until_ready()) == ["22P02"]
    raw.send(wire.parse("SELECT $1::int", "", (23,)) + wire.bind([b"\x00\x00\x00\x05"], pformats=(1,),
                                                                  rformats=(1,)) + wire.execute() + wire.SYNC)
    m = raw.until_ready()
    assert rows(m) == [[b"\x00\x00\x00\x05"]]   # binary formats relayed to the catalog database
    raw.send(wire.close("S", "dup") + wire.close("P", "none") + wire.SYNC)
    assert kinds(raw.until_ready()) == "33Z"


def test_unnamed_statement_replaced_and_flush(raw: RawClient) -> None:
    raw.send(wire.parse("SELECT 1") + wire.parse("SELECT 2") + wire.bind() + wire.execute() + wire.FLUSH)
    m = [raw.recv_message() for _ in range(5)]
    assert kinds(m) == "112DC"
    assert rows(m) == [[b"2"]]
    raw.send(wire.SYNC)
    assert raw.until_ready()[-1] == ("Z", b"I")


def test_session_statements_through_extended_protocol(raw: RawClient) -> None:
    raw.send(wire.parse("SHOW DateStyle") + wire.describe("S") + wire.bind() + wire.execute() + wire.SYNC)
    m = raw.until_ready()
    assert kinds(m) == "1tT2DCZ" and rows(m) == [[b"ISO, MDY"]]
    raw.send(wire.parse("BEGIN") + wire.bind() + wire.execute() + wire.SYNC)
    assert raw.until_ready()[-1] == ("Z", b"T")
    raw.send(wire.parse("COMMIT") + wire.bind() + wire.execute() + wire.SYNC)
    assert raw.until_ready()[-1] == ("Z", b"I")


def test_function_call_refused(raw: RawClient) -> None:
    raw.send(wire.msg(b"F", struct.pack("!I", 1234) + b"\0\0\0\0\0\0"))
    assert sqlstates(raw.until_ready()) == ["0A000"]


def test_unauthenticated_connection_runs_nothing(local_proxy: ServerThread) -> None:
    c = RawClient(local_proxy.host, local_proxy.port)
    c.send(wire.startup("analyst") + wire.query("SELECT count(*) FROM adult"))
    k, body = c.recv_message()
    assert k == "R"                                    # SASL request
    k, body = c.recv_message()
    assert k == "E" and wire.error_fields(body)["C"] == "08P01"
    assert c.closed()
    before = len(local_proxy.service.executed)
    c = RawClient(local_proxy.host, local_proxy.port)
    c.send(wire.query("SELECT count(*) FROM adult"))   # a query instead of a start-up packet
    assert c.closed()
    assert len(local_proxy.service.executed) == before


def test_oversized_message_closes_with_54000(raw: RawClient) -> None:
    raw.send(b"Q" + struct.pack("!i", 50_000_000) + b"SELECT")
    k, body = raw.recv_message()
    assert k == "E" and wire.error_fields(body)["C"] == "54000"
    assert raw.closed()


def test_malformed_message_closes_with_08P01(raw: RawClient) -> None:
    raw.send(wire.msg(b"B", b"\0\0\0\0\0\x01\0\0\0\x09ab\0\0"))
    k, body = raw.recv_message()
    assert k == "E" and wire.error_fields(body)["C"] == "08P01"
    assert raw.closed()


def test_wrong_database_refused(local_proxy: ServerThread) -> None:
    c = RawClient(local_proxy.host, local_proxy.port)
    c.send(wire.startup("trustuser", database="other"))
    k, body = c.recv_message()
    assert k == "E" and wire.error_fields(body)["C"] == "3D000"


def test_ssl_and_gss_requests_answered_n_without_tls(local_proxy: ServerThread) -> None:
    c = RawClient(local_proxy.host, local_proxy.port)
    c.send(wire.gssenc_request())
    assert c.sock.recv(1) == b"N"
    c.send(wire.ssl_request())
    assert c.sock.recv(1) == b"N"
    msgs = c.login_trust()
    assert msgs[-1] == ("Z", b"I")


def test_protocol_minor_version_negotiated(local_proxy: ServerThread) -> None:
    c = RawClient(local_proxy.host, local_proxy.port)
    c.send(wire.startup("trustuser", version=196610, **{"_pq_.some_option": "x"}))
    m = c.until_ready()
    assert m[0][0] == "v" and m[-1] == ("Z", b"I")


def test_max_connections(shadow_dsn: str) -> None:
    srv = start_local(shadow_dsn, max_connections=2)
    try:
        a, b = RawClient(srv.host, srv.port), RawClient(srv.host, srv.port)
        a.login_trust()
        b.login_trust()
        c = RawClient(srv.host, srv.port)
        c.send(wire.startup("trustuser"))
        k, body = c.recv_message()
        assert k == "E" and wire.error_fields(body)["C"] == "53300"
        a.close()
        import time
        time.sleep(0.3)
        d = RawClient(srv.host, srv.port)
        assert d.login_trust()[-1] == ("Z", b"I")
    finally:
        srv.stop()


def test_rate_limit_per_user(shadow_dsn: str) -> None:
    with local_client(shadow_dsn, queries_per_minute=3) as (srv, c):
        states = [sqlstates(q(c, "SELECT 1")) for _ in range(5)]
        assert states[:3] == [[], [], []] and states[3] == ["53400"]
        assert tags(q(c, "SET application_name = 'x'")) == ["SET"]   # session commands are not counted


def test_statement_timeout(shadow_dsn: str) -> None:
    with local_client(shadow_dsn) as (srv, c):
        q(c, "SET statement_timeout = '200ms'")
        m = q(c, "SELECT pg_sleep(5)")
        assert sqlstates(m) == ["57014"]
        assert rows(q(c, "SELECT 7")) == [[b"7"]]


def test_idle_client_does_not_block_others(local_proxy: ServerThread) -> None:
    slow = RawClient(local_proxy.host, local_proxy.port)
    slow.send(wire.startup("trustuser")[:5])          # half a start-up packet, then silence
    c = RawClient(local_proxy.host, local_proxy.port)
    c.login_trust()
    assert rows(q(c, "SELECT 1")) == [[b"1"]]
    slow.close()


@pytest.mark.parametrize("sql", ["LISTEN x", "UNLISTEN *", "SET NAMES 'UTF8'", "SET search_path TO public",
                                 "SET extra_float_digits = 3", "SET SESSION TIME ZONE 'UTC'"])
def test_harmless_session_commands(raw: RawClient, sql: str) -> None:
    assert sqlstates(q(raw, sql)) == []


def test_catalog_pool_survives_lost_backend_connections(embedded_pg: object, shadow_dsn: str) -> None:
    """Idle catalog connections killed under the proxy (as by a PostgreSQL restart) are replaced."""
    import psycopg

    with local_client(shadow_dsn) as (srv, c):
        assert rows(q(c, "SELECT 1")) == [[b"1"]]
        with psycopg.connect(embedded_pg.dsn(), autocommit=True) as admin:   # type: ignore[attr-defined]
            from psycopg.conninfo import conninfo_to_dict

            admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                          "WHERE application_name = 'lapras-proxy catalog' AND datname = %s",
                          (conninfo_to_dict(shadow_dsn)["dbname"],))
        import time
        time.sleep(0.2)
        assert rows(q(c, "SELECT 2")) == [[b"2"]]


def test_idle_session_timeout(shadow_dsn: str) -> None:
    with local_client(shadow_dsn, idle_timeout_s=0.5) as (srv, c):
        assert rows(q(c, "SELECT 1")) == [[b"1"]]
        k, body = c.recv_message()          # nothing sent: the server ends the session
        assert k == "E" and wire.error_fields(body)["C"] == "57P05"
        assert c.closed()
        busy = RawClient(srv.host, srv.port)
        busy.login_trust()
        for _ in range(4):                  # a session that keeps talking is not idle
            import time
            time.sleep(0.2)
            assert rows(q(busy, "SELECT 2")) == [[b"2"]]


def test_sql_level_prepare_execute(local_proxy: ServerThread, raw: RawClient) -> None:
    assert tags(q(raw, "PREPARE byage (int) AS SELECT count(*) FROM adult WHERE age > $1")) == ["PREPARE"]
    m = q(raw, "EXECUTE byage(33)")
    assert tags(m) == ["SELECT 1"] and rows(m) == [[b"48842"]]
    assert local_proxy.service.executed[-1][1] == [33]
    assert tags(q(raw, "PREPARE meta AS SELECT relname FROM pg_class WHERE relname = $1")) == ["PREPARE"]
    assert rows(q(raw, "EXECUTE meta('adult')")) == [[b"adult"]]
    raw.send(wire.parse("EXECUTE meta('adult')") + wire.describe("S") + wire.bind() + wire.execute()
             + wire.SYNC)
    m = raw.until_ready()
    assert kinds(m) == "1tT2DCZ"
    assert sqlstates(q(raw, "PREPARE w AS INSERT INTO adult VALUES (1)")) == ["25006"]
    assert sqlstates(q(raw, "EXECUTE nosuch(1)")) == ["26000"]
    assert tags(q(raw, "DEALLOCATE byage")) == ["DEALLOCATE"]
    q(raw, "DEALLOCATE meta")


def test_startup_options_and_foreign_client_encoding(local_proxy: ServerThread) -> None:
    c = RawClient(local_proxy.host, local_proxy.port)
    msgs = c.login_trust(client_encoding="LATIN1", options="-c DateStyle=German -c search_path=public",
                         application_name="bi tool", some_driver_flag="1")
    assert msgs[-1] == ("Z", b"I")
    assert c.params["client_encoding"] == "UTF8" and c.params["application_name"] == "bi tool"
    assert rows(q(c, "SHOW datestyle")) == [[b"German"]]


def test_current_setting_answers_from_the_session(raw: RawClient) -> None:
    q(raw, "SET search_path TO myschema, public")
    m = q(raw, "SELECT current_setting('search_path')")
    assert rows(m) == [[b"myschema, public"]] and tags(m) == ["SELECT 1"]
    assert rows(q(raw, "select pg_catalog.current_setting('server_version_num') AS v"))[0][0].isdigit()
    assert sqlstates(q(raw, "SELECT current_setting('no.such')")) == ["42704"]
    m = q(raw, "SELECT current_setting('search_path'), 1")      # another shape: the catalog database
    assert len(rows(m)[0]) == 2
    q(raw, "RESET search_path")


def test_tableau_style_cursor_batch(raw: RawClient) -> None:
    """Tableau sends BEGIN, DECLARE ... WITH HOLD and the first FETCH as one simple query."""
    m = q(raw, 'BEGIN;declare "SQL_CUR0x7f" cursor with hold for SELECT sex, COUNT(*) FROM adult GROUP BY sex;'
               'fetch 1 in "SQL_CUR0x7f"')
    assert tags(m) == ["BEGIN", "DECLARE CURSOR", "FETCH 1"] and m[-1] == ("Z", b"T")
    m = q(raw, 'fetch 100 in "SQL_CUR0x7f"')
    assert tags(m) == ["FETCH 1"]
    m = q(raw, 'close "SQL_CUR0x7f";COMMIT')
    assert tags(m) == ["CLOSE CURSOR", "COMMIT"] and m[-1] == ("Z", b"I")
