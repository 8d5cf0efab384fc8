"""A statement's hold on its upstream reads: its deadline and its cancellation, as the exact source sees them.

The proxy answers a statement in a worker thread (a handful of them serve every client). When the client's
statement timeout passes or it sends a CancelRequest, the proxy stops waiting at once, but the thread runs
on until its upstream query ends: a few statements behind a lock held in another upstream session would
hold every thread. So the proxy runs the thread under a ``ReadGuard`` (``READ_GUARD``, a context variable
that ``asyncio.to_thread`` carries into the thread) and cancels the guard when it stops waiting.
``PostgresExactSource`` reads under it: each statement's queries run with ``statement_timeout`` no longer
than the time left, no query starts once the guard is cancelled or its deadline passed, and a query
running when the guard is cancelled is cancelled at the upstream (libpq's cancel request). The engine
charges a statement whose upstream read had begun even when the read is stopped (``lapras.engine.answerer``:
the spend is committed with no answer stored, so a retry is charged again): whether a read ends within a
deadline depends on the data, and an analyst who could retry such reads for free could time them without
limit. A statement stopped before any query started is not charged. Partition selection and the regression
read without a guard: they run to their end and commit, charged and stored, as any statement whose client
stopped waiting (a retry is then a free repeat).
"""

from __future__ import annotations

import contextvars
import math
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from lapras.errors import StatementInterrupted

TIMEOUT_MESSAGE = "canceling statement due to statement timeout"
USER_MESSAGE = "canceling statement due to user request"
RESEND_S = 0.5
"""How often a cancel is sent again while the query it aimed at still runs: one that reached the upstream
between two of the statement's queries was ignored (PostgreSQL drops a cancel that finds its backend idle)."""

READ_GUARD: contextvars.ContextVar[ReadGuard | None] = contextvars.ContextVar("lapras_read_guard", default=None)
"""The guard of the statement this thread reads for (None: no client waits, e.g. the epoch preparer)."""


class ReadGuard:
    """One statement's limit on its upstream reads: a deadline (``time.monotonic``) and a cancel flag."""

    def __init__(self, deadline: float | None = None) -> None:
        self.deadline = deadline
        self.cancelled = False
        # Set once a query of the statement starts upstream: from then on how long the read takes (which
        # depends on the data) decides between an answer and 57014, so the statement is charged either way.
        self.read_started = False
        self.armed = False  # reads are bounded and cancelled only inside ``armed_reads``
        self._lock = threading.Lock()
        self._conn: Any = None  # the connection running the statement's queries now
        self._canceller: threading.Thread | None = None
        self._done = threading.Event()  # set when the block that ``running`` guards is left

    def cancel(self) -> None:
        """Stop the statement's reads (the caller stopped waiting for them): no further query starts, and
        the one running is cancelled at the upstream. Returns at once: the cancel request is a connection
        of its own, sent from a thread of its own (never the event loop's, nor a worker's)."""
        with self._lock:
            if self.cancelled:
                return
            self.cancelled = True
            if self._conn is not None:
                self._start_canceller(self._conn)

    def check(self) -> None:
        """Raise ``StatementInterrupted`` (57014) once cancelled or past the deadline."""
        if self.cancelled:
            raise StatementInterrupted(USER_MESSAGE)
        if self.deadline is not None and time.monotonic() >= self.deadline:
            raise StatementInterrupted(TIMEOUT_MESSAGE)

    def timeout_ms(self) -> int | None:
        """The upstream ``statement_timeout`` for the statement's queries: the time left, in whole
        milliseconds rounded up (at least 1; 0 would mean none); None without a deadline."""
        if self.deadline is None:
            return None
        return max(1, math.ceil((self.deadline - time.monotonic()) * 1000.0))

    def interrupted(self) -> StatementInterrupted:
        """The error of a query the upstream cancelled under this guard: cancelled, else timed out."""
        return StatementInterrupted(USER_MESSAGE if self.cancelled else TIMEOUT_MESSAGE)

    @contextmanager
    def running(self, conn: Any) -> Iterator[None]:
        """The statement's queries run on ``conn`` inside this block. On leaving it, a cancel sent meanwhile
        has been delivered: a late one must never reach the connection's next query (another statement's)."""
        with self._lock:
            self._conn = conn
            self._done.clear()
        try:
            self.check()
            self.read_started = True
            yield
        finally:
            with self._lock:
                self._conn = None
                canceller = self._canceller
            self._done.set()
            if canceller is not None:
                canceller.join()

    def _start_canceller(self, conn: Any) -> None:
        send = getattr(conn, "cancel_safe", None) or conn.cancel

        def resend() -> None:
            while True:
                try:
                    send()
                except Exception:  # the connection broke meanwhile: nothing runs on it any more
                    return
                if self._done.wait(RESEND_S):
                    return

        self._canceller = threading.Thread(target=resend, name="lapras-upstream-cancel", daemon=True)
        self._canceller.start()


def current_guard() -> ReadGuard | None:
    """The guard of the statement this thread reads for, while its reads are armed (:func:`armed_reads`)."""
    guard = READ_GUARD.get()
    return guard if guard is not None and guard.armed else None


@contextmanager
def armed_reads() -> Iterator[ReadGuard | None]:
    """The reads inside are bounded and cancellable by the statement's guard (None: no client waits). Only
    the statement's answer read is armed, where a read stopped after it began is charged (the answerer);
    the reads before it (bounded tables, bounds, partition selection) and the regression's run to their
    end, as before, so no stopped read escapes its charge."""
    guard = READ_GUARD.get()
    if guard is None:
        yield None
        return
    guard.armed = True
    try:
        yield guard
    finally:
        guard.armed = False
