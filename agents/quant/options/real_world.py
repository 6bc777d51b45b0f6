"""The real-world model the option plans price their probabilities with: the one seam between
the option screens and the project's risk forecast.

:func:`real_world_model` is the only place that chooses it. The model is the risk forecast
(:mod:`agents.quant.risk`: σ per horizon from a HAR model of the range variance, filtered
historical simulation, earnings left out of the volatility and added back as the company's own
report-day moves when a report falls inside the horizon; P(below) and P(touch) from its forecast
distribution), wrapped in :class:`ForecastRealWorld`. When the forecast cannot be built (fewer
than its minimum of sessions), the interim :class:`~agents.quant.options.probabilities.
LognormalRealWorld` on a RiskMetrics EWMA of the adjusted closes stands in; each model's
``source`` says which, in every output that uses it.
"""

from __future__ import annotations

import math
from datetime import date

import pandas as pd

from agents.quant.options.probabilities import (
    EWMA_LAMBDA,
    SESSIONS_PER_YEAR,
    LognormalRealWorld,
    RealWorldModel,
    ewma_daily_sigma,
)
from agents.quant.risk import RiskForecast, RiskInputError, forecast_risk
from core.display import percent

#: The horizons the forecast is built for at first (sessions); others are added on demand.
BASE_HORIZONS = (1, 5, 10, 15, 20, 25, 30, 35, 40, 45, 60)
#: The longest horizon the risk forecast covers (sessions).
MAX_HORIZON = 250


class ForecastRealWorld:
    """The risk forecast (:func:`agents.quant.risk.forecast_risk`) as a
    :class:`~agents.quant.options.probabilities.RealWorldModel` of an underlying quoted at
    ``spot`` (the chain's units; the forecast's prices are the bars' units, scaled by
    spot / close). A horizon it was not built for is forecast on first use (one more model run)."""

    def __init__(
        self, *, bars: pd.DataFrame, symbol: str, as_of: date, spot: float, horizons: tuple[int, ...]
    ) -> None:
        self._bars, self._symbol, self._as_of = bars, symbol, as_of
        wanted = tuple(sorted({h for h in (*BASE_HORIZONS, *horizons) if 1 <= h <= MAX_HORIZON}))
        first = forecast_risk(bars, symbol=symbol, as_of=as_of, horizons=wanted)
        self._by_horizon: dict[int, RiskForecast] = {h: first for h in wanted}
        self.forecast = first
        self._spot = spot
        self._scale = spot / first.close
        e = first.earnings
        jumps = f"report-day moves: {e.jump_source}" if e.calendar_coverage else "no earnings calendar for it"
        self._source = (
            f"risk forecast {first.model.version} ({first.model.label}); σ {percent(first.sigma_annual)} a "
            f"year outside report days, fitted on "
            f"{first.model.fitted_on.get('first')}..{first.model.fitted_on.get('last')}; "
            f"{jumps}"
        )

    @property
    def source(self) -> str:
        """What the model is (printed with every number it gives)."""
        return self._source

    @property
    def spot(self) -> float:
        """The price the model is quoted at (USD, the chain's units)."""
        return self._spot

    def _at(self, horizon: int) -> RiskForecast:
        h = max(1, min(int(horizon), MAX_HORIZON))
        if h not in self._by_horizon:
            self._by_horizon[h] = forecast_risk(
                self._bars, symbol=self._symbol, as_of=self._as_of, horizons=(h,)
            )
        return self._by_horizon[h]

    def sigma(self, horizon: int) -> float:
        """σ of the return to ``horizon`` sessions (the forecast's σ of the total return; report
        days inside the horizon included)."""
        if horizon <= 0:
            return 0.0
        return float(self._at(horizon).horizon(max(1, min(horizon, MAX_HORIZON))).sigma)

    def prob_below(self, level: float, horizon: int) -> float:
        """P(the close after ``horizon`` sessions ≤ ``level``)."""
        if horizon <= 0:
            return 1.0 if level >= self._spot else 0.0
        h = max(1, min(horizon, MAX_HORIZON))
        return float(self._at(h).prob_below(level / self._scale, h))

    def prob_touch(self, level: float, horizon: int) -> float:
        """P(a close within ``horizon`` sessions reaches ``level``)."""
        if horizon <= 0:
            return 1.0 if level == self._spot else 0.0
        h = max(1, min(horizon, MAX_HORIZON))
        return float(self._at(h).prob_touch(level / self._scale, h))


def annual_sigma(model: RealWorldModel, horizon: int) -> float:
    """The model's σ to ``horizon`` sessions on a yearly scale (× √(252 / horizon)): what an
    at-the-money IV of that expiry compares with."""
    h = max(1, horizon)
    return model.sigma(h) * math.sqrt(SESSIONS_PER_YEAR / h)


def real_world_model(
    *, bars: pd.DataFrame, symbol: str, as_of: date, spot: float, horizons: tuple[int, ...] = ()
) -> RealWorldModel:
    """The real-world model of ``symbol`` at ``spot`` (USD, the chain's units) from its daily
    ``bars`` up to ``as_of`` (``open, high, low, close, adj_close``; only returns and ranges are
    used, so a share basis other than the chain's does not matter): the risk forecast, or the
    interim EWMA model when the forecast cannot be built. ``horizons``: sessions the caller will
    ask for (built in one run).

    Raises ValueError when the bars are too few for either model."""
    try:
        return ForecastRealWorld(bars=bars, symbol=symbol, as_of=as_of, spot=spot, horizons=horizons)
    except RiskInputError as exc:
        closes = bars["adj_close"].to_numpy(dtype="float64")
        # the EWMA's start: the variance of up to 60 returns, at least 20 (fewer → ValueError)
        daily = ewma_daily_sigma(closes, seed=max(20, min(60, len(closes) - 2)))
        source = (
            f"interim model (the risk forecast cannot be built: {exc}): EWMA σ (λ = {EWMA_LAMBDA}) of "
            f"{len(closes) - 1} daily log returns, {daily * math.sqrt(SESSIONS_PER_YEAR):.4f} a year, "
            "lognormal "
            "with zero drift"
        )
        return LognormalRealWorld(spot=spot, daily_sigma=daily, source=source)


__all__ = ["ForecastRealWorld", "annual_sigma", "real_world_model"]
