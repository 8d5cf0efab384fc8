"""How often a thing recurs: Bayesian model averaging over schedules for a 0/1 presence sequence.

A "thing" is a concrete query (canonical key) or a literal progression (see :mod:`predictor.progressions`);
its history is which epochs it occurred in. Each schedule model splits epochs into classes and gives every
class its own Beta-Bernoulli rate:

- ``daily``: one class (occurs on a share of epochs, regardless of which);
- ``weekday``: business days vs weekend (calendar epochs of 24 hours only);
- ``weekly``: the day of the week;
- ``period-k``: the epoch index modulo k (every other day, every third day; for epochs shorter than a
  day, the daily and weekly cycles).

Only epochs after the first occurrence count (the first one is how we learnt the thing exists). The
models are weighed by prior x marginal likelihood (exact for Beta-Bernoulli), so a richer schedule wins
only when the history supports it; the prediction for the target epoch is the posterior-weighted rate of
the target's class. The Beta prior itself is fitted to the whole population of keys (empirical Bayes): in
real logs it is U-shaped (most things either recur nearly always or never again), which is what lets a
one-off stay near zero and a fresh daily panel reach a high score after two or three days.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.optimize import minimize
from scipy.special import betaln

from predictor.volume import ClassFn


@dataclass(frozen=True)
class Schedule:
    name: str
    prior: float
    classify: ClassFn


@dataclass(frozen=True)
class BetaPrior:
    """Beta(a, b): the prior, over a log's keys, of the chance that a key recurs in an epoch (``fit_prior``)."""

    a: float
    b: float

    @property
    def mean(self) -> float:
        return self.a / (self.a + self.b)


DEFAULT_PRIOR = BetaPrior(0.5, 1.0)


def _modulo(k: int) -> ClassFn:
    return lambda i: i % k


def make_schedules(
    n_epochs: int, weekday_of: Callable[[int], int] | None, epoch_hours: float = 24.0
) -> list[Schedule]:
    """Schedules worth trying on ``n_epochs`` of history; ``weekday_of(i)`` is 0=Monday..6 for day epochs.

    The set is deliberately small: every extra schedule is one more way for a chance repeat of an ad hoc
    query to look periodic. Day epochs: daily, business days, weekly, every 2nd and every 3rd day. Shorter
    epochs: the daily and weekly cycles in epochs, when the history holds each at least twice.
    """
    out = [Schedule("daily", 0.8, lambda i: 0)]
    rich: list[Schedule] = []
    if weekday_of is not None:
        rich.append(Schedule("weekday", 0.0, lambda i: 1 if weekday_of(i) >= 5 else 0))
        rich.append(Schedule("weekly", 0.0, weekday_of))
        periods = [2, 3]
    else:
        periods = [round(h / epoch_hours) for h in (24.0, 168.0) if (h / epoch_hours).is_integer()]
    for k in periods:
        if 2 <= k and 2 * k <= n_epochs:  # a period must be seen at least twice to be learnt at all
            rich.append(Schedule(f"period-{k}", 0.0, _modulo(k)))
    if rich:
        share = 0.2 / len(rich)
        out.extend(Schedule(s.name, share, s.classify) for s in rich)
    else:
        out[0] = Schedule("daily", 1.0, out[0].classify)
    return out


