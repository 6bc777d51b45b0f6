"""agents.quant.scorer: the rule table, thresholds, confidence and checkable statements.

The indicator dicts built by hand below are SCENARIO INPUTS for the rule table (values chosen
to sit on one side of each documented threshold), not market data. One test at the end scores
indicators computed from real AAPL bars.
"""

from __future__ import annotations

import importlib.resources
import math
import re
from typing import Any

import pandas as pd
import pytest

from agents.analysts.grounding import unverified_numbers
from agents.quant.scorer import (
    BUY_THRESHOLD,
    CONFIDENCE_CAP,
    HIGH_VOLATILITY_HV,
    NEAR_52W_HIGH_PCT,
    SELL_THRESHOLD,
    TREND_GROUP,
    WEIGHTS,
    TechnicalScore,
    score_technical,
)

REFS = {"history": "get_history_0123456789ab", "indicators": "technical_indicators_0123456789ab"}
QUOTE_REFS = {**REFS, "quote": "get_stock_data_0123456789ab"}

# Scenario: an established uptrend (close > SMA50 > SMA200), MACD above signal and zero,
# ADX above 25, RSI not yet overbought, close inside the bands, 10 % under the 52-week high.
BULLISH: dict[str, float | str | None] = {
    "rsi_14": 62.5,
    "macd": 1.25,
    "macd_signal": 0.9,
    "macd_hist": 0.35,
    "bb_upper": 112.0,
    "bb_middle": 105.0,
    "bb_lower": 98.0,
    "sma_50": 100.0,
    "sma_200": 90.0,
    "ema_21": 104.0,
    "atr_14": 2.1,
    "adx_14": 31.0,
    "obv": 1500000.0,
    "hv_20": 0.22,
    "close": 108.0,
    "date": "2020-01-02",
    "high_52w": 120.0,
    "low_52w": 80.0,
    "bars_used": 400,
    "pct_from_52w_high": -0.1,
}
# Scenario: the mirror image, a strong downtrend.
BEARISH: dict[str, float | str | None] = {
    **BULLISH,
    "rsi_14": 38.5,
    "macd": -1.25,
    "macd_signal": -0.9,
    "macd_hist": -0.35,
    "sma_50": 110.0,
    "sma_200": 125.0,
    "close": 102.0,
    "high_52w": 140.0,
    "pct_from_52w_high": -0.2714,
}
# Scenario: long-term uptrend but short-term weakness, weak trend strength: the rules disagree.
MIXED: dict[str, float | str | None] = {
    **BULLISH,
    "close": 96.0,  # below SMA50 (100) but above SMA200 (90)
    "macd": -0.4,
    "macd_signal": -0.1,
    "macd_hist": -0.3,
    "adx_14": 18.0,
    "rsi_14": 45.0,
    "bb_lower": 95.0,
    "pct_from_52w_high": -0.2,
}

#: A number as a statement prints it: sign, thousands separators, decimals, a "%" after a space.
PRINTED = re.compile(r"[-+]?\d[\d,]*(?:\.\d+)?(?:[eE][-+]?\d+)?(?: %)?")


def _texts(result: TechnicalScore) -> list[str]:
    return (
        [s.text for s in result.rationale]
        + [c.text for c in result.components]
        + [f.text for f in result.risk_flags]
    )


def _assert_numbers_are_inputs(result: TechnicalScore, *sources: dict[str, Any]) -> None:
    """Every number printed is an input value as the report's tables print it: two decimals
    (prices, indicator values, percentages of fractions) or, for counts, whole with thousands
    separators; and the project's grounding checker finds each one in the inputs."""
    values = [
        v for src in sources for v in src.values() if isinstance(v, int | float) and not isinstance(v, bool)
    ]
    for text in _texts(result):
        for token in PRINTED.findall(text):
            digits = token.removesuffix(" %").replace(",", "")
            assert "e" not in digits.lower(), (token, text)
            if "." in digits:
                assert len(digits.split(".")[1]) == 2, (token, text)
            else:  # a count: one of the inputs, whole
                assert any(float(digits) == round(abs(v)) for v in values), (token, text)
        assert unverified_numbers(text, list(sources)) == [], text


