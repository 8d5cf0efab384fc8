"""Client authentication (SCRAM-SHA-256 via scramp, md5, cleartext, trust) and the hash-password command.

Every failure, including an unknown user, ends with the same FATAL 28P01 message PostgreSQL sends, after
the same exchange, so a client cannot tell whether a user exists.
"""

from __future__ import annotations

import argparse
import base64
import getpass
import hashlib
import hmac
import logging
import secrets
import sys
from collections.abc import Generator
from dataclasses import dataclass

from scramp import ScramException, ScramMechanism

from ..config import User
from ..protocol import backend
from ..protocol.errors import PgError

log = logging.getLogger("lapras.auth")

SCRAM_ITERATIONS = 4096
_MECH = ScramMechanism("SCRAM-SHA-256")
# Per-process key for fake verifiers: the same unknown name gets the same salt within a run.
_MOCK_KEY = secrets.token_bytes(32)


class AuthFailed(PgError):
    """Authentication failed; the message never says why."""

    def __init__(self, user: str) -> None:
        super().__init__("28P01", f"password authentication failed for user \"{user}\"", severity="FATAL")


@dataclass(frozen=True)
class ScramVerifier:
    iterations: int
    salt: bytes
    stored_key: bytes
    server_key: bytes


def parse_scram_verifier(secret: str) -> ScramVerifier:
    """Parse PostgreSQL's `SCRAM-SHA-256$<iter>:<salt>$<StoredKey>:<ServerKey>`; raises ValueError."""
    try:
        method, rest = secret.split("$", 1)
        iter_salt, keys = rest.split("$", 1)
        iterations, salt = iter_salt.split(":", 1)
        stored, server = keys.split(":", 1)
        if method != "SCRAM-SHA-256":
            raise ValueError(method)
        v = ScramVerifier(int(iterations), base64.b64decode(salt, validate=True),
                          base64.b64decode(stored, validate=True), base64.b64decode(server, validate=True))
    except (ValueError, TypeError, base64.binascii.Error) as exc:  # type: ignore[attr-defined]
        raise ValueError("not a SCRAM-SHA-256 verifier") from exc
    if v.iterations <= 0 or len(v.stored_key) != 32 or len(v.server_key) != 32:
        raise ValueError("not a SCRAM-SHA-256 verifier")
    return v


def scram_verifier(password: str, iterations: int = SCRAM_ITERATIONS, salt: bytes | None = None) -> str:
    """A PostgreSQL-format SCRAM-SHA-256 verifier for a password."""
    salt = salt if salt is not None else secrets.token_bytes(16)
    s, stored, server, it = _MECH.make_auth_info(password, iteration_count=iterations, salt=salt)
    b64 = base64.b64encode
    return f"SCRAM-SHA-256${it}:{b64(s).decode()}${b64(stored).decode()}:{b64(server).decode()}"


def md5_secret(user: str, password: str) -> str:
    return "md5" + hashlib.md5((password + user).encode("utf-8")).hexdigest()


def hash_password(user: str, password: str, method: str = "scram-sha-256") -> str:
    """The config.toml `secret` for a user and password under `method` (scram-sha-256, md5, password)."""
    if method == "scram-sha-256":
        return scram_verifier(password)
    if method in ("md5", "password"):
        return md5_secret(user, password)
    raise ValueError(f"unknown method {method!r} (scram-sha-256, md5 or password)")


def _mock_verifier(user: str) -> ScramVerifier:
    digest = hmac.new(_MOCK_KEY, user.encode("utf-8"), hashlib.sha256).digest()
    return ScramVerifier(SCRAM_ITERATIONS, digest[:16], secrets.token_bytes(32), secrets.token_bytes(32))


Exchange = Generator[bytes, bytes, bytes]


