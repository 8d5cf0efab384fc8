"""Lint and type checks are part of the test suite: ruff on the repo, mypy on the packages."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.process

REPO = Path(__file__).resolve().parents[1]


def _tool(name: str) -> str:
    exe = Path(sys.executable).parent / name
    return str(exe) if exe.exists() else (shutil.which(name) or name)


def test_ruff_clean() -> None:
    done = subprocess.run([_tool("ruff"), "check", "."], cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_mypy_clean(mypy_result: tuple[int, str]) -> None:
    code, output = mypy_result  # mypy runs from the end of collection (conftest), beside the other tests
    assert code == 0, output
