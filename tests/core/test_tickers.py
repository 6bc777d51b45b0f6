"""Ticker validation (docs/design.md, "Tickers"), class suffixes included."""

from __future__ import annotations

import pytest

from core.tickers import (
    MAX_ECHO,
    InvalidTickerError,
    JunkInputError,
    junk_characters,
    normalize_ticker,
    refuse_junk,
)


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


@pytest.mark.parametrize(
    ("text", "junk"),
    [
        # one word: a ticker attempt, anything but letters, digits and . - ^ = is junk
        ("AAPL;DROP", ";"),
        ("$AAPL", "$"),
        ("AAPL'", "'"),
        ("AAPL/MSFT", "/"),
        ('"AAPL";--', '";'),
        ("AAPL\x00", "\x00"),
        # several words: a question, only ; \ < > | ` { } and control characters are junk
        ("AAPL;DROP TABLE", ";"),
        ("AAPL | cat /etc/passwd", "|"),
        ("AAPL<script> now", "<>"),
        ("tell me $(whoami) `id`", "`"),
        ("AAPL \x1b[31m red", "\x1b"),
    ],
)
def test_a_ticker_with_junk_is_refused_naming_the_characters(text: str, junk: str) -> None:
    assert junk_characters(text) == junk
    with pytest.raises(JunkInputError) as info:
        refuse_junk(text)
    assert info.value.junk == junk
    assert all(repr(ch) in str(info.value) for ch in junk)


@pytest.mark.parametrize(
    "text",
    [
        "AAPL",
        " brk.b ",
        "BRK-A",
        "^GSPC",
        "ES=F",
        "AAPL1",  # not junk: the format rule refuses it, with its own message
        "is tesla a buy?",
        "what about microsoft stock",
        "what's the P/E of $MSFT?",
        "how is AT&T doing, and the S&P 500?",
        'should I buy "Apple" (AAPL) now!',
        "AAPL' OR '1'='1",  # quotes are prose in a question; the text is never spliced into SQL
    ],
)
def test_tickers_and_questions_are_not_junk(text: str) -> None:
    assert junk_characters(text) == ""
    refuse_junk(text)


def test_errors_echo_at_most_200_characters_of_the_input() -> None:
    long_word = "A" * 5000 + ";" + "".join(chr(c) for c in range(0x21, 0x30))
    with pytest.raises(JunkInputError) as info:
        refuse_junk(long_word)
    message = str(info.value)
    assert "A" * MAX_ECHO in message and "A" * (MAX_ECHO + 1) not in message
    assert len(message) < MAX_ECHO + 200 and "';'" in message and "…" in message
    with pytest.raises(InvalidTickerError) as bad:
        normalize_ticker("B" * 5000)
    assert len(str(bad.value)) < MAX_ECHO + 100 and bad.value.symbol == "B" * 5000


def test_name_once_adds_the_subject_only_when_missing() -> None:
    from core.tickers import name_once

    assert name_once("ZZZZZ", "not in the embedded dataset") == "ZZZZZ: not in the embedded dataset"
    assert name_once("ZZZZZ", "ZZZZZ: not in the embedded dataset") == "ZZZZZ: not in the embedded dataset"
    assert name_once("AAPL", "AAPL requested end 2026-11-23") == "AAPL requested end 2026-11-23"
    # another symbol that merely starts with the same letters is not the subject
    assert name_once("BRK", "BRK.B: no data") == "BRK: BRK.B: no data"


def test_drop_subject_removes_every_stacked_prefix() -> None:
    from core.tickers import drop_subject

    assert drop_subject("AAPL", "AAPL: AAPL: AAPL: requested end") == "requested end"
    assert drop_subject("AAPL", "research failed: AAPL: x") == "research failed: AAPL: x"
