"""FinancialAgentState: JSON round trip and validation at task boundaries."""

from __future__ import annotations

import json
from datetime import date

import pytest
from pydantic import ValidationError

from pipeline.core.state import FinancialAgentState, StageError, Status, ToolHistoryEntry


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
    state.stock_data = {"status": "success", "history_ref": "get_history_0123456789ab"}
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
