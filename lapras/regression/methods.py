"""DP ordinary least squares: AdaSSP, LinMix, IHM (dense Gaussian Hessian sketches) and fast IHM (FastMix).

Every method takes the data either as arrays ``(X, y)`` or as a :data:`RowSource` (a callable returning a
fresh iterator of ``(X_block, y_block)`` per pass, e.g. one server-side cursor per call), the public bounds
``c_x`` on row norms and ``c_y`` on |y|, the budget ``(eps, delta)`` and a numpy Generator. Rows are
scaled by the public bounds and clipped (never normalised by the data), so the mechanisms see rows of norm
<= 1 and |y| <= 1; coefficients are scaled back. Each returns ``(theta, Cost)``; the cost is the whole
(eps, delta) the method was calibrated to, under basic composition within the regression budget.

Passes over the data (memory): AdaSSP 1 (O(d^2)); LinMix 1 (O(k d)); IHM T + 1 (O(T k d)); fast IHM keeps
the padded rows (O(n d)) because the SRHT mixes all of them.

Mechanisms, all in :mod:`lapras.mechanisms` with their privacy maps, none seedable outside a simulation:

- Gaussian-mechanism steps (AdaSSP's X^T X, X^T y and lambda_min; the private lambda_min of the mixing
  methods; IHM's noisy gradients) are releases of a statistic with a known L2 sensitivity through the
  lattice Gaussian (:func:`lapras.mechanisms.gaussian.gaussian_release`: exact discrete Gaussian from the
  CSPRNG, values on a lattice), its sigma raised by the rounding margin so that each keeps exactly the
  privacy its calibration in :mod:`lapras.regression.rdp` counts on (Mironov-style low-bit attacks have
  nothing to read).
- The noisy sketches ``S A + eta xi`` (Sheffet; Lev et al.; seeds 002-003) are releases of the Gaussian
  mixing mechanism (:class:`lapras.mechanisms.mixing.GaussianMixing`): its privacy is the Renyi divergence
  of two Gaussians ``N(0, A^T A + eta^2 I)`` over the law of the Gaussian sketch S and of xi, so S and xi
  must stay unknown to the analyst, and they are continuous by the analysis (no discrete counterpart
  exists). FastMix's SRHT (Rademacher signs, sampled rows) is kept secret too: its guarantee is stated over
  the SRHT's randomness, not for a known one. S and the SRHT are drawn in :mod:`lapras.regression.sketches`
  (why there: its docstring), xi by the mechanism, all from one secret stream of
  :func:`lapras.mechanisms.noise.sketch_randomness` (AES-128 in counter mode keyed from the OS CSPRNG,
  numpy's vectorised samplers: 15 million entries for a 300-row sketch of Adult take seconds, not the
  hours OpenDP's per-draw exact sampler would).
- The released coefficients are floating-point functions of those continuous sketches: they are rounded
  to a public lattice (2^-32 of the coefficients' scale c_y / c_x, far below the noise), so their low-order
  bits carry nothing beyond the rounded value.

Each method's budget split is :mod:`lapras.regression.rdp` (RDP of the T sketches plus the Gaussian steps,
converted to (eps, delta)); each fit returns that whole cost, which the caller charges to the ledger with
the release (``Ledger.commit_regression``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.special import ndtri

from lapras.calibration import agm_sigma
from lapras.mechanisms import Cost
from lapras.mechanisms.gaussian import gaussian_release
from lapras.mechanisms.mixing import GaussianMixing
from lapras.mechanisms.noise import SketchRandomness, sketch_randomness
from lapras.regression import rdp
from lapras.regression.clip import clip_rows, clip_values
from lapras.regression.sketches import GaussianSketch, dense_gaussian_sketch, next_pow2, srht

Block = tuple[np.ndarray, np.ndarray]
RowSource = Callable[[], Iterable[Block]]
Data = tuple[np.ndarray, np.ndarray] | RowSource

METHODS = ("adassp", "linmix", "ihm", "fast_ihm")


@dataclass
class FitInfo:
    """Diagnostics that are functions of the released noisy quantities only (safe to log)."""

    method: str
    n_passes: int = 0
    params: dict[str, Any] = field(default_factory=dict)


def array_source(X: np.ndarray, y: np.ndarray, block: int = 65536) -> RowSource:
    """Row blocks of in-memory arrays, as a re-iterable source."""

    def gen() -> Iterator[Block]:
        for i in range(0, X.shape[0], block):
            yield X[i:i + block], y[i:i + block]

    return gen


def _source(data: Data) -> RowSource:
    if callable(data):
        return data
    X, y = data
    return array_source(np.asarray(X, dtype=np.float64), np.asarray(y, dtype=np.float64))


def _scaled(data: Data, c_x: float, c_y: float) -> RowSource:
    """Scale by the public bounds and clip, so rows have norm <= 1 and |y| <= 1.

    In-memory arrays are scaled once; a streamed source is scaled block by block on every pass.
    """
    if not callable(data):
        X = clip_rows(np.asarray(data[0], dtype=np.float64) / c_x, 1.0)
        y = clip_values(np.asarray(data[1], dtype=np.float64).reshape(-1) / c_y, 1.0)
        return array_source(X, y)
    src = data

    def gen() -> Iterator[Block]:
        for Xb, yb in src():
            Xb = np.asarray(Xb, dtype=np.float64)
            yb = np.asarray(yb, dtype=np.float64).reshape(-1)
            yield clip_rows(Xb / c_x, 1.0), clip_values(yb / c_y, 1.0)

    return gen


def _check(c_x: float, c_y: float, eps: float, delta: float) -> None:
    if not (c_x > 0 and c_y > 0 and math.isfinite(c_x) and math.isfinite(c_y)):
        raise ValueError("bounds must be positive and finite")
    if not (eps > 0 and math.isfinite(eps)) or not 0 < delta < 1:
        raise rdp.InfeasibleBudget(f"need epsilon > 0 and 0 < delta < 1, got ({eps}, {delta})")


# Released coefficients are rounded to this fraction of their public scale c_y / c_x.
THETA_LATTICE = 2.0**-32


def _sym_release(M: np.ndarray, sigma: float) -> np.ndarray:
    """Symmetric M released with noise on and above the diagonal (L2 sensitivity of the upper triangle of
    x x^T is <= ||x||^2 <= 1), mirrored below."""
    d = M.shape[0]
    iu = np.triu_indices(d)
    U = np.zeros_like(M)
    U[iu] = gaussian_release(M[iu], sigma, 1.0)
    return U + np.triu(U, 1).T


def _released_theta(theta: np.ndarray, c_x: float, c_y: float) -> np.ndarray:
    """Coefficients in the original units, on the public lattice (see the module docstring)."""
    scale = c_y / c_x
    step = scale * THETA_LATTICE
    return np.rint(theta * scale / step) * step


def _solve(A: np.ndarray, b: np.ndarray) -> np.ndarray:
    try:
        return np.linalg.solve(A, b)
    except np.linalg.LinAlgError:
        return np.linalg.lstsq(A, b, rcond=None)[0]


def _lambda_min_private(G: np.ndarray, sigma: float, z_shift: float, sensitivity: float = 1.0) -> float:
    """Noisy lambda_min(G) shifted down by z_shift sigma: below the truth with probability 1 - rho.
    ``sensitivity``: the largest squared norm of a row of the Gram matrix's rows."""
    lam = float(np.linalg.eigvalsh(G)[0])
    return float(gaussian_release(np.array([lam]), sigma, sensitivity)[0]) - z_shift * sigma


