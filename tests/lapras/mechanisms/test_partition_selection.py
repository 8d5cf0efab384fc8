"""Partition selection's threshold mechanism: calibration, privacy map, and release probabilities measured
with the real sampler against the stated bound (exact binomial confidence bounds)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from scipy.stats import beta, norm

from lapras.calibration import zcdp_eps, zcdp_rho
from lapras.mechanisms import Cost, noise
from lapras.mechanisms.threshold import GaussianThreshold

ALPHA = 1e-6  # per check: a correct mechanism fails one of these with probability below 1e-5


def _clopper_pearson(k: int, n: int, alpha: float = ALPHA) -> tuple[float, float]:
    lo = 0.0 if k == 0 else float(beta.ppf(alpha / 2, k, n - k + 1))
    hi = 1.0 if k == n else float(beta.ppf(1 - alpha / 2, k + 1, n - k))
    return lo, hi


@dataclass(frozen=True)
class _Req:
    """A partition selection's request: its key, its key-count SQL, at most one key kept."""

    key: str = "f"
    sql: str = "-- counts"
    max_keys: int = 1

    def encode(self, keys: list[tuple[object, ...]]) -> list[list[object]]:
        return [list(k) for k in keys]


def _selection_engine(source: Any) -> Any:
    """An engine over no table whose partition part (0.3 of epsilon = 1) admits 3 selections an epoch."""
    from lapras.engine import Engine
    from lapras.ledger.memory import MemoryLedger
    from lapras.settings import EngineSettings
    from parser.model.schema import Catalog

    return Engine(Catalog(()), MemoryLedger(), source, EngineSettings(
        epsilon=1.0, delta=1e-5, partition_fraction=0.3, partition_selections=3, epoch="manual"))


@pytest.mark.parametrize("m", [1, 3, 10])
def test_calibration_meets_the_cost_and_its_threshold_is_the_least(m: int) -> None:
    cost = Cost(rho=0.05, delta=1e-6)
    mech = GaussianThreshold.calibrate(cost, m)
    got = mech.privacy_map()
    assert got.rho is not None and got.delta is not None
    assert got.rho == pytest.approx(cost.rho, rel=1e-9) and got.rho <= cost.rho * (1 + 1e-9)
    assert got.delta <= cost.delta
    # One less is not enough: the threshold is the least meeting delta.
    assert GaussianThreshold(mech.sigma, mech.threshold - 1, m).privacy_map().delta > cost.delta  # type: ignore[operator]
    # delta is the union over m keys of a single unit's tail P[Z >= T - 1], the discrete Gaussian's mass
    # at T - 1 included (about the continuous tail from T - 1.5); OpenDP 0.16 reports less (opendp#2922).
    tail = norm.sf((mech.threshold - 1 - 0.5) / mech.sigma)
    assert got.delta == pytest.approx(m * tail, rel=0.15)
    assert got.delta >= noise.threshold_measurement(mech.sigma, mech.threshold).map((m, m, 1))[1]
    assert mech.single_unit_bound() == pytest.approx(got.delta / m, rel=1e-9)
    # Stored parameters rebuild the same mechanism.
    again = GaussianThreshold.from_params(mech.params)
    assert (again.sigma, again.threshold, again.max_keys) == (mech.sigma, mech.threshold, m)


def test_zcdp_conversion_inverts() -> None:
    for rho, delta in [(0.03, 1e-5), (0.5, 1e-8), (2.0, 1e-3)]:
        eps = zcdp_eps(rho, delta)
        # Never worse than Bun & Steinke's simple bound, and inverted by zcdp_rho on the safe side.
        assert eps <= rho + 2 * math.sqrt(rho * math.log(1 / delta))
        assert zcdp_rho(eps, delta) <= rho
        assert zcdp_rho(eps, delta) == pytest.approx(rho, rel=1e-8)


@pytest.mark.slow
def test_a_single_units_key_is_released_at_most_at_the_stated_bound() -> None:
    """Two exact binomial checks at ALPHA = 1e-6 each: false-failure rate below 2e-6."""
    # A cost loose enough that the bound (about 1e-2 per key) is measurable: 40,000 keys of one unit each.
    mech = GaussianThreshold.calibrate(Cost(rho=0.1, delta=1e-2), 1)
    bound = mech.single_unit_bound()
    n = 40_000
    released = int(mech.select(np.ones(n, dtype=np.int64)).sum())
    lo, hi = _clopper_pearson(released, n)
    assert lo <= bound, f"{released}/{n} released, above the stated bound {bound:.3g}"
    # The bound is tight (it is the release probability): the sampler is not suppressing more than stated.
    assert hi >= bound, f"{released}/{n} released, far below {bound:.3g}: the noise is not the calibrated one"


