"""`lapras-proxy whatif`: the command line of the what-if replay (arguments, data source, outputs)."""

from __future__ import annotations

import argparse
import os
import sys
from datetime import date
from pathlib import Path
from typing import Any

from tqdm import tqdm

HELP = """\
Replay query logs epoch by epoch (a day by default) through the real LAPRAS engine, in process, as if the
proxy had fronted the database for those days: each epoch gets a fresh budget and a prediction P trained on
the epochs before it only (declared templates included); every budget runs with P and with P switched off.
Prints, per epoch and budget, statements answered fresh, from P, as free repeats, refused; the error of
the released answers against the exact ones (MAE, median relative error, share within 5% and 10%) by
statement kind (recurring/ad hoc, COUNT vs SUM/AVG, GROUP BY); the budget burn along the epoch.

OPERATOR ONLY. Exact answers are computed here (by the upstream, or by the embedded database loaded with
--data) to measure errors. No exact value is printed or stored, but the error figures are derived from the
data: run this on the operator's machine and do not hand its output to analysts (files are written mode
0600). Exact answers come from the data as it is now, for every day of the log.

Error of a statement: over its aggregate cells (all groups of a GROUP BY), MAE = mean |released - exact|,
relative error = sum |released - exact| / max(sum |exact|, 1). "within 5%" counts refused statements as
misses. z_rms: root mean square of (released - exact) / stated standard error (about 1 when honest).
Error figures are given to two significant digits and only over at least 5 statements (else null): one
statement's MAE and relative error would give back its exact answer."""


def _epsilons(text: str) -> list[float]:
    try:
        out = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of numbers: {text!r}") from None
    if not out or any(not e > 0 for e in out):
        raise argparse.ArgumentTypeError("every epsilon must be > 0")
    return out


def _stream_length(text: str) -> int | None:
    if text == "auto":
        return None
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError("--stream-length is auto or a positive integer") from None
    if n < 1:
        raise argparse.ArgumentTypeError("--stream-length must be >= 1")
    return n


def parse_days(text: str, first_day: Any) -> tuple[int, int]:
    """``FROM:TO`` as 1-based epoch numbers of the log (``15:21``) or ISO dates; either side may be empty."""
    lo, sep, hi = text.partition(":")
    if not sep:
        lo = hi = text

    def one(s: str, default: int) -> int:
        s = s.strip()
        if not s:
            return default
        if s.isdigit():
            return int(s) - 1
        try:
            return (date.fromisoformat(s) - first_day).days
        except ValueError:
            raise ValueError(f"--days: {s!r} is neither an epoch number nor a date (YYYY-MM-DD)") from None

    return one(lo, 0), one(hi, 1 << 30)


def _cmd(args: argparse.Namespace) -> int:
    from proxy.dp.engine_factory import engine_settings
    from proxy.ops.cliargs import load_or_exit, parse_data_args

    from .figures import format_table, summary_lines
    from .simulate import WhatIfOptions

    cfg = load_or_exit(args.config)
    try:
        from predictor.predict import read_logs

        statements, stats = read_logs(args.log, args.format, args.prefix)
    except (OSError, ValueError) as exc:
        print(f"lapras-proxy whatif: cannot read the log: {exc}", file=sys.stderr)
        return 2
    for s in stats:
        print(s.summary(), file=sys.stderr)
    dated = [s.ts for s in statements if s.ts is not None]
    if not dated:
        print("lapras-proxy whatif: no dated statements in the log (a what-if needs timestamps)", file=sys.stderr)
        return 1
    days = None
    if args.days:
        try:
            days = parse_days(args.days, min(dated).date())
        except ValueError as exc:
            print(f"lapras-proxy whatif: {exc}", file=sys.stderr)
            return 2
    section = cfg.predictor
    from predictor.utility import CostModel

    options = WhatIfOptions(
        epsilons=args.epsilon or [cfg.privacy.epsilon], stream_length=args.stream_length, split=args.split,
        days=days, epoch_hours=_epoch_hours(cfg, args.epoch_hours), declared=list(section.get("templates", [])),
        cost=CostModel.for_split(str(section.get("split", "auto")), float(section.get("kappa", 1.0))),
        threshold=section.get("threshold"), seed=args.seed, without_p=not args.no_baseline, workers=args.workers)
    data = parse_data_args(cfg, args.data)
    from proxy.ops.app import StartupError

    try:
        result = _run(cfg, Path(args.state_dir), data, statements, engine_settings(cfg, progress=False), options,
                      progress=not args.no_progress, reload_data=args.reload_data)
    except StartupError as exc:  # e.g. --data for a table the embedded database has: names --reload-data
        print(f"lapras-proxy whatif: {exc}", file=sys.stderr)
        return 2
    print(format_table(result))
    for line in summary_lines(result):
        print(line)
    if args.json:
        from .report import write_json

        write_json(result, args.json)
        print(f"json: {args.json}")
    if args.report:
        from .report import write_report

        paths = write_report(result, args.report)
        print(f"report: {paths['html']} ({paths['png']})")
    return 0


