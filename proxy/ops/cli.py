"""The `lapras-proxy` command: serve, check-config, draft-config, hash-password, budget, epoch, psql,
reset, predict, replay, whatif, dev-cluster."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import rtoml

from ..config import Config, ConfigError, parse_listen
from .cliargs import load_or_exit, parse_data_args

DEFAULT_CONFIG = "config.toml"
DEFAULT_STATE_DIR = ".lapras"


def _cmd_check_config(args: argparse.Namespace) -> int:
    cfg = load_or_exit(args.config)
    tables = ", ".join(f"{t.qualified_name} ({len(t.attributes)} columns)" for t in cfg.catalog.tables)
    where = cfg.upstream_dsn and "upstream PostgreSQL" or "embedded PostgreSQL"
    problems = _check_prediction_inputs(cfg) + _upstream_checks(cfg)
    if problems:
        print(f"lapras-proxy: {cfg.path}: " + "; ".join(problems), file=sys.stderr)
        return 2
    for warning in [*config_warnings(cfg), *_public_table_checks(cfg)]:
        print(f"lapras-proxy: warning: {warning}", file=sys.stderr)
    print(f"{args.config}: OK — serves {tables} on {cfg.server.host}:{cfg.server.port} from {where}; "
          f"budget per epoch ({cfg.privacy.epsilon:g}, {cfg.privacy.delta:g}), "
          f"{cfg.privacy.accounting} accounting, {len(cfg.users)} user(s)")
    for line in _against_running(cfg, Path(args.state_dir or DEFAULT_STATE_DIR), explicit=bool(args.state_dir)):
        print(line)
    return 0


def _against_running(cfg: Config, state_dir: Path, explicit: bool) -> list[str]:
    """What reloading ``cfg`` would change in the proxy of ``state_dir`` (the configuration it recorded at
    start and at each reload), with when each change takes effect; and, when the ledger can be read
    without starting anything, the privacy settings in which the epoch in force differs from ``cfg`` (they
    apply from the next epoch, which is named)."""
    from ..config.reload import NEXT_EPOCH, diff, epoch_difference_lines, summary
    from ..server.admin_control import RUNNING_CONFIG

    current = _current_epoch(cfg, state_dir)
    nxt = _next_epoch_text(cfg, current)
    out: list[str] = []
    record = state_dir / RUNNING_CONFIG
    if record.is_file():
        from ..config import parse_config

        try:
            saved = json.loads(record.read_text(encoding="utf-8"))
            running = parse_config(rtoml.loads(saved["text"]), saved["path"])
        except (OSError, ValueError, KeyError, ConfigError, rtoml.TomlParsingError) as exc:
            out.append(f"(the running configuration recorded in {record} cannot be read: {exc})")
        else:
            changes = diff(running, cfg)
            out.append(f"compared with the configuration running from {state_dir} ({saved['path']}); "
                       "on RELOAD or SIGHUP:")
            out += ["  " + line for line in summary(changes, nxt if any(c.when == NEXT_EPOCH for c in changes)
                                                     else "")]
    elif explicit:
        out.append(f"(no proxy has run from {state_dir}: no running configuration to compare with)")
    epoch_lines = epoch_difference_lines(current or {}, cfg, nxt)
    if epoch_lines:
        out.append("compared with the epoch in force (privacy settings take effect when an epoch begins):")
        out += ["  " + line for line in epoch_lines]
    return out


def _current_epoch(cfg: Config, state_dir: Path) -> dict[str, object] | None:
    """The ledger's report of the epoch in force, when it can be read without starting a database."""
    from .app import _embedded_running, budget_report

    if not cfg.upstream_dsn and not _embedded_running(state_dir):
        return None
    try:
        return budget_report(cfg, state_dir).get("current") or None
    except Exception:  # noqa: BLE001 - an unreachable ledger only leaves this comparison out
        return None