def _gram_pass(src: RowSource, sketches: list[GaussianSketch], with_y: bool) -> tuple[np.ndarray, int]:
    """One pass: Gram matrix of X (or [X, y]) and the given Gaussian sketches updated with the same rows."""
    G: np.ndarray | None = None
    n = 0
    for Xb, yb in src():
        A = np.column_stack([Xb, yb]) if with_y else Xb
        G = A.T @ A if G is None else G + A.T @ A
        for s in sketches:
            s.update(A)
        n += A.shape[0]
    if G is None:
        raise ValueError("no rows")
    return G, n


# ------------------------------------------------------------------------------------------------ AdaSSP


def adassp(data: Data, c_x: float, c_y: float, eps: float, delta: float,
           rho: float = 0.05) -> tuple[np.ndarray, Cost]:
    """AdaSSP (Wang 2018): noisy X^T X and X^T y with an adaptive ridge from a noisy lambda_min.

    Budget split in three equal parts; each Gaussian release calibrated with the exact AGM (sensitivity 1
    after scaling) instead of the paper's classical-Gaussian formula. ``rho`` is a utility (not privacy)
    failure probability for the ridge choice.
    """
    _check(c_x, c_y, eps, delta)
    src = _scaled(data, c_x, c_y)
    XtX: np.ndarray | None = None
    Xty: np.ndarray | None = None
    for Xb, yb in src():
        XtX = Xb.T @ Xb if XtX is None else XtX + Xb.T @ Xb
        Xty = Xb.T @ yb if Xty is None else Xty + Xb.T @ yb
    if XtX is None or Xty is None:
        raise ValueError("no rows")
    d = XtX.shape[0]
    sigma = agm_sigma(eps / 3.0, delta / 3.0, 1.0)
    lam_min = max(_lambda_min_private(XtX, sigma, float(ndtri(1.0 - rho))), 0.0)
    ridge = max(0.0, sigma * math.sqrt(d * math.log(2.0 * d * d / rho)) - lam_min)
    XtX_n = _sym_release(XtX, sigma)
    Xty_n = gaussian_release(Xty, sigma, 1.0)
    theta = _solve(XtX_n + ridge * np.eye(d), Xty_n)
    return _released_theta(theta, c_x, c_y), Cost(eps=eps, delta=delta)


