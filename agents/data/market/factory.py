"""Build the configured market-data provider (``FINAGENT_DATA_PROVIDER``), once per process.

``embedded`` (default, offline, bokeh_sampledata) | ``csv`` (a folder of Yahoo CSVs named by
``FINAGENT_DATA_DIR``) | ``yfinance`` (online) | ``module:attr`` (a plug-in: ``attr`` is a
provider instance, or a callable taking no arguments that returns one).
"""

from __future__ import annotations

import importlib
import threading
from pathlib import Path

from agents.data.market.base import MarketDataProvider
from agents.data.market.csv_folder import CsvFolderProvider
from agents.data.market.embedded import EmbeddedProvider
from core.settings import Settings, get_settings

# One instance per (provider setting, data_dir, timeout) per process: providers hold caches (the
# embedded frames, parsed CSVs) and yfinance's session, which every task should share.
_INSTANCES: dict[tuple[str, str | None, float], MarketDataProvider] = {}
_LOCK = threading.Lock()


def get_provider(*, settings: Settings | None = None) -> MarketDataProvider:
    """The provider named by ``settings.data_provider`` (default: the process settings).

    Args:
        settings: configuration to read; ``None`` uses :func:`core.settings.get_settings`.
    Returns:
        A cached :class:`~agents.data.market.base.MarketDataProvider` for that configuration.
    Raises:
        ValueError: ``csv`` without an existing ``FINAGENT_DATA_DIR`` folder; a ``module:attr``
            plug-in that cannot be imported, lacks ``attr``, or does not yield a provider.
    """
    settings = settings or get_settings()
    key = (
        settings.data_provider,
        str(settings.data_dir) if settings.data_dir is not None else None,
        settings.tool_timeout,
    )
    with _LOCK:
        provider = _INSTANCES.get(key)
        if provider is None:
            provider = _build(settings)
            _INSTANCES[key] = provider
        return provider


def clear_provider_cache() -> None:
    """Forget the cached instances (tests that change settings call this)."""
    with _LOCK:
        _INSTANCES.clear()


def _build(settings: Settings) -> MarketDataProvider:
    choice = settings.data_provider
    if choice == "embedded":
        return EmbeddedProvider()
    if choice == "csv":
        return _build_csv(settings.data_dir)
    if choice == "yfinance":
        # lazy: yfinance pulls in curl_cffi, bs4 and peewee (about a second); the other providers,
        # the CLI's embedded mode first, should not pay for it (cold start, docs/benchmarks.md)
        from agents.data.market.yfinance_provider import YFinanceProvider

        return YFinanceProvider(timeout=settings.tool_timeout)
    if ":" in choice:
        return _build_plugin(choice)
    raise ValueError(
        f"FINAGENT_DATA_PROVIDER={choice!r} is not embedded, csv, yfinance or 'module:attribute'"
    )  # pragma: no cover - Settings validates the value


def _build_csv(data_dir: Path | None) -> MarketDataProvider:
    if data_dir is None:
        raise ValueError("FINAGENT_DATA_PROVIDER=csv needs FINAGENT_DATA_DIR: a folder of <TICKER>.csv files")
    if not Path(data_dir).expanduser().is_dir():
        raise ValueError(f"FINAGENT_DATA_DIR={str(data_dir)!r} is not an existing folder (csv provider)")
    return CsvFolderProvider(data_dir=Path(data_dir))


def _build_plugin(spec: str) -> MarketDataProvider:
    module_name, _, attr = spec.partition(":")
    module_name, attr = module_name.strip(), attr.strip()
    if not module_name or not attr:
        raise ValueError(f"FINAGENT_DATA_PROVIDER={spec!r}: expected 'package.module:attribute'")
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
