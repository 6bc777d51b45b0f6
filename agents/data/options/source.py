"""The option-chain source interface and its two implementations (snapshot folder, Yahoo online).

Contract of an :class:`OptionChainSource` (see ``docs/architecture.md`` "Data sources"):

* **no data**: no chain quoted on ``as_of`` raises :class:`~agents.data.options.chains.
  ChainNotFoundError` (its message names what exists), a malformed snapshot
  :class:`~agents.data.options.chains.ChainFormatError`; the option tools report both as
  ``NO_DATA``. A chain is never taken from after ``as_of``;
* **an infrastructure failure raises** a :class:`~agents.data.market.base.ProviderError`
  subclass (``NETWORK_ERROR``, ``RATE_LIMITED``), which the tool registry turns into the
  envelope error of its ``code`` with that code's ``retry_hint``.

Which source serves a call is decided by the routing table (:mod:`agents.data.routing`).
"""

from __future__ import annotations

from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from agents.data.options.chains import OptionChain, find_chain

if TYPE_CHECKING:
    from agents.data.market.yfinance_provider import YFinanceProvider


@runtime_checkable
class OptionChainSource(Protocol):
    """What the option tools need from a chain source (module docstring: the contract)."""

    #: The routing-table name of the source (``files``, ``yfinance``).
    name: str
    #: True when the chain holds only the expiries asked for (``dte_max`` is part of the answer).
    by_horizon: bool

    def chain(self, *, symbol: str, as_of: date, dte_max: int) -> OptionChain:
        """The chain of ``symbol`` quoted on ``as_of`` with expiries up to ``dte_max`` calendar days
        (a snapshot file may hold more; the tools filter by DTE).

        Raises:
            ChainNotFoundError: no chain quoted on ``as_of`` (no data).
            ChainFormatError: the snapshot cannot be read.
            ProviderError: infrastructure failures of an online source.
        """
        ...


class FolderChainSource:
    """Offline snapshots in ``FINAGENT_OPTIONS_DIR`` (Lean end-of-day, CBOE delayed quotes,
    yfinance captures; :func:`agents.data.options.chains.find_chain`)."""

    name = "files"
    by_horizon = False

    def __init__(self, options_dir: Path) -> None:
        self.options_dir = options_dir

    def chain(self, *, symbol: str, as_of: date, dte_max: int) -> OptionChain:
        """See :meth:`OptionChainSource.chain` (every expiry of the snapshot; ``dte_max`` unused)."""
        return find_chain(options_dir=self.options_dir, symbol=symbol, as_of=as_of)


class YahooChainSource:
    """Yahoo Finance's chain of now, through the yfinance provider's session
    (:func:`agents.data.options.yahoo.fetch_chain`), used only when quoted on ``as_of``."""

    name = "yfinance"
    by_horizon = True

    def __init__(self, provider: YFinanceProvider) -> None:
        self.provider = provider

    def chain(self, *, symbol: str, as_of: date, dte_max: int) -> OptionChain:
        """See :meth:`OptionChainSource.chain`; one request per expiry within ``dte_max``."""
        # lazy: yfinance is imported only by processes that use the yfinance provider
        from agents.data.options.yahoo import fetch_chain

        return fetch_chain(provider=self.provider, symbol=symbol, as_of=as_of, dte_max=dte_max)
