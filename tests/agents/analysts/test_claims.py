"""Claims a statement makes that the cited outputs contradict (agents.analysts.claims), and the
readings shown to the analysts (agents.analysts.readings): the product's own wording must pass
the check on real data, and the same wording with the comparison flipped must not."""

from __future__ import annotations

import re
from datetime import date
from typing import Any

import pytest

from agents.analysts.claims import contradictions, label_problems
from agents.analysts.deterministic import technical_view
from agents.analysts.enforce import Sources, drop_unverified, unverified_of
from agents.analysts.grounding import (
    ValueIndex,
    extract_numbers,
    keyed_values,
    misattributed,
    unverified_numbers,
)
from agents.analysts.models import TechnicalView
from agents.analysts.readings import fundamental_readings, technical_readings
from agents.data.market.embedded import EmbeddedProvider
from agents.quant.indicators import compute_indicators
from agents.quant.scorer import score_technical

# IBM as of 2011-12-30 as the real 0.5B model was shown it (docs/benchmarks.md), plus indicators
IBM = {
    "current_price": 183.88,
    "previous_close": 186.18,
    "close": 183.88,
    "rsi_14": 55.2,
    "macd": -0.89,
    "macd_signal": -0.5,
    "sma_50": 180.1,
    "sma_200": 175.3,
    "bb_upper": 190.0,
    "bb_lower": 170.0,
}
KEYED = {k: [v] for k, v in IBM.items()}


def test_the_models_wrong_comparison_and_trend_are_contradictions() -> None:
    wrong = "The close price is currently at $183.88, which is above the previous close of $186.18."
    assert contradictions(wrong, KEYED) == ["close $183.88 above previous close $186.18 (it is below)"]
    trend = "IBM is a relatively strong stock and is likely to be in a downtrend."
    assert contradictions(trend, KEYED) == [
        "downtrend (the close 183.88 is above the fifty-day SMA 180.1 and the two-hundred-day SMA 175.3)"
    ]
    assert contradictions("The stock is overbought, RSI 55.2.", KEYED) == [
        "overbought (the RSI is 55.2, at or below seventy)"
    ]
    # a measure named without its number is read from the outputs
    assert contradictions("The close is below the fifty-day SMA.", KEYED) == [
        "the close (183.88) below the fifty-day SMA (180.1) (it is above)"
    ]
    assert contradictions("MACD -0.89 is above zero.", KEYED) == ["MACD -0.89 above zero (it is below)"]
    # a threshold in words is an operand: the real model read the P/E rule as the price's
    # (and the P/E rule's verdict read on the price is a misreading of its own)
    assert contradictions("The current price (183.88) is below fifteen (modest valuation).", KEYED) == [
        "close 183.88 below fifteen (it is above)",
        "modest valuation read on the close (a verdict of the P/E ratio's rule)",
    ]


@pytest.mark.parametrize(
    "text",
    [
        "The close price is $183.88, below the previous close of $186.18.",
        "Close 183.88 is 2.1% above the fifty-day SMA 180.1 and above the 200-day SMA.",
        "The RSI of 55.2 is neither overbought nor oversold.",
        "The close is not above the upper band.",
        "IBM could enter a downtrend if it loses the fifty-day SMA.",
        "Price is down 1.24% from 186.18.",  # a distance first: not judged
        "RSI 55.2 is above thirty and below seventy.",  # thresholds in words are no operands
        "MACD line -0.89 is below its signal line -0.5 (histogram -0.39) and below zero.",
        # a percentage in words is a distance, "twenty-day" a period
        "Volatility 0.25 (annualised, as a fraction) is above the threshold of forty percent.",
        "The close is above the twenty-day average.",
        "The close is near the upper band, which sits above the fifty-day SMA.",
    ],
)
def test_true_negated_hedged_or_unsettled_claims_pass(text: str) -> None:
    assert contradictions(text, KEYED) == []


