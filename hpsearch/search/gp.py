"""A small Gaussian process: Matérn 5/2 with one length scale per input, fitted by maximum
marginal likelihood (analytic gradients, L-BFGS), expected improvement for minimisation.

NumPy and SciPy only, sized for a search: a few hundred points at most (the sampler caps them),
a fit in milliseconds. Inputs are in [0, 1]; outputs are standardised before the fit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy.linalg import cho_solve, solve_triangular
from scipy.linalg.lapack import dpotri
from scipy.optimize import minimize
from scipy.stats import norm

Array = NDArray[np.float64]
SQRT5 = math.sqrt(5.0)
LOG_SCALE_PRIOR = (math.log(0.5), 1.0)  # log length scale ~ N(log 0.5, 1): keeps a fit on a handful of points sane
JITTER = 1e-6  # added to the diagonal (standardised units)
LOG_SCALE_BOUNDS = (math.log(0.02), math.log(20.0))
LOG_SIGNAL_BOUNDS = (math.log(0.05), math.log(20.0))
LOG_NOISE_BOUNDS = (math.log(1e-6), math.log(0.5))  # noise variance, standardised units


def single_threaded() -> Any:
    """BLAS on one thread: for matrices of a few hundred rows, more threads only wait on each other
    (measured 20x slower on a busy 2-core machine), and a trial's training has the cores."""
    from threadpoolctl import threadpool_limits

    return threadpool_limits(1)


def _squares(a: Array, b: Array) -> Array:
    """Squared differences per input, n x m x d (unscaled: computed once per fit)."""
    return np.asarray((a[:, None, :] - b[None, :, :]) ** 2, dtype=np.float64)


def matern52(a: Array, b: Array, scales: Array) -> Array:
    """The kernel matrix, from scaled squared distances by inner products: n x m memory, not n x m x d."""
    sa, sb = a / scales, b / scales
    d2 = (sa * sa).sum(1)[:, None] + (sb * sb).sum(1)[None, :] - 2.0 * sa @ sb.T
    r = np.sqrt(np.maximum(d2, 0.0))
    return np.asarray((1 + SQRT5 * r + 5.0 / 3.0 * r * r) * np.exp(-SQRT5 * r), dtype=np.float64)


