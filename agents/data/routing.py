"""Which source serves which kind of data: one table (:data:`ROUTES`) and the builders that read it.

The table maps a source name to its factories per data kind (``None``: that source does not
serve the kind). A name is chosen per kind from the settings:

============================  ==================================================================
kind                          name used
============================  ==================================================================
``bars`` (bars, quotes,       ``FINAGENT_DATA_PROVIDER``; a ``package.module:attribute`` value is
profiles)                     a plug-in (bars only, :func:`get_provider`)
``fundamentals``              ``files`` when ``FINAGENT_DATA_FUNDAMENTALS_DIR`` is set, else the data
                              provider's name when its row serves fundamentals, else ``calendar``
``news``                      ``FINAGENT_DATA_NEWS_PROVIDER``
``option_chains``             ``files`` when ``FINAGENT_OPTIONS_DIR`` is set, else the name of the
                              bar provider in use when its row serves option chains, else none
                              (``NOT_CONFIGURED``)
``earnings_calendar``         ``calendar`` (the ``HistoricalEarningsData`` wheel)
============================  ==================================================================

So the online ``yfinance`` provider also brings fundamentals, news and option chains online,
while a configured folder always wins for fundamentals and chains (point-in-time data).

Every source keeps one contract (``docs/architecture.md`` "Data sources"): no data is an empty
answer (an empty list or frame, ``None``; a single-object lookup raises its kind's *not found*
error: ``SymbolNotFoundError``, ``ChainNotFoundError``), and an infrastructure failure raises a
:class:`~agents.data.market.base.ProviderError` subclass whose ``code`` becomes the envelope error
and ``retry_hint`` (``NETWORK_ERROR``, ``RATE_LIMITED``); a missing configuration raises the
kind's ``*NotConfiguredError`` (``NOT_CONFIGURED`` with its hint).

The pattern follows TradingAgents' ``tradingagents/dataflows/interface.py`` (a dict from data
kind to vendor implementations), read here as one row per source so that adding a source is one
row. The names the settings accept are listed in :mod:`core.settings` (the ground floor cannot
import this module): ``DATA_PROVIDER_NAMES`` and the ``news_provider`` literal;
``tests/agents/providers/test_routing.py`` checks that this table serves exactly those names.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from types import MappingProxyType
from typing import Any, Final, Literal, cast

from agents.data.fundamentals.earnings import CalendarUnavailableError, EarningsCalendar, default_calendar
from agents.data.fundamentals.offline import get_offline_fundamentals
from agents.data.fundamentals.source import (
    FundamentalsNotConfiguredError,
    FundamentalsSource,
    OfflineFundamentalsSource,
    YFinanceFundamentalsSource,
)
from agents.data.market.base import MarketDataProvider
from agents.data.market.csv_folder import CsvFolderProvider
from agents.data.market.embedded import EmbeddedProvider
from agents.data.news.providers import (
    TAVILY_KEY_HINT,
    TAVILY_KEY_MISSING,
    HeadlineFilesProvider,
    NewsNotConfiguredError,
    NewsProvider,
    RssProvider,
    TavilyProvider,
    YFinanceNewsProvider,
)
from agents.data.options.source import FolderChainSource, OptionChainSource, YahooChainSource
from core.settings import Settings

DataKind = Literal["bars", "fundamentals", "news", "option_chains", "earnings_calendar"]

#: The project's top-level packages: a plug-in (``module:attribute``) is code outside them.
PROJECT_PACKAGES: Final = frozenset({"agents", "apps", "core", "db", "pipeline", "tasks"})

#: ``get_fundamentals``' hint when its source is not configured.
FUNDAMENTALS_HINT = (
    "Set FINAGENT_DATA_FUNDAMENTALS_DIR to a folder with sp500/, alphavantage/ or sec_companyfacts/ "
    "(e.g. ../shared/data/fundamentals)."
)


@dataclass(frozen=True)
class Route:
    """One source's factories per data kind; ``None`` where the source does not serve the kind.

    bars: ``settings → MarketDataProvider``; fundamentals: ``settings → FundamentalsSource``;
    news: ``settings → NewsProvider``; option_chains: ``(settings, bar provider in use) →
    OptionChainSource``; earnings_calendar: ``() → EarningsCalendar``. Factories raise the
    kind's configuration error (``ValueError`` for bars, ``*NotConfiguredError`` otherwise).
    """

    bars: Callable[[Settings], MarketDataProvider] | None = None
    fundamentals: Callable[[Settings], FundamentalsSource] | None = None
    news: Callable[[Settings], NewsProvider] | None = None
    option_chains: Callable[[Settings, MarketDataProvider], OptionChainSource] | None = None
    earnings_calendar: Callable[[], EarningsCalendar] | None = None

    def kinds(self) -> tuple[str, ...]:
        """The data kinds this source serves, in the table's column order."""
        return tuple(f.name for f in fields(self) if getattr(self, f.name) is not None)