def released_sketches(src: RowSource, k: int, T: int, cal: rdp.Calibration, rnd: SketchRandomness,
                      with_y: bool) -> tuple[list[np.ndarray], float]:
    """The T noisy Gaussian sketches ``S_t A + eta xi_t`` of A = X (or [X, y]) and eta^2, in one pass.

    eta^2 = max(gamma - lambda_tilde, 0) with lambda_tilde a private under-estimate of lambda_min(A^T A),
    so that the rows released are i.i.d. N(0, A^T A + eta^2 I) with lambda_min >= gamma (w.p. 1 - rho).
    """
    first = next(iter(src()))
    width = first[0].shape[1] + (1 if with_y else 0)
    sketches = [GaussianSketch(k, width, rnd) for _ in range(T)]
    G, _ = _gram_pass(src, sketches, with_y=with_y)
    lam = _lambda_min_private(G, cal.sigma_eig, cal.z_rho, cal.eig_sensitivity)
    mix = GaussianMixing(cal.gamma, k, T, stream=rnd)
    eta2 = mix.noise_floor(lam)
    eta = math.sqrt(eta2)
    return [mix.release(s.result(), eta) for s in sketches], eta2


# ------------------------------------------------------------------------------------------------ LinMix


def linmix(data: Data, c_x: float, c_y: float, eps: float, delta: float,
           k: int | None = None) -> tuple[np.ndarray, Cost]:
    """LinMix (Lev et al. 2025): least squares on a noisy Gaussian sketch of [X, y]; one pass, O(k d)."""
    _check(c_x, c_y, eps, delta)
    src = _scaled(data, c_x, c_y)
    first = next(iter(src()))
    d = first[0].shape[1]
    k = k or max(24 * d, 128)
    cal = rdp.calibrate_linmix(eps, delta, k)
    A = released_sketches(src, k, 1, cal, sketch_randomness(), with_y=True)[0][0]
    theta = np.linalg.lstsq(A[:, :d], A[:, d], rcond=None)[0]
    return _released_theta(theta, c_x, c_y), Cost(eps=eps, delta=delta)


# --------------------------------------------------------------------------------------------------- IHM


def _ihm_steps(H_list: list[np.ndarray], grad: Callable[[np.ndarray], np.ndarray], eta2: float,
               sigma_grad: float, d: int, ridge: bool = False) -> np.ndarray:
    """Newton-type iterations theta += H^{-1} (X^T clip(y - X theta) [- eta^2 theta] + noise).

    All T noisy sketches are released before the first gradient, so their average (k T rows, a better
    estimate of X^T X + eta^2 I than any single one) preconditions every step: post-processing, same
    privacy. Without the ``- eta^2 theta`` term (``ridge=False``, default) the fixed point is OLS and the
    eta^2 I in H only slows convergence; with it (seed 003 literally) the iterations converge to the ridge
    solution with penalty eta^2, a bias that dominates at small epsilon.
    """
    H = np.mean(np.stack(H_list), axis=0)
    theta = np.zeros(d)
    for _ in H_list:
        g = gaussian_release(grad(theta), sigma_grad, 1.0)  # clipped: sensitivity clip <= 1
        if ridge:
            g -= eta2 * theta
        theta = theta + _solve(H, g)
    return theta


