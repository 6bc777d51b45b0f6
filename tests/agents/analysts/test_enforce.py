"""Grounding that enforces (agents.analysts.enforce): statements with numbers no cited output
holds are found and dropped; an LLM signal stands only when its statements restate scorer rules
voting its way. Expected values are worked out by hand from the module docstring's rules."""

from __future__ import annotations

from typing import Any

from agents.analysts.enforce import (
    Sources,
    drop_unverified,
    restated_rules,
    signal_support,
    unverified_of,
)
from agents.analysts.grounding import ValueIndex, keyed_values, misattributed
from agents.analysts.llm_agents import correction_request
from agents.quant.scorer import score_technical

INDICATORS = {"rsi_14": 63.2149, "close": 437.5, "sma_50": 441.1234}

COMPONENTS: list[dict[str, Any]] = [
    {"name": "rsi", "values": {"rsi_14": 72.5}, "vote": -1.0, "weight": 1.0},
    {
        "name": "macd",
        "values": {"macd": -1.2, "macd_signal": -0.8, "macd_hist": -0.4},
        "vote": -1.0,
        "weight": 1.0,
    },
    {
        "name": "price_vs_sma50",
        "values": {"close": 430.4712, "sma_50": 441.2, "adx_14": 30.1},
        "vote": -1.0,
        "weight": 0.75,
    },
    {
        "name": "price_vs_sma200",
        "values": {"close": 430.4712, "sma_200": 400.0, "adx_14": 30.1},
        "vote": 1.0,
        "weight": 1.0,
    },
    {
        "name": "sma_cross",
        "values": {"sma_50": 441.2, "sma_200": 400.0, "adx_14": 30.1},
        "vote": 1.0,
        "weight": 1.0,
    },
    {
        "name": "bollinger",
        "values": {"close": 430.4712, "bb_upper": 450.0, "bb_lower": 420.0},
        "vote": 0.0,
        "weight": 0.5,
    },
]


def _sources(known: list[str] | None = None) -> Sources:
    return Sources(known=known or ["t1"], load=lambda ref: ValueIndex(INDICATORS))


def _names(text: str) -> list[str]:
    return [str(c["name"]) for c in restated_rules(text, COMPONENTS)]


def test_a_statement_restates_a_rule_only_with_the_values_that_identify_it() -> None:
    assert _names("Close 430.47 is below the fifty-day SMA") == []  # the close belongs to three rules
    assert _names("Close 430.47 is below the fifty-day SMA 441.20") == ["price_vs_sma50"]
    assert _names("RSI 72.5 is above seventy") == ["rsi"]
    assert _names("The MACD histogram is -0.4") == ["macd"]
    assert _names("ADX 30.1 says the trend is strong") == []  # ADX only scales trend votes
    assert _names("Close 430.47 sits inside the bands, from 420 to 450") == ["bollinger"]
    assert _names("Close 430.47 is above the two-hundred-day SMA 400 and below the fifty-day SMA 441.2") == [
        "price_vs_sma50",
        "price_vs_sma200",
        "sma_cross",
    ]


def test_the_issue_case_a_buy_with_only_bearish_statements_is_not_accepted() -> None:
    statements = [{"text": "Close 430.47 is below the fifty-day SMA 441.2.", "source_refs": ["t1"]}]
    check = signal_support(signal="BUY", statements=statements, components=COMPONENTS)
    # support = 0.75 x (-1) = -0.75
    assert (check.accepted, check.support, check.restated) == (False, -0.75, {"price_vs_sma50": -1.0})
    assert "vote bearish" in check.reason


def test_a_signal_needs_net_support_its_way_and_hold_needs_none() -> None:
    both = [
        {"text": "Close 430.47 is below the fifty-day SMA 441.2.", "source_refs": ["t1"]},
        {"text": "Close 430.47 is above the two-hundred-day SMA 400.", "source_refs": ["t1"]},
    ]
    # -0.75 (price vs SMA(50)) + 1.0 (price vs SMA(200)) = +0.25
    buy = signal_support(signal="BUY", statements=both, components=COMPONENTS)
    assert buy.accepted and buy.support == 0.25
    assert not signal_support(signal="SELL", statements=both, components=COMPONENTS).accepted
    invented = [{"text": "Fair value is 987.65 per share.", "source_refs": ["t1"]}]
    sell = signal_support(signal="SELL", statements=invented, components=COMPONENTS)
    assert not sell.accepted and sell.support == 0.0 and "no statement that restates" in sell.reason
    assert signal_support(signal="HOLD", statements=invented, components=COMPONENTS).accepted