@dataclass
class GP:
    theta: Array | None = None  # log length scales, log signal variance, log noise variance
    fits: int = 0
    x: Array = field(default_factory=lambda: np.zeros((0, 0)))
    _mean: float = 0.0
    _sd: float = 1.0
    _chol: Array = field(default_factory=lambda: np.zeros((0, 0)))
    _alpha: Array = field(default_factory=lambda: np.zeros(0))

    @property
    def noise(self) -> float:
        """The fitted noise as a share of the data's variance."""
        return math.exp(float(self.theta[-1])) if self.theta is not None else 0.0

    def fit(self, x: Array, y: Array, refit: bool = True) -> GP:
        """Condition on (x, y); ``refit``: also fit the hyperparameters (else keep the last ones)."""
        n, d = x.shape
        self.x, self._mean, self._sd = x, float(np.mean(y)), float(np.std(y)) or 1.0
        z = np.asarray((y - self._mean) / self._sd, dtype=np.float64)
        if refit or self.theta is None or len(self.theta) != d + 2:
            self.theta = self._fitted(x, z)
        scales, signal, noise = self._unpack(d)
        k = signal * matern52(x, x, scales) + (noise + JITTER) * np.eye(n)
        self._chol = np.asarray(np.linalg.cholesky(k), dtype=np.float64)
        self._alpha = cho_solve((self._chol, True), z)
        return self

    def predict(self, at: Array) -> tuple[Array, Array]:
        """Posterior mean and standard deviation of the latent function at ``at``."""
        scales, signal, _ = self._unpack(at.shape[1])
        cross = signal * matern52(at, self.x, scales)
        mean = cross @ self._alpha
        v = solve_triangular(self._chol, cross.T, lower=True)
        var = np.maximum(signal - (v * v).sum(0), 1e-12)
        return mean * self._sd + self._mean, np.sqrt(var) * self._sd

    def sample(self, at: Array, rng: np.random.Generator) -> Array:
        """One joint draw of the latent function at ``at`` (Thompson sampling)."""
        scales, signal, _ = self._unpack(at.shape[1])
        cross = signal * matern52(at, self.x, scales)
        v = solve_triangular(self._chol, cross.T, lower=True)
        cov = signal * matern52(at, at, scales) - v.T @ v
        mean = cross @ self._alpha
        chol = np.linalg.cholesky(cov + 1e-6 * np.eye(len(at)))
        draw = mean + chol @ rng.standard_normal(len(at))
        return np.asarray(draw * self._sd + self._mean, dtype=np.float64)

    def _unpack(self, d: int) -> tuple[Array, float, float]:
        assert self.theta is not None
        return np.exp(self.theta[:d]), math.exp(float(self.theta[d])), math.exp(float(self.theta[d + 1]))

    def _fitted(self, x: Array, z: Array) -> Array:
        d = x.shape[1]
        default = np.r_[np.full(d, LOG_SCALE_PRIOR[0]), 0.0, math.log(1e-3)]
        starts = [default]
        if self.theta is not None and len(self.theta) == d + 2:
            starts = [self.theta] + ([default] if self.fits % 5 == 0 else [])  # now and then from scratch: no local rut
        self.fits += 1
        bounds = [LOG_SCALE_BOUNDS] * d + [LOG_SIGNAL_BOUNDS, LOG_NOISE_BOUNDS]
        best = None
        squares = _squares(x, x)
        for start in starts:
            result = minimize(_objective, start, args=(squares, z), jac=True, method="L-BFGS-B", bounds=bounds, options={"maxiter": 25})
            if best is None or result.fun < best.fun:
                best = result
        assert best is not None
        return np.asarray(best.x, dtype=np.float64)


def _objective(theta: Array, squares: Array, z: Array) -> tuple[float, Array]:
    """Negative log marginal likelihood plus the length-scale prior, and its gradient (``squares``: ``_squares(x, x)``)."""
    n, _, d = squares.shape
    scales, signal, noise = np.exp(theta[:d]), math.exp(float(theta[d])), math.exp(float(theta[d + 1]))
    diff2 = squares / scales**2
    r = np.sqrt(diff2.sum(-1))
    decay = np.exp(-SQRT5 * r)
    shape = (1 + SQRT5 * r + 5.0 / 3.0 * r * r) * decay
    k = signal * shape + (noise + JITTER) * np.eye(n)
    try:
        chol = np.linalg.cholesky(k)
    except np.linalg.LinAlgError:
        return 1e10, np.zeros_like(theta)
    alpha = cho_solve((chol, True), z)
    inverse, _ = dpotri(chol, lower=1)
    inverse = np.tril(inverse) + np.tril(inverse, -1).T
    w = inverse - np.outer(alpha, alpha)  # d nll / d K, times 2
    grad = np.empty_like(theta)
    # d K / d log scale_j = signal * 5/3 (1 + sqrt5 r) exp(-sqrt5 r) * diff_j^2 / scale_j^2
    grad[:d] = 0.5 * np.einsum("ab,abj->j", w * (signal * 5.0 / 3.0 * (1 + SQRT5 * r) * decay), diff2)
    grad[d] = 0.5 * float(np.sum(w * (signal * shape)))
    grad[d + 1] = 0.5 * float(np.trace(w)) * noise
    centre, spread = LOG_SCALE_PRIOR
    grad[:d] += (theta[:d] - centre) / spread**2
    nll = 0.5 * float(z @ alpha) + float(np.log(np.diag(chol)).sum()) + 0.5 * float(np.sum((theta[:d] - centre) ** 2)) / spread**2
    return nll, grad


def expected_improvement(mean: Array, sd: Array, best: float) -> Array:
    """How much below ``best`` a point is expected to land (minimisation)."""
    gap = best - mean
    u = gap / sd
    return np.asarray(gap * norm.cdf(u) + sd * norm.pdf(u), dtype=np.float64)
