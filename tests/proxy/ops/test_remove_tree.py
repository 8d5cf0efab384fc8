"""remove_tree (the embedded cluster's and the dev cluster's clean-up) removes a data-directory-like tree
in parallel parts, and never follows a symlink out of it."""

from __future__ import annotations

from pathlib import Path

import pytest

from proxy.upstream.embedded import remove_tree


def _cluster_like(root: Path, outside: Path) -> None:
    for db in range(12):
        d = root / "pgdata" / "base" / str(16384 + db)
        d.mkdir(parents=True)
        for f in range(5):
            (d / str(f)).write_bytes(b"x" * 100)
    (root / "pgdata" / "global").mkdir()
    (root / "pgdata" / "global" / "pg_control").write_bytes(b"c")
    (root / "pgdata" / "PG_VERSION").write_text("17\n")
    (root / "postgres.log").write_text("log\n")
    (root / "pgdata" / "linked").symlink_to(outside, target_is_directory=True)
    (root / "pgdata" / "base" / "16384" / "linked").symlink_to(outside, target_is_directory=True)


def test_removes_everything_and_follows_no_symlink(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep").write_text("mine")
    root = tmp_path / "home"
    _cluster_like(root, outside)
    remove_tree(root / "pgdata")  # as destroy does: the data directory, then its home
    remove_tree(root)
    assert not root.exists()
    assert (outside / "keep").read_text() == "mine"
    remove_tree(root)  # already gone: nothing to do, no error


def test_errors_are_raised_when_asked(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        remove_tree(tmp_path / "missing", ignore_errors=False)
