"""get_provider: each FINAGENT_DATA_PROVIDER value, plug-ins, and the errors a user can hit."""

from __future__ import annotations

import sys
import types
from collections.abc import Iterator
from datetime import date
from pathlib import Path

import pytest

from agents.data.market.base import MarketDataProvider
from agents.data.market.csv_folder import CsvFolderProvider
from agents.data.market.embedded import EmbeddedProvider
from agents.data.market.yfinance_provider import YFinanceProvider
from agents.data.routing import clear_provider_cache, get_provider
from core.settings import Settings

PLUGIN_MODULE = "finagent_test_plugin_provider"
REAL_ROW = "2016-06-27,64.949997,64.989998,63.430000,63.919998,63.077053,129200"  # stocknet PTR.csv


@pytest.fixture(autouse=True)
def _fresh_cache(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in ("FINAGENT_DATA_PROVIDER", "FINAGENT_DATA_DIR", "FINAGENT_DATA_TOOL_TIMEOUT"):
        monkeypatch.delenv(name, raising=False)
    clear_provider_cache()
    yield
    clear_provider_cache()


@pytest.fixture
def plugin_module() -> Iterator[types.ModuleType]:
    """An importable module exposing a provider instance, a provider class and a factory."""
    module = types.ModuleType(PLUGIN_MODULE)
    module.__dict__["INSTANCE"] = EmbeddedProvider()
    module.__dict__["ProviderClass"] = EmbeddedProvider
    module.__dict__["make"] = lambda: EmbeddedProvider()
    module.__dict__["NOT_A_PROVIDER"] = 42
    module.__dict__["needs_args"] = lambda data_dir: EmbeddedProvider()
    sys.modules[PLUGIN_MODULE] = module
    yield module
    del sys.modules[PLUGIN_MODULE]


def settings(**values: object) -> Settings:
    """Settings from these values only (no environment leaks in, no .env file)."""
    return Settings(_env_file=None, **values)  # type: ignore[arg-type]


def test_default_is_the_embedded_provider() -> None:
    provider = get_provider(settings=settings())
    assert isinstance(provider, EmbeddedProvider)
    assert provider.latest_date(symbol="AAPL") == date(2013, 3, 1)


def test_same_settings_share_one_instance() -> None:
    assert get_provider(settings=settings()) is get_provider(settings=settings(data_provider="embedded"))


def test_csv_provider_reads_the_configured_folder(tmp_path: Path) -> None:
    (tmp_path / "PTR.csv").write_text(f"Date,Open,High,Low,Close,Adj Close,Volume\n{REAL_ROW}\n")
    provider = get_provider(settings=settings(data_provider="csv", data_dir=tmp_path))
    assert isinstance(provider, CsvFolderProvider)
    assert provider.symbols() == ["PTR"]
    other = tmp_path / "other"
    other.mkdir()
    # a different folder is a different provider
    assert get_provider(settings=settings(data_provider="csv", data_dir=other)) is not provider


def test_csv_without_data_dir_names_the_variable() -> None:
    with pytest.raises(ValueError, match="FINAGENT_DATA_DIR"):
        get_provider(settings=settings(data_provider="csv"))


def test_csv_with_a_missing_folder_names_the_variable(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"FINAGENT_DATA_DIR=.*nope"):
        get_provider(settings=settings(data_provider="csv", data_dir=tmp_path / "nope"))


def test_yfinance_provider_uses_the_tool_timeout() -> None:
    provider = get_provider(settings=settings(data_provider="yfinance", data_tool_timeout=4.5))
    assert isinstance(provider, YFinanceProvider)
    assert provider.timeout == 4.5


@pytest.mark.parametrize("attr", ["INSTANCE", "ProviderClass", "make"])
def test_plugin_instance_class_or_factory(plugin_module: types.ModuleType, attr: str) -> None:
    provider = get_provider(settings=settings(data_provider=f"{PLUGIN_MODULE}:{attr}"))
    assert isinstance(provider, MarketDataProvider)
    assert isinstance(provider, EmbeddedProvider)
    if attr == "INSTANCE":
        assert provider is plugin_module.INSTANCE


def test_plugin_module_that_cannot_be_imported() -> None:
    with pytest.raises(ValueError, match=r"cannot import 'no_such_pkg\.providers'"):
        get_provider(settings=settings(data_provider="no_such_pkg.providers:Provider"))


def test_plugin_attribute_that_does_not_exist(plugin_module: types.ModuleType) -> None:
    with pytest.raises(ValueError, match="has no 'Missing'"):
        get_provider(settings=settings(data_provider=f"{PLUGIN_MODULE}:Missing"))


def test_plugin_that_is_not_a_provider(plugin_module: types.ModuleType) -> None:
    with pytest.raises(ValueError, match="not a market-data provider"):
        get_provider(settings=settings(data_provider=f"{PLUGIN_MODULE}:NOT_A_PROVIDER"))


def test_plugin_factory_that_needs_arguments(plugin_module: types.ModuleType) -> None:
    with pytest.raises(ValueError, match="callable with no arguments"):
        get_provider(settings=settings(data_provider=f"{PLUGIN_MODULE}:needs_args"))


@pytest.mark.parametrize("spec", ["agents.data.market.embedded:EmbeddedProvider", "pipeline.x:Provider"])
def test_a_module_of_the_project_is_no_plugin(spec: str) -> None:
    """The project's own sources are rows imported in code: naming one as a plug-in is refused."""
    with pytest.raises(ValueError, match="is a row of the routing table"):
        get_provider(settings=settings(data_provider=spec))
