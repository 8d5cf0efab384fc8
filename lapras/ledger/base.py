"""The ledger interface: epochs, budget parts, releases, spends and served answers.

Durability is part of privacy: a spend, its release and the answers computed from it are recorded in one
atomic step (:meth:`EpochTxn.commit_item`) before any answer leaves the engine, and every spender holds the
epoch's lock while it decides, so concurrent sessions (and processes) serialise their spends. The
allocation state (stream position, estimator, pool and reserve spent) lives in the epoch record and is
updated in the same step, so a restart resumes the epoch exactly.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any

from lapras.accounting import Accountant, Budget, PartitionAccountant
from lapras.allocation import FORECAST_END_SURVIVAL, Allocator, AllocState, Split
from lapras.errors import BudgetExhausted, SettingsDiffer
from lapras.mechanisms import Cost


@dataclass(frozen=True)
class EpochSpec:
    """Everything fixed when an epoch starts (stored with it, so a restart uses the same rules)."""

    mode: str
    epsilon: float  # query-stream part
    delta: float
    total_epsilon: float
    total_delta: float
    regression_epsilon: float
    regression_delta: float
    split: Mapping[str, float]
    policy: str
    s: int
    warmup: int
    min_fraction: float
    prior_bad: float | None = None
    rho_estimate: float | None = None
    predicted_keys: int = 0
    partition_epsilon: float = 0.0  # partition-selection part (basic composition with the others)
    partition_delta: float = 0.0
    partition_selections: int = 0
    # The public value lists (``values_from`` source -> sorted values) read when the epoch was prepared:
    # its text domains, so P's release and every process's cells mean the same values all epoch. Stored
    # with the spec; read back with Ledger.value_lists (epoch reads may leave them out: they can be long).
    value_lists: Mapping[str, Sequence[str]] = field(default_factory=dict)

    @property
    def budget(self) -> Accountant:
        return Budget(self.mode, self.epsilon, self.delta)

    @property
    def partition(self) -> PartitionAccountant:
        return PartitionAccountant(self.partition_epsilon, self.partition_delta, self.partition_selections)

    def allocator(self) -> Allocator:
        # The engine's S is forecast, never known: its last position is paced as reached half of the time.
        return Allocator(Split(**self.split), self.budget.units, self.s, self.warmup,
                         self.policy, self.min_fraction, self.prior_bad,  # type: ignore[arg-type]
                         FORECAST_END_SURVIVAL)

    def to_json(self) -> dict[str, object]:
        d = asdict(self)
        d["split"] = dict(self.split)
        d["value_lists"] = {k: list(v) for k, v in self.value_lists.items()}
        return d

    @staticmethod
    def from_json(d: Mapping[str, object]) -> EpochSpec:
        return EpochSpec(**d)  # type: ignore[arg-type]


@dataclass
class EpochRecord:
    id: int
    started_at: float
    spec: EpochSpec
    state: AllocState
    spent_units: float = 0.0
    regression_epsilon_spent: float = 0.0
    regression_delta_spent: float = 0.0
    ended_at: float | None = None
    answers_served: int = 0
    partition_rho_spent: float = 0.0
    partition_delta_spent: float = 0.0


@dataclass(frozen=True)
class HistoryRow:
    """One statement the proxy answered (or refused) over a protected table, for learning P and S: its text,
    bound parameters, when and in which epoch, and how the engine served it. Never a value or an answer."""

    epoch_id: int
    at: float  # unix seconds
    sql: str
    params: tuple[Any, ...] | None
    outcome: str  # repeat | good | bad | free_after_stop | refused | zero ...
    # The session's TimeZone as SHOW prints it (None: UTC, and every row written before zones were kept): a
    # timestamptz's day or hour, and a literal without an offset, are planned again in it.
    zone: str | None = None


@dataclass(frozen=True)
class EpochSpan:
    """An epoch's id and time span (``ended_at`` None while it is open): the history's calendar."""

    id: int
    started_at: float
    ended_at: float | None


@dataclass(frozen=True)
class PartitionRecord:
    """A selected set of keys, stored before it is released: what it cost and how it was drawn."""

    key: str
    keys: list[list[Any]]
    cost: Cost
    mechanism: str
    params: Mapping[str, float]


@dataclass(frozen=True)
class ReleaseRecord:
    """One release: its cost, the mechanism (name and parameters) that drew it, the sensitivity it was
    calibrated for and (for the MM release) its stored measurements."""

    kind: str  # "mm" | "fresh"
    cost: Cost
    units: float
    mechanism: str
    params: Mapping[str, float]
    sensitivity: float
    position: int | None = None
    parts: Mapping[str, float] = field(default_factory=dict)  # units per budget part
    meta: object = None
    payload: bytes | None = None


@dataclass(frozen=True)
class StoredAnswer:
    key: str
    value: float
    stderr: float
    outcome: str
    position: int | None = None


class EpochTxn(ABC):
    """The epoch under its lock: read the state, then commit one stream item (or nothing)."""

    epoch: EpochRecord

    @abstractmethod
    def find(self, keys: Sequence[str]) -> dict[str, StoredAnswer]:
        """Stored answers among ``keys`` (another session or process may have answered them)."""

    @abstractmethod
    def commit_item(self, state: AllocState, release: ReleaseRecord | None, answers: Sequence[StoredAnswer],
                    user: str = "") -> int | None:
        """Record the new state, the release with its spends, and the answers; durable on return."""


SETTINGS_MODES = ("check", "adopt", "replace")


def settings_differences(ours: Mapping[str, Any], stored: Mapping[str, Any]) -> list[tuple[str, object, object]]:
    """(key, ours, stored) for each setting that differs, in key order."""
    return [(k, ours.get(k), stored.get(k)) for k in sorted(set(ours) | set(stored)) if ours.get(k) != stored.get(k)]


StoredSettings = tuple[Mapping[str, Any] | None, Callable[[dict[str, Any]], None]]
"""The privacy settings a ledger holds (None before any) and the function storing new ones."""


class Ledger(ABC):
    _settings: dict[str, Any] | None = None

    def agree_settings(self, settings: Mapping[str, Any], mode: str = "check") -> dict[str, Any]:
        """The privacy settings every process on this ledger uses: stored by the first one, then compared.

        ``check``: differing settings raise :class:`SettingsDiffer` naming each; ``adopt``: the stored ones
        are returned; ``replace``: ``settings`` become the stored ones."""
        with self._stored_settings() as (stored, store):
            if stored is None or mode == "replace":
                store(dict(settings))
                return dict(settings)
        diff = settings_differences(settings, stored)
        if diff and mode == "check":
            raise SettingsDiffer(diff)
        return dict(stored)

    @contextmanager
    def _stored_settings(self) -> Iterator[StoredSettings]:
        """The stored settings (None before the first process stored any) and how to store new ones, both
        under one lock held until the block ends. In memory: one process's own."""
        def store(settings: dict[str, Any]) -> None:
            self._settings = settings

        yield self._settings, store

    @abstractmethod
    def current_epoch(self) -> EpochRecord | None: ...

    @abstractmethod
    def begin_epoch(self, spec: EpochSpec, mm: ReleaseRecord | None, expected_current: int | None) -> EpochRecord:
        """Close the current epoch and open a new one with its MM release, atomically.

        ``expected_current`` is the epoch id the caller saw; when another process already rolled the epoch,
        nothing is created and the newer epoch is returned.
        """

    @abstractmethod
    def mm_release(self, epoch_id: int) -> ReleaseRecord | None: ...

    def attach_mm(self, epoch_id: int, mm: ReleaseRecord) -> bool:
        """Add the MM release to an epoch begun without one (its share reserved by the split), durably.

        False, and nothing recorded, when the epoch has ended or already has its release. The release's
        units must be exactly the epoch's reserved MM share."""
        raise NotImplementedError

    @abstractmethod
    def answers(self, epoch_id: int) -> dict[str, StoredAnswer]: ...

    def value_lists(self, epoch_id: int) -> dict[str, tuple[str, ...]]:
        """The value lists the epoch's spec stored (empty for an epoch stored before they were)."""
        ep = next((e for e in self.epochs() if e.id == epoch_id), None)
        return {k: tuple(v) for k, v in ep.spec.value_lists.items()} if ep is not None else {}

    @abstractmethod
    def locked(self, epoch_id: int) -> AbstractContextManager[EpochTxn]:
        """Lock the epoch (raises StaleEpoch when it is no longer current)."""

    @abstractmethod
    def epochs(self) -> list[EpochRecord]: ...

    @abstractmethod
    def releases(self, epoch_id: int) -> list[ReleaseRecord]: ...

    @abstractmethod
    def regression_answer(self, epoch_id: int, key: str) -> list[list[Any]] | None:
        """Rows of the regression released under ``key`` in the epoch, or None."""

    @abstractmethod
    def commit_regression(self, epoch_id: int, key: str, epsilon: float, delta: float, rows: list[list[Any]],
                          note: str = "") -> tuple[list[list[Any]], bool]:
        """Charge the regression part (basic composition) and store the released rows in ONE transaction,
        under the epoch's lock, so a crash leaves both or neither. When ``key`` was stored meanwhile,
        nothing is charged and the stored rows are returned with False; raises BudgetExhausted when the
        part cannot cover the cost (nothing is stored: the computed rows are never released)."""

    def partition(self, epoch_id: int, key: str) -> PartitionRecord | None:
        """The set selected under ``key`` in the epoch, or None."""
        raise NotImplementedError

    def commit_partition(self, epoch_id: int, record: PartitionRecord) -> tuple[PartitionRecord, bool]:
        """Charge the partition part and store the selected set in ONE transaction under the epoch's lock.
        When ``record.key`` was stored meanwhile, nothing is charged and the stored set is returned with
        False; raises BudgetExhausted when the part cannot cover the cost (nothing is stored)."""
        raise NotImplementedError

    def user_activity(self, epoch_id: int, user: str) -> dict[str, float]:
        """What `user` caused in the epoch: answers first released to them (`answers`), of which fresh
        (`fresh`), and the privacy units of the releases behind those answers (`units`). Empty when the
        ledger does not record users."""
        return {}

    def record_history(self, rows: Sequence[HistoryRow]) -> None:
        """Append statements to the operator-only statement history (texts, parameters, times, epochs)."""
        raise NotImplementedError

    def history(self, last_epochs: int) -> tuple[list[EpochSpan], list[HistoryRow]]:
        """The newest ``last_epochs`` epochs (oldest first) and the history rows recorded in them."""
        raise NotImplementedError

    def prune_history(self, keep_epochs: int) -> None:  # noqa: B027 - optional hook
        """Forget the history of all but the newest ``keep_epochs`` epochs."""

    def close(self) -> None:  # noqa: B027 - optional hook
        pass


