"""The real-world model the option plans price their probabilities with: the one seam between
the option screens and the project's volatility forecast.

:func:`real_world_model` is the only place that chooses it. Today it is the interim
:class:`~agents.quant.options.probabilities.LognormalRealWorld` on a RiskMetrics EWMA of the
adjusted closes (zero drift); the model's ``source`` says so in every output that uses it. The
risk forecast (σ per horizon, P(below), P(touch), earnings-aware) plugs in here by returning an
object of the :class:`~agents.quant.options.probabilities.RealWorldModel` protocol.
"""

from __future__ import annotations

import math

import numpy as np

from agents.quant.options.probabilities import (
    EWMA_LAMBDA,
    SESSIONS_PER_YEAR,
    LognormalRealWorld,
    RealWorldModel,
    ewma_daily_sigma,
)


def real_world_model(*, closes: list[float] | np.ndarray, spot: float) -> RealWorldModel:
    """The real-world model of an underlying at ``spot`` (USD, the chain's units) from its
    adjusted ``closes`` up to ``as_of`` (oldest first; only returns are used, so a share basis
    other than the chain's does not matter).

    Raises ValueError when the closes are too few for the model (see :func:`ewma_daily_sigma`)."""
    daily = ewma_daily_sigma(closes)
    source = (
        f"interim model: EWMA σ (λ = {EWMA_LAMBDA}) of {len(closes) - 1} daily log returns, "
        f"{daily * math.sqrt(SESSIONS_PER_YEAR):.4f} a year, lognormal with zero drift"
    )
    return LognormalRealWorld(spot=spot, daily_sigma=daily, source=source)
