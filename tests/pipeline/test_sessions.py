"""Sessions: ticker extraction, inheritance rules and the in-memory TTL store."""

from __future__ import annotations

import re
import time
from datetime import date

import pytest

from agents.data.market.embedded import EmbeddedProvider
from pipeline.query import UnresolvedQueryError, named_analysis_type, resolve_rules
from pipeline.sessions import MemorySessionStore, resolve_request


def _find(text: str) -> str | None:
    return resolve_rules(text=text, provider=EmbeddedProvider())


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("what about MSFT?", "MSFT"),
        ("What about $msft", "MSFT"),
        ("I think AAPL is cheap", "AAPL"),
        ("how is apple doing", "AAPL"),  # company names resolve too (same parser as the CLI)
        ("WHAT IS THE RSI", None),  # names nothing: a follow-up may inherit
        ("and the chart?", None),
    ],
)
def test_free_text_uses_the_cli_parser(query: str, expected: str | None) -> None:
    assert _find(query) == expected


@pytest.mark.parametrize(
    ("query", "reason"),
    [
        ("what about TSLA?", "names TSLA (Tesla, Inc.), but the data source has no data for it"),
        ("is tesla a buy?", "names TSLA (Tesla, Inc.), but the data source has no data for it"),
        ("apple or microsoft, which one?", "names several companies"),
    ],
)
def test_a_text_naming_what_cannot_be_used_is_refused_not_inherited(query: str, reason: str) -> None:
    # the previous symbol may fill in only when the text names no company at all
    with pytest.raises(UnresolvedQueryError, match=re.escape(reason)):
        resolve_request(
            symbol=None,
            query=query,
            as_of=None,
            analysis_type=None,
            options=None,
            previous={"symbol": "AAPL", "analysis_type": "composite"},
            find_ticker=_find,
        )


def test_a_text_naming_nothing_inherits_the_previous_symbol() -> None:
    got = resolve_request(
        symbol=None,
        query="and the chart?",
        as_of=None,
        analysis_type=None,
        options=None,
        previous={"symbol": "AAPL", "analysis_type": "composite"},
        find_ticker=_find,
    )
    assert (got.symbol, got.analysis_type) == ("AAPL", "technical")
    assert got.inherited == ["symbol"]


def test_follow_up_inherits_type_options_and_date() -> None:
    previous = {
        "symbol": "AAPL",
        "analysis_type": "technical",
        "options": {"max_iterations": 2},
        "as_of": "2012-06-29",
    }
    got = resolve_request(
        symbol=None,
        query="what about MSFT?",
        as_of=None,
        analysis_type=None,
        options=None,
        previous=previous,
        find_ticker=_find,
    )
    assert (got.symbol, got.analysis_type, got.options, got.as_of) == (
        "MSFT",
        "technical",
        {"max_iterations": 2},
        date(2012, 6, 29),
    )
    assert set(got.inherited) == {"analysis_type", "options", "as_of"}


def test_explicit_values_win_over_the_session() -> None:
    previous = {"symbol": "AAPL", "analysis_type": "technical", "options": {"max_iterations": 2}}
    got = resolve_request(
        symbol="IBM",
        query="a fundamental view please",
        as_of=date(2011, 1, 3),
        analysis_type=None,
        options={"max_iterations": 3},
        previous=previous,
        find_ticker=_find,
    )
    assert (got.symbol, got.analysis_type, got.options["max_iterations"], got.as_of) == (
        "IBM",
        "fundamental",
        3,
        date(2011, 1, 3),
    )


def test_no_ticker_anywhere_is_an_error_and_no_session_means_defaults() -> None:
    with pytest.raises(ValueError, match="no ticker"):
        resolve_request(
            symbol=None,
            query="how are markets",
            as_of=None,
            analysis_type=None,
            options=None,
            previous=None,
            find_ticker=_find,
        )
    got = resolve_request(
        symbol="AAPL",
        query=None,
        as_of=None,
        analysis_type=None,
        options=None,
        previous=None,
        find_ticker=_find,
    )
    assert got.analysis_type == "composite" and got.inherited == [] and got.as_of is None
    assert named_analysis_type("sentiment on TSLA") == "sentiment"


def test_memory_store_expires_entries() -> None:
    store = MemorySessionStore(ttl=0.05)
    store.put("s", {"symbol": "AAPL"})
    assert store.get("s") == {"symbol": "AAPL"}
    time.sleep(0.1)
    assert store.get("s") is None
