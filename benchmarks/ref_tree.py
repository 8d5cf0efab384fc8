"""Timing this tree's parser against a git ref's: the ref's parser/ (and pgcore/) extracted to a temporary directory, and
a worker run on each tree in turn, round after round, so machine load hits both alike."""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def parser_paths(ref: str) -> list[str]:
    """The parser's directories at ``ref``: ``parser`` and, since issue 28's split, ``pgcore``."""
    has = subprocess.run(["git", "-C", str(REPO), "cat-file", "-e", f"{ref}:pgcore"], capture_output=True)
    return ["parser", "pgcore"] if has.returncode == 0 else ["parser"]


def alternate(ref: str, rounds: int, worker: Callable[[Path], dict[str, Any]],
              prefix: str = "ref-tree-") -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``worker(root)`` results for the parser of ``ref`` and for this tree's, ``rounds`` of each, alternating."""
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        archive = subprocess.run(["git", "-C", str(REPO), "archive", ref, *parser_paths(ref)], capture_output=True,
                                 check=True)
        subprocess.run(["tar", "-x", "-C", tmp], input=archive.stdout, check=True)
        old: list[dict[str, Any]] = []
        new: list[dict[str, Any]] = []
        for _ in range(rounds):
            old.append(worker(Path(tmp)))
            new.append(worker(REPO))
    return old, new
