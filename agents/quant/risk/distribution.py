"""The forecast distribution of one horizon's total log return, and what is read from it.

A horizon's log return is ``X = scale · S + J``:

* ``S`` the standardised diffusion shape, held as a quantile table on the fixed probability grid
  :data:`PROB_GRID` (filtered historical simulation: quantiles of the pooled standardised
  residuals, or of bootstrap sums of them for several sessions; or the normal's);
* ``scale`` the diffusion's standard deviation over the horizon's non-earnings sessions;
* ``J`` an earnings jump drawn with equal weight from ``jumps`` (each past earnings move with
  both signs; ``(0,)`` when no report falls in the window), independent of ``S``.

So ``F(x) = mean_j F_S((x − J_j) / scale)``. Simple returns are ``exp(X) − 1`` (quantiles map
one to one). The table's tails end at the grid's first and last probability (0.0005 and 0.9995):
beyond them ``F_S`` reads 0 or 1.

The functions take one forecast (scalars) or many at once (``scale`` and ``jump_scale`` arrays of
``r`` forecasts sharing a shape table and a jump set: what a walk-forward produces); both paths run
the same arithmetic, so a forecast's numbers do not depend on how it was computed.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Final

import numpy as np
from scipy.special import ndtr, ndtri  # type: ignore[import-untyped]

#: The levels the forecasts report (fractions): the quantiles of the forecasts CSV.
QUANTILE_LEVELS: Final = (0.01, 0.025, 0.05, 0.10, 0.25, 0.50, 0.75, 0.90, 0.95, 0.975, 0.99)
#: Their column names: ``q`` and the level's digits after "0." (q01 = 1 %, q975 = 97.5 %).
QUANTILE_KEYS: Final = ("q01", "q025", "q05", "q10", "q25", "q50", "q75", "q90", "q95", "q975", "q99")
#: The probabilities the shape tables are held on: normal-spaced (dense in the tails) from
#: 0.0005 to 0.9995, plus every reported level exactly.
PROB_GRID: Final = np.unique(
    np.round(np.concatenate([ndtr(np.linspace(-3.2905, 3.2905, 121)), QUANTILE_LEVELS]), 10)
)
#: Points of the x grid on which a mixture's CDF is inverted (per forecast).
MIXTURE_POINTS: Final = 240
#: Midpoints of a uniform probability grid for the moments of the simple return.
MOMENT_POINTS: Final = 2000
#: Points of ``(0, α)`` for the expected shortfall.
ES_POINTS: Final = 400
_U_MOMENTS: Final = (np.arange(MOMENT_POINTS) + 0.5) / MOMENT_POINTS

type Floats = float | np.ndarray


def normal_shape() -> np.ndarray:
    """The standard normal's quantiles on :data:`PROB_GRID`."""
    return np.asarray(ndtri(PROB_GRID), dtype=np.float64)


def empirical_shape(sample: np.ndarray) -> np.ndarray:
    """Quantiles of ``sample`` on :data:`PROB_GRID` by ``numpy.quantile(method="weibull")``
    (Hyndman and Fan 1996, type 6: the ``p``-quantile sits at rank ``p (n + 1)``), under which a
    new draw falls below the ``p``-quantile with probability ``p``. numpy's default (type 7, rank
    ``1 + p (n − 1)``) puts it too far out in small samples: with 250 residuals a new draw falls
    below its 1 % quantile 1.39 % of the time. Below rank 1 (p < 1/(n+1)) the sample minimum.

    Computed by :func:`weibull_quantiles` (the same floats as ``numpy.quantile``, ~15× faster)."""
    return weibull_quantiles(np.asarray(sample, dtype=np.float64), PROB_GRID)


