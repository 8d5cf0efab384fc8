"""LAPRAS engine: mechanisms with privacy maps, matrix mechanism for predicted queries, paced Gaussian
answers for the rest, and a durable ledger. No knowledge of sockets."""

from lapras.accounting import Budget
from lapras.engine import Answer, Engine, Prediction, load_prediction
from lapras.errors import BudgetExhausted, LaprasError
from lapras.exact import ExactSource, HistogramExactSource, PostgresExactSource
from lapras.ledger import MemoryLedger, PostgresLedger
from lapras.mechanisms import Cost
from lapras.report import budget_report
from lapras.settings import EngineSettings

__all__ = [
    "Answer", "Budget", "BudgetExhausted", "Cost", "Engine", "EngineSettings", "ExactSource", "HistogramExactSource",
    "LaprasError", "MemoryLedger", "PostgresExactSource", "PostgresLedger", "Prediction", "budget_report",
    "load_prediction",
]
