"""In-memory ledger: the same contract without durability, for simulations, benchmarks and unit tests."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

from lapras.allocation import AllocState
from lapras.ledger.base import (
    EpochRecord,
    EpochSpan,
    EpochSpec,
    EpochTxn,
    HistoryRow,
    Ledger,
    PartitionRecord,
    ReleaseRecord,
    StaleEpoch,
    StoredAnswer,
    check_partition,
    check_regression,
    check_reserved,
)


class _MemTxn(EpochTxn):
    def __init__(self, ledger: MemoryLedger, epoch: EpochRecord) -> None:
        self.ledger = ledger
        self.epoch = epoch

    def find(self, keys: Sequence[str]) -> dict[str, StoredAnswer]:
        store = self.ledger._answers[self.epoch.id]
        return {k: store[k] for k in keys if k in store}

    def commit_item(self, state: AllocState, release: ReleaseRecord | None, answers: Sequence[StoredAnswer],
                    user: str = "") -> int | None:
        rid = None
        if release is not None:
            self.ledger._releases[self.epoch.id].append(release)
            rid = len(self.ledger._releases[self.epoch.id])
            self.epoch.spent_units += release.units
        self.epoch.state = state
        store = self.ledger._answers[self.epoch.id]
        for a in answers:
            store.setdefault(a.key, a)
        self.epoch.answers_served += len(answers)
        return rid


class MemoryLedger(Ledger):
    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._epochs: list[EpochRecord] = []
        self._releases: dict[int, list[ReleaseRecord]] = {}
        self._answers: dict[int, dict[str, StoredAnswer]] = {}
        self._regressions: dict[tuple[int, str], list[list[Any]]] = {}
        self._partitions: dict[tuple[int, str], PartitionRecord] = {}
        self._history: list[HistoryRow] = []

    def current_epoch(self) -> EpochRecord | None:
        with self._lock:
            return replace(self._epochs[-1]) if self._epochs and self._epochs[-1].ended_at is None else None

    def begin_epoch(self, spec: EpochSpec, mm: ReleaseRecord | None, expected_current: int | None) -> EpochRecord:
        with self._lock:
            cur = self._epochs[-1] if self._epochs and self._epochs[-1].ended_at is None else None
            if (cur.id if cur else None) != expected_current and cur is not None:
                return replace(cur)
            now = time.time()
            if cur is not None:
                cur.ended_at = now
            ep = EpochRecord(len(self._epochs) + 1, now, spec, AllocState())
            self._epochs.append(ep)
            self._releases[ep.id] = []
            self._answers[ep.id] = {}
            if mm is not None:
                self._releases[ep.id].append(mm)
                ep.spent_units = mm.units
            return replace(ep)

    def attach_mm(self, epoch_id: int, mm: ReleaseRecord) -> bool:
        with self._lock:
            ep = self._epochs[epoch_id - 1]
            check_reserved(ep.spec, mm)
            if ep.ended_at is not None or any(r.kind == "mm" for r in self._releases[epoch_id]):
                return False
            self._releases[epoch_id].append(mm)
            ep.spent_units += mm.units
            return True

    def mm_release(self, epoch_id: int) -> ReleaseRecord | None:
        with self._lock:
            return next((r for r in self._releases.get(epoch_id, []) if r.kind == "mm"), None)

    def answers(self, epoch_id: int) -> dict[str, StoredAnswer]:
        with self._lock:
            return dict(self._answers.get(epoch_id, {}))

    def _open(self, epoch_id: int) -> EpochRecord:
        """The epoch ``epoch_id`` (with the lock held), or StaleEpoch once it has ended."""
        ep = self._epochs[epoch_id - 1]
        if ep.ended_at is not None:
            raise StaleEpoch(epoch_id)
        return ep

    @contextmanager
    def locked(self, epoch_id: int) -> Iterator[EpochTxn]:
        with self._lock:
            ep = self._open(epoch_id)
            yield _MemTxn(self, ep)

    def epochs(self) -> list[EpochRecord]:
        with self._lock:
            return [replace(e) for e in self._epochs]

    def releases(self, epoch_id: int) -> list[ReleaseRecord]:
        with self._lock:
            return list(self._releases.get(epoch_id, []))

    def regression_answer(self, epoch_id: int, key: str) -> list[list[Any]] | None:
        with self._lock:
            return self._regressions.get((epoch_id, key))

    def commit_regression(self, epoch_id: int, key: str, epsilon: float, delta: float, rows: list[list[Any]],
                          note: str = "") -> tuple[list[list[Any]], bool]:
        with self._lock:
            ep = self._open(epoch_id)
            stored = self._regressions.get((epoch_id, key))
            if stored is not None:
                return stored, False
            check_regression(ep, epsilon, delta)
            ep.regression_epsilon_spent += epsilon
            ep.regression_delta_spent += delta
            self._regressions[(epoch_id, key)] = rows
            return rows, True

    def partition(self, epoch_id: int, key: str) -> PartitionRecord | None:
        with self._lock:
            return self._partitions.get((epoch_id, key))

    def commit_partition(self, epoch_id: int, record: PartitionRecord) -> tuple[PartitionRecord, bool]:
        with self._lock:
            ep = self._open(epoch_id)
            stored = self._partitions.get((epoch_id, record.key))
            if stored is not None:
                return stored, False
            check_partition(ep, record.cost)
            ep.partition_rho_spent += record.cost.rho or 0.0
            ep.partition_delta_spent += record.cost.delta or 0.0
            self._partitions[(epoch_id, record.key)] = record
            return record, True

    def record_history(self, rows: Sequence[HistoryRow]) -> None:
        with self._lock:
            self._history.extend(rows)

    def history(self, last_epochs: int) -> tuple[list[EpochSpan], list[HistoryRow]]:
        with self._lock:
            spans = [EpochSpan(e.id, e.started_at, e.ended_at) for e in self._epochs[-last_epochs:]]
            ids = {s.id for s in spans}
            return spans, [r for r in self._history if r.epoch_id in ids]

    def prune_history(self, keep_epochs: int) -> None:
        with self._lock:
            keep = {e.id for e in self._epochs[-keep_epochs:]}
            self._history = [r for r in self._history if r.epoch_id in keep]
