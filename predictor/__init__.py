"""Workload predictor: learn tomorrow's recurring queries from past query logs (the LAPRAS prediction set P).

Pipeline: ``logs`` (PostgreSQL stderr/syslog, csvlog, jsonlog, pg_stat_statements, plain SQL files) ->
``templates`` (canonical form, literals abstracted) -> ``model`` (recurrence schedules, literal
progressions, expected-utility cut-off) -> ``output`` (P.json, loaded by the engine).
"""

from predictor.declared import expand_templates
from predictor.logs import LogStatement, ReadStats, read_log
from predictor.output import load_prediction, write_prediction
from predictor.predict import PredictedQuery, PredictionSet, predict_from_logs, train

__all__ = [
    "LogStatement",
    "PredictedQuery",
    "PredictionSet",
    "ReadStats",
    "expand_templates",
    "load_prediction",
    "predict_from_logs",
    "read_log",
    "train",
    "write_prediction",
]