def test_a_shared_subject_is_kept_across_and_and_asides() -> None:
    keyed = {**KEYED, "macd": [-0.2], "sma_200": [182.0]}
    # the second comparison's subject is the close, not the fifty-day SMA before it
    assert (
        contradictions(
            "Close 183.88 is above the fifty-day SMA 180.1 and above the two-hundred-day SMA 182.", keyed
        )
        == []
    )
    # the histogram in parentheses is an aside: "and above zero" is said of the MACD line
    said = "MACD line -0.2 is above its signal line -0.5 (histogram 0.3) and above zero."
    assert contradictions(said, keyed) == ["MACD -0.2 above zero (it is below)"]
    assert contradictions(said.replace("and above zero", "and below zero"), keyed) == []


def test_a_measure_with_several_values_settles_nothing() -> None:
    keyed = {**KEYED, "sma_50": [180.1, 190.0]}
    assert contradictions("The close is below the fifty-day SMA.", keyed) == []


def _technical(ticker: str, end: str) -> dict[str, Any]:
    # the embedded provider's real daily bars (Quandl WIKI via bokeh_sampledata)
    bars = EmbeddedProvider().bars(symbol=ticker, start=None, end=date.fromisoformat(end))
    ind = compute_indicators(bars=bars)
    top = {k: ind.pop(k) for k in ("close", "high_52w", "pct_from_52w_high") if k in ind}
    return {**top, "indicators": ind}


_FLIP = {"above": "below", "below": "above"}
CASES = [
    (t, e) for t in ("AAPL", "IBM", "MSFT") for e in ("2005-06-30", "2008-10-31", "2011-12-30", "2013-02-28")
]


@pytest.mark.parametrize(("ticker", "end"), CASES)
def test_the_scorers_own_statements_hold_and_flipped_ones_do_not(ticker: str, end: str) -> None:
    """On the embedded data (Bokeh sample data: real daily OHLCV), every rule statement of
    the scorer and every technical reading passes the check; the trend statements with their
    comparison word flipped are each found."""
    technical = _technical(ticker, end)
    keyed = keyed_values(technical)
    flat = {**technical["indicators"], **{k: v for k, v in technical.items() if k != "indicators"}}
    score = score_technical(indicators=flat, refs={"indicators": "technical_indicators_0123456789ab"})
    texts = [s.text for s in score.rationale] + [f.text for f in score.risk_flags]
    texts += technical_readings(technical=technical, quote=None)
    for text in texts:
        assert contradictions(text, keyed) == [], text
        # the names it reads numbers with are the right ones ("the fifty-two-week high 69.655")
        assert misattributed(text, keyed) == [], text
    flipped = 0
    for comp in score.components:
        if comp.name not in {"price_vs_sma50", "price_vs_sma200", "sma_cross"}:
            continue
        head, _, _ = comp.text.partition(":")
        word = next((w for w in _FLIP if f" {w} " in head), None)
        if word is None:  # "equal to"
            continue
        wrong = head.replace(f" {word} ", f" {_FLIP[word]} ", 1) + "."
        assert contradictions(wrong, keyed), wrong
        flipped += 1
    assert flipped >= 2


def test_a_contradicted_sentence_gets_the_correction_round_and_is_dropped() -> None:
    ref = "get_stock_data_0123456789ab"
    sources = Sources(
        known=[ref],
        load=lambda r: ValueIndex(IBM),
        base=[ref],
        load_keys=lambda r: keyed_values(IBM),
    )
    answer = {
        "notes": "The close of $183.88 is above the previous close of $186.18. RSI 55.2 is neutral.",
        "source_refs": [ref],
    }
    found = unverified_of(answer, sources=sources, name="technical")
    assert [d.numbers for d in found] == [("close $183.88 above previous close $186.18 (it is below)",)]
    kept, dropped = drop_unverified(answer, sources=sources, name="technical")
    assert kept["notes"] == "RSI 55.2 is neutral."
    assert dropped == found


def test_technical_readings_are_true_grounded_and_carry_no_vote() -> None:
    technical = _technical("IBM", "2011-12-30")
    quote = {"current_price": technical["close"], "previous_close": 186.18}
    readings = technical_readings(technical=technical, quote=quote)
    assert readings and not any(re.search(r"\bvote\b|\bweight\b", r) for r in readings)
    # periods in digits: the 0.5B model garbled "fifty-day" into "five-day" when copying
    assert any("50-day SMA" in r for r in readings) and not any("fifty-day" in r for r in readings)
    assert readings[0].startswith("The quote's price ") and " below the previous close 186.18" in readings[0]
    assert readings[-1].startswith("Close ") and "200-day SMA" in readings[-1]
    keyed = keyed_values({**technical, **quote})
    index = ValueIndex({**technical, **quote})
    for reading in readings:
        assert contradictions(reading, keyed) == [], reading
        assert all(index.has(p) for p in extract_numbers(reading)), reading
    assert technical_readings(technical={}, quote=None) == []
    assert technical_readings(technical={"indicators": {"rsi_14": float("nan")}}, quote=None) == []


