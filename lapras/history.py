"""The proxy's own statement history: what it was asked, kept for learning P and S at each epoch start.

Each statement the engine answers or refuses over a protected table is recorded with its text, bound
parameters, time, epoch id, session TimeZone and outcome (never a value, an answer or a standard error) in the ledger
(``lapras.statement_history`` upstream, readable by the owner only; in memory for the memory ledger).
Recording is off the serving path: rows are buffered and written in batches by a daemon thread (a lost
batch at a crash costs a few statements of history, never privacy). The buffer is bounded: past
``max_buffer`` rows waiting, new rows are dropped and counted.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from lapras.ledger.base import HistoryRow, Ledger

log = logging.getLogger("lapras.history")


class StatementHistory:
    """Buffered writer of :class:`HistoryRow` into a ledger; ``flush`` writes what is waiting now."""

    def __init__(self, ledger: Ledger, every: float = 1.0, max_buffer: int = 50_000,
                 clock: Callable[[], float] = time.time, background: bool = True) -> None:
        self.ledger = ledger
        self.every = every
        self.max_buffer = max_buffer
        self.clock = clock
        self.dropped = 0
        self._rows: list[HistoryRow] = []
        self._lock = threading.Lock()
        self._flush_lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if background:
            self._thread = threading.Thread(target=self._run, name="lapras-history", daemon=True)
            self._thread.start()

    def record(self, epoch_id: int, sql: str, params: Sequence[Any] | None, outcome: str,
               zone: str | None = None) -> None:
        row = HistoryRow(epoch_id, self.clock(), sql, tuple(params) if params else None, outcome, zone)
        with self._lock:
            if len(self._rows) >= self.max_buffer:
                self.dropped += 1
                return
            self._rows.append(row)

    def flush(self) -> None:
        with self._flush_lock:  # one writer at a time keeps the rows in order
            with self._lock:
                rows, self._rows = self._rows, []
            if rows:
                try:
                    self.ledger.record_history(rows)
                except Exception:
                    with self._lock:  # kept for the next round (the database may be restarting)
                        self._rows[:0] = rows[: max(0, self.max_buffer - len(self._rows))]
                    raise

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            try:
                self.flush()
            except Exception as exc:  # noqa: BLE001 - keep serving; history is best effort
                log.warning("statement history not written yet: %s", exc)

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread.is_alive():
            self._thread.join(5.0)
        try:
            self.flush()
        except Exception as exc:  # noqa: BLE001
            log.warning("statement history lost at close: %s", exc)
