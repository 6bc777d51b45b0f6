"""Online fundamentals from Yahoo Finance (``yfinance.Ticker(symbol).info``): a thin adapter.

Used by ``get_fundamentals`` when ``FINAGENT_FUNDAMENTALS_DIR`` is unset and
``FINAGENT_DATA_PROVIDER=yfinance``. Yahoo's ``info`` holds *current* values only, so it serves
only an ``as_of`` within :data:`LIVE_WINDOW` of today; an older ``as_of`` is refused
(``DATE_OUT_OF_RANGE``), never answered with today's numbers.

Mapping (``info`` key → field):

* ``trailingPE`` → pe_ratio; ``trailingPegRatio`` (else ``pegRatio``) → peg_ratio;
  ``enterpriseToEbitda`` → ev_ebitda; ``grossMargins`` → gross_margin; ``currentRatio`` →
  current_ratio; ``debtToEquity`` / 100 → debt_to_equity (Yahoo reports it in percent);
  ``(totalDebt − totalCash) / ebitda`` → net_debt_to_ebitda; ``forwardEps`` (analysts' consensus
  for the next fiscal year) → eps_consensus; ``trailingEps`` → eps_actual;
  ``earningsTimestamp`` (else ``earningsTimestampStart``, epoch seconds) → earnings_date (UTC ISO date);
* extras: ``profitMargins`` → net_margin, ``marketCap``, ``ebitda``,
  ``priceToSalesTrailing12Months``, ``priceToBook``, ``beta``.
* roic: Yahoo has no invested-capital figure → null; dividend_yield: Yahoo changed its unit
  (fraction → percent) across versions → null rather than guessed.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from typing import Any

from agents.fundamentals.offline import ALL_FIELDS, _num, _ratio
from agents.providers.base import (
    DateOutOfRangeError,
    ProviderConnectionError,
    SymbolNotFoundError,
)

LIVE_WINDOW = timedelta(days=3)

InfoGetter = Callable[[str], dict[str, Any]]


def _yfinance_info(symbol: str) -> dict[str, Any]:  # pragma: no cover - network
    import yfinance

    return dict(yfinance.Ticker(symbol).info or {})


def yfinance_fundamentals(
    symbol: str, *, as_of: date, info_getter: InfoGetter | None = None, today: date | None = None
) -> dict[str, Any]:
    """Fields of :data:`agents.fundamentals.offline.ALL_FIELDS` for ``symbol`` from Yahoo ``info``.

    Returns ``{symbol, <fields>, timestamp (today), field_sources, null_reasons, refused: []}``.

    Raises:
        DateOutOfRangeError: ``as_of`` older than today − 3 days (Yahoo has current values only).
        SymbolNotFoundError: Yahoo knows no such symbol (empty ``info``).
        ProviderConnectionError: the request failed.
    """
    today = today or datetime.now(UTC).date()
    if as_of < today - LIVE_WINDOW:
        raise DateOutOfRangeError(
            f"yfinance fundamentals are current values; as_of {as_of.isoformat()} is in the past "
            "(configure FINAGENT_FUNDAMENTALS_DIR for point-in-time data)"
        )
    getter = info_getter or _yfinance_info
    try:
        info = getter(symbol)
    except Exception as exc:  # yfinance raises many types for network problems
        raise ProviderConnectionError(f"yfinance info for {symbol}: {type(exc).__name__}") from exc
    if not info or not (info.get("quoteType") or info.get("symbol")):
        raise SymbolNotFoundError(f"Yahoo Finance has no data for {symbol}")
    d2e = _num(info.get("debtToEquity"))
    earnings = _num(info.get("earningsTimestamp")) or _num(info.get("earningsTimestampStart"))
    debt, cash = _num(info.get("totalDebt")), _num(info.get("totalCash"))
    values: dict[str, Any] = {
        "pe_ratio": _num(info.get("trailingPE")),
        "peg_ratio": _num(info.get("trailingPegRatio")) or _num(info.get("pegRatio")),
        "ev_ebitda": _num(info.get("enterpriseToEbitda")),
        "roic": None,
        "gross_margin": _num(info.get("grossMargins")),
        "current_ratio": _num(info.get("currentRatio")),
        "debt_to_equity": round(d2e / 100.0, 4) if d2e is not None else None,
        "net_debt_to_ebitda": _ratio(
            debt - cash if debt is not None and cash is not None else None, _num(info.get("ebitda"))
        ),
        "eps_consensus": _num(info.get("forwardEps")),
        "eps_actual": _num(info.get("trailingEps")),
        "earnings_date": datetime.fromtimestamp(earnings, tz=UTC).date().isoformat() if earnings else None,
        "net_margin": _num(info.get("profitMargins")),
        "market_cap": _num(info.get("marketCap")),
        "ebitda": _num(info.get("ebitda")),
        "price_to_sales": _num(info.get("priceToSalesTrailing12Months")),
        "price_to_book": _num(info.get("priceToBook")),
        "dividend_yield": None,
        "beta": _num(info.get("beta")),
    }
    ref = f"yfinance:info#{symbol}@{today.isoformat()}"
    out: dict[str, Any] = {"symbol": symbol, **{k: values.get(k) for k in ALL_FIELDS}}
    out["timestamp"] = today.isoformat()
    out["field_sources"] = {k: ref for k in ALL_FIELDS if values.get(k) is not None}
    reasons = {k: "not in Yahoo's info for this symbol" for k in ALL_FIELDS if values.get(k) is None}
    reasons["roic"] = "Yahoo has no invested-capital figure"
    reasons["dividend_yield"] = "Yahoo's dividendYield unit changed across versions; not guessed"
    out["null_reasons"] = reasons
    out["refused"] = []
    return out