# -- bars ------------------------------------------------------------------------------------------


def _embedded_bars(settings: Settings) -> MarketDataProvider:
    return EmbeddedProvider()


def _csv_bars(settings: Settings) -> MarketDataProvider:
    data_dir = settings.data.dir
    if data_dir is None:
        raise ValueError("FINAGENT_DATA_PROVIDER=csv needs FINAGENT_DATA_DIR: a folder of <TICKER>.csv files")
    if not Path(data_dir).expanduser().is_dir():
        raise ValueError(f"FINAGENT_DATA_DIR={str(data_dir)!r} is not an existing folder (csv provider)")
    return CsvFolderProvider(data_dir=Path(data_dir), cache_files=settings.data.csv_cache_files)


def _yfinance_bars(settings: Settings) -> MarketDataProvider:
    # lazy: yfinance pulls in curl_cffi, bs4 and peewee (about a second); the other providers,
    # the CLI's embedded mode first, should not pay for it (cold start, docs/benchmarks.md)
    from agents.data.market.yfinance_provider import YFinanceProvider

    return YFinanceProvider(timeout=settings.data.tool_timeout)


# -- fundamentals ----------------------------------------------------------------------------------


def _calendar_or_none() -> EarningsCalendar | None:
    try:
        return default_calendar()
    except CalendarUnavailableError:
        return None  # earnings_date / eps_consensus then null with the no-source reason


def _folder_fundamentals(settings: Settings) -> FundamentalsSource:
    root = settings.data.fundamentals_dir
    if root is None or not Path(root).expanduser().is_dir():
        raise FundamentalsNotConfiguredError(
            f"FINAGENT_DATA_FUNDAMENTALS_DIR={str(root)!r} is not a folder.", hint=FUNDAMENTALS_HINT
        )
    return OfflineFundamentalsSource(
        store=get_offline_fundamentals(Path(root)),
        calendar=_calendar_or_none(),
        name="files",
        label=str(root),
    )


def _calendar_fundamentals(settings: Settings) -> FundamentalsSource:
    calendar = _calendar_or_none()
    if calendar is None:
        raise FundamentalsNotConfiguredError(
            "No fundamentals source: no FINAGENT_DATA_FUNDAMENTALS_DIR and the earnings calendar is missing.",
            hint=FUNDAMENTALS_HINT,
        )
    return OfflineFundamentalsSource(
        store=None, calendar=calendar, name="calendar", label="the earnings calendar"
    )


def _yfinance_fundamentals(settings: Settings) -> FundamentalsSource:
    # the past is answered by the calendar; without it those fields are null with the reason
    fallback = OfflineFundamentalsSource(
        store=None, calendar=_calendar_or_none(), name="calendar", label="the earnings calendar"
    )
    return YFinanceFundamentalsSource(fallback=fallback)


# -- news ------------------------------------------------------------------------------------------


def _headline_files(settings: Settings) -> NewsProvider:
    if settings.data.news_dir is None or not Path(settings.data.news_dir).expanduser().is_dir():
        raise NewsNotConfiguredError(
            "No offline news folder is configured."
            if settings.data.news_dir is None
            else f"FINAGENT_DATA_NEWS_DIR={str(settings.data.news_dir)!r} is not a folder.",
            hint="Set FINAGENT_DATA_NEWS_DIR to a folder of headline CSVs (e.g. ../shared/data/news), "
            "or choose FINAGENT_DATA_NEWS_PROVIDER=rss|tavily.",
        )
    # one instance per folder: it holds the parsed CSVs
    folder = str(Path(settings.data.news_dir).expanduser().resolve())
    return _once(("files", folder, None), lambda: HeadlineFilesProvider(Path(folder)))


def _rss_news(settings: Settings) -> NewsProvider:
    urls = [u.strip() for u in settings.data.news_rss_urls.split(",") if u.strip()]
    if not urls:
        raise NewsNotConfiguredError(
            "No RSS feed is configured.", hint="Set FINAGENT_DATA_NEWS_RSS_URLS (comma-separated feed URLs)."
        )
    return RssProvider(urls, timeout=settings.data.tool_timeout)


