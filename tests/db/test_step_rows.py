"""What a step's end writes, prepared before its statement: ``db.attempt_rows.step_rows`` (the
rows of a step and of a retry) and ``db.state_refs.pack_row`` (the state and its JSON report as
one row stores them). No database."""

from __future__ import annotations

from typing import Any

from db import state_refs
from db.attempt_rows import BLOBS_KEY, step_rows


def _tool(attempt: int = 1, **extra: Any) -> dict[str, Any]:
    return {
        "tool_call_id": "t-1",
        "stage": "research",
        "tool": "get_stock_data",
        "status": "success",
        "attempt": attempt,
        "latency_ms": 3,
        **extra,
    }


def _llm(row_id: str) -> dict[str, Any]:
    return {
        "id": row_id,
        "llm_call_id": "l-1",
        "stage": "analysis",
        "agent": "bull",
        "iteration": 0,
        "model": "m",
        "status": "success",
        "attempt": 1,
        "latency_ms": 5,
    }


def test_step_rows_keeps_one_row_per_id_redacted_and_tagged_with_the_analysis() -> None:
    rows = step_rows(
        [_tool(arguments={"api_key": "abc"}), _tool(arguments={"api_key": "other"}), _tool(attempt=2)],
        [_llm("l-1#1"), _llm("l-1#1")],
        analysis_id="a-1",
        iteration=3,
    )
    assert [r["id"] for r in rows.tools] == ["t-1#1", "t-1#2"]  # the first row of an id wins
    assert rows.tools[0]["arguments"] == {"api_key": "***"}
    assert {(r["analysis_id"], r["iteration"]) for r in rows.tools} == {("a-1", 3)}
    assert [r["id"] for r in rows.llms] == ["l-1#1"] and rows.llms[0]["analysis_id"] == "a-1"
    assert rows.pieces == [] and all(BLOBS_KEY not in r for r in rows.tools)


def test_step_rows_params_name_only_the_lists_that_hold_rows() -> None:
    assert step_rows([], []).params() == {}
    assert set(step_rows([_tool()], []).params()) == {"p_tools"}
    assert set(step_rows([], [_llm("l-1#1")]).params()) == {"p_llms"}


def test_pack_row_packs_the_state_then_the_report_against_that_stored_state() -> None:
    quote = {"symbol": "AAPL", "price": 187.25, "history": list(range(40))}
    rationale = {"text": "x" * 120}
    state = {"stock_data": {"quote": quote}, "rationale": rationale, "note": "kept"}
    report = {"quote": {"stock_data": {"quote": quote}}, "why": rationale, "headline": "h"}
    stored, packed = state_refs.pack_row(state, report, {"t-1": quote})
    assert stored["stock_data"] == {"quote": {state_refs.MARKER: ["t-1"]}}
    assert stored["rationale"] == rationale and stored["note"] == "kept"
    # the report is compared with the state AS STORED: its copy of the rationale (inline there)
    # becomes a reference to the state; its copy of the quote (a reference there) matches
    # nothing and stays inline
    assert packed == {
        "quote": report["quote"],
        "why": {state_refs.MARKER: [state_refs.STATE, "rationale"]},
        "headline": "h",
    }
    assert state_refs.pack_row(state, None, {"t-1": quote})[1] is None
    assert state_refs.unpack(stored, {"t-1": quote}) == state
