"""Risk limits checked before an order fills, and the risk metrics of a portfolio.

Metrics (``trade_simulate``'s ``risk_metrics``) come from real history: the portfolio's current
holdings are held fixed (buy and hold, cash constant) over the last ``window`` daily bars, so the
daily value is ``V_t = cash + sum_i q_i * P_i,t`` with ``P`` the split/dividend-adjusted close
expressed in ``as_of`` prices (``agents.data.market.base.adjusted_ohlc``), and the daily return
``r_t = V_t / V_{t-1} - 1`` (``window`` returns from ``window + 1`` values, dates where every
held symbol has a bar). With empyrical (``empyrical-reloaded``):

* ``var_95_1d``: the project's risk forecast (:func:`agents.quant.risk.forecast_risk`, the model
  every report cites, docs/design.md "Risk forecasts") of the next session's return of ``V``,
  from the close-only series of the daily values (all of them, up to the model's 1,000-session
  fit window; no earnings handling for a portfolio): ``forecast.horizon(1).var_95``. Sign
  convention: a LOSS as a POSITIVE fraction of today's value (0.021 = "a 5 % chance of losing
  2.1 % or more tomorrow"); ``var_95_1d_usd`` is the same loss in USD (``var_95_1d * V_T``,
  positive). ``None`` with a reason when the values are too few for the model (60 sessions).
  Before this, ``var_95_1d`` was the historical percentile below, signed as a return (negative).
* ``historical_var_95_1d`` = ``-empyrical.value_at_risk(r, cutoff=0.05)``: the historical VaR of
  the last ``window`` returns (the 5th percentile of ``r``, numpy linear interpolation), in the
  same positive-loss convention, kept for comparison.
* ``max_drawdown`` = ``empyrical.max_drawdown(r)`` = ``min_t (V_t / max_{s<=t} V_s - 1)``, a
  non-positive fraction.
* ``sharpe_ratio`` = ``empyrical.sharpe_ratio(r, risk_free=rf_d, annualization=252)`` =
  ``mean(r - rf_d) / std(r - rf_d, ddof=1) * sqrt(252)`` with ``rf_d = (1 + rf)**(1/252) - 1``
  from the annual ``risk_free_rate`` setting (0 by default).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from core.settings import Settings

TRADING_DAYS_PER_YEAR = 252


@dataclass(frozen=True)
class RiskLimits:
    """Pre-trade limits. ``max_position_weight``: fraction of total portfolio value one symbol may
    reach through a buy; ``max_order_notional``: USD of one order (quantity x reference price)."""

    max_position_weight: float = 0.25
    max_order_notional: float = 50_000.0

    @classmethod
    def from_settings(cls, settings: Settings) -> RiskLimits:
        """The limits configured by ``broker.max_position_weight`` and ``broker.max_order_notional``."""
        return cls(
            max_position_weight=settings.broker.max_position_weight,
            max_order_notional=settings.broker.max_order_notional,
        )


def portfolio_values(*, holdings: dict[str, int], cash: float, closes: dict[str, pd.Series]) -> pd.Series:
    """Daily USD value ``V_t = cash + sum q_i * P_i,t`` of fixed ``holdings`` (module docstring).

    ``closes`` maps every held symbol to its adjusted close series (DatetimeIndex); only dates
    where every held symbol has a close are kept. With no holdings the result is empty.
    """
    held = {s: q for s, q in holdings.items() if q}
    if not held:
        return pd.Series(dtype="float64")
    frame = pd.concat({s: closes[s] for s in held}, axis=1, join="inner").dropna()
    values = frame.mul(pd.Series(held, dtype="float64"), axis=1).sum(axis=1) + cash
    return values.astype("float64")


#: The sign convention of every VaR in ``risk_metrics``, said in the output.
VAR_CONVENTION = "losses as positive fractions of today's value (0.021: a 5 % chance of losing 2.1 % or more)"
#: Daily values the risk model is given at most (its fit window, ``agents.quant.risk.constants``).
MODEL_VALUES = 1001


def model_var(values: pd.Series, out: dict[str, Any]) -> None:
    """Set ``out["var_95_1d"]``, ``var_95_1d_usd`` and ``var_model`` from the risk forecast of the
    daily values ``values`` (USD, DatetimeIndex; the last :data:`MODEL_VALUES`): a close-only
    frame, no earnings (module docstring); or null with the model's reason in
    ``out["null_reasons"]`` when it cannot forecast them (fewer than 60 sessions)."""
    from agents.quant.risk import RiskInputError, forecast_risk

    series = values.tail(MODEL_VALUES)
    frame = pd.DataFrame({"close": series.to_numpy(dtype="float64")}, index=pd.DatetimeIndex(series.index))
    try:
        forecast = forecast_risk(frame, as_of=frame.index[-1].date(), earnings=None, horizons=(1,))
    except RiskInputError as exc:
        for key in ("var_95_1d", "var_95_1d_usd"):
            out["null_reasons"][key] = f"the risk model cannot forecast these values: {exc}"
        return
    var = forecast.horizon(1).var_95
    out["var_95_1d"] = round(var, 6)
    out["var_95_1d_usd"] = round(var * float(series.iloc[-1]), 2)
    fitted = forecast.model.fitted_on
    out["var_model"] = (
        f"risk forecast {forecast.model.version} ({forecast.model.label}) of {len(series)} daily values "
        f"{fitted.get('first')}..{fitted.get('last')}"
    )


def risk_metrics(*, values: pd.Series, window: int, risk_free_rate: float = 0.0) -> dict[str, Any]:
    """``{var_95_1d, var_95_1d_usd, var_convention, var_model, historical_var_95_1d, max_drawdown,
    sharpe_ratio, window: {...}, null_reasons}``: the VaR from the risk model on all ``values``
    (:func:`model_var`), the rest from the last ``window + 1`` daily values (module docstring for
    formulas and signs).

    Metrics are ``None`` with a reason when fewer than 2 returns exist, or (Sharpe) when the
    returns do not vary (an all-cash portfolio).
    """
    tail = values.tail(window + 1)
    returns = tail.pct_change().dropna()
    out: dict[str, Any] = {
        "var_95_1d": None,
        "var_95_1d_usd": None,
        "var_convention": VAR_CONVENTION,
        "var_model": None,
        "historical_var_95_1d": None,
        "max_drawdown": None,
        "sharpe_ratio": None,
        "window": {
            "returns": len(returns),
            "first_date": tail.index[0].date().isoformat() if len(tail) else None,
            "last_date": tail.index[-1].date().isoformat() if len(tail) else None,
            "method": "historical, fixed post-trade holdings, adjusted daily closes",
            "risk_free_rate": risk_free_rate,
        },
        "null_reasons": {},
    }
    if len(returns) < 2:
        reason = "no position to measure" if values.empty else "fewer than 2 daily returns of history"
        for key in ("var_95_1d", "var_95_1d_usd", "historical_var_95_1d", "max_drawdown", "sharpe_ratio"):
            out["null_reasons"][key] = reason
        return out
    model_var(values, out)
    # Imported here: empyrical pulls in scipy and yfinance (~1.5 s), which every process that
    # registers the tools (the CLI's cold start) would otherwise pay without ever simulating a trade.
    import empyrical  # type: ignore[import-untyped]

    out["historical_var_95_1d"] = round(-float(empyrical.value_at_risk(returns, cutoff=0.05)), 6)
    out["max_drawdown"] = round(float(empyrical.max_drawdown(returns)), 6)
    rf_daily = (1.0 + risk_free_rate) ** (1.0 / TRADING_DAYS_PER_YEAR) - 1.0
    if float(np.std(returns.to_numpy(), ddof=1)) == 0.0:
        out["null_reasons"]["sharpe_ratio"] = "returns do not vary (no risky position)"
        return out
    sharpe = float(empyrical.sharpe_ratio(returns, risk_free=rf_daily, annualization=TRADING_DAYS_PER_YEAR))
    out["sharpe_ratio"] = round(sharpe, 6) if math.isfinite(sharpe) else None
    return out
