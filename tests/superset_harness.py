"""Apache Superset for the end-to-end BI test and the dashboard screenshot: installed in its own virtualenv
from the `superset` optional-dependency group of pyproject.toml, started on a free port with SQLite
metadata, and driven through its REST API.

Superset pins SQLAlchemy, pandas, Flask and more, so it cannot share the project's virtualenv. The
virtualenv is keyed by the pinned requirements and kept outside the work tree
(``~/.cache/lapras-proxy/superset-<hash>``, or ``$LAPRAS_SUPERSET_VENV``), so a fresh clone (CI) reuses an
install of the same pins; a migrated, initialised metadata database is cached beside it, since
`superset db upgrade` + `init` take about two minutes.

    python tests/superset_harness.py install     # what scripts/test runs before pytest
"""

from __future__ import annotations

import hashlib
import http.cookiejar
import json
import os
import shutil
import subprocess
import sys
import time
import tomllib
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
ADMIN = ("admin", "admin")


def requirements() -> list[str]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    return list(project["optional-dependencies"]["superset"])


def venv_dir() -> Path:
    env = os.environ.get("LAPRAS_SUPERSET_VENV")
    if env:
        return Path(env)
    key = hashlib.sha256("\n".join(requirements()).encode()).hexdigest()[:12]
    return Path.home() / ".cache" / "lapras-proxy" / f"superset-{key}"


def ensure_installed(log: Any = sys.stderr) -> Path:
    """The virtualenv with Superset installed (installing it when missing); returns its directory."""
    venv = venv_dir()
    marker = venv / "lapras-installed.json"
    if marker.exists():
        return venv
    if venv.exists():
        shutil.rmtree(venv)  # a half-finished install
    venv.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(venv / "bin" / "pip"), "install", "-q", *requirements()], check=True)
    seconds = time.monotonic() - t0
    marker.write_text(json.dumps({"requirements": requirements(), "install_seconds": round(seconds, 1)}))
    print(f"superset installed in {venv} in {seconds:.0f} s", file=log)
    return venv


def _config_text(metadata: Path, secret: str) -> str:
    return (f"SECRET_KEY = {secret!r}\n"
            f"SQLALCHEMY_DATABASE_URI = {('sqlite:///' + str(metadata))!r}\n"
            "WTF_CSRF_ENABLED = False\n"
            "TALISMAN_ENABLED = False\n"
            "CONTENT_SECURITY_POLICY_WARNING = False\n"
            "RATELIMIT_ENABLED = False\n"
            "AUTH_RATE_LIMITED = False\n"
            # Every chart request reaches the proxy (a cached answer would not show what the proxy does).
            "CACHE_CONFIG = {'CACHE_TYPE': 'NullCache'}\n"
            "DATA_CACHE_CONFIG = {'CACHE_TYPE': 'NullCache'}\n"
            "FEATURE_FLAGS = {'ENABLE_TEMPLATE_PROCESSING': False}\n")


def _superset(venv: Path, workdir: Path, *args: str, **kw: Any) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, SUPERSET_CONFIG_PATH=str(workdir / "superset_config.py"), FLASK_APP="superset",
               PYTHONPATH="")
    return subprocess.run([str(venv / "bin" / "superset"), *args], cwd=workdir, env=env, text=True,
                          capture_output=True, check=True, **kw)


def ensure_metadata(venv: Path) -> Path:
    """A migrated metadata database with the admin user and Superset's roles, made once per install."""
    template = venv / "lapras-metadata.db"
    if template.exists():
        return template
    work = venv / "lapras-init"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    (work / "superset_config.py").write_text(_config_text(work / "metadata.db", "init-only"))
    _superset(venv, work, "db", "upgrade")
    _superset(venv, work, "fab", "create-admin", "--username", ADMIN[0], "--firstname", "Ada",
              "--lastname", "Admin", "--email", "admin@example.invalid", "--password", ADMIN[1])
    _superset(venv, work, "init")
    shutil.move(work / "metadata.db", template)
    shutil.rmtree(work, ignore_errors=True)
    return template


