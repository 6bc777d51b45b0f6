"""Online option chains from Yahoo Finance through yfinance (``Ticker.options`` and
``Ticker.option_chain``), point in time.

Used by the option tools when no offline folder is configured and the data provider is
``yfinance`` (:func:`agents.tools.options.load_chain`). yfinance asks Yahoo's
``/v7/finance/options/<SYM>`` once for the expiration dates (and the nearest expiry's contracts),
then once per further expiry (``?date=<epoch>``); we ask only for the expiries within ``dte_max``
days, so a 14–45 DTE screen costs about six requests instead of twenty.

Point in time: an online chain is a quote of *now*. Its quote day is the New York date of the
underlying's ``regularMarketTime`` (before the open that is the previous session, which is what
the market clock calls the last completed session: ``agents.data.market.clock``). The chain is
used only when that day is the analysis ``as_of``; an earlier ``as_of`` gets
:class:`~agents.data.options.chains.ChainNotFoundError` (→ ``NO_DATA``), never a later chain.

Mapping (Yahoo's JSON as yfinance's frame carries it): ``contractSymbol`` → OCC contract,
``strike``, ``bid``, ``ask``, ``lastPrice`` → last, ``volume`` (NaN → 0), ``openInterest`` (NaN →
unknown), ``impliedVolatility`` → the source's IV (Yahoo's own, compared with our recomputed IV
like the other sources' values). Yahoo sends placeholder IVs of ~1e-5 for contracts without a
quote; those rows have no two-sided quote and are dropped with the other untradable rows. The
spot is ``regularMarketPrice``. Errors of yfinance or its HTTP backend are mapped by
:func:`agents.data.market.yfinance_provider.translate_error` (404 → INVALID_SYMBOL, 429 →
RATE_LIMITED, timeout → retried, connection → NETWORK_ERROR), like the other Yahoo paths.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from datetime import UTC, date, datetime
from typing import Any
from zoneinfo import ZoneInfo

from agents.data.market.yfinance_provider import YFinanceProvider, translate_error
from agents.data.options.chains import ChainNotFoundError, OptionChain, OptionQuote, Right

#: Yahoo's exchange time zone for US options; the quote day is the date there.
NEW_YORK = ZoneInfo("America/New_York")
#: Below this Yahoo's ``impliedVolatility`` is its "no value" placeholder (1e-5), not an IV.
_MIN_REAL_IV = 1e-3
SOURCE = "yahoo_online"


def _number(value: Any) -> float | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def quote_day(underlying: Mapping[str, Any]) -> date | None:
    """The New York date of the underlying's ``regularMarketTime`` (epoch seconds), else None."""
    stamp = _number(underlying.get("regularMarketTime"))
    if stamp is None:
        return None
    return datetime.fromtimestamp(stamp, tz=UTC).astimezone(NEW_YORK).date()


def _quotes(rows: Iterable[Mapping[str, Any]], *, right: Right, expiry: date) -> list[OptionQuote]:
    quotes: list[OptionQuote] = []
    for row in rows:
        strike, bid, ask = _number(row.get("strike")), _number(row.get("bid")), _number(row.get("ask"))
        if strike is None or bid is None or ask is None or not bid > 0 or not ask >= bid:
            continue  # no two-sided quote: not tradable on the quote day (chains.py's rule)
        iv = _number(row.get("impliedVolatility"))
        volume, oi = _number(row.get("volume")), _number(row.get("openInterest"))
        quotes.append(
            OptionQuote(
                contract=str(row["contractSymbol"]),
                expiry=expiry,
                right=right,
                strike=strike,
                bid=bid,
                ask=ask,
                last=_number(row.get("lastPrice")),
                volume=int(volume) if volume is not None else 0,
                open_interest=int(oi) if oi is not None else None,
                source_iv=iv if iv is not None and iv >= _MIN_REAL_IV else None,
            )
        )
    return quotes


def fetch_chain(*, provider: YFinanceProvider, symbol: str, as_of: date, dte_max: int) -> OptionChain:
    """The Yahoo chain of ``symbol`` quoted on ``as_of``: every expiry with 0 ≤ DTE ≤ ``dte_max``.

    Args:
        provider: the yfinance provider (its HTTP session: tests route Yahoo to a local server).
        symbol: product ticker (``BRK.B`` is asked as ``BRK-B``).
        as_of: the analysis date; must be the chain's quote day (module docstring).
        dte_max: the most calendar days to expiry to fetch.
    Returns:
        :class:`OptionChain` with ``source="yahoo_online"``, ``path`` = the request(s) made.
    Raises:
        ChainNotFoundError: Yahoo lists no options, no expiry within ``dte_max``, or the quote
            day is not ``as_of``.
        ProviderError: subclasses from :func:`translate_error` (HTTP 404/429/5xx, timeouts).
    """
    ticker = provider.yahoo_ticker(symbol)
    try:
        # the first request: the expiry list, the quote and the nearest expiry's contracts
        nearest = ticker.option_chain()
        expiries = list(ticker.options)
    except Exception as exc:
        raise translate_error(exc, symbol=symbol) from exc
    if not expiries or nearest.underlying is None:
        raise ChainNotFoundError(f"Yahoo Finance lists no options for {symbol}")
    day = quote_day(nearest.underlying)
    if day is None:
        raise ChainNotFoundError(f"the Yahoo Finance {symbol} chain carries no quote time")
    if day != as_of:  # a later quote is never used for an earlier as_of
        raise ChainNotFoundError(
            f"the Yahoo Finance {symbol} chain is quoted {day.isoformat()} (online chains are "
            f"quotes of now), not on as_of {as_of.isoformat()}"
        )
    wanted = [e for e in expiries if 0 <= (date.fromisoformat(e) - as_of).days <= dte_max]
    if not wanted:
        raise ChainNotFoundError(
            f"no {symbol} expiry within {dte_max} days of {as_of.isoformat()} on Yahoo Finance "
            f"(listed: {', '.join(expiries[:6])}{' …' if len(expiries) > 6 else ''})"
        )
    spot = _number(nearest.underlying.get("regularMarketPrice"))
    contracts: list[OptionQuote] = []
    for expiry in wanted:
        try:
            # the nearest expiry was answered already (yfinance caches identical GETs anyway)
            got = nearest if expiry == expiries[0] else ticker.option_chain(expiry)
        except Exception as exc:
            raise translate_error(exc, symbol=symbol) from exc
        when = date.fromisoformat(expiry)
        for right, frame in (("put", got.puts), ("call", got.calls)):
            if frame is not None:
                contracts += _quotes(frame.to_dict("records"), right=right, expiry=when)  # type: ignore[arg-type]
    return OptionChain(
        symbol=symbol,
        quote_date=day,
        underlying_price=spot,
        source=SOURCE,
        path=f"yahoo:v7/finance/options/{provider.yahoo_symbol(symbol)}",
        contracts=tuple(sorted(contracts, key=lambda q: (q.expiry, q.right, q.strike))),
    )