def fit_prior(
    histories: Sequence[tuple[int, int]], min_concentration: float = 0.1, max_concentration: float = 2.0
) -> BetaPrior:
    """Maximum marginal likelihood Beta prior from (hits, trials) pairs (beta-binomial).

    Parametrised by mean and concentration (a + b): the population of a log is typically very U-shaped,
    and bounding a and b separately would drag the mean towards 1/2; only the concentration is bounded.
    The upper bound keeps the prior weakly informative (worth at most two epochs of evidence): a log with
    a single recurring query among hundreds of one-offs must not need weeks to believe in it.
    """
    data = np.array([(h, n) for h, n in histories if n > 0], dtype=float)
    if len(data) < 8:
        return DEFAULT_PRIOR
    h, n = data[:, 0], data[:, 1]

    def ab(x: np.ndarray) -> tuple[float, float]:
        mean = 1.0 / (1.0 + math.exp(-float(np.clip(x[0], -12.0, 12.0))))
        conc = min(min_concentration + math.exp(float(np.clip(x[1], -12.0, 6.0))), max_concentration)
        return mean * conc, (1.0 - mean) * conc

    def nll(x: np.ndarray) -> float:
        a, b = ab(x)
        value = -float(np.sum(betaln(a + h, b + n - h) - betaln(a, b)))
        return value if math.isfinite(value) else 1e300

    mean0 = min(max(float(h.sum() / n.sum()), 0.01), 0.99)
    res = minimize(
        nll,
        x0=np.array([math.log(mean0 / (1 - mean0)), 0.0]),
        method="Nelder-Mead",
        options={"xatol": 1e-4, "fatol": 1e-6},
    )
    a, b = ab(res.x)
    return BetaPrior(a, b)


@dataclass(frozen=True)
class Recurrence:
    """Predicted probability for the target epoch and the schedule that explains the history best."""

    p: float
    schedule: str
    hits: int
    trials: int


def class_tables(schedules: Sequence[Schedule], upto: int) -> list[tuple[Schedule, list[int]]]:
    """Each schedule's class of epochs 0..upto (computed once per model, not once per key)."""
    return [(s, [s.classify(i) for i in range(upto + 1)]) for s in schedules if s.prior > 0]


def score(
    present: Sequence[bool],
    first: int,
    target: int,
    tables: Sequence[tuple[Schedule, Sequence[int]]],
    prior: BetaPrior,
) -> Recurrence:
    """Posterior predictive probability that the thing occurs in epoch ``target``.

    ``present[i]`` for i < len(present) is the history; ``first`` the first epoch it occurred in;
    ``tables`` from :func:`class_tables` with ``upto >= target``.
    """
    n_hist = len(present)
    hits_total = sum(1 for i in range(first + 1, n_hist) if present[i])
    log_w: list[float] = []
    preds: list[float] = []
    base = betaln(prior.a, prior.b)
    daily_p = (prior.a + hits_total) / (prior.a + prior.b + n_hist - first - 1)
    for s, classes in tables:
        # The evidence for a schedule counts the first occurrence too: a true weekly query occurred in the
        # same weekday class every time, a chance repeat usually did not. The prediction does not (the
        # first occurrence is how we learnt the query exists, so it says nothing about its rate).
        evidence: dict[int, list[int]] = {}
        cls = classes[target]
        h_t = n_t = 0
        seen_in_class = 0
        for i in range(first, n_hist):
            c = classes[i]
            e = evidence.get(c)
            if e is None:
                e = evidence[c] = [0, 0]
            hit = present[i]
            e[0] += hit
            e[1] += 1
            if c == cls:
                seen_in_class += hit
                if i > first:
                    h_t += hit
                    n_t += 1
        lml = sum(betaln(prior.a + h, prior.b + n - h) - base for h, n in evidence.values())
        log_w.append(math.log(s.prior) + lml)
        rate = (prior.a + h_t) / (prior.a + prior.b + n_t)
        if len(evidence) > 1 and seen_in_class < 3:
            # Raising a class above the overall rate needs three occurrences in that class: two could be
            # chance (an ad hoc query that came back a week later), and with many ad hoc queries some will.
            # Lowering it (no business-day panel on Saturdays) needs no such proof.
            rate = min(rate, daily_p)
        preds.append(rate)
    top = max(log_w)
    weights = [math.exp(v - top) for v in log_w]
    total = sum(weights)
    p = sum(w * q for w, q in zip(weights, preds, strict=True)) / total
    best = tables[max(range(len(weights)), key=weights.__getitem__)][0].name
    return Recurrence(p, best, hits_total, n_hist - first - 1)
