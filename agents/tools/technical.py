"""``technical_indicators``: indicators computed in code from a cited ``get_history`` result.

The bars are not passed in the message: the tool takes the bars of the ``get_history`` call
named by ``history_ref`` (same task; or rebuilt from the provider and proven identical by the
digest the research stage put in the state; or the ``tool_calls`` row written by an earlier
stage: ``agents.tools.history.cited_history``), so every indicator is traceable to the exact
bars it came from.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from agents.tools.fields import HistoryRef, Symbol
from agents.tools.history import cited_history
from agents.tools.registry import ToolContext, ToolInputError, ToolOutput, register


class TechnicalInput(BaseModel):
    """``{symbol, history_ref}``: ``history_ref`` is the ``tool_call_id`` of a ``get_history`` call."""

    model_config = ConfigDict(extra="forbid")

    symbol: Symbol = Field(description="Stock ticker, e.g. AAPL")
    history_ref: HistoryRef = Field(min_length=1, description="tool_call_id of a get_history call")


@register(
    name="technical_indicators",
    description=(
        "RSI(14), MACD(12,26,9), Bollinger(20,2), SMA(50), SMA(200), EMA(21), ATR(14), ADX(14), OBV, "
        "HV(20) and the 52-week range, computed with pandas-ta on adjusted OHLC from a get_history result."
    ),
    input_model=TechnicalInput,
)
def technical_indicators(params: TechnicalInput, ctx: ToolContext) -> ToolOutput:
    """Indicators at the last bar of the referenced history (see ``agents.quant.indicators``).

    Returns data ``{symbol, date, history_ref, indicators: {rsi_14, ...}, close, high_52w,
    low_52w, pct_from_52w_high, bars_used}``; values not computable from the bars are null.

    Raises:
        ToolInputError: ``history_ref`` unknown, not a history of ``symbol``, or without bars.
    """
    from agents.quant.indicators import INDICATOR_KEYS, compute_indicators  # pandas-ta import is heavy

    cited = cited_history(ctx, params.history_ref)
    if cited is None:
        raise ToolInputError(f"history_ref {params.history_ref!r} is not a successful get_history call")
    if cited.symbol != params.symbol:
        raise ToolInputError(f"history_ref {params.history_ref!r} holds {cited.symbol}, not {params.symbol}")
    try:
        if cited.bars is None:
            raise ValueError("history result has no bars")
        bars = cited.bars
        values = compute_indicators(bars=bars)
    except ValueError as exc:
        raise ToolInputError(f"cannot compute indicators: {exc}") from None
    indicators = {key: values.get(key) for key in INDICATOR_KEYS}
    context = {key: value for key, value in values.items() if key not in INDICATOR_KEYS}
    missing = [key for key, value in indicators.items() if value is None]
    out = {"symbol": params.symbol, "history_ref": params.history_ref, "indicators": indicators, **context}
    if missing:
        out["null_reasons"] = {key: f"not enough bars ({len(bars)}) for this indicator" for key in missing}
    summary = f"{params.symbol} {context.get('date')}: " + ", ".join(
        f"{k}={indicators[k]}"
        for k in ("rsi_14", "macd_hist", "sma_50", "sma_200")
        if indicators.get(k) is not None
    )
    return ToolOutput(data=out, summary=summary, source_refs=(params.history_ref,), symbol=params.symbol)
