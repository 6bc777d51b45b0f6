"""FinancialAgentState: JSON round trip and validation at task boundaries."""

from __future__ import annotations

import json
from datetime import date

import pytest
from pydantic import ValidationError

from core.parts import AnalysisResult, Recommendation, ResearchBundle
from core.state import FinancialAgentState, StageError, Status, ToolHistoryEntry


def _state() -> FinancialAgentState:
    state = FinancialAgentState(
        analysis_id="a-1",
        stock_symbol="AAPL",
        user_query="Analyze AAPL",
        as_of=date(2013, 3, 1),
        messages=[{"role": "user", "content": "Analyze AAPL"}],
    )
    state.errors.append(StageError(stage="research", iteration=0, code="NO_DATA", message="empty"))
    state.tool_history.append(
        ToolHistoryEntry(
            tool_call_id="get_history_0123456789ab",
            tool="get_history",
            stage="research",
            iteration=0,
            status="success",
        )
    )
    state.stock_data = ResearchBundle(status="success", history_ref="get_history_0123456789ab")
    state.cite("get_history_0123456789ab", "get_history_0123456789ab", "get_stock_data_0123456789ab")
    return state


def test_round_trip_through_json_preserves_every_field() -> None:
    state = _state()
    wire = json.loads(json.dumps(state.to_message()))
    back = FinancialAgentState.from_message(wire)
    assert back == state
    assert wire["as_of"] == "2013-03-01"
    assert wire["status"] == "researching"


def test_cite_keeps_first_seen_order_without_duplicates() -> None:
    assert _state().source_refs == ["get_history_0123456789ab", "get_stock_data_0123456789ab"]


def test_advance_moves_to_the_next_stage_status_unless_the_analysis_ended() -> None:
    state = FinancialAgentState(analysis_id="a-2", stock_symbol="AAPL", status=Status.RESEARCHING)
    assert state.advance(stage="research") is state
    assert state.status is Status.ANALYZING
    state.advance(stage="recommendation")
    assert state.status is Status.REVIEWING
    state.advance(stage="review")  # the last stage: the end of the pass decides
    assert state.status is Status.REVIEWING
    state.status = Status.DONE  # a stage that ended the analysis keeps its status
    state.advance(stage="analysis")
    assert state.status is Status.DONE
    with pytest.raises(KeyError, match="unknown stage"):
        state.advance(stage="dreaming")


def test_seed_001_fields_and_defaults() -> None:
    state = FinancialAgentState(analysis_id="x", stock_symbol="MSFT")
    dumped = state.to_message()
    for key in (
        "messages",
        "stock_symbol",
        "user_query",
        "iteration",
        "max_iterations",
        "status",
        "errors",
        "tool_history",
    ):
        assert key in dumped
    assert dumped["iteration"] == 0
    assert dumped["max_iterations"] == 3
    assert {s.value for s in Status} == {
        "queued",
        "researching",
        "analyzing",
        "recommending",
        "reviewing",
        "done",
        "failed",
    }


@pytest.mark.parametrize(
    "payload",
    [
        {"analysis_id": "x"},  # no symbol
        {"analysis_id": "x", "stock_symbol": "AAPL", "status": "sleeping"},
        {"analysis_id": "x", "stock_symbol": "AAPL", "iteration": -1},
        {
            "analysis_id": "x",
            "stock_symbol": "AAPL",
            "bars": [1, 2, 3],
        },  # unknown field: no DataFrames in messages
    ],
)
def test_invalid_messages_are_refused(payload: dict) -> None:
    with pytest.raises(ValidationError):
        FinancialAgentState.from_message(payload)