def _tavily_news(settings: Settings) -> NewsProvider:
    api_key = settings.data.tavily_api_key.get_secret_value() if settings.data.tavily_api_key else None
    if not api_key:
        raise NewsNotConfiguredError(TAVILY_KEY_MISSING, hint=TAVILY_KEY_HINT)
    return TavilyProvider(api_key=api_key, url=settings.data.tavily_url, timeout=settings.data.tool_timeout)


def _yfinance_news(settings: Settings) -> NewsProvider:
    return YFinanceNewsProvider()


# -- option chains ---------------------------------------------------------------------------------


def _folder_chains(settings: Settings, provider: MarketDataProvider) -> OptionChainSource:
    assert settings.options.dir is not None  # chosen only when the folder is set (module docstring)
    return FolderChainSource(Path(settings.options.dir))


def _yahoo_chains(settings: Settings, provider: MarketDataProvider) -> OptionChainSource:
    # lazy: yfinance is imported only by processes that use the yfinance provider
    from agents.data.market.yfinance_provider import YFinanceProvider

    if not isinstance(provider, YFinanceProvider):
        raise TypeError(
            f"online option chains need the yfinance provider's session, not {type(provider).__name__}"
        )
    return YahooChainSource(provider)


#: The routing table: source name → its factories per data kind (module docstring).
ROUTES: Mapping[str, Route] = MappingProxyType(
    {
        "embedded": Route(bars=_embedded_bars),
        "csv": Route(bars=_csv_bars),
        "yfinance": Route(
            bars=_yfinance_bars,
            fundamentals=_yfinance_fundamentals,
            news=_yfinance_news,
            option_chains=_yahoo_chains,
        ),
        "files": Route(fundamentals=_folder_fundamentals, news=_headline_files, option_chains=_folder_chains),
        "rss": Route(news=_rss_news),
        "tavily": Route(news=_tavily_news),
        "calendar": Route(fundamentals=_calendar_fundamentals, earnings_calendar=default_calendar),
    }
)


def names_serving(kind: DataKind) -> tuple[str, ...]:
    """The source names whose row serves ``kind``, in table order (e.g. ``bars`` →
    ``("embedded", "csv", "yfinance")``)."""
    return tuple(name for name, route in ROUTES.items() if getattr(route, kind) is not None)


def serves(name: str, kind: DataKind) -> bool:
    """True when the source ``name`` (a table name; a plug-in or unknown name is False) serves ``kind``."""
    route = ROUTES.get(name)
    return route is not None and getattr(route, kind) is not None


# -- bars: the provider of FINAGENT_DATA_PROVIDER, once per process -------------------------------

# One instance per configuration per process: bar providers (key: provider setting, data_dir,
# timeout) and the headline-files news provider (key: "files", folder) hold caches (the embedded
# frames, parsed CSVs) and yfinance's session, which every task should share.
_INSTANCES: dict[tuple[str, str | None, float | None], Any] = {}
_LOCK = threading.Lock()


def _once[T](key: tuple[str, str | None, float | None], build: Callable[[], T]) -> T:
    """The instance cached under ``key``, built by ``build`` on first use (under the lock)."""
    with _LOCK:
        if key not in _INSTANCES:
            _INSTANCES[key] = build()
        return cast(T, _INSTANCES[key])


def get_provider(*, settings: Settings) -> MarketDataProvider:
    """The market-data provider named by ``settings.data.provider``.

    ``embedded`` (default, offline, bokeh_sampledata) | ``csv`` (a folder of Yahoo CSVs named by
    ``FINAGENT_DATA_DIR``) | ``yfinance`` (online) | ``module:attr`` (a plug-in outside the
    project's packages: ``attr`` is a provider instance, or a callable taking no arguments that
    returns one).

    Args:
        settings: configuration to read; ``None`` uses :func:`core.settings.get_settings`.
    Returns:
        A cached :class:`~agents.data.market.base.MarketDataProvider` for that configuration.
    Raises:
        ValueError: ``csv`` without an existing ``FINAGENT_DATA_DIR`` folder; a ``module:attr``
            plug-in in one of the project's packages (:data:`PROJECT_PACKAGES`), or one that cannot
            be imported, lacks ``attr``, or does not yield a provider.
    """
    key = (
        settings.data.provider,
        str(settings.data.dir) if settings.data.dir is not None else None,
        settings.data.tool_timeout,
    )
    return _once(key, lambda: _build_bars(settings))


def clear_provider_cache() -> None:
    """Forget the cached bar providers and headline-files providers (tests that change settings
    call this)."""
    with _LOCK:
        _INSTANCES.clear()