def authenticate(name: str, user: User | None, *, tls: bool, allow_cleartext: bool) -> Exchange:
    """The exchange configured for `user` (SCRAM with a fake verifier when unknown), free of I/O.

    A generator driven by the connection, as psycopg 3 drives its protocol: each value it yields is a
    request the client must answer; the driver sends it and resumes the generator with the body of the
    client's next PasswordMessage. It returns the bytes to send before AuthenticationOk (the SASL final
    message, or b"") and raises AuthFailed, or a FATAL PgError for a malformed answer.
    """
    if user is None:
        yield from _scram(name, _mock_verifier(name))
        raise AuthFailed(name)
    if user.auth == "trust":
        return b""
    if user.auth == "scram-sha-256":
        try:
            verifier = parse_scram_verifier(user.secret)
        except ValueError:
            log.error("user %r has an invalid SCRAM verifier in the configuration", name)
            yield from _scram(name, _mock_verifier(name))
            raise AuthFailed(name) from None
        final = yield from _scram(name, verifier)
        if final is None:
            raise AuthFailed(name)
        return final
    if user.auth == "md5":
        salt = secrets.token_bytes(4)
        data = _cstring((yield backend.auth_md5(salt)))
        expected = "md5" + hashlib.md5(user.secret[3:].encode() + salt).hexdigest()
        if not hmac.compare_digest(data.encode("utf-8", "replace"), expected.encode()):
            raise AuthFailed(name)
        return b""
    if user.auth == "password":
        if not tls and not allow_cleartext:
            # Refuse before the password crosses the wire in clear; the log says why, the client
            # gets the generic message so the method does not reveal that the user exists.
            log.warning("user %r uses cleartext passwords but the connection has no TLS "
                        "(configure [tls] or server.allow_cleartext_without_tls)", name)
            raise AuthFailed(name)
        password = _cstring((yield backend.AUTH_CLEARTEXT))
        if not hmac.compare_digest(md5_secret(name, password).encode(), user.secret.encode()):
            raise AuthFailed(name)
        return b""
    raise AuthFailed(name)


def _cstring(data: bytes) -> str:
    if not data.endswith(b"\0") or b"\0" in data[:-1]:
        raise PgError("08P01", "invalid password packet", severity="FATAL")
    return data[:-1].decode("utf-8", "replace")


def _scram(name: str, v: ScramVerifier) -> Generator[bytes, bytes, bytes | None]:
    """The SCRAM-SHA-256 exchange; returns the SASL final message when the client proved the password."""
    server = _MECH.make_server(lambda _username: (v.salt, v.stored_key, v.server_key, v.iterations))
    data = yield backend.auth_sasl(["SCRAM-SHA-256"])
    # SASLInitialResponse: mechanism name, int32 length, client-first-message.
    nul = data.find(b"\0")
    if nul < 0 or len(data) < nul + 5:
        raise PgError("08P01", "malformed SASLInitialResponse", severity="FATAL")
    mech = data[:nul].decode("ascii", "replace")
    length = int.from_bytes(data[nul + 1:nul + 5], "big", signed=True)
    first = data[nul + 5:]
    if mech != "SCRAM-SHA-256":
        raise PgError("28000", "client selected an invalid SASL authentication mechanism", severity="FATAL")
    if length != len(first):
        raise PgError("08P01", "malformed SASLInitialResponse", severity="FATAL")
    try:
        client_first = first.decode("utf-8")
        gs2_end = client_first.find(",", client_first.find(",") + 1) + 1
        bare = client_first[gs2_end:]
        if gs2_end > 0 and bare.startswith("n=,"):
            # PostgreSQL clients send an empty SCRAM user name (the start-up packet names the user);
            # scramp rejects empty names, so hand it a placeholder and restore the exact bare message,
            # which the client's proof is computed over.
            server.set_client_first(client_first[:gs2_end] + "n=*" + bare[2:])
            server.client_first_bare = bare
        else:
            server.set_client_first(client_first)
        final = yield backend.auth_sasl_continue(server.get_server_first().encode())
        server.set_client_final(final.decode("utf-8"))
        server_final = server.get_server_final()
    except (ScramException, UnicodeDecodeError) as exc:
        log.debug("SCRAM exchange for %r failed: %s", name, exc)
        return None
    return backend.auth_sasl_final(server_final.encode())


# -------------------------------------------------------------------------------- CLI sub-command

def add_hash_password_parser(subparsers: argparse._SubParsersAction) -> None:
    """Mount `hash-password` on the lapras-proxy command line."""
    p = subparsers.add_parser("hash-password", help="print the config.toml secret for a password",
                              description="Print a SCRAM-SHA-256 verifier (or md5 hash) for a password, to "
                                          "paste into a [[users]] secret. The password is read from the "
                                          "terminal, or from stdin with --password-stdin.")
    p.add_argument("--user", required=True, help="login name (md5 hashes are salted with it)")
    p.add_argument("--method", choices=["scram-sha-256", "md5"], default="scram-sha-256")
    p.add_argument("--password-stdin", action="store_true", help="read the password from stdin")
    p.set_defaults(func=run_hash_password)


def run_hash_password(args: argparse.Namespace) -> int:
    """Print the secret; returns the process exit code."""
    if args.password_stdin or not sys.stdin.isatty():
        password = sys.stdin.readline().rstrip("\r\n")
    else:
        password = getpass.getpass("Password: ")
        if getpass.getpass("Again: ") != password:
            print("lapras-proxy: the passwords differ", file=sys.stderr)
            return 1
    if not password:
        print("lapras-proxy: empty password", file=sys.stderr)
        return 1
    print(hash_password(args.user, password, args.method))
    return 0
