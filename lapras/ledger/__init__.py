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


def PostgresLedger(conninfo: str) -> Ledger:  # noqa: N802 - a constructor, imported lazily (psycopg)
    """Ledger in schema ``lapras`` of the database at ``conninfo`` (created on first use)."""
    from lapras.ledger.postgres import PostgresLedger as _Pg

    return _Pg(conninfo)


__all__ = ["EpochRecord", "EpochSpec", "EpochTxn", "Ledger", "MemoryLedger", "PostgresLedger", "ReleaseRecord",
           "StaleEpoch", "StoredAnswer"]
