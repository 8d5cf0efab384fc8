"""``lapras-proxy predict``: build P.json from logs, or back-test the predictor on them.

Mount into the main CLI with :func:`add_parser` (argparse subparsers) and dispatch to :func:`run`; ``python
-m predictor`` runs the same command standalone.

    lapras-proxy predict --log FILE [--log FILE ...] [--format auto|stderr|csvlog|jsonlog|pgss|sql|history]
                         [--log-line-prefix '%m [%p] %q%u@%d '] [--epoch-hours 24] [--config config.toml]
                         [--split auto] [--threshold P] --out P.json
    lapras-proxy predict --log FILE --backtest [--min-train 7] [--train-epochs K] [--truth TRUTH.csv]
                         [--json RESULTS.json]

``--truth`` is for evaluation only: it adds the recall on the recurring kinds to the back-test report and is
never seen by training.
"""

from __future__ import annotations

import argparse
import json
import sys
import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from parser.model.schema import Catalog
from predictor.backtest import backtest, format_table, load_truth
from predictor.declared import TemplateError
from predictor.logs import FORMATS
from predictor.output import write_prediction
from predictor.predict import bucket, measure_overlap, read_logs, train
from predictor.utility import SPLIT_NAMES, CostModel


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``predict`` sub-command to an argparse ``subparsers`` object; returns the new parser."""
    p: argparse.ArgumentParser = subparsers.add_parser(
        "predict",
        help="learn the prediction set P from query logs (or back-test it)",
        description="Learn the recurring part of tomorrow's queries from PostgreSQL logs and write P.json.",
    )
    configure_parser(p)
    return p


def configure_parser(p: argparse.ArgumentParser) -> None:
    # nargs="+": a shell glob (--log /var/log/postgresql/postgresql-*.log) passes several files to one --log
    p.add_argument("--log", action="extend", nargs="+", required=True, metavar="FILE",
                   help="log files (repeatable; several after one --log, as a glob gives them)")
    p.add_argument("--format", default="auto", choices=("auto", *FORMATS), help="log format (default: auto)")
    p.add_argument("--log-line-prefix", default=None, help="the server's log_line_prefix (stderr logs)")
    p.add_argument("--epoch-hours", type=float, default=24.0, help="epoch length in hours (default: 24)")
    p.add_argument(
        "--config",
        type=Path,
        default=None,
        help="config.toml: [[predictor.templates]] declared templates, [predictor] options",
    )
    p.add_argument(
        "--split",
        default="auto",
        choices=SPLIT_NAMES,
        help="budget split the cut-off's costs come from (default: auto)",
    )
    p.add_argument(
        "--kappa",
        type=float,
        default=1.0,
        help="MM cost of a wrong row relative to independent rows; < 1 credits correlation (default: 1)",
    )
    p.add_argument(
        "--threshold", type=float, default=None, help="fixed score cut-off instead of the utility rule"
    )
    p.add_argument(
        "--snapshot-days",
        type=float,
        default=1.0,
        help="days covered by a pg_stat_statements export (calls per epoch = calls / days)",
    )
    p.add_argument("--out", type=Path, default=None, help="where to write P.json")
    p.add_argument(
        "--backtest", action="store_true", help="replay the logs day by day and report recall etc."
    )
    p.add_argument(
        "--min-train", type=int, default=7, help="back-test: epochs of history before the first test"
    )
    p.add_argument(
        "--train-epochs",
        type=int,
        default=None,
        help="back-test: train once on the first K epochs and forecast every later one",
    )
    p.add_argument(
        "--truth", type=Path, default=None, help="back-test: truth file ts,kind,sql (evaluation only)"
    )
    p.add_argument("--json", type=Path, default=None, help="back-test: write one record per day to this file")
    p.add_argument("--quiet", action="store_true", help="no read statistics on stderr")


def _config(path: Path | None) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    if path is None:
        return [], {}
    with open(path, "rb") as f:
        data = tomllib.load(f)
    section = data.get("predictor", {}) or {}
    templates = section.get("templates", []) or []
    if not isinstance(templates, list):
        raise TemplateError("[[predictor.templates]] must be an array of tables")
    return templates, section


def run(args: argparse.Namespace, catalog: Catalog | None = None) -> int:
    """Execute ``predict``; the integrating CLI may pass the configured catalog (canonical keys, domains)."""
    try:
        declared, section = _config(args.config)
    except (OSError, tomllib.TOMLDecodeError, TemplateError) as exc:
        print(f"predict: cannot read config: {exc}", file=sys.stderr)
        return 2
    split = section.get("split", args.split)
    cost = CostModel.for_split(split, float(section.get("kappa", args.kappa)))
    threshold = args.threshold if args.threshold is not None else section.get("threshold")
    try:
        statements, stats = read_logs(args.log, args.format, args.log_line_prefix)
    except (OSError, ValueError) as exc:
        print(f"predict: {exc}", file=sys.stderr)
        return 2
    if not args.quiet:
        for s in stats:
            print(s.summary(), file=sys.stderr)
            for line, text in s.examples:
                print(f"  unreadable line {line}: {text}", file=sys.stderr)
    if args.backtest:
        truth = load_truth(args.truth) if args.truth else None
        mode = "fixed" if args.train_epochs is not None else "rolling"
        results = backtest(
            statements,
            args.epoch_hours,
            args.min_train,
            catalog,
            cost,
            threshold,
            truth,
            mode,
            args.train_epochs,
        )
        print(format_table(results))
        if args.json is not None:
            args.json.parent.mkdir(parents=True, exist_ok=True)
            args.json.write_text(json.dumps([r.as_record() for r in results], indent=2) + "\n")
        return 0
    # S in the engine's units: stream items (a statement asked again in its epoch is a free repeat).
    epochs, undated, counts = bucket(statements, args.epoch_hours, catalog, stream_items=True)
    try:
        pset = train(epochs, None, catalog, cost, threshold, undated, args.snapshot_days, declared)
    except TemplateError as exc:
        print(f"predict: bad declared template: {exc}", file=sys.stderr)
        return 2
    measure_overlap(pset, epochs, catalog, cost, threshold)
    pset.stats.update(counts)
    pset.stats["read"] = [
        {
            "path": s.path,
            "format": s.format,
            "lines": s.lines,
            "statements": s.statements,
            "skipped": s.skipped,
            "unreadable": s.unreadable,
        }
        for s in stats
    ]
    if args.out is not None:
        write_prediction(pset, args.out)
    # A pg_stat_statements export has no timestamps: P is for whichever epoch comes next.
    epoch = "the next epoch" if pset.epoch_start is None else f"epoch starting {pset.epoch_start}"
    print(
        f"P: {len(pset.queries)} queries for {epoch}, S estimate {pset.s_estimate}, "
        f"rho estimate {pset.rho_estimate:.3f}, cut-off {pset.threshold:.3f}"
        + (f" -> {args.out}" if args.out else "")
    )
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m predictor", description=__doc__.splitlines()[0])
    configure_parser(parser)
    return run(parser.parse_args(argv))
