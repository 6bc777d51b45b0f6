"""Online fundamentals from Yahoo Finance (``yfinance.Ticker(symbol).info``): a thin adapter.

Used by ``get_fundamentals`` when ``FINAGENT_DATA_FUNDAMENTALS_DIR`` is unset and
``FINAGENT_DATA_PROVIDER=yfinance``. Yahoo's ``info`` holds *current* values only, so it serves
only an ``as_of`` within :data:`LIVE_WINDOW` of today; an older ``as_of`` is refused
(``DATE_OUT_OF_RANGE``), never answered with today's numbers.

Mapping (``info`` key → field):

* ``trailingPE`` → pe_ratio; ``trailingPegRatio`` (else ``pegRatio``) → peg_ratio;
  ``enterpriseToEbitda`` → ev_ebitda; ``grossMargins`` → gross_margin; ``currentRatio`` →
  current_ratio; ``debtToEquity`` / 100 → debt_to_equity (Yahoo reports it in percent);
  ``(totalDebt − totalCash) / ebitda`` → net_debt_to_ebitda; ``forwardEps`` (analysts' consensus
  for the next fiscal year) → eps_consensus; ``trailingEps`` → eps_actual;
  the earliest of ``earningsTimestamp`` / ``earningsTimestampStart`` (epoch seconds) on or after
  ``as_of`` → earnings_date (UTC ISO date; see "Earnings date" below);
* extras: ``profitMargins`` → net_margin, ``marketCap``, ``sharesOutstanding``, ``ebitda``,
  ``priceToSalesTrailing12Months``, ``priceToBook``, ``beta``.
* roic: Yahoo has no invested-capital figure → null; dividend_yield: Yahoo changed its unit
  (fraction → percent) across versions → null rather than guessed.

Where the keys come from (yfinance 1.7, checked against recorded real responses in
``tests/agents/providers/fixtures/``): ``info`` merges quoteSummary (modules financialData,
quoteType, defaultKeyStatistics, assetProfile, summaryDetail) with the v7 quote, the v7 values
winning where both have a key (``trailingPE``, ``marketCap``, ``priceToBook``); ``earningsTimestamp*``
come from the v7 quote only; ``trailingPegRatio`` from the fundamentals-timeseries endpoint.

Earnings date (fixed after the recorded real responses showed it): ``earnings_date`` means the
*next* report, as in the offline calendar. After a report Yahoo's ``earningsTimestamp`` still holds
that past report (AAPL on 2025-02-17: 2025-01-30) while ``earningsTimestampStart``/``End`` bracket
the next, estimated one (2025-04-30 .. 2025-05-05). The adapter used to take ``earningsTimestamp``
first and so reported a past date as the next earnings; it now takes the earliest of the two that
is on or after ``as_of``, and null (with the reason) when both are past.

Errors (fixed after running real yfinance over HTTP): yfinance 1.7 raises ``HTTPError`` for a
symbol Yahoo does not know (quoteSummary HTTP 404) instead of returning an empty ``info``, so the
adapter used to report an unknown symbol as ``NETWORK_ERROR``. Failures now go through
:func:`agents.data.market.yfinance_provider.translate_error` (which also sets yfinance's
``hide_exceptions=False``, so failures raise instead of being logged and swallowed): 404 →
``SymbolNotFoundError`` (``INVALID_SYMBOL``), 429 → ``RateLimitedError`` (``RATE_LIMITED``), a
timeout → ``ProviderTimeoutError``, 5xx / refused connection / anything else →
``ProviderConnectionError`` (``NETWORK_ERROR``).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from typing import Any

from agents.data.fundamentals.offline import ALL_FIELDS, _num, _ratio
from agents.data.market.base import (
    DateOutOfRangeError,
    ProviderConnectionError,
    ProviderError,
    ProviderTimeoutError,
    RateLimitedError,
    SymbolNotFoundError,
)

LIVE_WINDOW = timedelta(days=3)

InfoGetter = Callable[[str], dict[str, Any]]


def _yfinance_info(symbol: str) -> dict[str, Any]:
    # lazy: yfinance (about a second, kept out of tool registration: tests/agents/test_registry.py)
    import yfinance

    import agents.data.market.yfinance_provider  # noqa: F401  (yfinance raises instead of hiding errors)

    return dict(yfinance.Ticker(symbol).info or {})


def _translate(exc: Exception, symbol: str) -> ProviderError:
    """A provider error for what fetching ``info`` raised (see the module docstring); the message
    names the HTTP status or the exception type, never the request URL (it carries the crumb)."""
    from agents.data.market.yfinance_provider import translate_error  # lazy: imports yfinance

    mapped = translate_error(exc, symbol=symbol)
    status = getattr(getattr(exc, "response", None), "status_code", None)
    detail = f"HTTP {status}" if isinstance(status, int) else type(exc).__name__
    if isinstance(mapped, SymbolNotFoundError):
        return SymbolNotFoundError(f"Yahoo Finance has no data for {symbol} ({detail})")
    known = (RateLimitedError, ProviderTimeoutError, ProviderConnectionError)
    cls = type(mapped) if isinstance(mapped, known) else ProviderConnectionError
    return cls(f"yfinance info for {symbol}: {detail}")


def _next_earnings(info: dict[str, Any], as_of: date) -> tuple[str | None, str]:
    """``(earnings_date, reason if null)``: the earliest Yahoo earnings date on or after ``as_of``."""
    days = [
        datetime.fromtimestamp(ts, tz=UTC).date()
        for ts in (_num(info.get("earningsTimestamp")), _num(info.get("earningsTimestampStart")))
        if ts
    ]
    upcoming = [d for d in days if d >= as_of]
    if upcoming:
        return min(upcoming).isoformat(), ""
    if days:
        return None, (
            f"Yahoo's latest earnings date ({max(days).isoformat()}) is before as_of and it gives "
            "no later one"
        )
    return None, "not in Yahoo's info for this symbol"


def yfinance_fundamentals(
    symbol: str, *, as_of: date, info_getter: InfoGetter | None = None, today: date | None = None
) -> dict[str, Any]:
    """Fields of :data:`agents.data.fundamentals.offline.ALL_FIELDS` for ``symbol`` from Yahoo ``info``.

    Returns ``{symbol, <fields>, timestamp (today), field_sources, null_reasons, refused: []}``.

    Raises:
        DateOutOfRangeError: ``as_of`` older than today − 3 days (Yahoo has current values only).
        SymbolNotFoundError: Yahoo knows no such symbol (HTTP 404, or an empty ``info``).
        RateLimitedError: Yahoo answered HTTP 429.
        ProviderTimeoutError: a request timed out.
        ProviderConnectionError: any other failed request (refused connection, HTTP 5xx, ...).
    """
    today = today or datetime.now(UTC).date()
    if as_of < today - LIVE_WINDOW:
        raise DateOutOfRangeError(
            f"yfinance fundamentals are current values; as_of {as_of.isoformat()} is in the past "
            "(configure FINAGENT_DATA_FUNDAMENTALS_DIR for point-in-time data)"
        )
    getter = info_getter or _yfinance_info
    try:
        info = getter(symbol)
    except Exception as exc:  # yfinance raises many types for network problems
        raise _translate(exc, symbol) from exc
    if not info or not (info.get("quoteType") or info.get("symbol")):
        raise SymbolNotFoundError(f"Yahoo Finance has no data for {symbol}")
    d2e = _num(info.get("debtToEquity"))
    earnings_date, earnings_reason = _next_earnings(info, as_of)
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
        "earnings_date": earnings_date,
        "net_margin": _num(info.get("profitMargins")),
        "market_cap": _num(info.get("marketCap")),
        "ebitda": _num(info.get("ebitda")),
        "price_to_sales": _num(info.get("priceToSalesTrailing12Months")),
        "price_to_book": _num(info.get("priceToBook")),
        "dividend_yield": None,
        "beta": _num(info.get("beta")),
        "shares_outstanding": _num(info.get("sharesOutstanding")),
    }
    ref = f"yfinance:info#{symbol}@{today.isoformat()}"
    out: dict[str, Any] = {"symbol": symbol, **{k: values.get(k) for k in ALL_FIELDS}}
    out["timestamp"] = today.isoformat()
    out["field_sources"] = {k: ref for k in ALL_FIELDS if values.get(k) is not None}
    reasons = {k: "not in Yahoo's info for this symbol" for k in ALL_FIELDS if values.get(k) is None}
    reasons["roic"] = "Yahoo has no invested-capital figure"
    reasons["dividend_yield"] = "Yahoo's dividendYield unit changed across versions; not guessed"
    if earnings_date is None:
        reasons["earnings_date"] = earnings_reason
    out["null_reasons"] = reasons
    out["refused"] = []
    return out