def _skip_statements(result: TechnicalScore) -> list[str]:
    """Statements about a rule that was not scored (the closing summary excluded)."""
    return [
        s.text for s in result.rationale if " not scored: " in s.text and not s.text.startswith("Technical")
    ]


def _flags(result: TechnicalScore) -> set[str]:
    return {f.flag for f in result.risk_flags}


def test_strong_bullish_scenario_is_buy() -> None:
    result = score_technical(indicators=BULLISH, refs=REFS)

    assert result.signal == "BUY"
    assert result.score >= BUY_THRESHOLD
    assert 0.5 < result.confidence <= CONFIDENCE_CAP
    votes = {c.name: c.vote for c in result.components}
    assert votes["macd"] == 1.0
    assert votes["price_vs_sma50"] == votes["price_vs_sma200"] == votes["sma_cross"] == 1.0
    assert votes["rsi"] == 0.0  # 62.5 is in the neutral zone
    assert votes["bollinger"] == 0.0
    _assert_numbers_are_inputs(result, BULLISH)


def test_strong_bearish_scenario_is_sell() -> None:
    result = score_technical(indicators=BEARISH, refs=REFS)

    assert result.signal == "SELL"
    assert result.score <= SELL_THRESHOLD
    assert 0.5 < result.confidence <= CONFIDENCE_CAP
    assert all(c.vote <= 0 for c in result.components)
    _assert_numbers_are_inputs(result, BEARISH)


def test_bullish_and_bearish_mirror_each_other() -> None:
    up = score_technical(indicators=BULLISH, refs=REFS)
    down = score_technical(indicators=BEARISH, refs=REFS)
    assert up.score == -down.score
    assert up.confidence == down.confidence


def test_mixed_scenario_is_hold_with_modest_confidence() -> None:
    result = score_technical(indicators=MIXED, refs=REFS)

    assert result.signal == "HOLD"
    assert SELL_THRESHOLD < result.score < BUY_THRESHOLD
    assert result.confidence <= 0.5
    votes = {c.name: c.vote for c in result.components}
    assert votes["price_vs_sma50"] < 0 < votes["price_vs_sma200"]
    # ADX 18 is not above 25: trend votes count half
    assert abs(votes["price_vs_sma200"]) == 0.5
    assert any("half weight" in c.text for c in result.components)
    _assert_numbers_are_inputs(result, MIXED)


def test_missing_indicators_are_skipped_with_a_statement_and_lower_confidence() -> None:
    # given the bullish scenario without SMA(200) and ADX (e.g. under 200 bars of history)
    partial = {**BULLISH, "sma_200": None, "adx_14": None}
    del partial["rsi_14"]  # absent key: the same as None

    full = score_technical(indicators=BULLISH, refs=REFS)
    result = score_technical(indicators=partial, refs=REFS)

    names = {c.name for c in result.components}
    assert names == {"macd", "price_vs_sma50", "bollinger"}
    skipped_texts = _skip_statements(result)
    assert len(skipped_texts) == 3
    assert any("two-hundred-day SMA unavailable" in t for t in skipped_texts)
    assert any(t.startswith("RSI not scored") for t in skipped_texts)
    assert any("ADX is unavailable" in c.text for c in result.components)
    assert result.confidence < full.confidence
    # no value was invented for the missing keys
    used = {k for c in result.components for k in c.values}
    assert not used & {"sma_200", "adx_14", "rsi_14"}
    _assert_numbers_are_inputs(result, partial)


def test_nothing_to_score_is_hold_with_zero_confidence() -> None:
    result = score_technical(indicators={"close": 10.0}, refs=REFS)
    assert result.signal == "HOLD"
    assert result.score == 0.0
    assert result.confidence == 0.0
    assert result.components == []
    assert len(_skip_statements(result)) == len(WEIGHTS)