def test_parts_dump_only_the_keys_a_stage_set() -> None:
    """A message carries the keys the stages wrote (explicit nulls included), no column of
    unset nulls, and a round trip gives back the same parts."""
    state = _state()
    state.recommendation = Recommendation(
        signal="HOLD", confidence=0.35, score=0.1, stop_loss=None, risk_per_share=None
    )
    state.analysis = AnalysisResult(
        technical={"close": 430.47}, technical_ref="technical_indicators_0123456789ab"
    )
    wire = json.loads(json.dumps(state.to_message()))
    assert wire["stock_data"] == {"status": "success", "history_ref": "get_history_0123456789ab"}
    assert wire["analysis"] == {
        "technical": {"close": 430.47},
        "technical_ref": "technical_indicators_0123456789ab",
    }
    assert wire["recommendation"] == {
        "signal": "HOLD",
        "confidence": 0.35,
        "score": 0.1,
        "stop_loss": None,
        "risk_per_share": None,
    }
    back = FinancialAgentState.from_message(wire)
    assert back.to_message() == state.to_message()
    assert back.recommendation is not None and back.recommendation.rationale == []


def test_a_row_written_before_the_parts_were_typed_loads() -> None:
    """A stored ``analyses.state`` of a finished LLM analysis (dict parts, a subset of the keys;
    its grounding without ``unknown_refs``) validates, and reads through attributes."""
    row = {
        "analysis_id": "x",
        "stock_symbol": "AAPL",
        "status": "done",
        "stock_data": {
            "status": "success",
            "quote": {"date": "2013-03-01", "current_price": 430.47, "pe_ratio": None},
            "quote_ref": "get_stock_data_0123456789ab",
            "history_ref": "get_history_0123456789ab",
            "history_check": {"symbol": "AAPL", "period": "2y", "interval": "1d", "digest": "ab12"},
            "bars": 504,
            "first_date": "2011-03-01",
            "last_date": "2013-03-01",
            "views": {"sentiment": {"label": "NEUTRAL", "count": 0}},
        },
        "analysis": {
            "technical": {"close": 430.47, "indicators": {"atr_14": 12.5}},
            "technical_ref": "technical_indicators_0123456789ab",
            "chart": {"fib": {"levels": {}}, "fib_ref": "calculate_fib_levels_0123456789ab"},
            "agents": {"technical": {"source": "llm", "model": "m", "result": {}}},
            "llm": {"calls": 3, "prompt_tokens": 10, "completion_tokens": 5, "cost_usd": None},
            "grounding": {"numbers_checked": 4, "unverified": []},
        },
        "recommendation": {
            "signal": "BUY",
            "confidence": 0.6,
            "score": 0.4,
            "components": [],
            "rationale": [{"text": "t", "source_refs": ["r"]}],
            "risk_flags": [],
            "stop_loss": {
                "value": 405.47,
                "expression": "e",
                "rule": "close - 2 x ATR(14)",
                "source_refs": ["c"],
            },
            "risk_per_share": None,
            "synthesis": {"source": "llm", "model": "m", "error": None},
            "deterministic": {"signal": "HOLD", "confidence": 0.3, "score": 0.1, "rationale": []},
            "risk_notes": ["n"],
            "author": {"kind": "llm", "model": "m"},
        },
    }
    state = FinancialAgentState.from_message(row)
    assert state.stock_data is not None and state.stock_data.history_check is not None
    assert state.stock_data.history_check.digest == "ab12"
    assert (
        state.analysis is not None and state.analysis.llm is not None and state.analysis.llm.cost_usd is None
    )
    assert state.recommendation is not None and state.recommendation.author is not None
    assert state.recommendation.author.model == "m"
    assert state.to_message()["recommendation"] == row["recommendation"]
    assert state.to_message()["analysis"] == row["analysis"]
    assert state.to_message()["stock_data"] == row["stock_data"]


@pytest.mark.parametrize(
    ("part", "payload"),
    [
        ("stock_data", {"status": "success", "histroy_ref": "x"}),  # a typo
        ("stock_data", {"status": "pending"}),
        ("analysis", {"technicals": {}}),
        ("recommendation", {"signal": "STRONG BUY", "confidence": 0.5, "score": 0.1}),
    ],
)
def test_unknown_keys_and_values_of_a_part_are_refused(part: str, payload: dict) -> None:
    with pytest.raises(ValidationError):
        FinancialAgentState.from_message({"analysis_id": "x", "stock_symbol": "AAPL", part: payload})


def test_assignments_to_a_part_are_validated() -> None:
    bundle = ResearchBundle(status="success")
    with pytest.raises(ValidationError):
        bundle.bars = "many"  # type: ignore[assignment]
