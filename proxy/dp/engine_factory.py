"""Build the LAPRAS engine and the regression endpoint from config: config.toml -> lapras settings."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import parser as sqlparser
from lapras.engine import Engine, Prediction, load_prediction, prediction_from_sql
from lapras.exact import ExactSource, PostgresExactSource
from lapras.history import StatementHistory
from lapras.ledger.base import Ledger
from lapras.ledger.postgres import PostgresLedger
from lapras.matrix_mechanism import p_workloads
from lapras.settings import EngineSettings
from lapras.snapshot import SnapshotExactSource
from lapras.strategy_cache import StrategyCache
from parser.model.linear import LinearQuery
from parser.model.schema import Catalog
from predictor.declared import expand_templates
from predictor.history import MAX_EPOCHS, epochs_to_read, learn
from predictor.utility import SPLIT_NAMES, CostModel

from ..config import Config
from ..config.keys import KEYS
from ..upstream.value_lists import read_value_lists
from .regression_endpoint import RegressionEndpoint

log = logging.getLogger("lapras.engine_factory")


def engine_settings(cfg: Config, progress: bool = True) -> EngineSettings:
    """The engine's settings: every key the key table marks with an engine field, from its section."""
    values = {k.engine: getattr(getattr(cfg, k.section), k.name) for k in KEYS if k.engine}
    return EngineSettings(**values, progress=progress)


def prediction_path(cfg: Config) -> Path | None:
    if not cfg.lapras.prediction:
        return None
    path = Path(cfg.lapras.prediction)
    if not path.is_absolute() and cfg.path != "<config>":
        path = Path(cfg.path).resolve().parent / path
    return path


def declared_queries(cfg: Config, catalog: Catalog | None = None) -> list[LinearQuery]:
    """P's part declared by the DBA in config.toml ([[predictor.templates]]), expanded and parsed (over
    ``catalog``, an epoch's, when given)."""
    specs = cfg.predictor.get("templates", [])
    if not specs:
        return []
    out: list[LinearQuery] = []
    for sql in expand_templates(specs):
        try:
            out.extend(q for q in sqlparser.plan_query(sql, catalog or cfg.catalog).queries if not q.is_zero)
        except sqlparser.Refusal:
            continue  # check-config reports templates the parser refuses
    return out


def _predictions(cfg: Config, ledger: Ledger | None = None, history: StatementHistory | None = None) -> Any:
    path = prediction_path(cfg)
    if path is None and not cfg.predictor.get("templates"):
        if ledger is not None and (cfg.lapras.learn_prediction or cfg.lapras.learn_stream):
            settings = engine_settings(cfg, progress=False)
            return history_learner(ledger, history, settings.epoch_length, cfg.lapras.split,
                                   settings.mm_time_limit, predict=cfg.lapras.learn_prediction)
        return None

    def load(catalog: Catalog) -> Prediction:
        # Re-read at each epoch start (the predictor refreshes P.json between epochs), planned over the
        # epoch's catalog: its value lists are those the epoch fixed.
        pred = load_prediction(path, catalog) if path is not None and path.is_file() else Prediction()
        declared = declared_queries(cfg, catalog)
        if not declared:
            return pred
        seen = {q.key for q in pred.queries}
        extra = tuple(q for q in declared if q.key not in seen)
        source = " and ".join(x for x in (pred.source, "declared templates") if x)
        return replace(pred, queries=tuple(pred.queries) + extra, source=source)

    return load


