"""Quantiles, CDF values and moments of a walk-forward's many forecasts at once
(:class:`~agents.quant.risk.engine.PathForecasts`): forecasts sharing a shape table and a jump set
differ only by their scales, so each such group goes through
:mod:`agents.quant.risk.distribution`'s vectorised functions in one call (the same arithmetic as a
single forecast's)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np

from agents.quant.risk import distribution as dist
from agents.quant.risk.engine import PathForecasts


def _groups(path: PathForecasts, k: int) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """``(rows, shape, jumps)`` per distinct (shape id, jump id) of horizon number ``k``."""
    keys = path.shape_id[:, k] * (len(path.jumps) + 1) + path.jump_id[:, k]
    for key in np.unique(keys):
        rows = np.nonzero(keys == key)[0]
        shape = path.shapes[int(path.shape_id[rows[0], k])]
        jumps = path.jumps[int(path.jump_id[rows[0], k])]
        yield rows, shape, jumps


def log_quantiles(path: PathForecasts, levels: Sequence[float] = dist.QUANTILE_LEVELS) -> np.ndarray:
    """Log-return quantiles at ``levels``: shape ``(n_origins, n_horizons, len(levels))``."""
    lv = np.asarray(levels, dtype=np.float64)
    n, n_h = path.scale.shape
    out = np.empty((n, n_h, len(lv)))
    for k in range(n_h):
        for rows, shape, jumps in _groups(path, k):
            out[rows, k, :] = dist.mixture_quantile(
                lv, scale=path.scale[rows, k], shape=shape, jumps=jumps, jump_scale=path.jump_scale[rows, k]
            )
    return out


def cdf_at(path: PathForecasts, x: np.ndarray) -> np.ndarray:
    """``P(X ≤ x)`` of each forecast: ``x`` and the result have shape ``(n_origins, n_horizons)``
    or ``(n_origins, n_horizons, m)`` (m log returns per forecast); NaN in ``x`` gives NaN."""
    xs = np.asarray(x, dtype=np.float64)
    squeeze = xs.ndim == 2
    if squeeze:
        xs = xs[:, :, None]
    out = np.full(xs.shape, np.nan)
    n_h = path.scale.shape[1]
    for k in range(n_h):
        for rows, shape, jumps in _groups(path, k):
            vals = np.nan_to_num(xs[rows, k, :])
            out[rows, k, :] = dist.mixture_cdf(
                vals, scale=path.scale[rows, k], shape=shape, jumps=jumps, jump_scale=path.jump_scale[rows, k]
            )
    out[np.isnan(xs)] = np.nan
    return out[:, :, 0] if squeeze else out


def simple_sigma(path: PathForecasts) -> np.ndarray:
    """Standard deviation of the simple total return of each forecast ``(n_origins, n_horizons)``
    (:func:`agents.quant.risk.distribution.mixture_moments`)."""
    n, n_h = path.scale.shape
    out = np.empty((n, n_h))
    for k in range(n_h):
        for rows, shape, jumps in _groups(path, k):
            out[rows, k] = dist.mixture_moments(
                scale=path.scale[rows, k], shape=shape, jumps=jumps, jump_scale=path.jump_scale[rows, k]
            )[1]
    return out