class SupersetServer:
    """One Superset web server (Flask's, threaded) on `port`, with its own copy of the metadata."""

    def __init__(self, venv: Path, workdir: Path, port: int) -> None:
        self.venv, self.workdir, self.port = venv, workdir, port
        self.base = f"http://127.0.0.1:{port}"
        self.proc: subprocess.Popen[str] | None = None
        self._token = ""
        self._opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))

    def start(self, timeout: float = 180.0) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        metadata = self.workdir / "metadata.db"
        shutil.copyfile(ensure_metadata(self.venv), metadata)
        secret = hashlib.sha256(str(self.workdir).encode()).hexdigest()
        (self.workdir / "superset_config.py").write_text(_config_text(metadata, secret))
        env = dict(os.environ, SUPERSET_CONFIG_PATH=str(self.workdir / "superset_config.py"),
                   FLASK_APP="superset", PYTHONPATH="")
        self.log = open(self.workdir / "superset.log", "w")  # noqa: SIM115 (closed in stop)
        self.proc = subprocess.Popen(
            [str(self.venv / "bin" / "superset"), "run", "-h", "127.0.0.1", "-p", str(self.port), "--with-threads"],
            cwd=self.workdir, env=env, stdout=self.log, stderr=subprocess.STDOUT, text=True)
        deadline = time.monotonic() + timeout
        while True:
            try:
                with urllib.request.urlopen(self.base + "/health", timeout=5) as r:
                    if r.status == 200:
                        break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("superset did not start:\n" + (self.workdir / "superset.log").read_text()[-4000:])
            time.sleep(0.5)
        self._token = self.api("POST", "/api/v1/security/login", {
            "username": ADMIN[0], "password": ADMIN[1], "provider": "db", "refresh": True})["access_token"]

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        if getattr(self, "log", None) is not None:
            self.log.close()

    def api(self, method: str, path: str, body: Any = None, ok: tuple[int, ...] = (200, 201)) -> Any:
        """One REST call; the decoded JSON answer. Another status raises with Superset's message."""
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method)
        req.add_header("Content-Type", "application/json")
        if self._token:
            req.add_header("Authorization", f"Bearer {self._token}")
        try:
            with self._opener.open(req, timeout=300) as r:
                status, text = r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            status, text = e.code, e.read().decode()
        if status not in ok:
            raise AssertionError(f"{method} {path}: HTTP {status}: {text[:2000]}")
        return json.loads(text) if text else None

    # -- what a user does in the UI, through the API

    def add_database(self, name: str, uri: str) -> int:
        self.api("POST", "/api/v1/database/test_connection/", {"sqlalchemy_uri": uri, "database_name": name})
        return int(self.api("POST", "/api/v1/database/", {"database_name": name, "sqlalchemy_uri": uri,
                                                          "expose_in_sqllab": True})["id"])

    def add_dataset(self, database: int, table: str, sql: str | None = None, schema: str = "public") -> int:
        body: dict[str, Any] = {"database": database, "schema": schema, "table_name": table}
        if sql is not None:
            body["sql"] = sql
        return int(self.api("POST", "/api/v1/dataset/", body)["id"])

    def chart_data(self, dataset: int, query: dict[str, Any]) -> dict[str, Any]:
        """/api/v1/chart/data for one query object; the result with its SQL (`query`), columns and rows."""
        body = {"datasource": {"id": dataset, "type": "table"}, "force": True, "queries": [query],
                "result_format": "json", "result_type": "full"}
        result: dict[str, Any] = self.api("POST", "/api/v1/chart/data", body)["result"][0]
        return result


if __name__ == "__main__":
    if sys.argv[1:] != ["install"]:
        sys.exit("usage: superset_harness.py install")
    ensure_metadata(ensure_installed())
