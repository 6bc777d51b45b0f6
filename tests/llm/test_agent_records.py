"""The analysts' records and how a stage applies them: analysts never see the pipeline state, so
the tool calls their models make and their failures come back as an ``AnalystOutcome`` and
``pipeline.stages.common.apply_outcome`` writes them to the state in call order."""

from __future__ import annotations

from datetime import date

import pytest

from agents.analysts.llm_agents import failure_of, make_executor
from agents.analysts.outcome import AnalystOutcome, ToolCallRecord
from agents.data.market.embedded import EmbeddedProvider
from agents.llm.loop import StructuredFailure
from agents.llm.session import BudgetExhaustedError, LLMError, TimeBudgetExhaustedError
from agents.tools.registry import ToolContext
from core.settings import Settings
from core.state import FinancialAgentState
from pipeline.stages.common import apply_outcome


@pytest.fixture
def ctx() -> ToolContext:
    return ToolContext(
        settings=Settings(), as_of=date(2013, 3, 1), provider=EmbeddedProvider(), stage="analysis"
    )


def test_failure_codes_and_message() -> None:
    cases = [
        (BudgetExhaustedError("spent", errors=[]), "LLM_BUDGET_EXHAUSTED"),
        (StructuredFailure("no JSON"), "LLM_INVALID_OUTPUT"),
        (LLMError("down", errors=["timeout"]), "LLM_ERROR"),
    ]
    for exc, code in cases:
        error = failure_of(agent="technical", exc=exc)
        assert error.code == code and not error.critical
        assert error.message.startswith("technical: ") and error.message.endswith(
            "; the deterministic result was used"
        )
    long = failure_of(agent="synthesis", exc=LLMError("x" * 5000, errors=[]))
    assert len(long.message) == len("synthesis: ") + 300 + len("; the deterministic result was used")
    timed = failure_of(agent="technical", exc=TimeBudgetExhaustedError("0.2 s left", errors=[]))
    assert timed.code == "LLM_TIME_BUDGET_EXHAUSTED"


def test_a_multi_line_repeated_provider_error_becomes_one_line() -> None:
    attempt = (
        "openai/m: InternalServerError: litellm.InternalServerError: OpenAIException - boom\n"
        "Traceback (most recent call last):\n  File x"
    )
    errors = [attempt, attempt, "openai/b: Timeout: litellm.Timeout: request timed out\ndetails"]
    exc = LLMError(f"synthesis: every model failed ({'; '.join(errors)})", errors=errors)
    error = failure_of(agent="synthesis", exc=exc, consequence="kept the scorer")
    assert error.message == (
        "synthesis: every model failed: openai/m: InternalServerError: litellm.InternalServerError: "
        "OpenAIException - boom (x2); openai/b: Timeout: litellm.Timeout: request timed out; kept the scorer"
    )
    assert error.message.endswith("; kept the scorer")


def test_the_executor_records_calls_and_the_stage_applies_them_in_order(ctx: ToolContext) -> None:
    calls: list[ToolCallRecord] = []
    execute = make_executor(ctx=ctx, allowed=["calculator"], calls=calls)

    ok = execute("calculator", {"expression": "2 * 3"})
    refused = execute("get_news", {"symbol": "AAPL"})
    failed = execute("calculator", {"expression": "10/0"})

    assert ok["data"]["result"] == 6.0 and "error" in failed
    assert refused["error"]["code"] == "INVALID_INPUT" and len(calls) == 2  # refused: nothing ran
    state = FinancialAgentState(analysis_id="a1", stock_symbol="AAPL", iteration=1)
    state.cite("get_history_000000000000")
    outcome = AnalystOutcome(
        value={"technical": {"source": "deterministic"}},
        tool_calls=tuple(calls),
        errors=(
            failure_of(agent="technical", exc=StructuredFailure("no JSON")),
            failure_of(agent="fundamental", exc=BudgetExhaustedError("spent", errors=[])),
        ),
    )

    assert apply_outcome(state, ctx=ctx, outcome=outcome) == {"technical": {"source": "deterministic"}}

    first, second = (c.envelope.tool_call_id for c in calls)
    assert [(h.tool_call_id, h.status, h.stage, h.iteration, h.attempts) for h in state.tool_history] == [
        (first, "success", "analysis", 1, 1),
        (second, "error", "analysis", 1, 1),
    ]
    assert state.tool_history[1].error_code == "INVALID_INPUT"
    assert state.source_refs == ["get_history_000000000000", first]  # a failed call is not cited
    assert [(e.code, e.stage, e.iteration, e.critical) for e in state.errors] == [
        ("LLM_INVALID_OUTPUT", "analysis", 1, False),
        ("LLM_BUDGET_EXHAUSTED", "analysis", 1, False),
    ]