@pytest.mark.slow
def test_at_the_product_default_a_single_units_key_is_almost_never_released() -> None:
    """One exact binomial check at ALPHA = 1e-6: false-failure rate below 1e-6."""
    # (eps, delta) = (1, 1e-5) for one selection: 100,000 single-unit keys; the stated bound is ~3e-6.
    mech = GaussianThreshold.calibrate(Cost(rho=zcdp_rho(1.0, 0.5e-5), delta=0.5e-5), 1)
    bound = mech.single_unit_bound()
    assert bound <= 0.5e-5
    n = 100_000
    released = int(mech.select(np.ones(n, dtype=np.int64)).sum())
    lo, _ = _clopper_pearson(released, n)
    assert lo <= bound, f"{released}/{n} released against a bound of {bound:.3g}"


@pytest.mark.slow
def test_keys_held_by_many_units_are_released() -> None:
    """False-failure rate below 1e-5: 5,000 keys six sigma above the threshold all released (each misses
    with probability 1e-9, so 5e-6 in all), and two exact binomial checks at ALPHA = 1e-6."""
    mech = GaussianThreshold.calibrate(Cost(rho=zcdp_rho(1.0, 0.5e-5), delta=0.5e-5), 4)
    many = mech.threshold + int(math.ceil(6 * mech.sigma))
    assert mech.select(np.full(5_000, many)).all()
    # At the threshold itself about half are released (the noise is centred, its scale the stated one).
    n = 5_000
    at = int(mech.select(np.full(n, mech.threshold)).sum())
    lo, hi = _clopper_pearson(at, n)
    p = float(mech.release_probability(mech.threshold))
    assert lo <= p <= hi, f"{at}/{n} released at the threshold, expected about {p:.3f}"
    # Below it by two standard deviations: few, as stated.
    below = mech.threshold - int(round(2 * mech.sigma))
    k = int(mech.select(np.full(n, below)).sum())
    lo, hi = _clopper_pearson(k, n)
    p = float(mech.release_probability(below))
    assert lo <= p <= hi, f"{k}/{n} released two sigma below, expected about {p:.3f}"


def test_partition_part_admits_its_selections_then_refuses_and_replays_free() -> None:
    from lapras.accounting import PartitionAccountant
    from lapras.engine import Engine
    from lapras.errors import BudgetExhausted
    from lapras.exact import HistogramExactSource
    from parser.model.schema import Catalog

    part = PartitionAccountant(0.3, 3e-6, 3)
    each = part.cost_per_selection()
    assert part.admits(2 * each.rho, 2 * each.delta, each)  # type: ignore[operator]
    assert not part.admits(3 * each.rho, 3 * each.delta, each)  # type: ignore[operator]
    # Spending the whole part is exactly its (epsilon, delta).
    eps, delta = part.eps_delta(3 * each.rho, 3 * each.delta)  # type: ignore[operator]
    assert eps == pytest.approx(0.3, rel=1e-6) and eps <= 0.3 and delta == 3e-6

    class Counts(HistogramExactSource):
        reads = 0

        def key_counts(self, sql: str) -> tuple[list[tuple[object, ...]], np.ndarray]:
            Counts.reads += 1
            return [("big",), ("lone",)], np.array([10_000, 1])

    engine = _selection_engine(Counts({}))
    for i in range(3):
        rec = engine.select_partition(_Req(f"f{i}"))
        assert rec.keys == [["big"]] and rec.cost.rho == pytest.approx(each.rho)
    with pytest.raises(BudgetExhausted):
        engine.select_partition(_Req("f3"))
    assert Counts.reads == 3  # refused before anything was read
    ep = engine.ledger.current_epoch()
    assert ep is not None and ep.partition_rho_spent == pytest.approx(3 * each.rho)
    # A stored selection is served again, from a fresh engine on the same ledger too: no read, no charge.
    again = Engine(Catalog(()), engine.ledger, Counts({}), engine.settings).select_partition(_Req("f1"))
    assert again.keys == [["big"]] and Counts.reads == 3
    assert engine.ledger.current_epoch().partition_rho_spent == pytest.approx(3 * each.rho)  # type: ignore[union-attr]


def test_a_selection_whose_client_stopped_waiting_after_the_read_is_charged_and_stored() -> None:
    """Its ReadGuard cancelled while the key counts came back: the selection reads unguarded and commits as
    always (charged and stored, lapras.read_guard), so asked again it is replayed free. False-failure rate 0."""
    import contextvars

    from lapras.exact import HistogramExactSource
    from lapras.read_guard import READ_GUARD, ReadGuard

    guard = ReadGuard(None)

    class Counts(HistogramExactSource):
        def key_counts(self, sql: str) -> tuple[list[tuple[object, ...]], np.ndarray]:
            guard.cancel()  # the client's timeout fires while the counts come back
            return [("big",)], np.array([10_000])

    engine = _selection_engine(Counts({}))
    ctx = contextvars.copy_context()
    ctx.run(READ_GUARD.set, guard)
    assert ctx.run(engine.select_partition, _Req()).keys == [["big"]]
    ep = engine.ledger.current_epoch()
    assert ep is not None and ep.partition_rho_spent > 0 and engine.ledger.partition(ep.id, "f") is not None
    spent = ep.partition_rho_spent
    assert engine.select_partition(_Req()).keys == [["big"]]  # replayed: no second charge
    assert engine.ledger.current_epoch().partition_rho_spent == spent  # type: ignore[union-attr]
