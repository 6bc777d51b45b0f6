"""get_quotes on the real embedded data: the default fields, partial failure, field validation."""

from __future__ import annotations

from datetime import date

import pytest

from agents.data.market.embedded import EmbeddedProvider
from agents.tools.catalog import run_tool
from agents.tools.registry import ToolContext
from core.settings import Settings

pytestmark = pytest.mark.usefixtures("clean_settings")


def _ctx(as_of: date) -> ToolContext:
    return ToolContext(settings=Settings(), as_of=as_of, provider=EmbeddedProvider())


def test_quotes_match_get_stock_data_for_each_symbol() -> None:
    ctx = _ctx(date(2013, 3, 1))
    env = run_tool(name="get_quotes", arguments={"symbols": ["aapl", "MSFT", "AAPL"]}, ctx=ctx)
    assert env.ok and env.data
    quotes = env.data["quotes"]
    assert [q["symbol"] for q in quotes] == ["AAPL", "MSFT"]  # normalised, deduplicated
    for q in quotes:
        assert set(q) == {"symbol", "price", "change", "change_percent", "volume", "timestamp"}
        single = run_tool(name="get_stock_data", arguments={"symbol": q["symbol"]}, ctx=ctx).data
        assert single is not None
        assert q["price"] == single["current_price"] and q["timestamp"] == "2013-03-01"
        assert q["change"] == single["change"] and q["volume"] == single["volume"]


def test_one_bad_symbol_carries_its_error_and_others_return() -> None:
    env = run_tool(name="get_quotes", arguments={"symbols": ["AAPL", "ZZZZ"]}, ctx=_ctx(date(2013, 3, 1)))
    assert env.ok and env.data
    good, bad = env.data["quotes"]
    assert good["symbol"] == "AAPL" and good["price"] > 0
    assert bad["symbol"] == "ZZZZ" and bad["error"]["code"] == "INVALID_SYMBOL"


def test_all_symbols_failing_is_an_error_envelope() -> None:
    env = run_tool(name="get_quotes", arguments={"symbols": ["ZZZZ"]}, ctx=_ctx(date(2013, 3, 1)))
    assert env.error is not None and env.error.code.value == "INVALID_SYMBOL"
    env = run_tool(name="get_quotes", arguments={"symbols": ["FB"]}, ctx=_ctx(date(2010, 1, 4)))
    assert env.error is not None and env.error.code.value == "DATE_OUT_OF_RANGE"


def test_fields_subset_and_unknown_fields_named() -> None:
    ctx = _ctx(date(2013, 3, 1))
    env = run_tool(
        name="get_quotes", arguments={"symbols": ["IBM"], "fields": ["price", "market_cap"]}, ctx=ctx
    )
    assert env.data is not None
    assert set(env.data["quotes"][0]) == {"symbol", "price", "market_cap"}
    assert env.data["quotes"][0]["market_cap"] is None and "market_cap" in env.data["null_reasons"]["IBM"]
    env = run_tool(
        name="get_quotes", arguments={"symbols": ["IBM"], "fields": ["price", "bid", "ask"]}, ctx=ctx
    )
    assert env.error is not None and env.error.code.value == "INVALID_INPUT"
    assert "bid" in env.error.message and "ask" in env.error.message
    env = run_tool(name="get_quotes", arguments={"symbols": []}, ctx=ctx)
    assert env.error is not None and env.error.code.value == "INVALID_INPUT"