@pytest.mark.parametrize(
    ("rsi", "vote"),
    [(29.99, 1.0), (30.0, 0.0), (50.0, 0.0), (70.0, 0.0), (70.01, -1.0)],
)
def test_rsi_thresholds(rsi: float, vote: float) -> None:
    result = score_technical(indicators={**MIXED, "rsi_14": rsi}, refs=REFS)
    assert {c.name: c.vote for c in result.components}["rsi"] == vote


@pytest.mark.parametrize(("adx", "factor"), [(25.0, 0.5), (25.01, 1.0), (10.0, 0.5), (40.0, 1.0)])
def test_adx_scales_trend_votes(adx: float, factor: float) -> None:
    result = score_technical(indicators={**BULLISH, "adx_14": adx}, refs=REFS)
    votes = {c.name: c.vote for c in result.components}
    assert votes["sma_cross"] == factor
    assert votes["macd"] == 1.0  # not a trend-following rule: never scaled


@pytest.mark.parametrize(("close", "vote"), [(112.01, -1.0), (112.0, 0.0), (98.0, 0.0), (97.99, 1.0)])
def test_bollinger_position(close: float, vote: float) -> None:
    result = score_technical(indicators={**BULLISH, "close": close}, refs=REFS)
    assert {c.name: c.vote for c in result.components}["bollinger"] == vote


def test_macd_half_votes_when_line_and_centre_disagree() -> None:
    # line above its signal (histogram > 0) but below zero: recovering, not yet bullish
    ind = {**BULLISH, "macd": -0.2, "macd_signal": -0.5, "macd_hist": 0.3}
    result = score_technical(indicators=ind, refs=REFS)
    assert {c.name: c.vote for c in result.components}["macd"] == 0.0


@pytest.mark.parametrize(
    ("pct", "fires"),
    [(-0.0499, True), (NEAR_52W_HIGH_PCT, True), (-0.0501, False), (0.0, True), (-0.3, False)],
)
def test_near_52w_high_flag_threshold(pct: float, fires: bool) -> None:
    ind = {**BULLISH, "pct_from_52w_high": pct}
    result = score_technical(indicators=ind, refs=REFS)
    assert ("NEAR_52W_HIGH" in _flags(result)) is fires
    if fires:
        flag = next(f for f in result.risk_flags if f.flag == "NEAR_52W_HIGH")
        assert f"(distance from the high {100 * pct:+.2f} %)" in flag.text  # a fraction, shown in %
        assert set(flag.source_refs) == {REFS["indicators"], REFS["history"]}
    _assert_numbers_are_inputs(result, ind)


@pytest.mark.parametrize(
    ("hv", "fires"),
    [(0.3999, False), (HIGH_VOLATILITY_HV, False), (0.4001, True), (1.2, True)],
)
def test_high_volatility_flag_threshold(hv: float, fires: bool) -> None:
    ind = {**BULLISH, "hv_20": hv}
    result = score_technical(indicators=ind, refs=REFS)
    assert ("HIGH_VOLATILITY" in _flags(result)) is fires
    if fires:  # the annualised fraction shown as the Indicators table shows HV(20): a percentage
        flag = next(f for f in result.risk_flags if f.flag == "HIGH_VOLATILITY")
        assert f"volatility {100 * hv:.2f} % (annualised)" in flag.text
    _assert_numbers_are_inputs(result, ind)


def test_flags_not_evaluable_say_so() -> None:
    ind = {**BULLISH, "pct_from_52w_high": None, "high_52w": None, "hv_20": None}
    result = score_technical(indicators=ind, refs=REFS)
    assert result.risk_flags == []
    notes = [s.text for s in result.rationale if "not evaluated" in s.text]
    assert len(notes) == 4  # near-high, volatility, liquidity (no dollar volume), earnings (no date)
    assert any(n.startswith("Liquidity") for n in notes)
    assert any(n.startswith("Earnings") for n in notes)