def _epoch_hours(cfg: Any, override: float | None) -> float:
    if override is not None:
        return override
    from lapras.settings import EPOCH_SECONDS

    seconds = EPOCH_SECONDS.get(cfg.privacy.epoch)
    # A manual epoch has no length: replay the log's days.
    return 24.0 if seconds is None else seconds / 3600.0


def _run(cfg: Any, state_dir: Path, data: dict[str, Path], statements: Any, settings: Any, options: Any,
         progress: bool, reload_data: bool = False) -> Any:
    """Exact answers from the configured upstream, or the embedded database (loaded from --data)."""
    from lapras.exact import PostgresExactSource
    from proxy.ops.app import operator_upstream

    from .exact import SnapshotExactSource
    from .simulate import simulate

    # Planning every text and training P for each epoch come first (no count known yet), then the replay.
    bar = tqdm(total=0, unit="stmt", disable=not progress, file=sys.stderr, dynamic_ncols=True,
               desc="planning statements, training P")

    def set_total(n: int) -> None:
        bar.set_description("what-if")
        bar.total = n
        bar.refresh()

    with operator_upstream(cfg, state_dir, data, reload_data=reload_data) as upstream:
        # Every exact answer over each unit's k rows of the whole table, as the histograms it caches
        # (the replay's noise is calibrated on k; statement bounding's rows would differ per statement).
        exact = SnapshotExactSource(PostgresExactSource(upstream.dsn, bounding="live"))
        try:
            return simulate(statements, cfg.catalog, settings, exact, options, on_step=bar.update,
                            total=set_total)
        finally:
            exact.close()
            bar.close()


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Mount `whatif` on the `lapras-proxy` command line."""
    p = sub.add_parser("whatif", help="replay query logs day by day through the engine (operator only)",
                       description=HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("log", nargs="+", metavar="LOG", help="query logs (any format `predict` reads), with timestamps")
    p.add_argument("--config", default="config.toml", help="config.toml (tables, privacy, lapras, predictor)")
    p.add_argument("--epsilon", type=_epsilons, default=None, metavar="E[,E...]",
                   help="budgets per epoch to compare (default: [privacy] epsilon), e.g. 0.5,1,2")
    p.add_argument("--stream-length", type=_stream_length, default=None, metavar="auto|N",
                   help="S per epoch: auto (the predictor's estimate, default) or a fixed N")
    p.add_argument("--split", default=None,
                   help="budget split: auto | equal | matrix_heavy | query_heavy | reserve_heavy (default: config)")
    p.add_argument("--days", default=None, metavar="FROM:TO",
                   help="epochs to replay: 1-based numbers (15:21) or dates (2026-10-15:2026-10-21); earlier "
                        "epochs still train P (default: all)")
    p.add_argument("--epoch-hours", type=float, default=None,
                   help="epoch length in hours (default: [privacy] epoch; manual = 24)")
    p.add_argument("--data", action="append", metavar="[TABLE=]FILE.csv",
                   help="load the embedded database from this CSV when it has no such table yet (a table "
                        "that exists is refused unless --reload-data)")
    p.add_argument("--reload-data", action="store_true",
                   help="replace the tables given with --data by the files' rows")
    p.add_argument("--state-dir", default=".lapras", help="embedded database directory (default .lapras)")
    p.add_argument("--format", default="auto", help="log format (default: auto-detect)")
    p.add_argument("--prefix", default=None, help="log_line_prefix of a stderr log (default: guessed)")
    p.add_argument("--seed", type=int, default=0, help="noise seed of the simulated engines")
    p.add_argument("--workers", type=int, default=min(4, os.cpu_count() or 1), metavar="N",
                   help="processes replaying epochs in parallel (default: the CPUs, at most 4)")
    p.add_argument("--no-baseline", action="store_true", help="skip the runs with P switched off")
    p.add_argument("--json", default=None, metavar="PATH",
                   help="one record per (epoch, epsilon, with_p) plus totals (mode 0600)")
    p.add_argument("--report", default=None, metavar="DIR", help="write whatif.png and whatif.html here (mode 0600)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=_cmd)
    return p
