"""Ticker validation (seed 000 plus class suffixes)."""

from __future__ import annotations

import pytest

from pipeline.core.tickers import InvalidTickerError, normalize_ticker


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("AAPL", "AAPL"),
        (" aapl ", "AAPL"),
        ("f", "F"),
        ("GOOGL", "GOOGL"),
        ("brk.b", "BRK.B"),
        ("BRK-A", "BRK-A"),
    ],
)
def test_valid_tickers_are_normalised(raw: str, expected: str) -> None:
    assert normalize_ticker(raw) == expected


@pytest.mark.parametrize(
    "raw", ["", "   ", "TOOLONG", "AAPL1", "12", "A$PL", "BRK.", "BRK.BBB", "AAPL;DROP", "ÄPPL"]
)
def test_invalid_tickers_name_the_input(raw: str) -> None:
    with pytest.raises(InvalidTickerError) as info:
        normalize_ticker(raw)
    assert repr(raw) in str(info.value)
    assert info.value.symbol == raw
