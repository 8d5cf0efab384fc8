"""The product's version, as `lapras-proxy --version`, `SHOW VERSION` and the ready line print it."""

from __future__ import annotations

import re
from functools import cache
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as dist_version
from pathlib import Path

PACKAGE = "lapras-proxy"


@cache
def version() -> str:
    """The version in pyproject.toml of this source tree (a checkout may be newer than what pip installed
    as editable), else the installed distribution's, else "unknown"."""
    pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"
    try:
        m = re.search(r'^version\s*=\s*"([^"]+)"', pyproject.read_text(encoding="utf-8"), re.M)
        if m:
            return m.group(1)
    except OSError:
        pass
    try:
        return dist_version(PACKAGE)
    except PackageNotFoundError:
        return "unknown"


def version_line() -> str:
    return f"{PACKAGE} {version()}"
