"""`lapras-proxy replay` on the command line: the arguments, the run (``runner``) and its report (``report``)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import psycopg

from ..config import parse_listen
from .report import format_table, summarize, write_chart, write_json
from .runner import ReplayOptions, load_statements, replay


def _cmd_replay(args: argparse.Namespace) -> int:
    try:
        host, port = parse_listen(args.target)
    except ValueError as exc:
        print(f"lapras-proxy replay: --target: {exc} (write it like 127.0.0.1:6432)", file=sys.stderr)
        return 2
    if args.speed < 0 or args.clients < 1:
        print("lapras-proxy replay: --speed must be >= 0 and --clients >= 1", file=sys.stderr)
        return 2
    try:
        statements = load_statements(args.log, args.format, args.prefix, args.limit)
    except (OSError, ValueError) as exc:
        print(f"lapras-proxy replay: cannot read {args.log}: {exc}", file=sys.stderr)
        return 2
    if not statements:
        print(f"lapras-proxy replay: no statements found in {args.log}", file=sys.stderr)
        return 1
    opts = ReplayOptions(host=host, port=port, user=args.user, password=args.password, dbname=args.dbname,
                         clients=args.clients, speed=args.speed, budget_every=args.budget_every,
                         show_stderr=not args.no_provenance)
    try:
        result = replay(statements, opts, progress=not args.no_progress)
    except psycopg.OperationalError as exc:
        print(f"lapras-proxy replay: cannot connect to {args.target}: {str(exc).strip()}", file=sys.stderr)
        return 1
    summary = summarize(result)
    print(format_table(summary))
    chart = args.chart or str(Path(args.log).with_suffix("").name) + ".replay.png"
    if chart != "-":
        write_chart(result, chart)
        print(f"chart: {chart}")
    if args.json:
        write_json(summary, result, args.json)
        if args.json != "-":
            print(f"json: {args.json}")
    return 1 if result.aborted else 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Mount `replay` on the `lapras-proxy` command line."""
    p = sub.add_parser(
        "replay", help="replay a query log through a running proxy",
        description="Replay a production query log (any format `predict` reads) through a running proxy "
                    "with real client connections, and report each statement's outcome (answered, from P, "
                    "free, refused), standard errors, budget burn and latency percentiles.")
    p.add_argument("log", metavar="LOG", help="query log: stderr, csvlog, jsonlog, pg_stat_statements, SQL")
    p.add_argument("--target", required=True, metavar="HOST:PORT", help="address of the running proxy")
    p.add_argument("--format", default="auto", help="log format (default: auto-detect)")
    p.add_argument("--prefix", default=None, help="log_line_prefix of a stderr log (default: guessed)")
    p.add_argument("--speed", type=float, default=0.0, metavar="X",
                   help="replay at X times the log's pace; 0 (default) sends as fast as the clients can")
    p.add_argument("--clients", type=int, default=4, metavar="N", help="client connections (default 4)")
    p.add_argument("--user", default="analyst", help="login of every client (default analyst)")
    p.add_argument("--password", default="lapras", help="password (default lapras)")
    p.add_argument("--dbname", default="adult", help="database name (default adult)")
    p.add_argument("--limit", type=int, default=None, metavar="N", help="replay the first N statements only")
    p.add_argument("--budget-every", type=int, default=0, metavar="K",
                   help="sample SHOW lapras.budget every K statements (default: 100 samples per stream)")
    p.add_argument("--chart", default=None, metavar="PNG",
                   help="chart path (default LOG-name.replay.png in the current directory; - for none)")
    p.add_argument("--json", default=None, metavar="PATH", help="also write the summary as JSON (- = stdout)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--no-provenance", action="store_true",
                   help="do not SET lapras.show_stderr (outcomes are then only answered or refused)")
    p.set_defaults(func=_cmd_replay)