def weibull_quantiles(sample: np.ndarray, probs: np.ndarray) -> np.ndarray:
    """``numpy.quantile(sample, probs, method="weibull")`` for a 1-D float64 ``sample`` (``n ≥
    1``) and probabilities ``probs`` in [0, 1]: the same floats, bit for bit
    (``tests/agents/quant/risk/test_distribution.py`` pins it on samples with ties and NaN).

    Why not numpy's own: with the 131 probabilities of :data:`PROB_GRID` it partitions the sample
    around 262 ranks, ~1 ms for a 4,000-draw bootstrap sample, four times per forecast; one sort
    and numpy's own arithmetic on it (``numpy/lib/_function_base_impl.py``: the virtual index
    ``n·p + p − 1``, its floor and ceiling clipped to the sample, and ``_lerp``) take ~0.06 ms.
    The values at the ranks are the same order statistics whether sorted or partitioned, except
    that −0.0 and 0.0 compare equal and may swap places: a sample holding both goes to numpy.
    A NaN in the sample makes every quantile NaN, as numpy's."""
    ordered = np.sort(sample)
    zeros = ordered[ordered == 0.0]
    if zeros.size and np.signbit(zeros).any() and not np.signbit(zeros).all():
        return np.asarray(np.quantile(sample, probs, method="weibull"), dtype=np.float64)
    n = len(ordered)
    q = np.asarray(probs, dtype=np.float64)
    virtual = n * q + q - 1  # numpy's _compute_virtual_index with alpha = beta = 0
    below = np.floor(virtual)
    above = below + 1
    beyond_last, before_first = virtual >= n - 1, virtual < 0
    below[beyond_last], above[beyond_last] = -1, -1
    below[before_first], above[before_first] = 0, 0
    lower, upper = below.astype(np.intp), above.astype(np.intp)
    gamma = virtual - lower  # numpy's _get_gamma: against the clipped floor, as numpy does
    a, b = ordered[lower], ordered[upper]
    diff = b - a  # numpy's _lerp: from below under a half, from above from a half on
    out = a + diff * gamma
    np.subtract(b, diff * (1 - gamma), out=out, where=gamma >= 0.5)
    if n and np.isnan(ordered[-1]):
        out[:] = np.nan
    return out


def bootstrap_sum_shape(pool: np.ndarray, sessions: int, *, draws: int, seed: int) -> np.ndarray:
    """Quantiles on :data:`PROB_GRID` of ``sum of `sessions` draws / √sessions`` from ``pool``
    with replacement (filtered historical simulation over several sessions, Barone-Adesi,
    Giannopoulos and Vosper 1999, with independent draws). Deterministic for a ``seed``."""
    pool = np.asarray(pool, dtype=np.float64)
    if sessions == 1:
        return empirical_shape(pool)
    idx = bootstrap_indices(len(pool), sessions, draws=draws, seed=seed)
    sums = pool[idx].sum(axis=1) / np.sqrt(sessions)
    return empirical_shape(sums)


@lru_cache(maxsize=16)
def bootstrap_indices(n_pool: int, sessions: int, *, draws: int, seed: int) -> np.ndarray:
    """The draws of :func:`bootstrap_sum_shape`: ``numpy.random.default_rng(seed).integers(0,
    n_pool, size=(draws, sessions))`` (``int64``, read-only), kept for the 16 latest arguments.

    Why kept: the indices depend only on the pool's length, the sessions, the draws and the
    seed, not on the pool's values, and a forecast's pool is almost always full
    (``RiskSpec.pool_window`` residuals), so every analysis draws the same ~340,000 integers
    (4,000 sums of 5, 20 and 60 sessions), ~1 ms of CPU, most of a shape's cost. The same seed
    gives the same integers, so the shapes are the same floats. 16 entries of at most 60 sessions
    hold under 31 MB (the usual nine sizes of one pool length: 8 MB)."""
    idx = np.random.default_rng(seed).integers(0, n_pool, size=(draws, sessions))
    idx.flags.writeable = False
    return idx


def shape_cdf(z: np.ndarray, shape: np.ndarray) -> np.ndarray:
    """``F_S(z)`` from a quantile table on :data:`PROB_GRID` (linear between grid points, 0 below
    the first quantile and 1 above the last)."""
    return np.asarray(np.interp(np.asarray(z, dtype=np.float64), shape, PROB_GRID, left=0.0, right=1.0))


def _rows(scale: Floats, jump_scale: Floats) -> tuple[np.ndarray, np.ndarray]:
    s = np.atleast_1d(np.asarray(scale, dtype=np.float64))
    js = np.broadcast_to(np.atleast_1d(np.asarray(jump_scale, dtype=np.float64)), s.shape)
    return s, js