def test_low_liquidity_flag_at_the_threshold() -> None:
    below = score_technical(indicators={**BULLISH, "dollar_volume_20": 999_999.0}, refs=REFS)
    at = score_technical(indicators={**BULLISH, "dollar_volume_20": 1_000_000.0}, refs=REFS)
    assert [f.flag for f in below.risk_flags] == ["LOW_LIQUIDITY"]
    assert "average traded value 999,999 USD" in below.risk_flags[0].text  # USD whole, separators
    assert "LOW_LIQUIDITY" not in [f.flag for f in at.risk_flags]


def test_earnings_soon_flag_within_fourteen_days() -> None:
    refs = {**REFS, "fundamentals": "get_fundamentals_0123456789ab"}
    ind = {**BULLISH, "dollar_volume_20": 5e9}

    def flags(earnings: str) -> list[str]:
        got = score_technical(indicators=ind, refs=refs, earnings_date=earnings, as_of="2012-06-29")
        return [f.flag for f in got.risk_flags if f.flag == "EARNINGS_SOON"]

    assert flags("2012-07-13") == ["EARNINGS_SOON"]  # 14 days: inside
    assert flags("2012-07-14") == []  # 15 days
    assert flags("2012-06-28") == []  # already reported
    soon = score_technical(indicators=ind, refs=refs, earnings_date="2012-07-02", as_of="2012-06-29")
    flag = next(f for f in soon.risk_flags if f.flag == "EARNINGS_SOON")
    assert flag.source_refs == ["get_fundamentals_0123456789ab"]


def test_quote_is_restated_with_its_own_ref() -> None:
    # the shape our get_stock_data returns
    quote = {
        "current_price": 108.0,
        "change": 1.5,
        "change_percent": 0.014085,
        "volume": 31234500,
        "date": "x",
    }
    result = score_technical(indicators=BULLISH, quote=quote, refs=QUOTE_REFS)
    quoted = [s for s in result.rationale if s.source_refs == [QUOTE_REFS["quote"]]]
    assert len(quoted) == 1
    # as the report's Quote table prints these fields: USD to the cent, the change fraction as a
    # signed percentage, the volume whole with thousands separators
    assert (
        quoted[0].text
        == "Latest quote (as reported): price 108.00, change 1.50 (+1.41 %), volume 31,234,500."
    )
    _assert_numbers_are_inputs(result, BULLISH, quote)
    # the quote does not vote
    assert result.score == score_technical(indicators=BULLISH, refs=REFS).score


def test_every_statement_cites_given_refs() -> None:
    result = score_technical(indicators=MIXED, quote={"price": 96.0}, refs=QUOTE_REFS)
    cited = {r for s in result.rationale for r in s.source_refs}
    cited |= {r for c in result.components for r in c.source_refs}
    assert cited <= set(QUOTE_REFS.values())
    assert all(s.source_refs for s in result.rationale)