def test_the_scorers_own_statements_support_its_own_signal() -> None:
    # RSI neutral, MACD and the trend group bullish, Bollinger bearish: a BUY with a dissenting rule
    indicators = {
        "rsi_14": 65.25,
        "macd": 2.5,
        "macd_signal": 1.75,
        "macd_hist": 0.75,
        "sma_50": 105.5,
        "sma_200": 98.25,
        "adx_14": 31.0,
        "close": 112.0,
        "bb_upper": 111.0,
        "bb_lower": 99.0,
    }
    score = score_technical(indicators=indicators, refs={"indicators": "t1"})
    components = [c.model_dump() for c in score.components]
    for comp in components:  # every rule statement restates its own rule
        assert comp["name"] in [c["name"] for c in restated_rules(comp["text"], components)]
    statements = [s.model_dump() for s in score.rationale]
    check = signal_support(signal=score.signal, statements=statements, components=components)
    assert (
        score.signal == "BUY" and check.accepted and set(check.restated) == set(c["name"] for c in components)
    )


def test_unverified_statements_are_dropped_and_listed_with_their_numbers() -> None:
    answer = {
        "recommendation": "neutral",
        "notes": "RSI(14) is 63.21. A target of 987.65 looks likely. Close 437.50 holds.",
        "support_levels": [437.5, 400.1],
        "missing_data": ["EPS 3.2 for the quarter", "news"],
        "confidence": 0.123,  # a judgement: never checked
        "source_refs": ["t1"],
    }

    kept, dropped = drop_unverified(answer, sources=_sources(), name="technical")

    assert kept["notes"] == "RSI(14) is 63.21. Close 437.50 holds."
    assert kept["support_levels"] == [437.5] and kept["missing_data"] == ["news"]
    assert kept["confidence"] == 0.123 and kept["source_refs"] == ["t1"]
    assert [(d.part, d.numbers) for d in dropped] == [
        ("technical.notes", ("987.65",)),
        ("technical.support_levels", ("400.1",)),
        ("technical.missing_data", ("3.2",)),
    ]


def test_a_rationale_statement_is_checked_against_its_own_known_citations_only() -> None:
    answer = {
        "signal": "HOLD",
        "rationale": [
            {"text": "RSI(14) is 63.21.", "source_refs": ["t1"]},
            {"text": "RSI(14) is 63.21 again.", "source_refs": ["unknown_ref"]},  # not a source
        ],
        "risks": [],
    }
    problems = unverified_of(answer, sources=_sources(), name="synthesis")
    # the known output that holds the number is named, so the correction round can cite it
    assert [(p.text, p.numbers) for p in problems] == [
        ("RSI(14) is 63.21 again.", ("63.21 (in t1, not cited)",))
    ]
    request = correction_request(problems)
    assert "63.21 (in t1, not cited) in 'RSI(14) is 63.21 again.'" in request
    assert "cite the tool_call_id named for a number" in request
    # a number no known output holds is listed bare
    answer["rationale"][1]["text"] = "RSI(14) is 63.22 again."
    problems = unverified_of(answer, sources=_sources(), name="synthesis")
    assert [p.numbers for p in problems] == [("63.22",)]


def test_a_calculator_result_counts_only_when_its_inputs_are_grounded() -> None:
    from agents.analysts.enforce import grounded_calculations

    calls = [
        ("calculator", "c1", {"expression": "437.5 - 2 * 63.2149", "result": 311.0702}),  # grounded
        ("calculator", "c2", {"expression": "987.65 * 1", "result": 987.65}),  # launders a number
        ("calculator", "c3", {"expression": "441.1234 / 100", "result": 4.411234}),  # small constant
        ("get_stock_data", "q9", {"current_price": 12.5}),  # a data tool always counts
    ]
    assert grounded_calculations(calls, sources=_sources()) == ["c1", "c3", "q9"]


# Attribution: a number read with a measure's name must be that measure's value. The outputs
# below are shaped like technical_indicators and get_stock_data results (keys at any depth).
TECHNICAL_OUTPUT = {
    "close": 23.01,
    "indicators": {"rsi_14": 41.2, "macd": -0.8923, "macd_signal": -0.7142, "adx_14": 9.89, "sma_50": 24.5},
}
QUOTE_OUTPUT = {"current_price": 23.01, "previous_close": 23.31, "52w_high": 31.58, "pe_ratio": 15.45}