def _next_epoch_text(cfg: Config, current: dict[str, object] | None) -> str:
    """ (epoch N, due T) for the epoch after ``current`` under ``cfg``'s epoch length, else empty."""
    from lapras.settings import EPOCH_SECONDS

    from ..dp.budget_view import timestamp

    if not current:
        return ""
    length = cfg.privacy.epoch_seconds or EPOCH_SECONDS.get(cfg.privacy.epoch)
    nxt = int(str(current["epoch"])) + 1
    if length is None:
        return f" (epoch {nxt}; epochs are manual: `lapras-proxy epoch --new` starts it)"
    return f" (epoch {nxt}, due {timestamp(float(str(current['started_at'])) + length)})"


def _upstream_checks(cfg: Config) -> list[str]:
    """With upstream.dsn: what `serve` would refuse there before listening (no connection, a missing table
    or column, a column of another type, a role that is not a superuser). Nothing is created or changed."""
    if not cfg.upstream_dsn:
        return []
    from .app import StartupError, open_upstream

    try:
        open_upstream(cfg, Path(DEFAULT_STATE_DIR), serving=True)
    except StartupError as exc:
        return [str(exc)]
    return []


def _public_table_checks(cfg: Config) -> list[str]:
    """With an upstream to read: each public table that will not be served, and public columns named like a
    privacy unit (check-config cannot see a public table's columns otherwise)."""
    if not cfg.catalog.public or not cfg.upstream_dsn:
        return []
    from .public_tables import public_table_warnings, with_public_tables

    try:
        catalog = with_public_tables(cfg.catalog, cfg.upstream_dsn)
    except Exception as exc:  # psycopg names the cause (unreachable, refused login...)
        return [f"public tables not checked: cannot read the upstream: {str(exc).strip()}"]
    return [f"public table {t.qualified_name} will not be served: {t.problem}" for t in catalog.public
            if t.problem] + public_table_warnings(catalog)


def config_warnings(cfg: Config) -> list[str]:
    """What a valid configuration will refuse at query time, said before serving it."""
    out = []
    if cfg.privacy.partition_fraction <= 0:
        private = [f"{t.qualified_name}.{a.name}" for t in cfg.catalog.tables for a in t.attributes
                   if getattr(a.domain, "private_keys", False)]
        if private:
            out.append(f"{', '.join(private[:5])}{' ...' if len(private) > 5 else ''}: keys = \"private\" but "
                       "[privacy] partition_fraction is 0, so GROUP BY over them is refused (0A000); set "
                       "partition_fraction (e.g. 0.1) to release their keys by DP partition selection")
    return out


def _check_prediction_inputs(cfg: Config) -> list[str]:
    """The prediction file and the declared templates, checked through the parser."""
    from ..dp.engine_factory import prediction_path

    problems = []
    path = prediction_path(cfg)
    if path is not None and not path.is_file():
        problems.append(f"lapras.prediction: {path} does not exist (run lapras-proxy predict --out {path})")
    specs = cfg.predictor.get("templates", [])
    if specs:
        import parser as sqlparser
        from predictor.declared import expand_templates

        try:
            sqls = expand_templates(specs)
        except Exception as exc:  # the expander names the template and parameter at fault
            return [*problems, f"predictor.templates: {exc}"]
        for sql in sqls:
            try:
                sqlparser.plan_query(sql, cfg.catalog)
            except sqlparser.Refusal as exc:
                problems.append(f"predictor.templates: {sql!r} is refused: {exc.message}")
                break
    return problems


