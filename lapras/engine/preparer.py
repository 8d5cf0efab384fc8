"""Epoch preparation off the serving path: a thread that keeps the next epoch ready and rolls it at the
boundary, so no statement ever waits for the matrix mechanism's strategy search.

- Ahead of a timed epoch's boundary (``prepare_ahead`` seconds, reading P.json then) the next epoch's
  strategies and budget split are prepared; they depend on P alone, never on the data.
- At the boundary the release is measured (P's marginals read, noise drawn) and committed with the new
  epoch in one ledger transaction. Until that commit lands, statements are answered in the old epoch
  (charged to its budget): nothing waits and nothing is charged twice.
- An epoch begun without its release (first start on an empty ledger, or a boundary reached before P
  was prepared) reserves the release's share of the budget; this thread optimises, measures and attaches
  the release, which spends exactly that share.
- Once an epoch is in force (begun here or elsewhere, or found at start), the bounded rows of its
  privacy-unit tables are materialised (``lapras.bounded``) before statements ask for them.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Protocol

from lapras.ledger.base import EpochRecord
from lapras.settings import EngineSettings

from .release import PreparedEpoch

log = logging.getLogger("lapras.epochs")


class Epochs(Protocol):
    """What the preparer drives: the engine's epoch keeper (``lapras.engine.keeper.EpochKeeper``)."""

    epoch: EpochRecord | None
    mm_pending: bool
    settings: EngineSettings
    clock: Callable[[], float]

    def fill_release(self) -> bool: ...

    def prepare_exact(self) -> None: ...

    def prepare_epoch(self) -> PreparedEpoch: ...

    def commit_epoch(self, prepared: PreparedEpoch, expected_current: int | None) -> EpochRecord: ...


def prepare_ahead(epoch_length: float) -> float:
    """Seconds before the boundary at which the next epoch is prepared: a tenth of it, at most 10 min."""
    return min(600.0, epoch_length / 10.0)


class EpochPreparer:
    """Daemon thread of one engine: fills a reserved release, prepares ahead, commits at the boundary."""

    def __init__(self, epochs: Epochs, poll: float = 0.25) -> None:
        self.epochs = epochs
        self.poll = poll
        self._stop = threading.Event()
        self._next: PreparedEpoch | None = None
        self._next_for: int | None = None  # the epoch id the prepared one follows
        self._exact_for: int | None = None  # the epoch whose bounded rows were materialised ahead
        self._generation = 0  # bumped when the engine's settings change: an epoch prepared before is stale
        self._thread = threading.Thread(target=self._run, name="lapras-epoch-preparer", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def forget(self) -> None:
        """Drop the next epoch prepared ahead (the settings it was prepared with changed); it is prepared
        again with the new ones when due."""
        self._generation += 1
        self._next = None

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(timeout)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.step()
            except Exception:  # the database may be down for a while: keep trying
                log.exception("epoch preparation failed; retrying")
                self._stop.wait(5.0)
            self._stop.wait(self.poll)

    def step(self) -> None:
        """One round: attach a pending release, prepare the next epoch when due, roll at the boundary."""
        eng = self.epochs
        ep = eng.epoch
        if ep is None:
            return
        if eng.mm_pending:
            t0 = eng.clock()
            if eng.fill_release():
                log.info("epoch %d: matrix-mechanism release attached after %.1f s", ep.id, eng.clock() - t0)
            return
        if self._exact_for != ep.id:
            # The epoch's bounded rows of privacy-unit tables, materialised here rather than by its first
            # statement (statements arriving meanwhile wait for this build instead of running the window).
            self._exact_for = ep.id
            try:
                eng.prepare_exact()
            except Exception as exc:  # statements build it at first use instead
                log.warning("epoch %d: bounded rows not materialised ahead: %s", ep.id, exc)
        length = eng.settings.epoch_length
        if length is None:
            return
        boundary = ep.started_at + length
        now = eng.clock()
        if (self._next is None or self._next_for != ep.id) and now >= boundary - prepare_ahead(length):
            generation = self._generation
            prepared = eng.prepare_epoch()
            if generation != self._generation:
                return  # the settings changed while preparing: prepare again next round
            self._next, self._next_for = prepared, ep.id
        if now >= boundary and self._next is not None and self._next_for == ep.id:
            new = eng.commit_epoch(self._next, expected_current=ep.id)
            self._next = None
            log.info("epoch %d began (prepared ahead; %.1f s after the boundary)", new.id, eng.clock() - boundary)