def check_reserved(spec: EpochSpec, mm: ReleaseRecord) -> None:
    """An attached release may spend the reserved MM share and nothing else."""
    share = spec.split.get("mm", 0.0) * spec.budget.units
    if mm.kind != "mm" or abs(mm.units - share) > 1e-9 * max(share, 1.0) or set(mm.parts) - {"mm"}:
        raise ValueError(f"an attached release must spend the reserved MM share ({share:g} units), "
                         f"not {mm.units:g}")


class StaleEpoch(Exception):
    """The epoch was closed by another process: reload and retry."""


def check_regression(ep: EpochRecord, epsilon: float, delta: float) -> None:
    """Raise BudgetExhausted (53400) when the epoch's regression part cannot cover (epsilon, delta)."""
    s = ep.spec
    over_eps = ep.regression_epsilon_spent + epsilon > s.regression_epsilon * (1 + 1e-12)
    over_delta = ep.regression_delta_spent + delta > s.regression_delta * (1 + 1e-12)
    if over_eps or over_delta:
        # Name every part that cannot cover the call: a call refused for its delta alone (the default delta is
        # half the regression delta) must not read as an epsilon problem.
        parts = [(f"epsilon {ep.regression_epsilon_spent:.4g} of {s.regression_epsilon:.4g} spent; the call "
                  f"needs {epsilon:.4g}") if over_eps else "",
                 (f"delta {ep.regression_delta_spent:.3g} of {s.regression_delta:.3g} spent; the call needs "
                  f"{delta:.3g}") if over_delta else ""]
        raise BudgetExhausted("the regression budget of this epoch is exhausted",
                              detail=f"epoch {ep.id}: " + "; ".join(p for p in parts if p),
                              hint=("ask for a smaller epsilon, " if over_eps else "")
                                   + ("pass a smaller delta (the sixth argument), " if over_delta else "")
                                   + "or wait for the next epoch")