def _is_plain(jumps: np.ndarray) -> bool:
    return len(jumps) == 1 and float(jumps[0]) == 0.0


def mixture_cdf(
    x: np.ndarray | float,
    *,
    scale: Floats,
    shape: np.ndarray,
    jumps: Sequence[float] | np.ndarray,
    jump_scale: Floats = 1.0,
) -> np.ndarray:
    """``P(X ≤ x)`` (module docstring) for ``r`` forecasts (``scale``, ``jump_scale``: ``(r,)``)
    at ``m`` log returns each (``x``: ``(r, m)``, or ``(m,)`` shared, or a scalar). Returns
    ``(r, m)``. The jumps of forecast ``i`` are ``jumps · jump_scale[i]``."""
    s, js = _rows(scale, jump_scale)
    xs = np.asarray(x, dtype=np.float64)
    xs = np.broadcast_to(
        xs.reshape(1, -1) if xs.ndim < 2 else xs, (len(s), max(xs.shape[-1] if xs.ndim else 1, 1))
    )
    j = np.asarray(jumps, dtype=np.float64)
    if _is_plain(j):
        return shape_cdf(xs / s[:, None], shape)
    z = (xs[:, :, None] - js[:, None, None] * j[None, None, :]) / s[:, None, None]
    return np.asarray(shape_cdf(z, shape).mean(axis=2))


def mixture_quantile(
    p: Sequence[float] | np.ndarray | float,
    *,
    scale: Floats,
    shape: np.ndarray,
    jumps: Sequence[float] | np.ndarray,
    jump_scale: Floats = 1.0,
) -> np.ndarray:
    """Log-return quantiles at probabilities ``p`` (``(L,)`` in (0, 1)) of ``r`` forecasts:
    ``(r, L)``. Without jumps ``scale · Q_S(p)`` exactly; with jumps the mixture CDF is evaluated
    on :data:`MIXTURE_POINTS` points from the lowest to the highest reachable value and inverted
    by linear interpolation."""
    s, js = _rows(scale, jump_scale)
    ps = np.atleast_1d(np.asarray(p, dtype=np.float64))
    j = np.asarray(jumps, dtype=np.float64)
    if _is_plain(j):
        return s[:, None] * np.interp(ps, PROB_GRID, shape)[None, :]
    out = np.empty((len(s), len(ps)))
    t = np.linspace(0.0, 1.0, MIXTURE_POINTS)
    for lo_i in range(0, len(s), 64):  # chunks bound the (rows, points, jumps) temporary
        sl = slice(lo_i, lo_i + 64)
        ss, jj = s[sl], js[sl]
        lo = jj * j.min() + ss * shape[0]
        hi = jj * j.max() + ss * shape[-1]
        grid = lo[:, None] + (hi - lo)[:, None] * t[None, :]
        f = mixture_cdf(grid, scale=ss, shape=shape, jumps=j, jump_scale=jj)
        # The ends of the grid are the lowest and highest reachable values, where a component's
        # CDF steps (0 below its table's first quantile, PROB_GRID[0] on it; PROB_GRID[-1] on its
        # last, 1 above): computed there, the last bit of ``lo``/``hi`` (which numpy's SIMD
        # kernels for the CPU at hand round differently, AVX-512 against AVX2) decided which side
        # of the step a point fell on, and moved the lowest quantiles, hence ES, by a fraction of
        # a grid step. Nothing lies below the lowest reachable value and nothing above the
        # highest: the CDF is 0 and 1 there by definition.
        f[:, 0], f[:, -1] = 0.0, 1.0
        # first grid point whose CDF reaches p, interpolated with the one before
        idx = np.clip((f[:, :, None] < ps[None, None, :]).sum(axis=1), 1, MIXTURE_POINTS - 1)
        rows = np.arange(len(ss))[:, None]
        f0, f1 = f[rows, idx - 1], f[rows, idx]
        g0, g1 = grid[rows, idx - 1], grid[rows, idx]
        w = np.where(f1 > f0, (ps[None, :] - f0) / np.where(f1 > f0, f1 - f0, 1.0), 0.5)
        out[sl] = g0 + np.clip(w, 0.0, 1.0) * (g1 - g0)
    return out


