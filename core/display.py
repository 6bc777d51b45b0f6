"""How the product prints a number for people: one definition shared by the report's tables
(``pipeline.report_sections``) and the sentences the deterministic rules write
(``agents.quant.scorer``), so a value reads the same in a table and in the prose about it.

The conventions (the paragraph at the top of docs/design.md): prices in USD to the cent with
thousands separators (``1,234.57``); fractions as percentages to two decimals (``-0.0248`` →
``-2.48 %``); indicator values such as RSI or ADX to two decimals; counts and volumes whole with
thousands separators. Stored JSON keeps the raw values; only printed text is rounded. The
grounding check (``agents.analysts.grounding``) reads a number printed this way as the tool
value rounded to the decimals shown, and a ``%`` (with or without the space before it) as a
fraction times one hundred.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _formatted(value: Any, spec: str, *, scale: float = 1.0, suffix: str = "") -> str:
    """``value * scale`` in the format ``spec`` plus ``suffix``; ``n/a`` for None; a non-number
    as it is (``str``): the one rule behind the helpers below."""
    if value is None:
        return "n/a"
    if not _number(value):
        return str(value)
    # an int stays an int when not scaled: ",.0f" of a float would round past 2**53
    return f"{value * scale if scale != 1.0 else value:{spec}}{suffix}"


def usd(value: Any) -> str:
    """A price in USD to the cent with thousands separators (``1234.5678`` → ``1,234.57``);
    ``n/a`` for None; a non-number as it is (``str``)."""
    return _formatted(value, ",.2f")


def money(value: Any, *, missing: str = "n/a") -> str:
    """A price or an amount in USD as :func:`usd` prints it (to the cent, thousands separators:
    ``1330.3`` → ``1,330.30``, ``-4477.2`` → ``-4,477.20``), for the option plans' sections, their
    reasons and the console; ``missing`` for None, a bool, NaN, an infinity or anything not a
    number, and no ``-0.00`` (a loss rounded to nothing is no loss)."""
    if not _number(value) or not math.isfinite(value):
        return missing
    text = usd(value)
    return "0.00" if text == "-0.00" else text


def decimal2(value: Any) -> str:
    """A plain number to two decimals with thousands separators (RSI, ADX, MACD, P/E:
    ``33.3412`` → ``33.34``); ``n/a`` for None; a non-number as it is."""
    return _formatted(value, ",.2f")


def signed_percent(value: Any, *, digits: int = 2) -> str:
    """A fraction as a signed percentage to ``digits`` decimals, two unless a line says fewer
    (``-0.024762`` → ``-2.48 %``, ``0.0263`` → ``+2.63 %``): a change; ``n/a`` for None; a
    non-number as it is."""
    return _formatted(value, f"+.{digits}f", scale=100, suffix=" %")


def percent(value: Any, *, digits: int = 2) -> str:
    """A fraction as a percentage to ``digits`` decimals (two unless a line says fewer: a
    probability to one, a cap such as 20 % to none) without a plus sign (``0.2764`` →
    ``27.64 %``): a level such as a volatility or a share of the account; ``n/a`` for None; a
    non-number as it is."""
    return signed_percent(value, digits=digits).lstrip("+")


def rate_interval(block: Mapping[str, Any]) -> str:
    """A backtest's observed rate with its 95 % interval, as the risk sections and the scorecard
    print it: ``block`` holds ``rate``, ``low`` and ``high`` (fractions; ``low``/``high`` None when
    no interval was computed) → ``80.9 % [78.0, 83.9]`` (the bounds in percent, one decimal, no
    sign, so a line of several rates stays short), or ``80.9 %`` without bounds. Raises
    ``KeyError`` when ``rate`` is missing."""
    low = block.get("low")
    bounds = "" if low is None else f" [{100 * low:.1f}, {100 * block['high']:.1f}]"
    return f"{percent(block['rate'], digits=1)}{bounds}"


def ratio(value: Any) -> str:
    """A ratio or a small fraction that is no percentage (IV over the forecast σ, income per unit
    of the ±1σ move, a delta) as the report's tables print it: at most four decimals, trailing
    zeros dropped (``1.16743`` → ``1.1674``, ``0.3`` → ``0.3``); ``n/a`` for None; a non-number
    as it is."""
    if not _number(value):
        return _formatted(value, "")
    return f"{value:,.4f}".rstrip("0").rstrip(".") if isinstance(value, float) else f"{value:,}"


def whole(value: Any) -> str:
    """A count or volume with thousands separators and no decimals (shares, OBV, USD traded:
    ``19730300`` → ``19,730,300``); ``n/a`` for None; a non-number as it is."""
    return _formatted(value, ",.0f")


#: How each ``get_stock_data`` quote field prints: prices to the cent, the change as a signed
#: percentage (the JSON holds a fraction), counts whole, the P/E to two decimals.
QUOTE_FORMAT: Mapping[str, Callable[[Any], str]] = MappingProxyType(
    {
        "current_price": usd,
        "price": usd,
        "previous_close": usd,
        "change": usd,
        "change_percent": signed_percent,
        "volume": whole,
        "52w_high": usd,
        "52w_low": usd,
        "market_cap": whole,
        "pe_ratio": decimal2,
    }
)

#: How each ``technical_indicators`` value prints where it differs from :func:`decimal2` (price
#: levels, MACD and oscillators): OBV (shares) whole, the annualised HV(20) (a fraction) as a
#: percentage, the distance from the 52-week high (a fraction) as a signed percentage, the
#: 20-day traded value (USD) whole.
INDICATOR_FORMAT: Mapping[str, Callable[[Any], str]] = MappingProxyType(
    {"obv": whole, "hv_20": percent, "pct_from_52w_high": signed_percent, "dollar_volume_20": whole}
)


def indicator_text(key: str, value: Any) -> str:
    """Indicator ``key``'s ``value`` as the report's Indicators table prints it
    (:data:`INDICATOR_FORMAT`, else two decimals: ``sma_50`` 483.1986 → ``483.20``)."""
    return INDICATOR_FORMAT.get(key, decimal2)(value)


def quote_text(key: str, value: Any) -> str:
    """Quote field ``key``'s ``value`` as the report's Quote table prints it
    (:data:`QUOTE_FORMAT`, else two decimals)."""
    return QUOTE_FORMAT.get(key, decimal2)(value)


#: How each ``get_fundamentals`` field prints where it differs from :func:`decimal2` (P/E, PEG,
#: EV/EBITDA, the liquidity and leverage ratios, beta): margins, returns and yields (fractions)
#: as percentages, the earnings trend (fractions) as signed percentages, EPS (USD a share) to
#: the cent, market cap and EBITDA (USD) whole.
FUNDAMENTAL_FORMAT: Mapping[str, Callable[[Any], str]] = MappingProxyType(
    {
        "gross_margin": percent,
        "net_margin": percent,
        "profit_margin": percent,
        "operating_margin": percent,
        "roic": percent,
        "roe": percent,
        "dividend_yield": percent,
        "eps_growth_yoy": signed_percent,
        "eps_surprise_mean_4q": signed_percent,
        "eps_actual": usd,
        "eps_consensus": usd,
        "market_cap": whole,
        "ebitda": whole,
    }
)


def fundamental_text(key: str, value: Any) -> str:
    """Fundamentals field ``key``'s ``value`` as the report prints it (:data:`FUNDAMENTAL_FORMAT`,
    else two decimals: ``gross_margin`` 0.2167 → ``21.67 %``, ``pe_ratio`` 35.123 → ``35.12``)."""
    return FUNDAMENTAL_FORMAT.get(key, decimal2)(value)
