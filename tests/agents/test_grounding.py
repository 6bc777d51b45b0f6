"""Numeric grounding: printed numbers must match cited tool values (documented rounding)."""

from __future__ import annotations

from agents.analysts.grounding import extract_numbers, unverified_numbers

TOOL = {
    "indicators": {"rsi_14": 63.2149, "sma_50": 441.1234, "hv_20": 0.2345},
    "close": 437.5,
    "volume": 1234567,
}


def test_labels_dates_and_refs_are_not_facts() -> None:
    text = (
        "RSI(14) is 63.21 on 2013-03-01, MACD(12,26,9) bullish, 52-week high near [get_history_0123456789ab]"
    )
    assert [n.text for n in extract_numbers(text)] == ["63.21"]


def test_rounded_values_match() -> None:
    assert unverified_numbers("RSI(14) 63.21, SMA(50) 441.12, close $437.50", [TOOL]) == []
    assert unverified_numbers("volume 1,234,567", [TOOL]) == []


def test_percent_matches_fraction() -> None:
    assert unverified_numbers("HV(20) is 23.45% annualised", [TOOL]) == []


def test_wrong_or_invented_numbers_are_flagged() -> None:
    assert unverified_numbers("RSI(14) 63.3 and a target of 500", [TOOL]) == ["63.3", "500"]


def test_no_sources_means_every_number_is_unverified() -> None:
    assert unverified_numbers("close 437.5", []) == ["437.5"]


def test_value_index_agrees_with_matches_and_is_reused() -> None:
    from agents.analysts.grounding import ValueIndex, matches

    index = ValueIndex(TOOL)
    for text in ("63.21", "63.2", "63.3", "441.12", "23.45%", "23.4%", "1,234,567", "437.50", "0.2345", "12"):
        printed = extract_numbers(f"value {text}")[0]
        expected = any(matches(printed, v) for v in (63.2149, 441.1234, 0.2345, 437.5, 1234567))
        assert index.has(printed) is expected, text
    # a prebuilt index is accepted wherever raw outputs are
    assert unverified_numbers("RSI(14) 63.21 and 99.9", [index]) == ["99.9"]


# The report's display conventions (core.display): prices to the cent, percentages with a
# space before "%", counts with thousands separators. Values of the real AAPL 2013-03-01 run.
QUOTE = {"current_price": 430.47, "change": -10.93, "change_percent": -0.024762, "volume": 19730300}
INDICATORS = {"macd": -12.0917, "macd_signal": -11.5845, "sma_50": 483.1986, "bb_upper": 480.0971}


def test_numbers_in_the_reports_display_format_verify() -> None:
    text = "Latest quote (as reported): price 430.47, change -10.93 (-2.48 %), volume 19,730,300."
    assert unverified_numbers(text, [QUOTE]) == []
    text = "MACD line -12.09 is below its signal line -11.58; close below the SMA 483.20 and the band 480.10."
    assert unverified_numbers(text, [INDICATORS]) == []


def test_a_percentage_with_a_space_is_a_percentage() -> None:
    (printed,) = extract_numbers("change -2.48 % on the day")
    assert (printed.text, printed.value, printed.decimals, printed.percent) == ("-2.48 %", -2.48, 2, True)


def test_a_wrong_number_in_display_format_still_fails() -> None:
    # one cent off, one basis point off, one share off: each is a different number
    text = "price 430.48, change -2.49 %, volume 19,730,301, SMA 483.21"
    assert unverified_numbers(text, [QUOTE, INDICATORS]) == ["430.48", "-2.49 %", "19,730,301", "483.21"]