def _clipped_grad(src: RowSource, clip: float) -> Callable[[np.ndarray], np.ndarray]:
    def grad(theta: np.ndarray) -> np.ndarray:
        g = np.zeros_like(theta)
        for Xb, yb in src():
            g += Xb.T @ np.clip(yb - Xb @ theta, -clip, clip)
        return g

    return grad


def ihm(data: Data, c_x: float, c_y: float, eps: float, delta: float,
        k: int | None = None, T: int = 5, clip: float = 1.0, ridge: bool = False) -> tuple[np.ndarray, Cost]:
    """Iterative Hessian Mixing with dense Gaussian sketches (T + 1 passes, O(T k d) memory).

    ``clip``: residual clipping level in units of c_y (gradient sensitivity = clip after scaling; the
    calibration assumes clip <= 1, larger values are refused). ``ridge``: see :func:`_ihm_steps`.
    """
    _check(c_x, c_y, eps, delta)
    if not 0 < clip <= 1.0:
        raise ValueError("clip must be in (0, 1] (units of the |y| bound)")
    src = _scaled(data, c_x, c_y)
    d = next(iter(src()))[0].shape[1]
    k = k or max(8 * d, 64)
    cal = rdp.calibrate_ihm(eps, delta, k, T)
    released, eta2 = released_sketches(src, k, T, cal, sketch_randomness(), with_y=False)
    H_list = [Xt.T @ Xt / k for Xt in released]
    theta = _ihm_steps(H_list, _clipped_grad(src, clip), eta2, cal.sigma_grad, d, ridge)
    return _released_theta(theta, c_x, c_y), Cost(eps=eps, delta=delta)


def fast_ihm(data: Data, c_x: float, c_y: float, eps: float, delta: float,
             k: int | None = None, T: int = 5, k_in: int | None = None,
             clip: float = 1.0, ridge: bool = False) -> tuple[np.ndarray, Cost]:
    """IHM with FastMix sketches: per iteration an SRHT down to k_in rows, then a k x k_in Gaussian sketch.

    The rows are held (zero-padded to a power of two, transposed) because the SRHT mixes all of them.
    """
    _check(c_x, c_y, eps, delta)
    if not 0 < clip <= 1.0:
        raise ValueError("clip must be in (0, 1] (units of the |y| bound)")
    src = _scaled(data, c_x, c_y)
    # Rows kept transposed, (d, n_pad), zero-padded: the WHT then runs along contiguous memory.
    blocks = list(src())
    n = sum(b[0].shape[0] for b in blocks)
    if n == 0:
        raise ValueError("no rows")
    d = blocks[0][0].shape[1]
    At = np.zeros((d, next_pow2(n)))
    y = np.empty(n)
    i = 0
    for Xb, yb in blocks:
        At[:, i:i + len(yb)] = Xb.T
        y[i:i + len(yb)] = yb
        i += len(yb)
    del blocks
    Xt = At[:, :n]
    k = k or max(6 * d, 48)
    cal = rdp.calibrate_fast_ihm(eps, delta, k, T)
    k_in = min(At.shape[1], k_in or 32 * k)
    lam = _lambda_min_private(Xt @ Xt.T, cal.sigma_eig, cal.z_rho, cal.eig_sensitivity)
    work = np.empty_like(At)
    rnd = sketch_randomness()
    mix = GaussianMixing(cal.gamma, k, T, kind="fast", stream=rnd)
    eta2 = mix.noise_floor(lam)
    H_list = []
    for _ in range(T):
        Xs = srht(At, k_in, rnd, work=work)
        Xm = mix.release(dense_gaussian_sketch(Xs, k, rnd), math.sqrt(eta2))
        H_list.append(Xm.T @ Xm / k)

    def grad(theta: np.ndarray) -> np.ndarray:
        return Xt @ np.clip(y - theta @ Xt, -clip, clip)

    theta = _ihm_steps(H_list, grad, eta2, cal.sigma_grad, d, ridge)
    return _released_theta(theta, c_x, c_y), Cost(eps=eps, delta=delta)


def fit(method: str, data: Data, c_x: float, c_y: float, eps: float, delta: float,
        **params: Any) -> tuple[np.ndarray, Cost]:
    """Dispatch by method name (one of METHODS)."""
    fns: dict[str, Callable[..., tuple[np.ndarray, Cost]]] = {
        "adassp": adassp, "linmix": linmix, "ihm": ihm, "fast_ihm": fast_ihm}
    if method not in fns:
        raise ValueError(f"unknown method {method!r}")
    return fns[method](data, c_x, c_y, eps, delta, **params)