def history_learner(ledger: Ledger, history: StatementHistory | None, length: float | None,
                    split: str = "auto", time_limit: float = 30.0, predict: bool = True) -> Callable[[Catalog], Prediction]:
    """P and S learnt at each epoch's preparation from the proxy's own statement history in the ledger
    (``[lapras] learn_prediction``): the predictor's model over one bucket per ledger epoch (``length``:
    the configured epoch length in seconds, None for manual epochs). ``predict`` false
    (``learn_prediction = false``, ``learn_stream = true``): S only, P empty (nothing is answered from P)."""

    cost = CostModel.for_split(split if split in SPLIT_NAMES else "auto")

    def load(catalog: Catalog) -> Prediction:
        t0 = time.monotonic()
        if history is not None:
            try:
                history.flush()  # the statements of the epoch now ending
            except Exception as exc:  # noqa: BLE001 - learn from what is stored
                log.warning("statement history not flushed before learning: %s", exc)
        spans, rows = ledger.history(epochs_to_read(length))
        pset = learn(spans, rows, catalog, epoch_seconds=length, now=time.time(), cost=cost,
                     time_limit=time_limit)
        ledger.prune_history(MAX_EPOCHS)
        if pset is None:
            return Prediction()
        if not predict:
            log.info("S learnt from %d statements over %d epochs: %s (P not learnt: learn_prediction = false)",
                     len(rows), len(spans), pset.s_estimate)
            return Prediction(s_estimate=pset.s_estimate or None,
                              source=f"S learnt from the proxy's history of {len(spans)} epochs")
        rho = None if pset.stats.get("rho_unknown") else pset.rho_estimate
        pred = prediction_from_sql([q.sql for q in pset.queries], pset.s_estimate or None, rho,
                                   catalog, f"learnt from the proxy's history of {len(spans)} epochs")
        log.info("P learnt from %d statements over %d epochs in %.1f s: %d queries, S = %s, rho = %s",
                 len(rows), len(spans), time.monotonic() - t0, len(pred.queries), pred.s_estimate,
                 pred.rho_estimate)
        return pred

    return load


def strategy_store(state_dir: Path | None) -> StrategyCache:
    """P's strategies, kept on disk under the state dir when there is one (`epoch --prepare` fills it)."""
    return StrategyCache(path=state_dir / "strategies" if state_dir is not None else None)


def build_engine(cfg: Config, upstream_dsn: str, *, background: bool = False,
                 state_dir: Path | None = None) -> Engine:
    """The engine with its ledger and exact-answer source in the upstream database.

    ``background``: epochs are prepared by the engine's own thread, off the serving path (the proxy)."""
    ledger = PostgresLedger(upstream_dsn)
    history = StatementHistory(ledger) if cfg.lapras.learn_prediction or cfg.lapras.learn_stream else None
    return Engine(cfg.catalog, ledger, exact_source(cfg, upstream_dsn),
                  engine_settings(cfg), _predictions(cfg, ledger, history), strategies=strategy_store(state_dir),
                  background=background, value_lists=lambda: read_value_lists(cfg.catalog, upstream_dsn),
                  history=history)


def exact_source(cfg: Config, upstream_dsn: str) -> ExactSource:
    """Exact answers pushed down to the upstream (privacy-unit tables read from each epoch's bounded rows
    unless bounding = "live"), through the per-epoch marginal snapshot when configured."""
    live = PostgresExactSource(upstream_dsn, bounding=cfg.lapras.bounding)
    if cfg.lapras.snapshot == "epoch":
        return SnapshotExactSource(live, cfg.lapras.snapshot_max_cells)
    return live


def prepare_strategies(cfg: Config, state_dir: Path) -> dict[str, Any]:
    """Optimise the strategies of the current P into the state dir's store, touching no data and no budget:
    the proxy's next epoch (or first start) then finds them instead of optimising."""
    settings = engine_settings(cfg, progress=True)
    load = _predictions(cfg)
    pred = load(cfg.catalog) if load is not None else Prediction()
    workloads = p_workloads(cfg.catalog, pred.queries, settings.mm_max_cells)
    store = strategy_store(state_dir)
    t0 = time.monotonic()
    groups = store.plan_groups(workloads, joint_max_cells=settings.joint_max_cells,
                               time_limit=settings.mm_time_limit)
    return {"marginals": len(groups), "queries": sum(g.n_queries for g in groups),
            "reused": store.hits, "optimised": store.misses, "seconds": round(time.monotonic() - t0, 2),
            "timed_out": sum(g.strategy.name.endswith("-timed-out") for g in groups),
            "store": str(store.path)}


def build_regression(cfg: Config, upstream_dsn: str, engine: Engine) -> RegressionEndpoint:
    return RegressionEndpoint(cfg, upstream_dsn, engine)
