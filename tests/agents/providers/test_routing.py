"""The data routing table: the names the settings accept, which source each setting picks per
data kind, and the source contract (no data is an empty answer, a failure raises)."""

from __future__ import annotations

import typing
from datetime import date
from pathlib import Path

import pytest
from pydantic import ValidationError

from agents.data.fundamentals.source import (
    FundamentalsNotConfiguredError,
    FundamentalsSource,
    OfflineFundamentalsSource,
    YFinanceFundamentalsSource,
)
from agents.data.fundamentals.trailing import Price
from agents.data.market.base import ProviderTimeoutError
from agents.data.market.embedded import EmbeddedProvider
from agents.data.market.yfinance_provider import YFinanceProvider
from agents.data.news.providers import HeadlineFilesProvider, NewsNotConfiguredError
from agents.data.options.source import FolderChainSource, OptionChainSource, YahooChainSource
from agents.data.routing import (
    ROUTES,
    Route,
    clear_provider_cache,
    earnings_calendar,
    fundamentals_source,
    get_news_provider,
    names_serving,
    option_chain_source,
    serves,
)
from core.settings import DATA_PROVIDER_NAMES, DataSettings, Settings

pytestmark = pytest.mark.usefixtures("clean_settings")

#: The embedded AAPL data ends on 2013-03-01; the earnings calendar covers AAPL then.
AS_OF = date(2013, 3, 1)


def settings(**values: object) -> Settings:
    """Settings from these values only (no environment, no .env file)."""
    return Settings(_env_file=None, **values)  # type: ignore[arg-type]


def no_price(symbol: str) -> tuple[Price | None, str | None]:
    return None, "no price in this test"


def test_the_table_serves_exactly_the_names_the_settings_accept() -> None:
    assert names_serving("bars") == DATA_PROVIDER_NAMES
    news_literal = typing.get_args(DataSettings.model_fields["news_provider"].annotation)
    assert set(names_serving("news")) == set(news_literal)
    assert names_serving("earnings_calendar") == ("calendar",)
    # every row serves something, and the table cannot be changed at run time
    assert all(route.kinds() for route in ROUTES.values())
    with pytest.raises(TypeError):
        ROUTES["extra"] = Route()  # type: ignore[index]


def test_an_unknown_provider_keeps_its_settings_message() -> None:
    with pytest.raises(
        ValidationError, match="FINAGENT_DATA_PROVIDER must be embedded, csv, yfinance or 'module:attribute'"
    ):
        settings(data_provider="files")  # a table row, but not one that serves bars


def test_only_the_online_provider_brings_fundamentals_and_chains() -> None:
    assert serves("yfinance", "fundamentals") and serves("yfinance", "option_chains")
    assert not serves("embedded", "fundamentals") and not serves("csv", "option_chains")
    assert not serves("my.module:Provider", "bars")  # plug-ins are built by get_provider, bars only


def test_fundamentals_source_per_setting(tmp_path: Path) -> None:
    embedded = fundamentals_source(settings())
    assert isinstance(embedded, OfflineFundamentalsSource) and embedded.name == "calendar"
    assert embedded.store is None and embedded.label == "the earnings calendar"
    online = fundamentals_source(settings(data_provider="yfinance"))
    assert isinstance(online, YFinanceFundamentalsSource) and online.label == "yfinance"
    # a configured folder wins over the online provider (point-in-time data)
    folder = fundamentals_source(settings(data_provider="yfinance", data_fundamentals_dir=tmp_path))
    assert isinstance(folder, OfflineFundamentalsSource) and folder.name == "files"
    assert folder.label == str(tmp_path) and folder.store is not None
    for source in (embedded, online, folder):
        assert isinstance(source, FundamentalsSource)


def test_a_missing_fundamentals_folder_is_not_configured(tmp_path: Path) -> None:
    missing = tmp_path / "missing"
    with pytest.raises(FundamentalsNotConfiguredError) as info:
        fundamentals_source(settings(data_fundamentals_dir=missing))
    assert info.value.code == "NOT_CONFIGURED"
    assert str(info.value) == f"FINAGENT_DATA_FUNDAMENTALS_DIR={str(missing)!r} is not a folder."
    assert "FINAGENT_DATA_FUNDAMENTALS_DIR" in info.value.hint


def test_a_symbol_the_source_lacks_is_none_without_asking_a_price() -> None:
    asked: list[str] = []

    def price_at(symbol: str) -> tuple[Price | None, str | None]:
        asked.append(symbol)
        return None, "unused"

    source = fundamentals_source(settings())
    assert source.fundamentals("ZZZZ", AS_OF, price_at=price_at, provider=EmbeddedProvider()) is None
    assert asked == []


def test_an_infrastructure_failure_raises_through_the_source() -> None:
    def price_at(symbol: str) -> tuple[Price | None, str | None]:
        raise ProviderTimeoutError("bars timed out")

    source = fundamentals_source(settings())
    with pytest.raises(ProviderTimeoutError):
        source.fundamentals("AAPL", AS_OF, price_at=price_at, provider=EmbeddedProvider())


def test_the_online_source_answers_a_past_date_from_the_calendar_without_a_request() -> None:
    # Yahoo's info holds current values only: 2013 is answered by the calendar, with no request
    # (none could succeed here: the test machine has no route to Yahoo)
    online = fundamentals_source(settings(data_provider="yfinance"))
    offline = fundamentals_source(settings())
    provider = EmbeddedProvider()
    got = online.fundamentals("AAPL", AS_OF, price_at=no_price, provider=provider)
    want = offline.fundamentals("AAPL", AS_OF, price_at=no_price, provider=provider)
    assert got is not None and want is not None
    assert got.values == want.values
    assert any(ref.startswith("HistoricalEarningsData") for ref in got.values["field_sources"].values())


def test_option_chain_source_per_setting(tmp_path: Path) -> None:
    assert option_chain_source(settings(), EmbeddedProvider()) is None
    folder = option_chain_source(settings(options_dir=tmp_path), YFinanceProvider())
    assert isinstance(folder, FolderChainSource) and folder.options_dir == tmp_path
    online = option_chain_source(settings(), YFinanceProvider())
    assert isinstance(online, YahooChainSource) and online.by_horizon
    assert isinstance(online, OptionChainSource)


def test_online_chains_need_the_yfinance_session() -> None:
    class Impostor(EmbeddedProvider):
        name = "yfinance"

    with pytest.raises(TypeError, match="Impostor"):
        option_chain_source(settings(), Impostor())


def test_news_provider_per_setting(tmp_path: Path) -> None:
    files = get_news_provider(settings(data_news_dir=tmp_path))
    assert isinstance(files, HeadlineFilesProvider)
    assert get_news_provider(settings(data_news_dir=tmp_path)) is files  # one instance per folder
    clear_provider_cache()  # forgets it with the bar providers (a test changing the folder's files)
    assert get_news_provider(settings(data_news_dir=tmp_path)) is not files
    with pytest.raises(NewsNotConfiguredError, match=r"No RSS feed is configured\."):
        get_news_provider(settings(data_news_provider="rss"))
    with pytest.raises(NewsNotConfiguredError, match=r"Tavily API key is not configured\."):
        get_news_provider(settings(data_news_provider="tavily"))


def test_the_earnings_calendar_row() -> None:
    assert earnings_calendar() is earnings_calendar()  # one per process
    assert "AAPL" in earnings_calendar().symbols()
