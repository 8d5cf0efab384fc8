"""Engine settings: what config.toml's [privacy] and [lapras] sections map onto."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from lapras.accounting import split_budget
from lapras.allocation import Split, auto_split, warmup_length
from lapras.errors import ConfigError

EPOCH_SECONDS = {"daily": 86400.0, "hourly": 3600.0, "weekly": 7 * 86400.0, "manual": None}


@dataclass(frozen=True)
class EngineSettings:
    """All knobs of the engine (defaults are the product's defaults).

    - ``epsilon``, ``delta``: the epoch's whole budget; ``regression_fraction`` of it (both parameters,
      basic composition) goes to the regression part, the rest to the query stream.
    - ``partition_fraction`` of the budget (both parameters, basic composition) goes to DP partition
      selection, shared equally by up to ``partition_selections`` selections per epoch
      (:class:`lapras.accounting.PartitionAccountant`); 0 leaves partition selection off.
    - ``accounting``: ``gdp`` (mu^2 composes; default) or ``basic`` (epsilons and deltas add; AGM).
    - ``split``: ``auto``, a preset (equal, matrix_heavy, query_heavy, reserve_heavy) or ``custom`` with
      ``fractions`` = {mm, bad_init, reserve[, rem_bad]} (rem_bad defaults to the remainder).
    - ``allocation``: ``smooth`` or ``static``; ``warmup``: T (0 = ceil(log2(S)^2)).
    - ``stream_length``: S, the expected number of statements per epoch (the prediction's estimate wins).
    - ``rho_estimate``: expected overlap for ``auto`` when the prediction carries none.
    - ``min_fraction``: eps_min as a fraction of an even per-statement share of the stream budget
      (units / S, in eps or mu^2); the stream stops when a grant would fall below it.
    - ``free_answer_max_stderr``: a free estimate is served alone when its standard error is at most this
      (0 = relative rule: at most ``free_stderr_ratio`` times the fresh answer's standard error).
    - ``epoch``: daily | hourly | weekly | manual, or ``epoch_seconds`` directly.
    - ``joint_max_cells``: largest marginal whose strategy is also optimised as one joint block (0 = per
      attribute only); ``mm_max_cells``: largest marginal the MM release covers (bigger groups of P are
      answered online); ``mm_time_limit``: seconds the strategy optimiser may spend on all of P's marginals
      (shared out cheapest first); a marginal whose share runs out keeps the best strategy found so far
      (at worst the identity; its error is computed, not assumed); ``mm_wait``: while an epoch's release is
      being prepared, how long a statement over predicted queries waits for it before it is answered fresh.
    - ``progress``: show a progress bar while the MM strategy is prepared.
    - ``max_statement_work``: steps one statement's sensitivity may take (grid cells of its segmented
      union marginal plus box corners); larger statements are refused with 54000 before anything is
      read or charged.
    """

    epsilon: float = 1.0
    delta: float = 1e-3
    accounting: str = "gdp"
    regression_fraction: float = 0.2
    partition_fraction: float = 0.1
    partition_selections: int = 20
    split: str = "auto"
    fractions: Mapping[str, float] | None = None
    allocation: str = "smooth"
    warmup: int = 0
    stream_length: int = 200
    rho_estimate: float | None = None
    min_fraction: float = 1e-2
    free_answer_max_stderr: float = 0.0
    free_stderr_ratio: float = 1.0
    epoch: str = "daily"
    epoch_seconds: float | None = None
    joint_max_cells: int = 256
    mm_time_limit: float = 30.0
    mm_wait: float = 5.0
    mm_max_cells: int = 1 << 20
    progress: bool = False
    max_statement_work: int = 50_000_000

    def __post_init__(self) -> None:
        if self.accounting not in ("gdp", "basic"):
            raise ConfigError(f"accounting must be gdp or basic, got {self.accounting!r}")
        if self.allocation not in ("smooth", "static"):
            raise ConfigError(f"allocation must be smooth or static, got {self.allocation!r}")
        if not self.epsilon > 0 or not 0 < self.delta < 1:
            raise ConfigError("epsilon must be > 0 and delta in (0, 1)")
        if not 0 <= self.partition_fraction < 1 or self.regression_fraction + self.partition_fraction >= 1:
            raise ConfigError("regression_fraction + partition_fraction must leave the query stream some budget")
        if self.epoch not in EPOCH_SECONDS and self.epoch_seconds is None:
            raise ConfigError(f"epoch must be one of {sorted(EPOCH_SECONDS)}, got {self.epoch!r}")

    @property
    def epoch_length(self) -> float | None:
        return self.epoch_seconds if self.epoch_seconds is not None else EPOCH_SECONDS.get(self.epoch)

    @property
    def stream_budget(self) -> tuple[float, float]:
        return split_budget(self.epsilon, self.delta, self.regression_fraction, self.partition_fraction)[0]

    @property
    def regression_budget(self) -> tuple[float, float]:
        return split_budget(self.epsilon, self.delta, self.regression_fraction, self.partition_fraction)[1]

    @property
    def partition_budget(self) -> tuple[float, float]:
        return split_budget(self.epsilon, self.delta, self.regression_fraction, self.partition_fraction)[2]

    def resolve_split(self, s: int, rho: float | None, mm_query_variance: float | None, has_p: bool) -> Split:
        """The epoch's fractions: a preset, custom, or auto from the expected overlap."""
        if self.split == "auto":
            r = rho if rho is not None else (self.rho_estimate if self.rho_estimate is not None else 0.5)
            return auto_split(r if has_p else 0.0, s, mm_query_variance, self.accounting,
                              self.warmup or warmup_length(s))
        if self.split == "custom":
            f = dict(self.fractions or {})
            try:
                mm, bad_init, reserve = f["mm"], f["bad_init"], f["reserve"]
            except KeyError as exc:
                raise ConfigError(f"custom split needs fractions mm, bad_init, reserve: missing {exc}") from None
            rem = f.get("rem_bad", 1.0 - mm - bad_init - reserve)
            return Split(mm, bad_init, rem, reserve)
        try:
            return Split.preset(self.split)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
