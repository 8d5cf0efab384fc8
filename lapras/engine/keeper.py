"""The epoch keeper: which epoch the engine answers in, and its life cycle.

It holds the epoch as the ledger has it (its record, its matrix-mechanism release and P's keys, the
catalog its value lists fix, its stored answers, the online policy of its spec) and swaps all of it
together under one lock when an epoch is adopted: at start, when this process begins one (``new_epoch``,
``commit_epoch``, ``begin_reserved``), when another process or an admin did (``sync_epoch``), and when a
timed epoch ends. An epoch begun without its release reserves the MM share; ``fill_release`` attaches it
(the preparer's thread, ``lapras.engine.preparer``)."""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from lapras.allocation import AllocState
from lapras.exact import ExactSource
from lapras.ledger.base import EpochRecord, Ledger
from lapras.matrix_mechanism import MMRelease
from lapras.mechanisms import Mechanism
from lapras.online import OnlinePolicy
from lapras.settings import EngineSettings
from lapras.strategy_cache import StrategyCache
from parser.model.schema import Catalog, with_value_lists

from .prediction import Prediction
from .preparer import EpochPreparer
from .release import PreparedEpoch, ReleasePlanner

log = logging.getLogger("lapras.engine")


class EpochKeeper:
    """The current epoch of one engine and everything fixed with it; thread-safe."""

    def __init__(self, catalog: Catalog, ledger: Ledger, exact: ExactSource, settings: EngineSettings,
                 predictions: Callable[[Catalog], Prediction], rng: np.random.Generator, clock: Callable[[], float],
                 mechanism: type[Mechanism], strategies: StrategyCache | None, background: bool,
                 value_lists: Callable[[], Mapping[str, Sequence[str]]] | None) -> None:
        # ``catalog`` as configured; ``self.catalog`` is the current epoch's: its text columns declared
        # with ``values_from`` take the value lists the epoch fixed when it was prepared (``value_lists``
        # reads them fresh from their public tables then; see prepare_epoch and adopt).
        self.base_catalog = catalog
        self.catalog = catalog
        self.value_lists = value_lists
        self.ledger = ledger
        self.exact = exact
        self.settings = settings
        self.predictions = predictions
        self.clock = clock
        self.mechanism = mechanism
        self.background = background
        self.releases = ReleasePlanner(exact, strategies, rng, background)
        self.p_source = ""  # where the current epoch's P came from (this process's preparation)
        self.lock = threading.RLock()
        self.answers: dict[str, tuple[float, float]] = {}  # the epoch's stored answers: value, stderr
        self.epoch: EpochRecord | None = None
        self.mm: MMRelease | None = None
        self.pkeys: frozenset[str] = frozenset()
        self.policy: OnlinePolicy
        self.stopped: set[int] = set()  # epochs whose stream this process saw stop (it never restarts)
        self.lists: dict[str, tuple[str, ...]] = {}  # the current epoch's value lists
        # Epoch preparation off the serving path (see lapras.engine.preparer): a thread prepares the next
        # epoch and commits it at the boundary; an epoch begun without its release reserves the MM share.
        self.mm_pending = False
        self.mm_ready = threading.Event()
        self.pending_keys: frozenset[str] = frozenset()
        self.preparer: EpochPreparer | None = None

    def start(self) -> None:
        """Adopt the ledger's current epoch, or begin one; then start the preparer's thread (background)."""
        ep = self.ledger.current_epoch()
        if ep is None and self.background:
            self.begin_reserved(expected_current=None)  # serve at once; the release follows
        elif ep is None:
            self.new_epoch(expected_current=None)
        else:
            self.adopt(ep)
        if self.background:
            self.preparer = EpochPreparer(self)
            self.preparer.start()

    def adopt(self, ep: EpochRecord, drawn: MMRelease | None = None, drawn_payload: bytes | None = None) -> None:
        """Make ``ep`` the engine's epoch: its MM release and stored answers, as the ledger has them.

        ``drawn`` is the release this engine just stored (``drawn_payload`` its bytes): when the ledger holds
        exactly that one it is kept as is, with its strategies' factorisations already computed."""
        with self.lock:
            rel = self.ledger.mm_release(ep.id)
            mm = None
            pkeys: frozenset[str] = frozenset()
            if rel is not None and rel.payload is not None:
                meta = rel.meta if isinstance(rel.meta, dict) else {}
                if drawn is not None and rel.payload == drawn_payload:
                    mm = drawn
                else:
                    mm = MMRelease.from_bytes(meta.get("groups", []), rel.payload, rel.cost)
                pkeys = frozenset(meta.get("keys", []))
                self.p_source = str(meta.get("source") or "")
            pending = rel is None and ep.spec.split.get("mm", 0.0) > 0 and ep.spec.predicted_keys > 0
            if not pending:
                self.pending_keys = frozenset()
            self.epoch, self.mm, self.pkeys, self.mm_pending = ep, mm, pkeys, pending
            self.lists = self.ledger.value_lists(ep.id)
            self.catalog = self.catalog_for(self.lists)  # every process reads the same cells
            if pending:
                self.mm_ready.clear()
            else:
                self.mm_ready.set()
            if ep.state.stopped:
                self.stopped.add(ep.id)
            snapshot_epoch = getattr(self.exact, "new_epoch", None)
            if snapshot_epoch is not None:
                snapshot_epoch(ep.id)  # a per-epoch snapshot of exact marginals starts afresh
            self.answers = {k: (a.value, a.stderr) for k, a in self.ledger.answers(ep.id).items()}
            self.policy = OnlinePolicy(ep.spec.allocator(), ep.spec.budget, self.settings.free_stderr_ratio,
                                       self.settings.free_answer_max_stderr or None, self.mechanism)

    def update_settings(self, settings: EngineSettings) -> None:
        """New settings (a reloaded config): an epoch's budget and split are fixed in its spec when it is
        prepared, so privacy settings take effect at the next epoch (one prepared ahead is prepared
        again); the epoch length, work limit and release wait apply at once."""
        self.settings = settings
        if self.preparer is not None:
            self.preparer.forget()

    def next_epoch_at(self) -> float | None:
        """When the current epoch ends by itself (its start plus the epoch length), None for manual epochs."""
        ep, length = self.epoch, self.settings.epoch_length
        return None if ep is None or length is None else ep.started_at + length

    def new_epoch(self, prediction: Prediction | None = None, expected_current: int | None = -1) -> EpochRecord:
        """Start a new epoch now: new budget, new P, and the MM release drawn before any query is answered.

        The strategy is optimised before the epoch's lock is taken, so other sessions keep being answered
        (in the old epoch) meanwhile."""
        if expected_current == -1:
            expected_current = self.epoch.id if self.epoch is not None else None
        return self.commit_epoch(self.prepare_epoch(prediction), expected_current)

    def prepare_epoch(self, prediction: Prediction | None = None, quick: bool = False,
                      value_lists: Mapping[str, Sequence[str]] | None = None) -> PreparedEpoch:
        """The data-independent part of a new epoch: its public value lists, P planned over them, P's
        strategies (the slow part) and the budget split.

        ``quick`` skips the optimisation (instant): see :meth:`ReleasePlanner.prepare`. ``value_lists``
        (those of an epoch already begun) instead of reading them now."""
        lists = dict(value_lists) if value_lists is not None else self._read_value_lists()
        catalog = self.catalog_for(lists)
        pred = prediction if prediction is not None else self.predictions(catalog)
        return self.releases.prepare(pred, catalog, self.settings, lists, quick)

    def _read_value_lists(self) -> dict[str, tuple[str, ...]]:
        """The public value lists as their tables hold them now; the current epoch's when unreadable (the
        lists are public either way: an epoch must not wait for a broken lookup table)."""
        if self.value_lists is None:
            return {}
        try:
            return {k: tuple(v) for k, v in self.value_lists().items()}
        except Exception as exc:  # noqa: BLE001 - any failure to read keeps the lists in force
            log.warning("value lists kept as the current epoch has them: %s", exc)
            return dict(self.lists)

    def catalog_for(self, lists: Mapping[str, Sequence[str]]) -> Catalog:
        """The catalog whose ``values_from`` columns hold ``lists`` (the configured one when empty)."""
        return with_value_lists(self.base_catalog, lists) if lists else self.base_catalog

    def catalog_of_epoch(self, epoch_id: int) -> Catalog:
        """The catalog epoch ``epoch_id`` fixed (its ``values_from`` lists): the adopted one when it is
        that epoch, else read from the ledger (an epoch another process began but this one has not yet
        adopted)."""
        with self.lock:
            ep, catalog = self.epoch, self.catalog
        if ep is not None and ep.id == epoch_id:
            return catalog
        return self.catalog_for(self.ledger.value_lists(epoch_id))

    def commit_epoch(self, prepared: PreparedEpoch, expected_current: int | None) -> EpochRecord:
        """Begin the prepared epoch in the ledger, atomically with its MM release (measured now).

        A prepared epoch without strategies (``quick``) begins with the MM share reserved and no release:
        :meth:`fill_release` adds it. Returns the ledger's current epoch (another process may have won)."""
        # The epoch has no id yet, hence no materialised bounded rows: its release reads the window.
        live = getattr(self.exact, "reading_live", None)
        with live() if live is not None else contextlib.nullcontext():
            measured = (self.releases.measure(prepared.spec, prepared.groups, prepared.keys, prepared, self.catalog)
                        if prepared.groups else None)
        mm_rec, rel = measured if measured is not None else (None, None)
        ep = self.ledger.begin_epoch(prepared.spec, mm_rec, expected_current)
        with self.lock:
            if prepared.groups is None:
                self.pending_keys = frozenset(prepared.keys)
            self.adopt(ep, rel, mm_rec.payload if mm_rec is not None else None)
        return ep

    def begin_reserved(self, expected_current: int | None) -> EpochRecord:
        """Begin an epoch at once with the MM share reserved; its release is prepared afterwards."""
        return self.commit_epoch(self.prepare_epoch(quick=True), expected_current)

    def fill_release(self) -> bool:
        """Optimise, measure and attach the release of an epoch begun without it; True when attached here.

        The release spends exactly the share the epoch reserved for it, so nothing else could have used it;
        when another process attached one first (or the epoch ended), this one is discarded unreleased."""
        ep = self.epoch
        if ep is None or not self.mm_pending:
            return False
        prepared = self.prepare_epoch(value_lists=self.lists)  # the cells the epoch fixed
        if prepared.groups is None or not prepared.groups:
            return False
        measured = self.releases.measure(ep.spec, prepared.groups, prepared.keys, prepared, self.catalog)
        attached = measured is not None and self.ledger.attach_mm(ep.id, measured[0])
        cur = self.ledger.current_epoch()
        if cur is not None and cur.id == ep.id:
            if measured is not None:
                self.adopt(cur, measured[1], measured[0].payload)
            else:
                self.adopt(cur)
        return attached

    def prepare_exact(self) -> None:
        """Materialise the current epoch's bounded rows of the privacy-unit tables before statements need
        them (``[lapras] bounding = "epoch"``; the epoch preparer calls this off the serving path)."""
        prepare = getattr(self.exact, "prepare", None)
        if prepare is not None and self.epoch is not None:
            prepare([t for t in self.catalog.tables if t.privacy_unit is not None])

    def wait_for_release(self, timeout: float) -> bool:
        """Block up to ``timeout`` seconds while the epoch's release is being prepared; True when ready."""
        return self.mm_ready.wait(timeout)

    def maybe_roll(self) -> None:
        """Begin the next epoch when a timed one has ended (without the preparer's thread)."""
        if self.background:
            return  # the preparer thread rolls the epoch; serving never waits for it
        length = self.settings.epoch_length
        ep = self.epoch
        if ep is not None and length is not None and self.clock() - ep.started_at >= length:
            self.new_epoch(expected_current=ep.id)

    def sync_epoch(self) -> bool:
        """Adopt the ledger's current epoch when another process or an admin started a new one, and roll
        a timed epoch that has ended; True when the epoch changed. Cheap enough to poll every second."""
        ep = self.epoch
        self.maybe_roll()
        cur = self.ledger.current_epoch()
        if cur is not None and (self.epoch is None or cur.id != self.epoch.id):
            self.adopt(cur)
        elif cur is not None and self.mm_pending and self.ledger.mm_release(cur.id) is not None:
            self.adopt(cur)  # another process attached the release
        if cur is not None and cur.state.stopped:
            self.stopped.add(cur.id)  # another process stopped the stream: refuse before exact work here too
        return self.epoch is not ep

    def readopt(self) -> None:
        """After a StaleEpoch: adopt the ledger's current epoch, or begin one when there is none."""
        cur = self.ledger.current_epoch()
        if cur is None:
            self.new_epoch(expected_current=None)
        else:
            self.adopt(cur)

    def state_now(self, ep: EpochRecord) -> AllocState:
        """The allocation state of ``ep`` as the ledger has it now (other workers' spends included)."""
        cur = self.ledger.current_epoch()
        return cur.state if cur is not None and cur.id == ep.id else ep.state

    def close(self) -> None:
        if self.preparer is not None:
            self.preparer.stop()
