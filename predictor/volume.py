"""Expected volume of the next epoch from a per-epoch series, with the calendar's weekly pattern when the
history shows one.

Used for the part of the stream length S that no schedule explains (ad hoc traffic): analysts who work on
business days only, a Monday rush. Three level models are tried, each the mean of recent epochs of the
target's class: ``daily`` (the last 7 epochs, no calendar), ``weekday`` (business days vs weekend) and
``weekly`` (the same day of the week); for epochs shorter than a day, the daily and weekly cycles in epochs.
Each model predicts every recent epoch of the history from the epochs before it (walk-forward, as the
back-test does), and the one with the smallest mean absolute error is used; a calendar model must beat the
flat one by ``margin`` so that noise alone does not pick a calendar pattern that is not there.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

ClassFn = Callable[[int], int]


@dataclass(frozen=True)
class LevelModel:
    """Mean of the last ``depth`` epochs of the target's class among the last ``span`` epochs known."""

    name: str
    classify: ClassFn
    span: int
    depth: int

    def predict(self, series: Sequence[float], target: int) -> float | None:
        """Level for epoch ``target`` from ``series[:target]``; None when the class has no history yet."""
        cls = self.classify(target)
        picked: list[float] = []
        end = min(target, len(series))  # a target several epochs ahead looks back from the last one known
        for i in range(end - 1, max(-1, end - self.span - 1), -1):
            if self.classify(i) == cls:
                picked.append(series[i])
                if len(picked) == self.depth:
                    break
        return sum(picked) / len(picked) if picked else None


@dataclass(frozen=True)
class VolumeForecast:
    value: float
    model: str
    flat: float  # what the flat model alone says (for reports: what the calendar changed)
    errors: dict[str, float]  # walk-forward mean absolute error of each model that could be evaluated


def level_models(weekday_of: ClassFn | None, epoch_hours: float = 24.0) -> list[LevelModel]:
    """The flat model first, then the calendar models that make sense for the epoch length."""
    flat = LevelModel("daily", lambda i: 0, 7, 7)
    if weekday_of is not None:
        return [flat,
                LevelModel("weekday", lambda i: 1 if weekday_of(i) >= 5 else 0, 21, 7),
                LevelModel("weekly", weekday_of, 28, 4)]
    out = [flat]
    for hours, name in ((24.0, "hour-of-day"), (168.0, "hour-of-week")):
        k = hours / epoch_hours
        if k.is_integer() and k >= 2:
            out.append(LevelModel(name, _cycle(int(k)), 3 * int(k), 3))
    return out


def _cycle(period: int) -> ClassFn:
    return lambda i: i % period


def forecast(series: Sequence[float], target: int, models: Sequence[LevelModel], window: int = 14,
             margin: float = 0.9) -> VolumeForecast:
    """Expected value of ``series[target]`` (target >= len(series)) by the model that predicted the last
    ``window`` epochs best; the flat model (``models[0]``) unless another beats it by ``margin``."""
    n = len(series)
    flat = models[0]
    if n == 0:
        return VolumeForecast(0.0, flat.name, 0.0, {})
    errors: dict[str, float] = {}
    # Evaluate on the recent epochs every model can predict, so the comparison is on equal terms.
    usable = [m for m in models if m.predict(series, target) is not None]
    days = [t for t in range(max(1, n - window), n) if all(m.predict(series, t) is not None for m in usable)]
    if days:
        for m in usable:
            errors[m.name] = sum(abs((m.predict(series, t) or 0.0) - series[t]) for t in days) / len(days)
    best = flat
    for m in usable[1:]:
        if m.name in errors and errors[m.name] < margin * errors.get(best.name, float("inf")):
            best = m
    level = flat.predict(series, target) or 0.0
    value = best.predict(series, target)
    return VolumeForecast(level if value is None else value, best.name, level,
                          {k: round(v, 3) for k, v in errors.items()})