def test_fundamental_readings_name_the_rules_that_hold_and_the_quiet_fields() -> None:
    readings = fundamental_readings({"pe_ratio": 35.2, "gross_margin": 0.45, "roic": 0.1, "market_cap": 1e9})
    assert readings == [
        "The P/E is 35.20: P/E above thirty (rich valuation).",
        "The gross margin is 45.00 %: gross margin of forty percent or more.",
        "No rule of thumb is crossed by the return on invested capital 10.00 %.",
    ]
    digest = {"pe_ratio": 35.2, "gross_margin": 0.45, "roic": 0.1}
    keyed = keyed_values(digest)
    for text in readings:  # fractions as percentages: grounded, and each read with its measure
        assert unverified_numbers(text, [digest]) == [], text
        assert contradictions(text, keyed) == [] and misattributed(text, keyed) == [], text
    assert fundamental_readings({}) == []


@pytest.mark.parametrize(
    ("growth", "surprise", "moved", "verdict", "growth_pct", "surprise_pct"),
    [
        (-0.087, 0.0716, "fell", "beat", "-8.70 %", "+7.16 %"),
        (0.1167, -0.0211, "grew", "missed", "+11.67 %", "-2.11 %"),
        (0.0, 0.0, "was flat", "matched", "+0.00 %", "+0.00 %"),
    ],
)
def test_the_earnings_trend_is_read_against_zero_and_passes_the_checks(
    growth: float, surprise: float, moved: str, verdict: str, growth_pct: str, surprise_pct: str
) -> None:
    """JPM 2014-09-30 had only its earnings trend in the shared fundamentals and got no reading
    at all; the trend is now read in words, each number as the report prints it (a change as a
    signed percentage to two decimals, the EPS to the cent)."""
    digest = {"eps_actual": -1.25, "eps_growth_yoy": growth, "eps_surprise_mean_4q": surprise}
    readings = fundamental_readings(digest)
    assert readings == [
        f"The EPS growth is {growth_pct}: the last four quarters' earnings {moved} on the four before.",
        f"The mean EPS surprise is {surprise_pct}: reported earnings {verdict} the estimates over the "
        "last four quarters.",
        "The EPS of the last four reported quarters is -1.25 USD a share (a loss).",
    ]
    keyed = keyed_values(digest)
    for text in readings:
        assert unverified_numbers(text, [digest]) == [], text
        assert contradictions(text, keyed) == [] and misattributed(text, keyed) == [], text


