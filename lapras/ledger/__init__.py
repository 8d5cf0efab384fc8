"""Ledger of epochs, budget parts, releases, spends and answers: PostgreSQL-backed or in memory."""

from lapras.ledger.base import (
    EpochRecord,
    EpochSpec,
    EpochTxn,
    Ledger,
    ReleaseRecord,
    StaleEpoch,
    StoredAnswer,
)
from lapras.ledger.memory import MemoryLedger
from lapras.ledger.postgres import PostgresLedger

__all__ = ["EpochRecord", "EpochSpec", "EpochTxn", "Ledger", "MemoryLedger", "PostgresLedger", "ReleaseRecord",
           "StaleEpoch", "StoredAnswer"]
