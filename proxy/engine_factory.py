"""Build the LAPRAS engine and the regression endpoint from config: config.toml -> lapras settings."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lapras.engine import Engine, Prediction, load_prediction
from lapras.exact import PostgresExactSource
from lapras.ledger.postgres import PostgresLedger
from lapras.settings import EngineSettings

from .config import Config


def engine_settings(cfg: Config, progress: bool = True) -> EngineSettings:
    p, lp = cfg.privacy, cfg.lapras
    return EngineSettings(
        epsilon=p.epsilon, delta=p.delta, accounting=p.accounting,
        regression_fraction=p.regression_fraction, split=lp.split, fractions=lp.fractions,
        allocation=lp.allocation, warmup=lp.warmup, stream_length=p.stream_length,
        free_answer_max_stderr=lp.free_answer_max_stderr, epoch=p.epoch, progress=progress)


def prediction_path(cfg: Config) -> Path | None:
    if not cfg.lapras.prediction:
        return None
    path = Path(cfg.lapras.prediction)
    if not path.is_absolute() and cfg.path != "<config>":
        path = Path(cfg.path).resolve().parent / path
    return path


def _predictions(cfg: Config) -> Any:
    path = prediction_path(cfg)
    if path is None:
        return None

    def load() -> Prediction:
        # Re-read at each epoch start: the predictor refreshes P.json between epochs.
        if not path.is_file():
            return Prediction()
        return load_prediction(path, cfg.catalog)

    return load


def build_engine(cfg: Config, upstream_dsn: str) -> Engine:
    """The engine with its ledger and exact-answer source in the upstream database."""
    return Engine(cfg.catalog, PostgresLedger(upstream_dsn), PostgresExactSource(upstream_dsn),
                  engine_settings(cfg), _predictions(cfg))


def build_regression(cfg: Config, upstream_dsn: str, engine: Engine) -> Any:
    from .regression_endpoint import RegressionEndpoint

    return RegressionEndpoint(cfg, upstream_dsn, engine)