def test_the_earnings_trend_measures_are_read_with_their_own_values() -> None:
    """The 0.5B model wrote "The EPS ratio is 15.45" with 15.45 the P/E (AAPL 2015-06-30)."""
    digest = {"pe_ratio": 15.45, "eps_actual": 8.12, "eps_growth_yoy": 0.3444, "eps_surprise_mean_4q": 0.0956}
    keyed = keyed_values(digest)
    said = "The EPS ratio is 15.45, and the actual EPS for the last four quarters is 8.12 USD a share."
    assert misattributed(said, keyed) == ["15.45 (not the EPS)"]
    assert misattributed("EPS growth of 0.0956 and an earnings surprise of 0.3444.", keyed) == [
        "0.0956 (not the EPS growth)",
        "0.3444 (not the EPS surprise)",
    ]
    right = "The EPS growth of 0.3444, the EPS surprise 0.0956, EPS 8.12 and the P/E 15.45."
    assert misattributed(right, keyed) == []
    # a measure the cited outputs do not hold is not judged
    assert misattributed("The EPS estimate is 2.1.", keyed) == []


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # the real 0.5B model (AAPL 2012-06-29: EPS 41.16, growth 0.9342 as a fraction)
        ("The quote shows a 41.16% EPS growth on the last four quarters.", ["41.16% (not the EPS growth)"]),
        ("It had a growth rate, an EPS growth of 0.9342%.", ["0.9342% (not the EPS growth)"]),
        ("A mean EPS surprise of 0.2202% and an EPS growth of 93.42%.", ["0.2202% (not the EPS surprise)"]),
        # right: a percentage of the fraction, before or after the name, or the fraction itself
        ("A 93.42% EPS growth and an EPS surprise of 22.02%.", []),
        ("The EPS growth of 0.9342 and the EPS 41.16.", []),
        # a percentage not right before the name is not read with it
        ("Up 41.16% since the EPS growth report.", []),
    ],
)
def test_a_percentage_read_with_a_fraction_must_be_a_hundred_times_it(text: str, expected: list[str]) -> None:
    """A printed percentage matches a value or 100 × it anywhere (grounding.matches); read with
    the EPS growth or surprise, held as fractions, only 100 × it is right: "0.9342%" for a growth
    of 0.9342 is a hundredfold misreading the 0.5B model wrote."""
    keyed = keyed_values({"eps_actual": 41.16, "eps_growth_yoy": 0.9342, "eps_surprise_mean_4q": 0.2202})
    assert misattributed(text, keyed) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # the real 0.5B model's sentences (MSFT 2010-06-30, IBM 2011-12-30)
        (
            "The EPS of the last four reported quarters is 1.95 USD, which is below fifteen "
            "(modest valuation).",
            ["modest valuation read on the EPS (a verdict of the P/E ratio's rule)"],
        ),
        (
            "IBM has a moderate valuation, as evidenced by the EPS growth of 0.1793 and the reported EPS "
            "being below fifteen (modest valuation).",
            ["modest valuation read on the EPS (a verdict of the P/E ratio's rule)"],
        ),
        (
            "The close 584 is above thirty (rich valuation).",
            ["rich valuation read on the close (a verdict of the P/E ratio's rule)"],
        ),
        # the rule read on its own measure, or on no measure at all
        ("pe_ratio 12.3: P/E below fifteen (modest valuation).", []),
        ("The P/E ratio of 35 means a rich valuation.", []),
        ("AAPL has a modest valuation.", []),
    ],
)
def test_a_rules_verdict_read_on_another_measure_is_a_misreading(text: str, expected: list[str]) -> None:
    assert [c for c in contradictions(text, {}) if "verdict" in c] == expected
    # the fundamental readings themselves never misapply a verdict
    for reading in fundamental_readings({"pe_ratio": 12.3, "eps_actual": 1.95, "eps_growth_yoy": 0.1}):
        assert contradictions(reading, keyed_values({"pe_ratio": 12.3, "eps_actual": 1.95})) == [], reading


def test_the_report_tells_an_invented_number_from_a_misreading() -> None:
    from pipeline.report_llm import grounding_markdown

    lines = grounding_markdown(
        {
            "dropped": [
                {
                    "part": "technical.notes",
                    "text": "Close 987.65 is above the previous close of $186.18.",
                    "numbers": ["987.65", "close 987.65 above previous close $186.18 (it is below)"],
                }
            ]
        }
    )
    assert (
        "- dropped from technical.notes: 987.65 match no cited tool output; close 987.65 above "
        "previous close $186.18 (it is below): the cited tool outputs say otherwise (statement: "
        "'Close 987.65 is above the previous close of $186.18.')"
    ) in lines


def test_a_moving_average_of_another_period_holding_a_known_measures_value_is_misattributed() -> None:
    """The 0.5B model shown the readings wrote "the five-day SMA 128.261" with 128.261 the
    fifty-day SMA: no output holds a five-day SMA, so the number is read under a wrong name."""
    from agents.analysts.grounding import misattributed

    keyed = {"sma_50": [128.261], "sma_200": [117.3362]}
    said = "The five-day SMA 128.261 is above the two-hundred-day SMA 117.3362 (golden-cross alignment)."
    assert misattributed(said, keyed) == ["128.261 (not a five-day SMA: the fifty-day SMA)"]
    assert misattributed(said.replace("five-day", "fifty-day"), keyed) == []