def _cmd_draft_config(args: argparse.Namespace) -> int:
    from .draft_config import FROM_DATA_WARNING, DraftError, draft

    try:
        text = draft(args.dsn, args.table, schema=args.schema, from_data=args.from_data,
                     max_values=args.max_values)
    except DraftError as exc:
        print(f"lapras-proxy: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # psycopg's connection and permission errors name the cause
        print(f"lapras-proxy: cannot read the table: {str(exc).strip()}", file=sys.stderr)
        return 1
    if args.from_data:
        print(FROM_DATA_WARNING, file=sys.stderr)
    sys.stdout.write(text)
    return 0


def _cmd_serve(args: argparse.Namespace) -> int:
    cfg = load_or_exit(args.config)
    listen = None
    if args.listen:
        try:
            listen = parse_listen(args.listen)
        except ValueError as exc:
            print(f"lapras-proxy: --listen: {exc} (write it like 127.0.0.1:6432)", file=sys.stderr)
            return 2
    data = parse_data_args(cfg, args.data)
    if args.reload_data and not data:
        print("lapras-proxy: --reload-data replaces the tables given with --data TABLE=FILE.csv; none given",
              file=sys.stderr)
        return 2
    for warning in config_warnings(cfg):
        print(f"lapras-proxy: warning: {warning}", file=sys.stderr)
    from .app import serve

    mode = "adopt" if args.adopt_stored else "replace" if args.replace_stored else "check"
    return serve(cfg, state_dir=Path(args.state_dir), listen=listen, data=data, workers=args.workers,
                 reload_data=args.reload_data, settings_mode=mode)


def _cmd_budget(args: argparse.Namespace) -> int:
    cfg = load_or_exit(args.config)
    from .app import budget_report

    _print_report(budget_report(cfg, Path(args.state_dir)), args.json)
    return 0


def _print_report(report: dict[str, Any], as_json: bool) -> None:
    """A ledger report as `budget` and `epoch` print it: one key per line, timestamps in UTC, floats to 6
    digits; with --json the raw object (seconds since 1970, full floats) on one line."""
    if as_json:
        print(json.dumps(report, indent=None, sort_keys=True, default=str))
        return
    from ..dp.budget_view import readable
    from ..dp.service import flatten

    for key, value in flatten(report):
        print(f"{key:>34}: {readable(key, value)}")


def _cmd_epoch(args: argparse.Namespace) -> int:
    cfg = load_or_exit(args.config)
    if args.prepare:
        from ..dp.engine_factory import prepare_strategies

        _print_report(prepare_strategies(cfg, Path(args.state_dir)), args.json)
        return 0
    from .app import new_epoch

    _print_report(new_epoch(cfg, Path(args.state_dir)), args.json)
    return 0


def _cmd_psql(args: argparse.Namespace) -> int:
    """The operator's way into the embedded database: psql over its private socket, as the service account
    (peer authentication), or the connection string with --print-dsn."""
    cfg = load_or_exit(args.config)
    if cfg.upstream_dsn:
        print("lapras-proxy: upstream.dsn is set; connect to that database with its own credentials",
              file=sys.stderr)
        return 2
    from ..upstream.embedded import EmbeddedPostgres, bin_dir

    pg = EmbeddedPostgres(Path(args.state_dir))
    if not pg.is_running():
        print(f"lapras-proxy: no embedded PostgreSQL is running for {args.state_dir} "
              "(start `lapras-proxy serve` first)", file=sys.stderr)
        return 1
    dsn = pg.dsn(args.database or cfg.server.database)
    if args.print_dsn:
        print(dsn)
        return 0
    psql = str(bin_dir() / "psql")
    extra = list(args.psql_args)
    if extra[:1] == ["--"]:
        extra = extra[1:]
    os.execv(psql, [psql, dsn, *extra])
    return 0  # not reached


def _cmd_reset(args: argparse.Namespace) -> int:
    """Remove the embedded database of a state dir (its tables and its privacy ledger): the way back to a
    fresh start. As root the cluster lives under /var/lib/lapras-proxy, so removing the state dir alone
    does not reset it."""
    from ..upstream.embedded import EmbeddedPostgres

    pg = EmbeddedPostgres(Path(args.state_dir))
    if not (pg.data_dir / "PG_VERSION").exists():
        print(f"nothing to reset: {args.state_dir} has no embedded database (looked in {pg.data_dir})")
        return 0
    if pg.in_use_elsewhere():
        print(f"lapras-proxy: the embedded database of {args.state_dir} is in use by a running proxy or "
              "operator command; stop it first", file=sys.stderr)
        return 1
    if not args.yes:
        print(f"lapras-proxy: this removes {pg.data_dir}: the protected tables loaded there and the privacy "
              "ledger (every epoch, spend and stored answer: budgets already spent are forgotten); "
              "run again with --yes", file=sys.stderr)
        return 2
    pg.destroy()
    print(f"removed the embedded database of {args.state_dir} ({pg.data_dir}); the next `lapras-proxy serve` "
          "creates a new one")
    return 0


def _common(p: argparse.ArgumentParser, state: bool = True) -> None:
    p.add_argument("--config", default=DEFAULT_CONFIG, metavar="PATH",
                   help=f"configuration file (default: ./{DEFAULT_CONFIG})")
    if state:
        p.add_argument("--state-dir", default=DEFAULT_STATE_DIR, metavar="DIR",
                       help=f"state directory: embedded database and logs (default: ./{DEFAULT_STATE_DIR})")


CORE_COMMANDS = ("serve", "check-config", "draft-config", "budget", "epoch", "psql", "reset", "dev-cluster")


def build_parser(optional: bool = True) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lapras-proxy",
        description="A PostgreSQL wire-protocol proxy that answers aggregate SQL with differentially "
                    "private results under one privacy budget (LAPRAS).")
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug details")
    from ..observability.version import version_line

    parser.add_argument("--version", action="version", version=version_line(),
                        help="print the version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    p = sub.add_parser("serve", help="start the proxy", description=(
        "Start the proxy. Without upstream.dsn in the config it starts an embedded PostgreSQL under the "
        "state dir and fills missing protected tables (from --data, else with generated demo rows)."))
    _common(p)
    p.add_argument("--listen", metavar="HOST:PORT", help="address to listen on (default from config, "
                                                         "127.0.0.1:6432)")
    p.add_argument("--data", action="append", metavar="[TABLE=]CSV",
                   help="CSV (with a header row) to fill a missing protected table in the embedded database "
                        "(a table that exists is refused unless --reload-data)")
    p.add_argument("--reload-data", action="store_true",
                   help="replace the tables given with --data by the files' rows (drop and load)")
    p.add_argument("--workers", type=int, default=1, metavar="N",
                   help="number of proxy processes sharing the port (SO_REUSEPORT) and one ledger")
    stored = p.add_mutually_exclusive_group()
    stored.add_argument("--adopt-stored", action="store_true",
                        help="run with the privacy settings stored with the ledger when the config's differ "
                             "(proxies sharing a ledger must agree; without it such a proxy refuses to start)")
    stored.add_argument("--replace-stored", action="store_true",
                        help="make the config's privacy settings the ledger's (stop the other proxies first)")
    p.set_defaults(func=_cmd_serve)

    p = sub.add_parser("check-config", help="validate a configuration file",
                       description="Validate a configuration and explain every problem found; when a proxy "
                       "runs (or ran) from the state dir, say what reloading this file would change and when "
                       "each change takes effect.")
    _common(p, state=False)
    p.add_argument("--state-dir", default=None, metavar="DIR",
                   help=f"compare with the configuration the proxy of DIR runs with (default: ./{DEFAULT_STATE_DIR} "
                        "when a proxy ran there)")
    p.set_defaults(func=_cmd_check_config)

    p = sub.add_parser("draft-config", help="print the [tables.NAME] TOML for an existing table",
                       description="Read a table's columns from PostgreSQL and print its declaration: every "
                       "column with its type mapped, domains as TODO placeholders to fill from public "
                       "knowledge (check-config refuses them until filled), or with --from-data filled from "
                       "the rows (operator only: those values become public).")
    p.add_argument("--dsn", required=True, help="libpq connection string of the database holding the table")
    p.add_argument("--table", required=True, metavar="NAME",
                   help="the table as stored (Sales 3) or as SQL (public.\"Sales_3\")")
    p.add_argument("--schema", metavar="NAME", help="its schema (default: the first on the search path)")
    p.add_argument("--from-data", action="store_true",
                   help="fill min/max and short value lists from the data (they become PUBLIC)")
    p.add_argument("--max-values", type=int, default=100, metavar="N",
                   help="--from-data lists a text column's values when it has at most N (default 100)")
    p.set_defaults(func=_cmd_draft_config)

    p = sub.add_parser("budget", help="print the privacy ledger",
                       description="Print the epoch's budget, spend, remaining budget and answers served.")
    _common(p)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=_cmd_budget)

    p = sub.add_parser("epoch", help="start a new privacy epoch now, or prepare the next one",
                       description="Close the current epoch and start a new one (new budget, new release of P); "
                       "with --prepare, only optimise the strategies of the current P.json into the state dir "
                       "(no data read, no budget spent): the proxy's next epoch uses them.")
    _common(p)
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--new", action="store_true", help="start a new epoch now (the default)")
    mode.add_argument("--prepare", action="store_true",
                      help="prepare the next epoch's matrix-mechanism strategies ahead, without starting it")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=_cmd_epoch)

    p = sub.add_parser("psql", help="open psql on the embedded database (operator only)", description=(
        "Run psql on the embedded PostgreSQL as its superuser, through its private socket. Only the OS "
        "account that runs the proxy (and root) may connect: peer authentication, no password."))
    _common(p)
    p.add_argument("--database", metavar="NAME", help="database (default: the served one)")
    p.add_argument("--print-dsn", action="store_true", help="print the connection string instead")
    p.add_argument("psql_args", nargs=argparse.REMAINDER, help="arguments passed on to psql")
    p.set_defaults(func=_cmd_psql)

    p = sub.add_parser("reset", help="remove the embedded database of a state dir (operator only)", description=(
        "Stop and remove the embedded PostgreSQL of the state dir: the tables loaded into it and its privacy "
        "ledger (all epochs, spends and stored answers). The next serve starts from scratch. Refused while a "
        "proxy uses it. An upstream.dsn database is never touched."))
    p.add_argument("--state-dir", default=DEFAULT_STATE_DIR, metavar="DIR",
                   help=f"state directory (default: ./{DEFAULT_STATE_DIR})")
    p.add_argument("--yes", action="store_true", help="really remove it (without: say what would be removed)")
    p.set_defaults(func=_cmd_reset)

    from ..devcluster.cli import add_parser as add_dev_cluster_parser

    add_dev_cluster_parser(sub)
    if optional:
        for mount in _optional_mounts():
            mount(sub)
    return parser


