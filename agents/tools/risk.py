"""``risk_forecast`` and ``risk_levels``: the risk forecast of one symbol as logged tool calls.

``risk_forecast`` runs :func:`agents.quant.risk.forecast_risk` on the symbol's daily bars up to
``as_of`` (five years, so the model fits on its last 1,000 sessions as in its backtest) with the
project's earnings calendar as known at ``as_of``, and returns the whole forecast with the
sentences of the model's backtest record beside each number (:func:`agents.quant.risk.
coverage_line`, :func:`~agents.quant.risk.var_line`). ``risk_levels`` reads a cited
``risk_forecast`` result back (``forecast_ref``) and gives P(close below) and P(touch) of price
levels, e.g. the report's stop, so those numbers cite a call too (docs/design.md, "Risk
forecasts").
"""

from __future__ import annotations

from typing import Any, Final

from pydantic import BaseModel, ConfigDict, Field

from agents.tools.fields import Symbol
from agents.tools.registry import ToolContext, ToolInputError, ToolOutput, register

#: The bars a forecast reads: five years reach the model's 1,000-session fit window
#: (``agents.quant.risk.constants.FIT_WINDOW``) with room for the earnings sessions it leaves out.
RISK_PERIOD: Final = "5y"
#: The horizons of an analysis's forecast (sessions), the ones its backtest record covers.
DEFAULT_HORIZONS: Final = (1, 5, 20, 60)
#: The range probabilities a report prints.
RANGE_PERCENTS: Final = (50, 80, 95)


class RiskForecastInput(BaseModel):
    """``{symbol, horizons?}``: horizons in sessions (1..250, at most 8; default 1, 5, 20, 60)."""

    model_config = ConfigDict(extra="forbid")

    symbol: Symbol = Field(description="Stock ticker, e.g. AAPL")
    horizons: list[int] = Field(
        default_factory=lambda: list(DEFAULT_HORIZONS),
        min_length=1,
        max_length=8,
        description="Horizons in trading sessions after as_of (1..250)",
    )


class RiskLevelsInput(BaseModel):
    """``{symbol, forecast_ref, levels}``: levels are prices in the units of the forecast's close."""

    model_config = ConfigDict(extra="forbid")

    symbol: Symbol = Field(description="Stock ticker, e.g. AAPL")
    forecast_ref: str = Field(min_length=1, description="tool_call_id of a risk_forecast call")
    levels: list[float] = Field(min_length=1, max_length=10, description="Price levels, USD (> 0)")


def _rate(block: dict[str, Any]) -> dict[str, Any]:
    return {k: block.get(k) for k in ("rate", "low", "high")}


def record_lines(horizons: list[int], version: str) -> dict[str, Any]:
    """The backtest record's sentences for ``horizons`` of model ``version``: ``{version,
    period, horizons: {"20": {ranges: {"50": line, "80": ..., "95": ...}, var: {"95": line,
    "99": line}, rates: {ranges: {"80": {rate, low, high}, ...}, var: {...},
    ranges_spanning_a_report: {...}}, stop: {below:
    {mean_p, observed, ece, n}, touch: {...}}}}}`` (rates as fractions), a horizon the record
    lacks left out; or ``{version: null, unavailable: reason}`` when no record of this model
    version can be read (a report then says its numbers are not backtested)."""
    from agents.quant.risk import RecordUnavailableError, coverage_line, load_record, var_line

    try:
        record = load_record(version=version)
    except RecordUnavailableError as exc:
        return {"version": None, "unavailable": str(exc)}
    out: dict[str, Any] = {}
    for h in horizons:
        block = record["horizons"].get(str(h))
        if block is None:
            continue
        out[str(h)] = {
            "ranges": {str(p): coverage_line(h, p / 100, record=record) for p in RANGE_PERCENTS},
            "var": {str(level): var_line(h, level, record=record) for level in (95, 99)},
            "rates": {
                "ranges": {str(p): _rate(block["ranges"][str(p)]) for p in RANGE_PERCENTS},
                "var": {str(level): _rate(block["var"][str(level)]) for level in (95, 99)},
                "ranges_spanning_a_report": {
                    str(p): _rate(spanning[str(p)])
                    for p in RANGE_PERCENTS
                    if str(p) in (spanning := block.get("ranges_spanning_a_report") or {})
                },
            },
            "stop": block.get("stop") or {},
        }
    return {"version": record["model_version"], "period": record["period"], "horizons": out}