def test_history_ref_is_optional() -> None:
    result = score_technical(indicators=BULLISH, refs={"indicators": "technical_indicators_0123456789ab"})
    assert all(s.source_refs == ["technical_indicators_0123456789ab"] for s in result.rationale)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"indicators": BULLISH, "refs": {"history": "h"}}, "indicators"),
        ({"indicators": BULLISH, "refs": {**REFS, "quote": ""}, "quote": {"price": 1.0}}, "quote"),
        ({"indicators": {**BULLISH, "rsi_14": math.nan}, "refs": REFS}, "None for a missing"),
        ({"indicators": {**BULLISH, "sma_50": "100"}, "refs": REFS}, "must be a number"),
        ({"indicators": {**BULLISH, "adx_14": True}, "refs": REFS}, "must be a number"),
    ],
)
def test_invalid_input_raises(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        score_technical(**kwargs)


def test_pure_and_deterministic() -> None:
    before = dict(MIXED)
    a = score_technical(indicators=MIXED, refs=REFS)
    b = score_technical(indicators=MIXED, refs=REFS)
    assert a == b
    assert before == MIXED


def test_confidence_and_score_stay_in_range_over_a_grid() -> None:
    for rsi in (10.0, 50.0, 90.0):
        for sign in (-1.0, 1.0):
            for adx in (None, 10.0, 40.0):
                for close in (80.0, 105.0, 130.0):
                    ind = {
                        **BULLISH,
                        "rsi_14": rsi,
                        "macd": sign,
                        "macd_hist": sign / 2,
                        "adx_14": adx,
                        "close": close,
                    }
                    result = score_technical(indicators=ind, refs=REFS)
                    assert 0.0 <= result.confidence <= CONFIDENCE_CAP
                    assert -1.0 <= result.score <= 1.0
                    expected = (
                        "BUY"
                        if result.score >= BUY_THRESHOLD
                        else "SELL"
                        if result.score <= SELL_THRESHOLD
                        else "HOLD"
                    )
                    assert result.signal == expected


def _bokeh_bars(ticker: str, end: str) -> pd.DataFrame:
    path = importlib.resources.files("bokeh_sampledata") / "_data/stocks.csv.gz"
    with path.open("rb") as fh:
        raw = pd.read_csv(fh, compression="gzip")
    rows = raw.loc[(raw["Ticker"] == ticker) & (raw["Date"] <= end)]
    return pd.DataFrame(
        {
            "open": rows["Open"].to_numpy(dtype="float64"),
            "high": rows["High"].to_numpy(dtype="float64"),
            "low": rows["Low"].to_numpy(dtype="float64"),
            "close": rows["Close"].to_numpy(dtype="float64"),
            "adj_close": rows["Adj Close"].to_numpy(dtype="float64"),
            "volume": rows["Volume"].to_numpy(dtype="float64"),
        },
        index=pd.DatetimeIndex(pd.to_datetime(rows["Date"]), name="date"),
    )


@pytest.mark.parametrize("end", ["2005-03-15", "2007-12-27", "2013-03-01"])
def test_real_indicators_score_with_grounded_text(end: str) -> None:
    from agents.quant.indicators import compute_indicators

    ind = compute_indicators(bars=_bokeh_bars("AAPL", end))
    result = score_technical(indicators=ind, refs=REFS)

    _assert_numbers_are_inputs(result, ind)
    assert isinstance(ind["hv_20"], float)
    assert isinstance(ind["pct_from_52w_high"], float)
    assert ("HIGH_VOLATILITY" in _flags(result)) is (ind["hv_20"] > HIGH_VOLATILITY_HV)
    assert ("NEAR_52W_HIGH" in _flags(result)) is (ind["pct_from_52w_high"] >= NEAR_52W_HIGH_PCT)
    assert len(result.components) == len(WEIGHTS)
    # round-trips through JSON, as the pipeline stores it
    assert TechnicalScore.model_validate_json(result.model_dump_json()) == result


def test_the_collinear_trend_rules_vote_once_as_a_group() -> None:
    # all three trend rules bullish in a trending market (ADX 31), RSI and MACD bearish,
    # Bollinger neutral: as three independent rules the trend would outvote RSI and MACD
    indicators = {
        "rsi_14": 75.5,
        "macd": -0.5,
        "macd_signal": 0.25,
        "macd_hist": -0.75,
        "sma_50": 105.5,
        "sma_200": 98.25,
        "adx_14": 31.0,
        "close": 110.0,
        "bb_upper": 111.0,
        "bb_lower": 99.0,
    }
    result = score_technical(indicators=indicators, refs=REFS)
    votes = {c.name: c.vote for c in result.components}
    assert votes["price_vs_sma50"] == votes["price_vs_sma200"] == votes["sma_cross"] == 1.0
    trend_weight = sum(c.weight for c in result.components if c.name in TREND_GROUP)
    # the group weighs as much as one rule (RSI's weight), not three
    assert trend_weight == pytest.approx(WEIGHTS["rsi"])
    # (RSI -1 + MACD -1 + trend group +1 + Bollinger 0) / (1 + 1 + 1 + 0.5)
    assert result.score == pytest.approx(-1 / 3.5, abs=1e-4)
    assert result.signal == "SELL"
