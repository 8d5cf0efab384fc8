"""Authentication: SCRAM-SHA-256, md5, cleartext and trust accept the right secret and refuse a wrong one."""

from __future__ import annotations

import argparse
import io
import subprocess
from pathlib import Path

import psycopg
import pytest

from proxy.server.auth import (
    hash_password,
    md5_secret,
    parse_scram_verifier,
    run_hash_password,
    scram_verifier,
)
from tests.fixtures.local_proxy import ServerThread, start_local


def connect(srv: ServerThread, user: str, password: str | None, **kw: str) -> psycopg.Connection:
    return psycopg.connect(srv.dsn(user, password), connect_timeout=10, autocommit=True, **kw)


def refused(srv: ServerThread, user: str, password: str | None, **kw: str) -> psycopg.OperationalError:
    with pytest.raises(psycopg.OperationalError) as info:
        connect(srv, user, password, **kw).close()
    return info.value


@pytest.mark.parametrize("user,password", [("analyst", "lapras"), ("scramuser", "scrampass"),
                                           ("md5user", "md5pass"), ("trustuser", None)])
def test_right_secret_accepted(local_proxy: ServerThread, user: str, password: str | None) -> None:
    with connect(local_proxy, user, password) as c:
        assert c.execute("SELECT 1").fetchone() == (1,)
        assert c.execute("SHOW session_authorization").fetchone() == (user,)


@pytest.mark.parametrize("user", ["analyst", "scramuser", "md5user"])
def test_wrong_secret_refused_with_28P01(local_proxy: ServerThread, user: str) -> None:
    err = refused(local_proxy, user, "wrong")
    assert f'password authentication failed for user "{user}"' in str(err)


def test_unknown_user_gets_the_same_message(local_proxy: ServerThread) -> None:
    err = refused(local_proxy, "nobody", "whatever")
    assert 'password authentication failed for user "nobody"' in str(err)


def test_unknown_user_sees_a_scram_exchange_like_a_real_one(local_proxy: ServerThread) -> None:
    # A libpq client that insists on SCRAM gets through the SASL exchange for unknown users too.
    err = refused(local_proxy, "nobody", "x", require_auth="scram-sha-256")
    assert "password authentication failed" in str(err)


def test_cleartext_refused_without_tls(local_proxy: ServerThread) -> None:
    err = refused(local_proxy, "clearuser", "clearpass")
    assert 'password authentication failed for user "clearuser"' in str(err)


def test_cleartext_allowed_when_configured(shadow_dsn: str) -> None:
    srv = start_local(shadow_dsn, allow_cleartext_without_tls=True)
    try:
        with connect(srv, "clearuser", "clearpass") as c:
            assert c.execute("SELECT 1").fetchone() == (1,)
        refused(srv, "clearuser", "nope")
    finally:
        srv.stop()


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    d: Path = tmp_path_factory.mktemp("tls")
    cert, key = d / "server.crt", d / "server.key"
    try:
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                        "-subj", "/CN=localhost", "-keyout", str(key), "-out", str(cert)],
                       check=True, capture_output=True, timeout=60)
    except FileNotFoundError:
        pytest.skip("openssl is not installed")
    return {"cert": str(cert), "key": str(key)}


def test_tls_sslmode_require_and_cleartext_over_tls(shadow_dsn: str, tls_files: dict[str, str]) -> None:
    srv = start_local(shadow_dsn, tls=tls_files)
    try:
        dsn = srv.dsn("analyst", "lapras").replace("sslmode=disable", "sslmode=require")
        with psycopg.connect(dsn, autocommit=True) as c:
            assert c.pgconn.ssl_in_use
            assert c.execute("SELECT count(*) FROM adult").fetchone() is not None
        dsn = srv.dsn("clearuser", "clearpass").replace("sslmode=disable", "sslmode=require")
        with psycopg.connect(dsn, autocommit=True) as c:
            assert c.execute("SELECT 1").fetchone() == (1,)
        with psycopg.connect(srv.dsn("trustuser", None), autocommit=True) as c:   # plain still works
            assert not c.pgconn.ssl_in_use
    finally:
        srv.stop()


def test_hash_password_formats() -> None:
    v = hash_password("u", "pw")
    parsed = parse_scram_verifier(v)
    assert parsed.iterations == 4096 and len(parsed.salt) == 16
    assert scram_verifier("pw", parsed.iterations, parsed.salt) == v
    assert hash_password("u", "pw", "md5") == md5_secret("u", "pw") == "md5" + __import__("hashlib").md5(
        b"pwu").hexdigest()
    with pytest.raises(ValueError):
        parse_scram_verifier("md5abc")


def test_hash_password_command(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("s3cret\n"))
    args = argparse.Namespace(user="bob", method="scram-sha-256", password_stdin=True)
    assert run_hash_password(args) == 0
    out = capsys.readouterr().out.strip()
    assert out.startswith("SCRAM-SHA-256$4096:")
    p = parse_scram_verifier(out)
    assert scram_verifier("s3cret", p.iterations, p.salt) == out