def _build_bars(settings: Settings) -> MarketDataProvider:
    choice = settings.data.provider
    route = ROUTES.get(choice)
    if route is not None and route.bars is not None:
        return route.bars(settings)
    if ":" in choice:
        return _build_plugin(choice)
    raise ValueError(
        f"FINAGENT_DATA_PROVIDER={choice!r} is not embedded, csv, yfinance or 'module:attribute'"
    )  # pragma: no cover - Settings validates the value


def _build_plugin(spec: str) -> MarketDataProvider:
    module_name, _, attr = spec.partition(":")
    module_name, attr = module_name.strip(), attr.strip()
    if not module_name or not attr:
        raise ValueError(f"FINAGENT_DATA_PROVIDER={spec!r}: expected 'package.module:attribute'")
    if module_name.split(".")[0] in PROJECT_PACKAGES:
        # the project's own sources are rows of ROUTES, imported in code (docs/architecture.md,
        # "Data sources"): no import of the project hides from lint-imports behind a name
        raise ValueError(
            f"FINAGENT_DATA_PROVIDER={spec!r}: a source of finagent's own packages is a row of the "
            "routing table (agents/data/routing.py), not a plug-in"
        )
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(f"FINAGENT_DATA_PROVIDER={spec!r}: cannot import {module_name!r}: {exc}") from exc
    try:
        target = getattr(module, attr)
    except AttributeError as exc:
        raise ValueError(f"FINAGENT_DATA_PROVIDER={spec!r}: module {module_name!r} has no {attr!r}") from exc
    # A class or factory function is called; an already-built instance is used as is. (A class
    # passes the runtime Protocol check by its attributes alone, hence the explicit type test.)
    is_factory = isinstance(target, type) or (callable(target) and not isinstance(target, MarketDataProvider))
    try:
        provider = target() if is_factory else target
    except TypeError as exc:
        raise ValueError(
            f"FINAGENT_DATA_PROVIDER={spec!r}: {attr!r} must be callable with no arguments: {exc}"
        ) from exc
    if not isinstance(provider, MarketDataProvider):
        raise ValueError(
            f"FINAGENT_DATA_PROVIDER={spec!r}: {type(provider).__name__} is not a market-data provider "
            "(needs name, bars, latest_date, symbols, profile, source_ref)"
        )
    return provider


# -- the other kinds ---------------------------------------------------------------------------------


def fundamentals_source(settings: Settings) -> FundamentalsSource:
    """The fundamentals source for ``settings`` (module docstring: ``files`` > data provider > ``calendar``).

    Raises:
        FundamentalsNotConfiguredError: ``FINAGENT_DATA_FUNDAMENTALS_DIR`` is set but not a folder, or
            neither a folder, an online provider nor the earnings calendar is available.
    """
    if settings.data.fundamentals_dir is not None:
        name = "files"
    elif serves(settings.data.provider, "fundamentals"):
        name = settings.data.provider
    else:
        name = "calendar"
    factory = ROUTES[name].fundamentals
    assert factory is not None
    return factory(settings)


def get_news_provider(settings: Settings) -> NewsProvider:
    """The news provider named by ``settings.data.news_provider`` (one headline-files instance per folder).

    Raises:
        NewsNotConfiguredError: ``files`` without ``FINAGENT_DATA_NEWS_DIR`` (or not a folder), ``rss``
            without ``FINAGENT_DATA_NEWS_RSS_URLS``, ``tavily`` without a key.
    """
    factory = ROUTES[settings.data.news_provider].news
    assert factory is not None  # Settings accepts only names with a news column (test_routing.py)
    return factory(settings)


def news_configured(settings: Settings) -> bool:
    """True when :func:`get_news_provider` would not raise ``NewsNotConfiguredError``."""
    try:
        get_news_provider(settings)
    except NewsNotConfiguredError:
        return False
    return True


def option_chain_source(settings: Settings, provider: MarketDataProvider) -> OptionChainSource | None:
    """The chain source: the ``FINAGENT_OPTIONS_DIR`` snapshots when set, else the bar provider's
    own (``provider.name`` = ``yfinance``: Yahoo online), else ``None`` (not configured).

    Raises:
        TypeError: a provider named like a table row with chains that is not that row's class.
    """
    if settings.options.dir is not None:
        name = "files"
    elif serves(provider.name, "option_chains"):
        name = provider.name
    else:
        return None
    factory = ROUTES[name].option_chains
    assert factory is not None
    return factory(settings, provider)


def earnings_calendar() -> EarningsCalendar:
    """The earnings calendar (``calendar`` row: the ``HistoricalEarningsData`` wheel, one per process).

    Raises:
        CalendarUnavailableError: the package is not installed.
    """
    factory = ROUTES["calendar"].earnings_calendar
    assert factory is not None
    return factory()