def mixture_moments(
    *, scale: Floats, shape: np.ndarray, jumps: Sequence[float] | np.ndarray, jump_scale: Floats = 1.0
) -> tuple[np.ndarray, np.ndarray]:
    """Mean and standard deviation of the simple return ``exp(X) − 1`` of ``r`` forecasts:
    ``E e^{kX} = mean_j e^{k J_j} · E e^{k scale S}`` (``S`` and ``J`` independent), with
    ``E e^{c S}`` the mean of ``e^{c Q_S(u)}`` over :data:`MOMENT_POINTS` midpoints ``u``."""
    s, js = _rows(scale, jump_scale)
    j = np.asarray(jumps, dtype=np.float64)
    q = np.interp(_U_MOMENTS, PROB_GRID, shape)
    m1 = np.exp(s[:, None] * q[None, :]).mean(axis=1)
    m2 = np.exp(2.0 * s[:, None] * q[None, :]).mean(axis=1)
    e1 = np.exp(js[:, None] * j[None, :]).mean(axis=1) * m1
    e2 = np.exp(2.0 * js[:, None] * j[None, :]).mean(axis=1) * m2
    return e1 - 1.0, np.sqrt(np.maximum(e2 - e1 * e1, 0.0))


def mixture_expected_shortfall(
    level: float,
    *,
    scale: Floats,
    shape: np.ndarray,
    jumps: Sequence[float] | np.ndarray,
    jump_scale: Floats = 1.0,
) -> np.ndarray:
    """Expected shortfall at ``level`` (e.g. 0.975) as a positive loss fraction of ``r``
    forecasts: ``−E[R | R ≤ q_α] = −(1/α) ∫_0^α Q_R(u) du`` for the simple return ``R`` with
    ``α = 1 − level`` (Acerbi and Tasche 2002), on :data:`ES_POINTS` midpoints of ``(0, α)``."""
    q = mixture_quantile(
        es_probabilities(level), scale=scale, shape=shape, jumps=jumps, jump_scale=jump_scale
    )
    return shortfall_of(q)


def es_probabilities(level: float) -> np.ndarray:
    """The :data:`ES_POINTS` midpoints of ``(0, α)``, ``α = 1 − level``, at which
    :func:`mixture_expected_shortfall` reads the quantiles: ``(ES_POINTS,)``."""
    alpha = 1.0 - level
    return np.asarray(alpha * (np.arange(ES_POINTS) + 0.5) / ES_POINTS)


def shortfall_of(log_quantiles: np.ndarray) -> np.ndarray:
    """Expected shortfalls (positive loss fractions) ``(r,)`` from the log-return quantiles
    ``(r, ES_POINTS)`` at :func:`es_probabilities`: minus the mean simple return."""
    return np.asarray(-np.expm1(log_quantiles).mean(axis=1))


# -- one forecast ---------------------------------------------------------------------------------


type Jumps = Sequence[float] | np.ndarray


def cdf(x: np.ndarray | float, *, scale: float, shape: np.ndarray, jumps: Jumps) -> np.ndarray:
    """``P(X ≤ x)`` of one forecast at log returns ``x``: shape ``(m,)``."""
    return mixture_cdf(np.atleast_1d(np.asarray(x, dtype=np.float64)), scale=scale, shape=shape, jumps=jumps)[
        0
    ]


def quantile(p: np.ndarray | float, *, scale: float, shape: np.ndarray, jumps: Jumps) -> np.ndarray:
    """Log-return quantiles of one forecast at probabilities ``p``: shape ``(L,)``."""
    return mixture_quantile(p, scale=scale, shape=shape, jumps=jumps)[0]


def simple_moments(*, scale: float, shape: np.ndarray, jumps: Jumps) -> tuple[float, float]:
    """Mean and standard deviation of one forecast's simple return (:func:`mixture_moments`)."""
    mean, std = mixture_moments(scale=scale, shape=shape, jumps=jumps)
    return float(mean[0]), float(std[0])


def expected_shortfall(level: float, *, scale: float, shape: np.ndarray, jumps: Jumps) -> float:
    """Expected shortfall of one forecast (:func:`mixture_expected_shortfall`)."""
    return float(mixture_expected_shortfall(level, scale=scale, shape=shape, jumps=jumps)[0])
