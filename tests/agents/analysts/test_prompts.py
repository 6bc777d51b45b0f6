"""The synthesis prompt agrees with its schema: it never shows more scorer statements than the
answer may hold (a small model copies what it is shown), and the instructions say the same."""

from __future__ import annotations

import json

from agents.analysts.llm_agents import SYNTHESIS_INSTRUCTIONS, synthesis_context
from agents.analysts.models import SynthesisView
from agents.quant.scorer import score_technical

INDICATORS = {
    "rsi_14": 31.59,
    "macd": -15.6583,
    "macd_signal": -12.2943,
    "macd_hist": -3.364,
    "sma_50": 584.4551,
    "sma_200": 597.519,
    "adx_14": 33.31,
    "close": 509.794,
    "bb_upper": 606.5246,
    "bb_lower": 508.5181,
    "hv_20": 0.4363,
    "pct_from_52w_high": -0.28,
    "high_52w": 705.07,
}
QUOTE = {"current_price": 509.794, "change": -19.896, "change_percent": -0.037562, "volume": 36056400}


def test_the_prompt_shows_no_more_scorer_statements_than_the_schema_allows() -> None:
    score = score_technical(indicators=INDICATORS, quote=QUOTE, refs={"indicators": "t1", "quote": "q1"})
    rec = {**score.model_dump(mode="json"), "stop_loss": None, "risk_per_share": None}
    max_items = SynthesisView.model_json_schema()["properties"]["rationale"]["maxItems"]
    assert len(rec["rationale"]) > max_items  # the full rationale would not fit (9 > 8)

    context = synthesis_context(
        symbol="AAPL", as_of=None, user_query="AAPL", agents={}, deterministic_rec=rec
    )

    scorer = json.loads(context.split("Deterministic scorer: ", 1)[1].split("\n", 1)[0])
    assert 0 < len(scorer["rules"]) <= max_items == 6
    assert [r["rule"] for r in scorer["rules"]] == [c.name for c in score.components]
    assert "one to six rationale statements" in SYNTHESIS_INSTRUCTIONS
    assert "Latest quote" not in context and "Technical signal" not in context  # not restated twice


def test_the_synthesis_sees_the_refs_each_analysts_notes_were_checked_against() -> None:
    """A statement restating an analyst's note ("the previous close 186.18") can cite the
    output it came from: the answer's own refs first, then the outputs the analyst was shown."""
    agents = {
        "technical": {
            "source": "llm",
            "result": {
                "trend_direction": "up",
                "notes": "Close 183.88 is below the previous close 186.18.",
                "source_refs": ["t1"],
                "support_levels": [180.0],
            },
            "context_refs": ["t1", "q1", "", "h1"],
        },
        "sentiment": {"source": "skipped", "result": None, "context_refs": ["n1"]},
    }
    context = synthesis_context(
        symbol="AAPL", as_of=None, user_query="AAPL", agents=agents, deterministic_rec={"components": []}
    )
    shown = json.loads(context.split("Analysts: ", 1)[1].split("\n", 1)[0])
    assert shown["technical"]["source_refs"] == ["t1", "q1", "h1"]
    assert shown["technical"]["notes"].endswith("186.18.") and "support_levels" not in shown["technical"]
    assert shown["sentiment"] == {"source_refs": ["n1"]}