def check_partition(ep: EpochRecord, cost: Cost) -> None:
    """Raise BudgetExhausted (53400) when the epoch's partition part cannot cover ``cost``."""
    part = ep.spec.partition
    if part.reserved and not part.enabled:
        raise BudgetExhausted(
            "the partition-selection part's delta is too small to calibrate a selection",
            detail=f"a selection's share of delta, {part.share} * {part.delta:g} / {part.selections}, is below "
                   "1e-300",
            hint="raise [privacy] delta or partition_fraction, or lower partition_selections")
    if not part.admits(ep.partition_rho_spent, ep.partition_delta_spent, cost):
        raise BudgetExhausted(
            "the partition-selection budget of this epoch is exhausted" if part.enabled else
            "partition selection is off: no budget part is reserved for it",
            detail=f"epoch {ep.id}: {round(ep.partition_rho_spent / max(part.rho_total, 1e-300) * part.selections)} "
                   f"of {part.selections} selections made" if part.enabled else None,
            hint="repeat a value list or GROUP BY already answered in this epoch, or wait for the next epoch"
                 if part.enabled else "set [privacy] partition_fraction in config.toml")


def iter_parts(spec: EpochSpec) -> Iterator[tuple[str, float, float]]:
    """(part, fraction, units) for the four stream parts."""
    units = spec.budget.units
    for name, frac in spec.split.items():
        yield name, frac, frac * units
