"""The fundamentals source interface and its two implementations (offline files, Yahoo online).

Contract of a :class:`FundamentalsSource` (the same as every data kind's, see
``docs/architecture.md`` "Data sources"):

* **no data is an empty answer**: a symbol the source does not know gives ``None``; a field the
  source lacks is ``None`` with a reason in ``null_reasons``; a source dated after ``as_of`` is
  listed in ``refused`` (never used);
* **an infrastructure failure raises** a :class:`~agents.data.market.base.ProviderError`
  subclass: ``ProviderTimeoutError`` / ``ProviderConnectionError`` (``NETWORK_ERROR``),
  ``RateLimitedError`` (``RATE_LIMITED``). The tool registry turns each into the envelope error
  of its ``code`` with that code's ``retry_hint``;
* a source that cannot be built from the settings (a folder that is set but missing, no source
  at all) raises :class:`FundamentalsNotConfiguredError` from the routing table
  (:mod:`agents.data.routing`), which ``get_fundamentals`` reports as ``NOT_CONFIGURED`` with
  :attr:`FundamentalsNotConfiguredError.hint` as ``retry_hint``.

Implementations: :class:`OfflineFundamentalsSource` (``FINAGENT_DATA_FUNDAMENTALS_DIR`` and/or the
earnings calendar; formulas and dating in :mod:`agents.data.fundamentals.offline` and
:mod:`agents.data.fundamentals.trailing`) and :class:`YFinanceFundamentalsSource` (Yahoo's
current ``info``, :mod:`agents.data.fundamentals.yfinance_adapter`, falling back to an offline
source for an ``as_of`` older than Yahoo's current values).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import date
from typing import Any, Protocol, runtime_checkable

from agents.data.fundamentals.earnings import EarningsCalendar
from agents.data.fundamentals.offline import (
    OfflineFundamentals,
    SourceValues,
    fundamentals_at,
    market_cap_values,
)
from agents.data.fundamentals.trailing import Price, Trailing, trailing_values
from agents.data.fundamentals.yfinance_adapter import yfinance_fundamentals
from agents.data.market.base import (
    DateOutOfRangeError,
    MarketDataProvider,
    ProviderError,
    SymbolNotFoundError,
)

#: ``symbol → (the as-of close, None)`` or ``(None, why there is none)``; may raise a transient
#: :class:`~agents.data.market.base.ProviderError` (an infrastructure failure of the bar source).
PriceLookup = Callable[[str], tuple[Price | None, str | None]]


class FundamentalsNotConfiguredError(ProviderError):
    """No fundamentals source can be built from the settings (→ ``NOT_CONFIGURED``).

    ``hint`` says what to set; ``get_fundamentals`` returns it as the envelope's ``retry_hint``.
    """

    code = "NOT_CONFIGURED"

    def __init__(self, message: str, *, hint: str) -> None:
        super().__init__(message)
        self.hint = hint


@dataclass(frozen=True)
class FundamentalsRecord:
    """One symbol's answer: ``values`` = ``{symbol, <ALL_FIELDS>, timestamp, field_sources,
    null_reasons, refused}`` (the shape of :func:`agents.data.fundamentals.offline.fundamentals_at`;
    ratios as fractions, USD amounts, ``timestamp`` the ISO date of the newest source used or
    ``None`` when no source is dated on or before ``as_of``) and ``trailing``, the trailing-EPS
    detail when the earnings calendar contributed (else ``None``)."""

    values: dict[str, Any]
    trailing: Trailing | None = None


@runtime_checkable
class FundamentalsSource(Protocol):
    """What ``get_fundamentals`` needs from a fundamentals source (module docstring: the contract)."""

    #: The routing-table name of the source (``files``, ``calendar``, ``yfinance``).
    name: str
    #: How error messages name the source: the folder, ``yfinance`` or ``the earnings calendar``.
    label: str

    def fundamentals(
        self, symbol: str, as_of: date, *, price_at: PriceLookup, provider: MarketDataProvider
    ) -> FundamentalsRecord | None:
        """Fundamentals of ``symbol`` known at ``as_of``, or ``None`` when the source lacks the symbol.

        Args:
            symbol: ticker as the tools normalise it (``BRK.B``).
            as_of: the analysis date; nothing dated after it is used.
            price_at: the as-of close for per-share ratios (P/E, market cap).
            provider: the bar provider (share-basis checks of the trailing EPS).
        Raises:
            DateOutOfRangeError: the source holds only values of another time (Yahoo's current
                ``info`` for a past ``as_of``) and has nothing to fall back on.
            ProviderError: infrastructure failures (timeouts, refused connections, rate limits).
        """
        ...


class OfflineFundamentalsSource:
    """The offline folder (``store``, may be ``None``) merged with the earnings calendar
    (``calendar``, may be ``None``): per symbol the trailing EPS values of the calendar, the
    market cap from SEC shares × the as-of close, and the folder's statements, dated point in
    time by :func:`agents.data.fundamentals.offline.fundamentals_at`."""

    def __init__(
        self, *, store: OfflineFundamentals | None, calendar: EarningsCalendar | None, name: str, label: str
    ) -> None:
        self.store = store
        self.calendar = calendar
        self.name = name
        self.label = label

    def fundamentals(
        self, symbol: str, as_of: date, *, price_at: PriceLookup, provider: MarketDataProvider
    ) -> FundamentalsRecord | None:
        """See :meth:`FundamentalsSource.fundamentals`; the as-of close is asked at most once, and
        only when the calendar covers the symbol or the folder has its shares outstanding."""
        extra: list[SourceValues] = []
        price: Price | None = None
        price_reason: str | None = None
        trailing: Trailing | None = None
        if self.calendar is not None and self.calendar.covers(symbol, as_of):
            price, price_reason = price_at(symbol)
            trailing = trailing_values(self.calendar, symbol, as_of, price=price, price_reason=price_reason)
            if trailing is not None:
                extra.append(trailing.values)
        if self.store is not None and self.store.shares_outstanding(symbol, as_of) is not None:
            if price is None and price_reason is None:
                price, price_reason = price_at(symbol)
            # shares outstanding × a close whose share basis is unknown would be no market cap
            usable = price if price is not None and price.basis_reason is None else None
            cap = market_cap_values(
                self.store,
                symbol,
                as_of,
                close=usable.close if usable else None,
                price_ref=usable.ref if usable else None,
                price_reason=price_reason or (price.basis_reason if price else None),
            )
            if cap is not None:
                extra.append(cap)
        merged = fundamentals_at(self.store, symbol, as_of, calendar=self.calendar, extra=extra)
        return None if merged is None else FundamentalsRecord(merged, trailing)


class YFinanceFundamentalsSource:
    """Yahoo Finance's current ``info`` (online); an ``as_of`` older than its live window is
    answered by ``fallback`` (the earnings calendar) instead, never with today's numbers."""

    name = "yfinance"
    label = "yfinance"

    def __init__(self, *, fallback: FundamentalsSource) -> None:
        self.fallback = fallback

    def fundamentals(
        self, symbol: str, as_of: date, *, price_at: PriceLookup, provider: MarketDataProvider
    ) -> FundamentalsRecord | None:
        """See :meth:`FundamentalsSource.fundamentals`. Raises the adapter's ``RateLimitedError``,
        ``ProviderTimeoutError`` and ``ProviderConnectionError``."""
        try:
            return FundamentalsRecord(yfinance_fundamentals(symbol, as_of=as_of))
        except SymbolNotFoundError:
            return None
        except DateOutOfRangeError:
            return self.fallback.fundamentals(symbol, as_of, price_at=price_at, provider=provider)
