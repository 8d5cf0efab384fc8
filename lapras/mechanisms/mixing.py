"""The Gaussian mixing mechanism of the private regressions (LinMix, IHM, FastMix), with its privacy map.

A mixing release of a sketch ``S A`` (S a secret k x n standard Gaussian matrix, or FastMix's SRHT then
Gaussian sketch) adds ``eta * xi``, xi a k x width matrix of independent standard normals drawn here from
the release's secret stream (:func:`lapras.mechanisms.noise.sketch_randomness`): continuous by the
analysis, which is over the law of S and xi together (no discrete counterpart exists), and secret like S.
``eta^2 = max(gamma - lambda_tilde, 0)`` with lambda_tilde a private under-estimate of lambda_min(A^T A)
(a lattice Gaussian release), so the released rows are i.i.d. N(0, A^T A + eta^2 I) with lambda_min >=
gamma. Its privacy map, as OpenDP's measurements carry theirs, is the Renyi-DP bound of T such sketches
converted to (eps, delta); ``calibrate`` finds the least gamma meeting a cost.

Notation (DESIGN.md section 5). Rows are scaled so that every row of the sketched matrix has squared norm
at most ``b2`` (1 for IHM's ``X``, ``C_X^2 + C^2`` = 2 for LinMix's ``[X, y]``). A Gaussian mixing
mechanism releases ``S A + eta * xi`` with ``S`` a k x n standard Gaussian matrix: its k rows are i.i.d.
``N(0, Sigma)`` with ``Sigma = A^T A + eta^2 I``. Adding one row ``v`` gives ``Sigma' = Sigma + v v^T``. The
noise ``eta^2`` is chosen from a private lower estimate of ``lambda_min(A^T A)`` so that the larger of the
two covariances has ``lambda_min >= gamma``; then ``beta = v^T Sigma'^{-1} v <= b2 / gamma`` and the exact
Renyi divergences of the two zero-mean Gaussians (k independent rows) are

    remove:  D_a(N(0,Sigma') || N(0,Sigma)) = k / (2(a-1)) * [a log(1-beta) - log(1 - a beta)]   (a beta < 1)
    add:     D_a(N(0,Sigma) || N(0,Sigma')) = k * [-log(1-beta)/2 - log(1 + (a-1) beta) / (2(a-1))]

(derived from log det(a Sigma_1 + (1-a) Sigma_2) for a rank-one difference; both increase with beta, so
beta = b2/gamma is the worst case). The fast mixing mechanism (seed 002: SRHT to k_in rows, then a k x k_in
Gaussian sketch) has the weaker bound with ``f(c) = log(1 - c - c^2/4)`` in place of ``log(1 - c)``.
Caveat: that form is the one that reproduces DESIGN.md's fast-IHM reference; the seed's text (002) stops
before the theorem, so its exact conditions were not re-derived here. We apply it with the same floor as
the Gaussian sketch (lambda_min(X^T X) + eta^2 >= gamma); the SRHT's own contribution to the guarantee is
taken on the paper's word until the proof is checked.

RDP composes by addition over the T sketches of IHM; the total is converted to (eps, delta) with Canonne,
Kamath & Steinke (2020) Prop. 12:  eps = r(a) + log(1 - 1/a) - (log delta + log a) / (a - 1),
minimised over a. Any a gives a valid bound, so the numerical minimisation can only err on the safe side.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Literal

import numpy as np
from scipy.optimize import brentq, minimize_scalar

from lapras.errors import InfeasibleBudget
from lapras.mechanisms import noise
from lapras.mechanisms.base import Mechanism
from lapras.mechanisms.cost import Cost
from lapras.mechanisms.noise import SketchRandomness

SketchKind = Literal["gaussian", "fast"]

_GAMMA_RTOL = 1e-11
# FastMix's bound needs 1 - c - c^2/4 > 0, i.e. c < 2(sqrt 2 - 1).
_FAST_CMAX = 2.0 * (math.sqrt(2.0) - 1.0)


def _log1m(c: np.ndarray | float, kind: SketchKind) -> np.ndarray:
    """log(1 - c) for the Gaussian sketch, log(1 - c - c^2/4) for FastMix; nan outside the domain."""
    c = np.asarray(c, dtype=np.float64)
    inner = 1.0 - c - (0.25 * c * c if kind == "fast" else 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(inner > 0, np.log(np.where(inner > 0, inner, 1.0)), np.nan)


def sketch_rdp(alpha: np.ndarray | float, beta: float, k: int, kind: SketchKind = "gaussian") -> np.ndarray:
    """RDP of order ``alpha`` of one k-row mixing sketch with ``beta = b2 / gamma`` (inf where undefined).

    For the Gaussian sketch this is the max of the exact add and remove divergences; for FastMix the bound
    of seed 002 (remove form with the c^2/4 correction, which dominates its add form as well).
    """
    a = np.atleast_1d(np.asarray(alpha, dtype=np.float64))
    if not 0.0 < beta < 1.0:
        return np.full(a.shape, np.inf)
    remove = k * (a * _log1m(beta, kind) - _log1m(a * beta, kind)) / (2.0 * (a - 1.0))
    if kind == "gaussian":
        add = k * (-0.5 * math.log1p(-beta) - np.log1p((a - 1.0) * beta) / (2.0 * (a - 1.0)))
        out = np.fmax(remove, add)  # fmax: a nan 'remove' (a beta >= 1) must not hide behind 'add'
        out = np.where(np.isnan(remove), np.inf, out)
    else:
        out = np.where(np.isnan(remove), np.inf, remove)
    return out


def gaussian_rdp(alpha: np.ndarray | float, mu: float) -> np.ndarray:
    """RDP of a Gaussian mechanism with sensitivity / sigma = mu: alpha mu^2 / 2."""
    return np.asarray(alpha, dtype=np.float64) * mu * mu / 2.0


def rdp_to_dp(rdp: Callable[[np.ndarray], np.ndarray], delta: float, alpha_max: float) -> float:
    """Smallest eps (Canonne et al. Prop. 12) over orders 1 < alpha < alpha_max for an RDP curve."""
    if not 0.0 < delta < 1.0:
        raise ValueError("delta must be in (0, 1)")
    log_delta = math.log(delta)

    def eps_at(a: np.ndarray) -> np.ndarray:
        with np.errstate(invalid="ignore", divide="ignore"):
            e = rdp(a) + np.log1p(-1.0 / a) - (log_delta + np.log(a)) / (a - 1.0)
        return np.where(np.isfinite(e), e, np.inf)

    hi = min(alpha_max, 1e7)
    if hi <= 1.0 + 1e-9:
        return math.inf
    # Coarse log-spaced grid over alpha - 1, then a bounded refinement around the best grid point.
    grid = 1.0 + np.exp(np.linspace(math.log(min(1e-6, (hi - 1.0) / 2.0)), math.log(hi - 1.0), 400))
    grid = grid[grid < alpha_max]
    if grid.size == 0:
        return math.inf
    vals = eps_at(grid)
    i = int(np.argmin(vals))
    if not np.isfinite(vals[i]):
        return math.inf
    lo_a = grid[max(i - 1, 0)]
    hi_a = grid[min(i + 1, len(grid) - 1)]
    best = float(vals[i])
    if hi_a > lo_a:
        res = minimize_scalar(lambda x: float(eps_at(np.array([x]))[0]), bounds=(lo_a, hi_a),
                              method="bounded", options={"xatol": 1e-10 * lo_a})
        if np.isfinite(res.fun):
            best = min(best, float(res.fun))
    return best


def sketch_eps(gamma: float, *, k: int, T: int, delta_rdp: float, b2: float = 1.0,
               kind: SketchKind = "gaussian", delta_eig: float | None = None) -> float:
    """eps of T composed k-row mixing sketches at noise level gamma, plus the lambda_min release if any.

    ``delta_eig`` set: adds the eps charged for the private lambda_min estimate (see module docstring).
    """
    beta = b2 / gamma
    cmax = _FAST_CMAX if kind == "fast" else 1.0
    alpha_max = cmax / beta
    eps = rdp_to_dp(lambda a: T * sketch_rdp(a, beta, k, kind), delta_rdp, alpha_max)
    if delta_eig is not None:
        eps += eig_eps(gamma, k=k, delta_eig=delta_eig)
    return eps


def eig_eps(gamma: float, *, k: int, delta_eig: float) -> float:
    """eps charged for the private lambda_min estimate that goes with noise level gamma."""
    return math.sqrt(2.0 * math.log(1.25 / delta_eig)) * math.sqrt(k) / gamma


def calibrate_gamma(eps: float, *, k: int, T: int, delta_rdp: float, b2: float = 1.0,
                    kind: SketchKind = "gaussian", delta_eig: float | None = None) -> float:
    """Smallest gamma (relative tolerance 1e-11) with sketch_eps(gamma) <= eps; raise if none exists.

    Bracketed root finding on log(gamma): sketch_eps decreases in gamma, from +inf at gamma -> b2 (beta
    -> 1) to 0 as gamma -> inf. The returned gamma is checked to satisfy the budget (never infeasible).
    """
    if not (eps > 0 and math.isfinite(eps)):
        raise InfeasibleBudget(f"epsilon must be positive and finite, got {eps}")
    if not 0 < delta_rdp < 1 or (delta_eig is not None and not 0 < delta_eig < 1):
        raise InfeasibleBudget("delta must be in (0, 1)")

    def f(log_g: float) -> float:
        e = sketch_eps(math.exp(log_g), k=k, T=T, delta_rdp=delta_rdp, b2=b2, kind=kind, delta_eig=delta_eig)
        return (e if math.isfinite(e) else 1e300) - eps

    lo = math.log(b2 * 1.000001)
    hi = math.log(b2 * 10.0)
    while f(hi) > 0:
        hi += math.log(10.0)
        if hi > math.log(b2 * 1e15):
            raise InfeasibleBudget(f"no sketch noise level meets epsilon={eps:g}",
                                   hint="raise epsilon or lower the sketch size")
    if f(lo) <= 0:  # already private at the smallest admissible gamma
        return b2 * 1.000001
    root = brentq(f, lo, hi, xtol=1e-14, rtol=_GAMMA_RTOL, maxiter=500)
    g = math.exp(root)
    # brentq's answer lies within tolerance of the root on either side: step up until it is feasible.
    while f(math.log(g)) > 0:
        g *= 1.0 + 1e-10
    return g


class GaussianMixing(Mechanism):
    """T mixing releases of k rows each at noise floor ``gamma``; ``stream`` is the release's secret
    randomness (the one its sketches draw from), a fresh one when not given.

    ``release(sketch, eta)`` returns ``sketch + eta * xi``; the sensitivity of the maps is ``b2``, the
    bound on a sketched row's squared norm (1 for IHM's X, 2 for LinMix's [X, y])."""

    name = "gaussian_mixing"

    def __init__(self, gamma: float, rows: int, sketches: int = 1, kind: SketchKind = "gaussian",
                 stream: SketchRandomness | None = None) -> None:
        if not gamma > 0:
            raise ValueError("gamma must be > 0")
        self.gamma, self.rows, self.sketches, self.kind = float(gamma), int(rows), int(sketches), kind
        self._stream = stream

    @classmethod
    def calibrate(cls, cost: Cost, sensitivity: float, dims: int = 1, *, sketches: int = 1,
                  kind: SketchKind = "gaussian", floor_delta: float | None = None) -> GaussianMixing:
        """The least gamma whose ``sketches`` releases of ``dims`` rows cost at most ``cost`` (an (eps, delta)
        cost; delta is the RDP conversion's). With ``floor_delta`` the cost also covers the private
        lambda_min estimate released with that delta (:func:`eig_eps`)."""
        if cost.eps is None or cost.delta is None or cost.rho is not None:
            raise ValueError("a mixing release is calibrated to an (eps, delta) cost")
        gamma = calibrate_gamma(cost.eps, k=dims, T=sketches, delta_rdp=cost.delta, b2=sensitivity, kind=kind,
                                delta_eig=floor_delta)
        return cls(gamma, dims, sketches, kind)

    @classmethod
    def from_params(cls, params: Mapping[str, float]) -> GaussianMixing:
        return cls(float(params["gamma"]), int(params["rows"]), int(params["sketches"]),
                   "fast" if params.get("fast") else "gaussian")

    @property
    def params(self) -> dict[str, float]:
        return {"gamma": self.gamma, "rows": float(self.rows), "sketches": float(self.sketches),
                "fast": 1.0 if self.kind == "fast" else 0.0}

    def privacy_map(self, sensitivity: float, like: Cost, dims: int = 1) -> Cost:
        """(eps, delta) of the ``sketches`` releases at row bound ``sensitivity`` (b2), at like's delta; the
        instance fixes its rows per release, so ``dims`` is not read."""
        if like.delta is None or like.eps is None:
            raise ValueError("a mixing release's cost is (eps, delta): its Renyi curve is not a GDP one")
        eps = sketch_eps(self.gamma, k=self.rows, T=self.sketches, delta_rdp=like.delta, b2=sensitivity,
                         kind=self.kind)
        return Cost(eps=eps, delta=like.delta)

    def noise_floor(self, lambda_min_estimate: float) -> float:
        """eta^2 given the private under-estimate of lambda_min(A^T A): what the covariance lacks of gamma."""
        return max(self.gamma - lambda_min_estimate, 0.0)

    @staticmethod
    def draw(n: int) -> np.ndarray:
        return noise.sketch_randomness().normal(n)

    def release(self, exact: np.ndarray, scale: np.ndarray | float,
                unit: np.ndarray | None = None) -> np.ndarray:
        """``exact + scale * xi`` (scale: eta), xi from the release's stream unless given."""
        exact = np.asarray(exact, dtype=np.float64)
        if unit is None:
            if self._stream is None:
                self._stream = noise.sketch_randomness()
            unit = self._stream.normal(exact.shape)
        return exact + scale * np.asarray(unit, dtype=np.float64).reshape(exact.shape)

    def variance(self, scale: np.ndarray | float = 1.0) -> np.ndarray:
        return np.asarray(np.asarray(scale, dtype=np.float64) ** 2)
