"""Deterministic analysts: the results used when no model is configured for a role, when an LLM
answer stays invalid after repair, or when the LLM budget is spent.

They only restate tool values (never invent a number) and say what they lack.
"""

from __future__ import annotations

from typing import Any

from agents.analysts.models import FundamentalView, SentimentView, TechnicalView

#: ADX above 25 = trending, 20..25 = developing trend (Wilder 1978, the scorer's threshold).
ADX_STRONG = 25.0
ADX_MODERATE = 20.0


def technical_view(*, technical: dict[str, Any], signal: str | None, refs: list[str]) -> TechnicalView:
    """A :class:`TechnicalView` from the ``technical_indicators`` output and the scorer's signal.

    Trend: close vs SMA(200) (above → up, below → down, unknown → sideways); quality from ADX(14);
    supports/resistances: SMA(50), SMA(200), Bollinger bands and the 52-week range below/above
    the close; extension: close above the upper band → high, above the middle band → moderate.
    """
    ind = technical.get("indicators") or {}
    close = technical.get("close")
    sma200, adx = ind.get("sma_200"), ind.get("adx_14")
    direction = "sideways"
    if close is not None and sma200 is not None:
        direction = "up" if close > sma200 else "down" if close < sma200 else "sideways"
    quality = "weak" if adx is None or adx < ADX_MODERATE else "strong" if adx > ADX_STRONG else "moderate"
    levels = [
        v
        for v in (
            ind.get("sma_50"),
            ind.get("sma_200"),
            ind.get("bb_lower"),
            ind.get("bb_upper"),
            technical.get("low_52w"),
            technical.get("high_52w"),
        )
        if isinstance(v, int | float)
    ]
    support = sorted({v for v in levels if close is not None and v < close}, reverse=True)[:4]
    resistance = sorted({v for v in levels if close is not None and v > close})[:4]
    upper, middle = ind.get("bb_upper"), ind.get("bb_middle")
    extension = "low"
    if close is not None and upper is not None and close > upper:
        extension = "high"
    elif close is not None and middle is not None and close > middle:
        extension = "moderate"
    recommendation = {"BUY": "bullish", "SELL": "bearish"}.get(signal or "", "neutral")
    return TechnicalView(
        recommendation=recommendation,
        trend_direction=direction,
        trend_quality=quality,
        support_levels=support,
        resistance_levels=resistance,
        extension_risk=extension,
        notes="Deterministic reading of the indicators (trend vs the two-hundred-day SMA, ADX strength, "
        "Bollinger position); levels are the moving averages, bands and 52-week range.",
        source_refs=[r for r in refs if r],
    )


def fundamental_view(*, quote: dict[str, Any] | None, refs: list[str], reason: str) -> FundamentalView:
    """Outlook ``unknown``: lists the quote's missing fundamentals and ``reason`` (no tool, no model)."""
    quote = quote or {}
    missing = [k for k in ("market_cap", "pe_ratio") if quote.get(k) is None]
    return FundamentalView(
        outlook="unknown",
        missing_data=[*missing, "earnings", "revenue", "balance sheet"],
        notes=f"No fundamental judgement: {reason}.",
        source_refs=[r for r in refs if r],
    )


def sentiment_view(*, refs: list[str], reason: str) -> SentimentView:
    """Label and news risk ``unknown`` with ``reason`` (no news tool or no model)."""
    return SentimentView(
        label="unknown",
        news_risk="unknown",
        missing_data=["news", "analyst ratings"],
        notes=f"No sentiment judgement: {reason}.",
        source_refs=[r for r in refs if r],
    )