def test_a_high_or_low_of_another_period_holding_the_52_week_value_is_misattributed() -> None:
    """The 0.5B model wrote "the 50-day high of $133.9804" with 133.9804 the 52-week high."""
    from agents.analysts.grounding import misattributed

    keyed = {"52w_high": [133.9804], "52w_low": [90.9736], "current_price": [125.43]}
    said = (
        "The stock price is currently at $125.43, which is below the 50-day high of $133.9804 "
        "and above the 50-day low of $90.9736."
    )
    assert misattributed(said, keyed) == [
        "$133.9804 (not a 50-day high: the 52-week high)",
        "$90.9736 (not a 50-day low: the 52-week low)",
    ]
    assert misattributed(said.replace("50-day", "52-week"), keyed) == []
    # in words, as the scorer's near-high flag writes it: the same measure, judged as such
    assert misattributed(said.replace("50-day", "fifty-two-week"), keyed) == []
    assert misattributed("Close 125.43 is near the fifty-two-week high 125.43.", keyed) == [
        "125.43 (not the 52-week high)"
    ]
    # a period no output holds, with a number no measure holds: not judged here (grounding
    # still checks that some cited output holds it)
    assert misattributed("The ten-day SMA 99.1 is low.", keyed) == []


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # the 0.5B model put the ADX reading's words under the bands' name
        (
            "The Bollinger bands are not above twenty-five (a weak trend).",
            ["the Bollinger bands (170 to 190) not above twenty-five (it is above)"],
        ),
        ("Close 183.88 isn't above the upper band 190.", []),
        ("Close 183.88 is not below the fifty-day SMA 180.1.", []),
        (
            "Close 183.88 is not above the fifty-day SMA 180.1.",
            ["close 183.88 not above fifty-day SMA 180.1 (it is above)"],
        ),
        ("The close could not be above the upper band.", []),  # hedged before the negation
        ("The close 183.88 is between the Bollinger bands, above the lower one.", []),
        # between the bands: "below the bands" holds for the upper one, so it is not judged
        ("The close 183.88 is below the Bollinger bands.", []),
        (
            "The RSI 55.2 is above the Bollinger bands.",
            ["RSI 55.2 above the Bollinger bands (170 to 190) (it is below)"],
        ),
        ("The Bollinger bands are above 175.", []),  # the lower band is not: unsettled
    ],
)
def test_negated_comparisons_and_both_bands_are_judged(text: str, expected: list[str]) -> None:
    assert contradictions(text, KEYED) == expected


LABELS = TechnicalView.CHECKED_LABELS


def test_labels_and_levels_the_indicators_contradict_are_found() -> None:
    keyed = {**KEYED, "adx_14": [18.0], "bb_middle": [180.0], "bb_upper": [182.0]}
    answer = {
        "trend_direction": "down",  # close above both SMAs
        "trend_quality": "strong",  # ADX 18
        "extension_risk": "low",  # close above the upper band
        "support_levels": [180.1, 186.18],  # 186.18 is above the close
        "resistance_levels": [175.3],  # below the close
    }
    found = label_problems(answer, keyed, keys=LABELS)
    assert [(p.key, p.given, p.data_label) for p in found] == [
        ("trend_direction", "down", "up"),
        ("trend_quality", "strong", "weak"),
        ("extension_risk", "low", "high"),
        ("support_levels", "186.18", None),
        ("resistance_levels", "175.3", None),
    ]
    assert found[0].why == (
        "trend_direction down (the close 183.88 is above the fifty-day SMA 180.1 "
        "and the two-hundred-day SMA 175.3)"
    )
    # judgements the data does not contradict, and data that settles nothing
    fine = {"trend_direction": "sideways", "trend_quality": "moderate", "extension_risk": "moderate"}
    assert (
        label_problems({**answer, **fine, "support_levels": [], "resistance_levels": []}, keyed, keys=LABELS)
        == []
    )
    assert label_problems(answer, {"close": [183.88, 184.0]}, keys=LABELS) == []
    assert label_problems(answer, keyed, keys=()) == []