def _optional_mounts() -> list[Callable[[argparse._SubParsersAction], object]]:
    """Sub-commands that live with their own package (auth, predictor, replay, whatif), imported only when
    a command outside the core needs them (start-up time); a broken one fails loudly, never vanishes."""
    from ..replay.cli import add_parser as add_replay_parser
    from ..replay.whatif.cli import add_parser as add_whatif_parser
    from ..server.auth import add_hash_password_parser

    return [add_hash_password_parser, _mount_predict, add_replay_parser, add_whatif_parser]


def _mount_predict(sub: argparse._SubParsersAction) -> None:
    from predictor.cli import add_parser, run

    def cmd(args: argparse.Namespace) -> int:
        # The configured catalog gives the parser's canonical keys and the declared domains.
        path = args.config if args.config is not None else Path(DEFAULT_CONFIG)
        catalog = None
        if Path(path).is_file():
            args.config = Path(path)
            catalog = load_or_exit(str(path)).catalog
        return run(args, catalog)

    add_parser(sub).set_defaults(func=cmd)


def main(argv: Sequence[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    first = next((w for w in words if not w.startswith("-")), None)
    # The core commands skip importing the predictor and replay packages: serve starts faster.
    parser = build_parser(optional=first not in CORE_COMMANDS)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s %(message)s", stream=sys.stderr)
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader went away (`lapras-proxy budget --json | head`): stop quietly as other commands do, with
        # stdout pointed at /dev/null so that the flush at exit cannot raise again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


if __name__ == "__main__":
    raise SystemExit(main())
