"""Arguments several `lapras-proxy` commands read alike: the config file and ``--data TABLE=FILE.csv``
(serve, epoch, whatif)."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from ..config import Config, ConfigError, load_config


def load_or_exit(path: str) -> Config:
    """The config at ``path``; on an error, the message and exit status 2."""
    try:
        return load_config(path)
    except ConfigError as exc:
        print(f"lapras-proxy: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


def parse_data_args(cfg: Config, values: Sequence[str] | None) -> dict[str, Path]:
    """``--data TABLE=FILE.csv`` values (a bare FILE when one table is protected) -> the table's CSV path;
    on an error, the message and exit status 2."""
    out: dict[str, Path] = {}
    for value in values or []:
        # A declared name followed by "=" first: table names may hold "=" themselves.
        named = max((t.name for t in cfg.catalog.tables if value.startswith(t.name + "=")), key=len, default=None)
        if named is not None:
            table, sep, path = named, "=", value[len(named) + 1:]
        else:
            table, sep, path = value.partition("=")
        if not sep:
            if len(cfg.catalog.tables) != 1:
                print("lapras-proxy: --data: several tables are protected; write --data TABLE=FILE.csv",
                      file=sys.stderr)
                raise SystemExit(2)
            table, path = cfg.catalog.tables[0].name, value
        if cfg.catalog.table(table) is None:
            print(f"lapras-proxy: --data: {table!r} is not a protected table in {cfg.path}", file=sys.stderr)
            raise SystemExit(2)
        p = Path(path)
        if not p.is_file():
            print(f"lapras-proxy: --data: {p} does not exist", file=sys.stderr)
            raise SystemExit(2)
        out[table] = p
    return out