@register(
    name="risk_forecast",
    description=(
        "Risk forecast of a symbol from its daily bars up to as_of and its earnings calendar: sigma per "
        "day and per horizon, quantiles of the total return, VaR(95 %), VaR(99 %) and ES(97.5 %) as "
        "positive loss fractions, 50/80/95 % price ranges, reports in each window, the model's "
        "provenance and its backtest record's lines."
    ),
    input_model=RiskForecastInput,
)
def risk_forecast(params: RiskForecastInput, ctx: ToolContext) -> ToolOutput:
    """The :class:`agents.quant.risk.RiskForecast` of ``params.symbol`` at ``ctx.as_of`` as data:
    its ``model_dump`` (``as_of, close, sigma_daily, sigma_annual, model, earnings, horizons[*]
    {horizon, sigma, quantiles, var_95, var_99, es_975, ranges, earnings, distribution}``), plus
    ``symbol``, ``bars {period, first, last, count}`` and ``record`` (:func:`record_lines`).

    Raises:
        ToolInputError: a horizon outside 1..250, or bars the model cannot use (too few).
        ProviderError: from the data source (unknown symbol, no data), mapped by ``run_tool``.
    """
    from agents.quant.risk import RiskInputError, forecast_risk
    from agents.tools.bars import history_window

    horizons = sorted(set(params.horizons))
    if horizons[0] < 1 or horizons[-1] > 250:
        raise ToolInputError(f"horizons must be 1..250 sessions, got {params.horizons}")
    bars = history_window(ctx=ctx, symbol=params.symbol, period=RISK_PERIOD, interval="1d")
    if bars.empty:
        raise ToolInputError(f"no {params.symbol} bars up to {ctx.as_of}")
    try:
        forecast = forecast_risk(bars, symbol=params.symbol, as_of=ctx.as_of, horizons=horizons)
    except RiskInputError as exc:
        raise ToolInputError(f"cannot forecast {params.symbol}'s risk: {exc}") from None
    data = forecast.model_dump(mode="json")
    data["bars"] = {
        "period": RISK_PERIOD,
        "first": bars.index[0].date().isoformat(),
        "last": bars.index[-1].date().isoformat(),
        "count": len(bars),
    }
    data["record"] = record_lines(horizons, forecast.model.version)
    h = forecast.horizons[min(range(len(horizons)), key=lambda i: abs(horizons[i] - 20))]
    band = h.range(0.8)
    summary = (
        f"{params.symbol} {forecast.as_of}: close {forecast.close:.2f}, "
        f"sigma {forecast.sigma_daily:.4f}/day, 80% range {h.horizon}d {band.low:.2f}..{band.high:.2f}, "
        f"VaR95 {forecast.horizons[0].horizon}d {forecast.horizons[0].var_95:.4f} ({forecast.model.version})"
    )
    return ToolOutput(data=data, summary=summary, symbol=params.symbol)


def cited_forecast(ctx: ToolContext, forecast_ref: str) -> Any:
    """The :class:`agents.quant.risk.RiskForecast` of the successful ``risk_forecast`` call
    ``forecast_ref`` (rebuilt from its stored data; the numbers are the same to the last bit),
    or ``None`` when ``forecast_ref`` is no such call."""
    from agents.quant.risk import RiskForecast

    data = ctx.result_data(forecast_ref)
    if not data or "horizons" not in data or "model" not in data:
        return None
    return RiskForecast.model_validate({k: v for k, v in data.items() if k in RiskForecast.model_fields})


@register(
    name="risk_levels",
    description=(
        "P(close at the horizon at or below a level) and P(a daily close within the horizon reaches it) "
        "for price levels, from a cited risk_forecast result, at each of its horizons."
    ),
    input_model=RiskLevelsInput,
)
def risk_levels(params: RiskLevelsInput, ctx: ToolContext) -> ToolOutput:
    """``{symbol, forecast_ref, close, levels: [{level, horizons: [{horizon, p_below, p_touch}]}]}``
    (probabilities as fractions; ``p_touch`` for daily closes, :meth:`~agents.quant.risk.
    RiskForecast.prob_touch`).

    Raises:
        ToolInputError: ``forecast_ref`` is not a risk_forecast call of ``symbol``, or a level ≤ 0.
    """
    forecast = cited_forecast(ctx, params.forecast_ref)
    if forecast is None:
        raise ToolInputError(f"forecast_ref {params.forecast_ref!r} is not a successful risk_forecast call")
    if forecast.symbol != params.symbol:
        raise ToolInputError(
            f"forecast_ref {params.forecast_ref!r} holds {forecast.symbol}, not {params.symbol}"
        )
    if any(not (level > 0) for level in params.levels):
        raise ToolInputError(f"levels must be positive prices, got {params.levels}")
    levels: list[dict[str, Any]] = [
        {
            "level": level,
            "horizons": [
                {
                    "horizon": h.horizon,
                    "p_below": forecast.prob_below(level, h.horizon),
                    "p_touch": forecast.prob_touch(level, h.horizon),
                }
                for h in forecast.horizons
            ],
        }
        for level in params.levels
    ]
    data: dict[str, Any] = {
        "symbol": params.symbol,
        "forecast_ref": params.forecast_ref,
        "close": forecast.close,
        "levels": levels,
    }
    first = levels[0]["horizons"][-1]
    summary = (
        f"{params.symbol}: level {params.levels[0]:.2f} at {first['horizon']}d: P(below) "
        f"{first['p_below']:.3f}, P(touch) {first['p_touch']:.3f}"
    )
    return ToolOutput(data=data, summary=summary, source_refs=(params.forecast_ref,), symbol=params.symbol)
