"""Dev clusters for the scale tests, started once per test session through the real command line.

`sharded_cluster` is a coordinator with 2 shards; `single_cluster` one PostgreSQL holding the same data
(same generator, same generation day), for answers compared side by side."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ROWS = 20_000
USERS = 2_000
END = "2027-01-01"
"""The events' span ends on a fixed day (the whole of 2026), never today: no test depends on the date."""


@dataclass
class Running:
    state_dir: Path
    dsn: str
    shards: int

    def cli(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return run_cli("dev-cluster", *args, "--state-dir", str(self.state_dir), check=check)


def run_cli(*args: str, check: bool = True, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).parent / "lapras-proxy"
    done = subprocess.run([str(exe), *args], cwd=REPO, capture_output=True, text=True, timeout=timeout)
    if check and done.returncode != 0:
        raise AssertionError(f"lapras-proxy {' '.join(args)} failed: {done.stderr}")
    return done


def _start(shards: int) -> Iterator[Running]:
    # Under /tmp (searchable by the service account); the command takes the directory over, 0700.
    root = Path(tempfile.mkdtemp(prefix=f"lapras-dc{shards}-"))
    state = root
    try:
        done = run_cli("dev-cluster", "start", "--shards", str(shards), "--rows", str(ROWS), "--users", str(USERS),
                       "--end", END, "--state-dir", str(state), timeout=600)
        yield Running(state, done.stdout.strip().splitlines()[-1], shards)
    finally:
        run_cli("dev-cluster", "stop", "--remove", "--state-dir", str(state), check=False)
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def sharded_cluster() -> Iterator[Running]:
    yield from _start(2)


@pytest.fixture(scope="session")
def single_cluster() -> Iterator[Running]:
    yield from _start(0)


def is_root() -> bool:
    return os.geteuid() == 0
