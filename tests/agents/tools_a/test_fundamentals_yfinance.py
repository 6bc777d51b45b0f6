"""The yfinance fundamentals adapter, offline: Yahoo's ``info`` replaced by a dict of its shape
(the values are illustrative, not real data; the network path is not tested here)."""

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import Any

import pytest

import agents.fundamentals.yfinance_adapter as adapter
import agents.tools.fundamentals  # noqa: F401  (registers get_fundamentals)
from agents.providers.embedded import EmbeddedProvider
from agents.tools.fundamentals import fundamentals_configured
from agents.tools.registry import ToolContext, run_tool
from pipeline.settings import Settings

pytestmark = pytest.mark.usefixtures("clean_settings")

INFO = {
    "symbol": "AAPL",
    "quoteType": "EQUITY",
    "trailingPE": 35.5,
    "trailingPegRatio": 2.4,
    "enterpriseToEbitda": 27.1,
    "grossMargins": 0.466,
    "currentRatio": 0.87,
    "debtToEquity": 151.9,
    "totalDebt": 100.0e9,
    "totalCash": 40.0e9,
    "ebitda": 150.0e9,
    "forwardEps": 8.3,
    "trailingEps": 7.1,
    "earningsTimestamp": 1_761_854_400,
    "profitMargins": 0.24,
    "dividendYield": 0.44,
}


def _fake(symbol: str) -> dict[str, Any]:
    if symbol == "ZZZZ":
        return {}
    if symbol == "DOWN":
        raise ConnectionError("refused")
    return {**INFO, "symbol": symbol}


def test_mapping_units_and_nulls(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(adapter, "_yfinance_info", _fake)
    today = datetime.now(UTC).date()
    settings = Settings(data_provider="yfinance", fundamentals_dir=None)
    assert fundamentals_configured(settings)
    ctx = ToolContext(settings=settings, as_of=today, provider=EmbeddedProvider())
    env = run_tool(name="get_fundamentals", arguments={"symbols": ["AAPL", "ZZZZ"]}, ctx=ctx)
    assert env.ok and env.data
    a, z = env.data["fundamentals"]
    assert a["pe_ratio"] == 35.5 and a["peg_ratio"] == 2.4 and a["ev_ebitda"] == 27.1
    assert a["debt_to_equity"] == pytest.approx(1.519)  # Yahoo's percent → a ratio
    assert a["net_debt_to_ebitda"] == pytest.approx(0.4)
    assert a["eps_consensus"] == 8.3 and a["eps_actual"] == 7.1
    assert a["earnings_date"] == "2025-10-30" and a["timestamp"] == today.isoformat()
    assert a["roic"] is None and "invested-capital" in a["null_reasons"]["roic"]
    assert z["error"]["code"] == "INVALID_SYMBOL"
    env = run_tool(name="get_fundamentals", arguments={"symbols": ["DOWN"]}, ctx=ctx)
    assert env.error is not None and env.error.code.value == "NETWORK_ERROR"


def test_a_past_as_of_is_refused_not_answered_with_todays_values(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(adapter, "_yfinance_info", _fake)
    settings = Settings(data_provider="yfinance", fundamentals_dir=None)
    ctx = ToolContext(settings=settings, as_of=date(2013, 3, 1), provider=EmbeddedProvider())
    env = run_tool(name="get_fundamentals", arguments={"symbols": ["AAPL"]}, ctx=ctx)
    assert env.error is not None and env.error.code.value == "DATE_OUT_OF_RANGE"
    assert not fundamentals_configured(Settings(data_provider="embedded", fundamentals_dir=None))
