"""Calibrations at degenerate budgets (epsilon from 1e-12 to 1e300, delta from 1e-300 to 1 - 1e-6): every
one is a sound calibration or a 53400 refusal, never a bare Python error (ValueError, OverflowError,
MemoryError). Deterministic: false-failure rate 0."""

from __future__ import annotations

import math
from types import SimpleNamespace

import mpmath  # the 100-digit reference for the calibrations' true delta
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lapras.accounting import DELTA_FLOOR, Budget, PartitionAccountant
from lapras.calibration import EPS_MAX, gdp_mu, zcdp_eps, zcdp_rho
from lapras.errors import BudgetExhausted
from lapras.ledger.base import check_partition
from lapras.mechanisms import Cost
from lapras.mechanisms.threshold import GaussianThreshold, discrete_gaussian_tail

EPSILONS = [1e-12, 1e-3, 1.0, 50.0, 700.0, 800.0, 1e5, 1e300]
DELTAS = [1e-300, 1e-12, 1e-6, 0.5, 0.999999]


@pytest.mark.parametrize("eps", EPSILONS)
@pytest.mark.parametrize("delta", DELTAS)
@pytest.mark.parametrize("selections", [1, 1000])
def test_partition_part_calibrates_or_refuses_with_53400(eps: float, delta: float, selections: int) -> None:
    part = PartitionAccountant(eps, delta, selections)
    if not part.enabled:
        # Only a delta share below DELTA_FLOOR disables a configured part, and it is refused clearly.
        assert part.reserved and 0.5 * delta / selections < DELTA_FLOOR
        ep = SimpleNamespace(id=1, spec=SimpleNamespace(partition=part), partition_rho_spent=0.0,
                             partition_delta_spent=0.0)
        with pytest.raises(BudgetExhausted, match="too small to calibrate") as err:
            check_partition(ep, Cost(rho=1.0, delta=0.5))  # type: ignore[arg-type]
        assert err.value.sqlstate == "53400"
        return
    each = part.cost_per_selection()
    assert each.rho is not None and each.rho > 0 and each.delta is not None and each.delta >= DELTA_FLOOR * 0.999
    assert 0 < part.conversion_epsilon <= eps
    for m in (1, 50):
        mech = GaussianThreshold.calibrate(each, m)
        got = mech.privacy_map()
        assert got.rho is not None and got.rho <= each.rho * (1 + 1e-9) and got.delta is not None
        assert 0 < got.delta <= each.delta
    # The whole part spent reads as at most its (epsilon, delta), and every reading is a number.
    spent_eps, spent_delta = part.eps_delta(part.rho_total, part.events_total)
    assert spent_eps <= eps * (1 + 1e-6) and spent_delta == delta
    view_eps, view_delta = each.eps_delta_view()
    assert view_eps >= 0 and 0 < view_delta < 1


@pytest.mark.parametrize("eps", EPSILONS)
@pytest.mark.parametrize("delta", DELTAS)
@pytest.mark.parametrize("mode", ["gdp", "basic"])
def test_query_stream_calibrates_at_any_budget(eps: float, delta: float, mode: str) -> None:
    b = Budget(mode, eps, delta)
    assert b.units > 0 and math.isfinite(b.units)
    got_eps, got_delta = b.eps_delta(b.units)
    assert math.isfinite(got_eps) and got_delta <= delta * (1 + 1e-9)
    if 1e-6 <= eps and delta <= 0.5:  # elsewhere the reading may round up (an upper bound, flat curve)
        # gdp calibrates an epsilon above EPS_MAX as EPS_MAX (sound); basic spends epsilon itself
        assert got_eps == pytest.approx(min(eps, EPS_MAX) if mode == "gdp" else eps, rel=1e-6)
    mu = gdp_mu(eps, delta)
    assert 0 < mu < math.inf and 0 < zcdp_rho(eps, delta) < math.inf
    if mode == "gdp" and 0 < got_eps:
        # The true curve at the reading is within delta (80-digit arithmetic; double precision was 1e254
        # times off at eps = 1e-12, delta = 1e-300).
        e, m = mpmath.mpf(got_eps), mpmath.mpf(mu)
        with mpmath.workdps(100):
            true = mpmath.ncdf(-e / m + m / 2) - mpmath.exp(e) * mpmath.ncdf(-e / m - m / 2)
        assert true <= delta * (1 + 1e-6), (float(true), delta)
    # A capped calibration is still sound: rho-zCDP at the returned rho is (eps, delta)-DP.
    assert zcdp_eps(zcdp_rho(eps, delta), delta) <= eps * (1 + 1e-9)


@pytest.mark.parametrize("sigma", [2000.5, 2500.0, 10_000.0])
def test_the_integral_tail_bound_holds_above_the_summed_tail(sigma: float) -> None:
    """Above _EXACT_SIGMA the tail is an integral bound: checked here against the exact sum."""
    reach = math.ceil(40 * sigma) + 1
    z = np.arange(0, reach + 1, dtype=np.float64)
    w = np.exp(-(z * z) / (2 * sigma * sigma))
    total = 2 * float(np.sum(w[1:][::-1])) + 1
    for k in (1, int(sigma), int(3 * sigma), int(8 * sigma), int(30 * sigma)):
        exact = float(np.sum(w[k:][::-1])) / total
        bound = discrete_gaussian_tail(sigma, k)
        assert exact <= bound <= exact * 1.03 + 1e-300, (k, exact, bound)


@settings(max_examples=60, deadline=None)
@given(log_rho=st.floats(-25, 12), log_delta=st.floats(-690, -0.01), m=st.integers(1, 1000))
def test_calibration_is_sound_and_least_over_random_costs(log_rho: float, log_delta: float, m: int) -> None:
    cost = Cost(rho=math.exp(log_rho), delta=math.exp(log_delta))
    mech = GaussianThreshold.calibrate(cost, m)
    got = mech.privacy_map()
    assert got.rho is not None and got.rho <= cost.rho * (1 + 1e-9)  # type: ignore[operator]
    assert got.delta is not None and got.delta <= cost.delta  # type: ignore[operator]
    below = GaussianThreshold(mech.sigma, mech.threshold - 1, m).privacy_map().delta
    assert below is not None and below > cost.delta  # type: ignore[operator]


def test_a_partition_delta_that_underflows_is_a_part_too_small_not_a_crash() -> None:
    """delta 1e-320 shared by a million selections: share * delta / selections is 0 in floating point; the
    part is unusable (refused 53400 where a selection asks), never a bare ValueError. False-failure rate 0."""
    part = PartitionAccountant(1.0, 1e-320, 10**6)
    assert not part.enabled and part.conversion_epsilon == 0.0