def test_a_number_read_with_the_wrong_measure_is_misattributed() -> None:
    keyed = {**keyed_values(TECHNICAL_OUTPUT), **keyed_values(QUOTE_OUTPUT)}
    assert keyed["rsi_14"] == [41.2] and keyed["previous_close"] == [23.31]
    # the real 0.5B model's sentence: -0.8923 is the MACD, not the RSI
    assert misattributed("The RSI (Relative Strength Index) is at -0.8923, a downtrend.", keyed) == [
        "-0.8923 (not the RSI)"
    ]
    assert misattributed("The previous close was 23.01.", keyed) == ["23.01 (not the previous close)"]
    assert misattributed("The P/E ratio is 23.31.", keyed) == ["23.31 (not the P/E ratio)"]
    # right attributions, labels and the scorer's own phrasing pass
    for fine in (
        "RSI(14) is 41.2, between thirty and seventy.",
        "MACD line -0.8923 is below its signal line -0.7142 (histogram -0.1781) and below zero.",
        "MACD(12,26,9) is -0.8923 and ADX 9.89 is not above twenty-five.",
        "Close 23.01 is below the fifty-day SMA 24.5.",
        "The 52-week high is $31.58 and the previous close 23.31.",
        "The RSI and MACD signals are both above -0.7142.",  # the number is read with the nearer name
        "The close 23.01 sits under the RSI midline.",  # no number after the name
    ):
        assert misattributed(fine, keyed) == [], fine
    # a measure the cited outputs do not hold is not judged
    assert misattributed("The two-hundred-day SMA is 20.1.", keyed) == []
    # a number far from the name is not read with it
    far = "The RSI is not the point here, what matters most of all is the close of 23.01."
    assert misattributed(far, keyed) == []


def test_misattributed_numbers_are_dropped_like_unverified_ones() -> None:
    outputs = {"t1": TECHNICAL_OUTPUT, "q1": QUOTE_OUTPUT}
    sources = Sources(
        known=["t1", "q1"],
        load=lambda ref: ValueIndex(outputs[ref]),
        load_keys=lambda ref: keyed_values(outputs[ref]),
    )
    answer = {
        "recommendation": "bearish",
        "notes": "The RSI is at -0.8923, indicating a downtrend. "
        "Close 23.01 is below the fifty-day SMA 24.5.",
        "source_refs": ["t1", "q1"],
    }
    kept, dropped = drop_unverified(answer, sources=sources, name="technical")
    assert kept["notes"] == "Close 23.01 is below the fifty-day SMA 24.5."
    assert [d.to_json() for d in dropped] == [
        {
            "part": "technical.notes",
            "text": "The RSI is at -0.8923, indicating a downtrend.",
            "numbers": ["-0.8923 (not the RSI)"],
        }
    ]
    # a synthesis statement is checked against the outputs it cites
    statements = [{"text": "RSI 24.5 is between thirty and seventy: no vote.", "source_refs": ["t1"]}]
    problems = unverified_of({"signal": "HOLD", "rationale": statements}, sources=sources, name="synthesis")
    assert [d.numbers for d in problems] == [("24.5 (not the RSI)",)]
    # without load_keys (values only) the same sentence passes: -0.8923 is a value of t1
    plain = Sources(known=["t1"], load=lambda ref: ValueIndex(outputs[ref]))
    assert unverified_of(answer, sources=plain, name="technical") == []


def test_an_llm_copy_of_the_rounded_rationale_stands_and_a_wrong_number_is_dropped() -> None:
    # the scorer's statements print numbers as the report's tables (to the cent, "%" after a
    # space); an LLM answer that copies them is grounded like any other text
    indicators = {"macd": -12.0917, "macd_signal": -11.5845, "macd_hist": -0.5072, "sma_50": 483.1986}
    technical = {"close": 430.47, "indicators": indicators}
    quote = {"current_price": 430.47, "change": -10.93, "change_percent": -0.024762, "volume": 19730300}
    outputs = {"t1": technical, "q1": quote}
    sources = Sources(
        known=["t1", "q1"],
        load=lambda ref: ValueIndex(outputs[ref]),
        load_keys=lambda ref: keyed_values(outputs[ref]),
    )
    scorer_text = score_technical(
        indicators={**indicators, "close": 430.47},
        quote=quote,
        refs={"indicators": "t1", "quote": "q1"},
    ).rationale
    copied = " ".join(s.text for s in scorer_text if s.text.startswith(("MACD", "Close", "Latest")))
    assert "483.20" in copied and "-2.48 %" in copied and "19,730,300" in copied
    kept, dropped = drop_unverified(
        {"recommendation": "bearish", "notes": copied, "source_refs": ["t1", "q1"]},
        sources=sources,
        name="technical",
    )
    assert dropped == [] and kept["notes"] == copied
    wrong = "Close 430.47 is below the fifty-day SMA 483.25. The change was -2.48 %, on 19,730,300 shares."
    kept, dropped = drop_unverified(
        {"recommendation": "bearish", "notes": wrong, "source_refs": ["t1", "q1"]},
        sources=sources,
        name="technical",
    )
    assert kept["notes"] == "The change was -2.48 %, on 19,730,300 shares."
    assert [d.to_json() for d in dropped] == [
        {
            "part": "technical.notes",
            "text": "Close 430.47 is below the fifty-day SMA 483.25.",
            "numbers": ["483.25"],
        }
    ]