@pytest.mark.parametrize(("ticker", "end"), CASES)
def test_the_deterministic_views_labels_hold_and_the_opposite_ones_do_not(ticker: str, end: str) -> None:
    """On the embedded data, the labels and levels of the deterministic technical view (the
    fallback the model's answer is compared with) are never contradicted; its trend and
    extension labels turned to the opposite are, where the data is clear enough."""
    technical = _technical(ticker, end)
    keyed = keyed_values(technical)
    view = technical_view(technical=technical, signal=None, refs=[]).model_dump()
    assert label_problems(view, keyed, keys=LABELS) == []
    close, ind = technical["close"], technical["indicators"]
    opposite = {"up": "down", "down": "up", "sideways": "sideways"}[view["trend_direction"]]
    flipped = label_problems({**view, "trend_direction": opposite}, keyed, keys=LABELS)
    both = (close > ind["sma_50"]) == (close > ind["sma_200"])
    assert bool(flipped) == (both and opposite != "sideways")
    # the opposite extension and quality labels where the data settles them (over the cases:
    # six closes below the middle band, eleven ADX readings outside twenty to twenty-five;
    # none closes above the upper band, so "low" is judged only in the unit test above)
    wrong_extension = "high" if close < ind["bb_middle"] else "low" if close > ind["bb_upper"] else None
    adx = ind["adx_14"]
    wrong_quality = "strong" if adx < 20 else "weak" if adx > 25 else None
    for key, label in (("extension_risk", wrong_extension), ("trend_quality", wrong_quality)):
        found = label_problems({**view, key: label}, keyed, keys=LABELS) if label else []
        assert bool(found) == (label is not None), (key, label)
    swapped = {
        **view,
        "support_levels": view["resistance_levels"],
        "resistance_levels": view["support_levels"],
    }
    found = label_problems(swapped, keyed, keys=LABELS)
    assert len(found) == len(view["support_levels"]) + len(view["resistance_levels"])


def test_a_contradicted_label_is_corrected_then_replaced_by_the_datas_and_said_so() -> None:
    ref = "technical_indicators_0123456789ab"
    data = {**IBM, "adx_14": 31.0}
    sources = Sources(
        known=[ref], load=lambda r: ValueIndex(data), base=[ref], load_keys=lambda r: keyed_values(data)
    )
    answer = {
        "recommendation": "bearish",
        "trend_direction": "down",
        "trend_quality": "weak",
        "support_levels": [175.3, 186.18],
        "resistance_levels": [190.0],
        "extension_risk": "moderate",
        "notes": "RSI 55.2 is neutral.",
        "source_refs": [ref],
    }
    found = unverified_of(answer, sources=sources, name="technical", labels=LABELS)
    assert [(d.part, d.text) for d in found] == [
        ("technical.trend_direction", "down"),
        ("technical.trend_quality", "weak"),
        ("technical.support_levels", "186.18"),
    ]
    # without the model's labels named, nothing of this is judged (the options-plan decisions)
    assert unverified_of(answer, sources=sources, name="technical") == []
    kept, dropped = drop_unverified(answer, sources=sources, name="technical", labels=LABELS)
    assert kept["trend_direction"] == "up" and kept["trend_quality"] == "strong"
    assert kept["support_levels"] == [175.3] and kept["resistance_levels"] == [190.0]
    assert kept["recommendation"] == "bearish" and kept["notes"] == answer["notes"]
    TechnicalView.model_validate(kept)
    assert dropped[0].numbers[-1].endswith("; the data's up is used")
    assert dropped[2].numbers == ("186.18 above the close 183.88: no support",)


def test_every_fraction_a_fundamental_reading_shows_prints_as_a_percentage() -> None:
    """A field held as a fraction (``grounding.FRACTION_KEYS``) read as a plain number is the
    hundredfold misreading the 0.5B model wrote: the readings print each one as the report
    does, a level as "44.59 %", a change signed ("+93.42 %", "-2.11 %")."""
    digest = {"gross_margin": 0.4459, "roic": 0.2764}
    digest |= {"eps_growth_yoy": 0.9342, "eps_surprise_mean_4q": -0.0211}
    text = " ".join(fundamental_readings(digest))
    for shown in ("44.59 %", "27.64 %", "+93.42 %", "-2.11 %"):
        assert shown in text, text
    assert "0.9342" not in text and re.search(r"\d%", text) is None, text  # no "93.42%"
