"""Mechanisms carry their privacy maps; the engine takes any Mechanism without being edited."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pytest
from scipy.stats import chi2

from lapras import Engine, EngineSettings, MemoryLedger, Prediction
from lapras.mechanisms import Cost, Gaussian, Mechanism, mechanism_from
from tests.fixtures.engine_helpers import CATALOG, plan


@pytest.mark.parametrize("cost", [Cost(mu=0.3), Cost(eps=0.7, delta=1e-6)])
@pytest.mark.parametrize("sensitivity", [1.0, 2.5])
def test_gaussian_privacy_map_inverts_its_calibration(cost: Cost, sensitivity: float) -> None:
    mech = Gaussian.calibrate(cost, sensitivity)
    back = mech.privacy_map(sensitivity, cost)
    assert back.to_json() == pytest.approx(cost.to_json(), rel=1e-9)
    # Twice the sensitivity at the same scale costs more: the map is monotone.
    worse = mech.privacy_map(2 * sensitivity, cost)
    assert (worse.mu or worse.eps or 0) > (back.mu or back.eps or 0)


def test_stored_parameters_rebuild_the_mechanism() -> None:
    mech = Gaussian.calibrate(Cost(mu=0.5), 1.0)
    again = mechanism_from(mech.name, mech.params)
    assert isinstance(again, Gaussian) and again.sigma == mech.sigma == pytest.approx(2.0, rel=1e-4)
    with pytest.raises(ValueError, match="unknown mechanism"):
        mechanism_from("laplace-from-nowhere", {})


class Overcautious(Mechanism):
    """A toy: the Gaussian with three times the noise it needs (still within the granted cost)."""

    name = "overcautious"

    def __init__(self, sigma: float) -> None:
        self.inner = Gaussian(sigma)

    @classmethod
    def calibrate(cls, cost: Cost, sensitivity: float, dims: int = 1) -> Overcautious:
        return cls(3 * Gaussian.calibrate(cost, sensitivity, dims).sigma)

    @classmethod
    def from_params(cls, params: Mapping[str, float]) -> Overcautious:
        return cls(params["sigma"])

    @property
    def params(self) -> dict[str, float]:
        return self.inner.params

    def privacy_map(self, sensitivity: float, like: Cost, dims: int = 1) -> Cost:
        return self.inner.privacy_map(sensitivity, like, dims)

    @staticmethod
    def draw(n: int) -> np.ndarray:
        return Gaussian.draw(n)

    def release(self, exact: np.ndarray, scale: np.ndarray | float,
                unit: np.ndarray | None = None) -> np.ndarray:
        return self.inner.release(exact, scale, unit)

    def variance(self, scale: np.ndarray | float = 1.0) -> np.ndarray:
        return self.inner.variance(scale)


def test_a_toy_mechanism_plugs_into_the_engine(exact) -> None:  # type: ignore[no-untyped-def]
    """The engine calibrates, releases and records whatever Mechanism it is given; its stated errors are
    the toy's (three times the Gaussian's) and the empirical errors match them (chi-square, rate 1e-4)."""
    stat, df = 0.0, 0
    for _ in range(40):
        runs = {}
        for mech in (Gaussian, Overcautious):
            eng = Engine(CATALOG, MemoryLedger(), exact, EngineSettings(split="equal"), mechanism=mech,
                         predictions=lambda _catalog: Prediction((), 20, None))
            p = plan("SELECT b, count(*) FROM t WHERE a < 5 GROUP BY b")
            runs[mech.name] = (eng, eng.answer(p, "u"))
        eng, toy = runs["overcautious"]
        base = runs["gaussian"][1]
        assert toy.outcome == "bad" and toy.stderrs == pytest.approx(3 * base.stderrs)
        rel = [r for r in eng.ledger.releases(eng.ledger.current_epoch().id) if r.kind == "fresh"]  # type: ignore[union-attr]
        assert len(rel) == 1 and rel[0].mechanism == "overcautious"
        assert rel[0].params["sigma"] == pytest.approx(toy.stderrs[0])
        assert rel[0].cost == toy.cost
        truth = exact.answers(CATALOG.tables[0], p.queries)
        stat += float(np.sum(((toy.values - truth) / toy.stderrs) ** 2))
        df += len(truth)
    assert chi2.ppf(0.5e-4, df) < stat < chi2.ppf(1 - 0.5e-4, df)


def test_noise_scale_per_row() -> None:
    """Row i is released with noise scale[i] * sigma (a SUM beside a COUNT keeps its own scale): a two-sided
    chi-square test, false-failure rate 1e-4."""
    mech = Gaussian(2.0)
    n = 20000
    scale = np.where(np.arange(n) % 2 == 0, 1.0, 10.0)
    out = mech.release(np.zeros(n), scale)
    stat = float(np.sum(out**2 / mech.variance(scale)))
    assert chi2.ppf(0.5e-4, n) < stat < chi2.ppf(1 - 0.5e-4, n)


def test_released_values_are_lattice_points_of_a_discrete_gaussian() -> None:
    """Noise is never a floating-point Gaussian: every released value is an integer number of lattice
    steps (sigma * scale / STEPS), whatever the exact value, and its draws are integers of the right
    scale (chi-square above); the calibration keeps room for the rounding to the lattice. The spread check
    (1,000 draws, 0.8 < std < 1.2) is nine standard errors wide: false-failure rate below 1e-18."""
    from lapras.mechanisms import noise

    mech = Gaussian.calibrate(Cost(mu=0.5), 1.0, dims=4)
    assert mech.privacy_map(1.0, Cost(mu=0.5), dims=4).mu == pytest.approx(0.5, rel=1e-12)
    assert mech.sigma > 2.0  # the margin for rounding four rows: a hair above Delta / mu
    exact = np.array([0.1234567, 1e6 + 0.5, -3.0, 17.0])
    scale = np.array([1.0, 1.0, 39.0, 2.5])
    out = mech.release(exact, scale)
    steps = out / (mech.sigma * scale / noise.STEPS)
    assert np.allclose(steps, np.rint(steps), rtol=0, atol=1e-6)
    draws = noise.lattice_gaussian(1000)
    assert draws.dtype == np.int64 and 0.8 < draws.std() / noise.STEPS < 1.2


def test_simulation_noise_is_seeded_in_its_block_and_thread_only() -> None:
    """Inside ``noise.simulation(seed)`` draws are reproducible integers of the discrete Gaussian's scale;
    outside the block, and in another thread started inside it, they come from the CSPRNG again. The scale is
    a two-sided chi-square test (false-failure rate 1e-4); two CSPRNG draws of 50 equal to the seeded ones
    by chance have probability far below 1e-100."""
    import threading

    from lapras.mechanisms import noise

    with noise.simulation([7, 1]):
        a = noise.lattice_gaussian(20_000)
        other: list[np.ndarray] = []
        t = threading.Thread(target=lambda: other.append(noise.lattice_gaussian(50)))
        t.start()
        t.join()
    with noise.simulation([7, 1]):
        b = noise.lattice_gaussian(20_000)
    assert a.dtype == np.int64 and np.array_equal(a, b)
    n = len(a)
    stat = float(np.sum((a / noise.STEPS) ** 2))
    assert chi2.ppf(0.5e-4, n) < stat < chi2.ppf(1 - 0.5e-4, n)
    with noise.simulation([7, 1]):
        seeded = noise.lattice_gaussian(50)
    assert not np.array_equal(other[0], seeded)
    assert not np.array_equal(noise.lattice_gaussian(50), seeded)
