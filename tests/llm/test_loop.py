"""The agentic loop and structured answers against the scripted server, with real tools."""

from __future__ import annotations

import json
from datetime import date

import pytest

from agents.analysts.models import TechnicalView
from agents.data.market.embedded import EmbeddedProvider
from agents.llm.config import LLMConfig, Role
from agents.llm.loop import StructuredFailure, extract_json, run_agentic_loop, structured_answer
from agents.llm.runner import run_sync
from agents.llm.session import LLMSession
from agents.tools.catalog import get_tool, run_tool
from agents.tools.registry import ToolContext
from core.settings import Settings
from tests.llm.server import ScriptedLLM, chat

VIEW = {
    "recommendation": "neutral",
    "trend_direction": "up",
    "trend_quality": "weak",
    "extension_risk": "low",
    "notes": "Six is the product.",
}


def _session(server: ScriptedLLM, **kw: object) -> LLMSession:
    config = LLMConfig(models={Role.TECHNICAL: "openai/m"}, api_base=server.url, api_key="k", **kw)  # type: ignore[arg-type]
    heartbeats: list[dict[str, object]] = []
    session = LLMSession(config=config, heartbeat=heartbeats.append)
    session.heartbeats = heartbeats  # type: ignore[attr-defined]
    return session


def _ctx() -> ToolContext:
    return ToolContext(settings=Settings(), as_of=date(2012, 6, 29), provider=EmbeddedProvider())


def _loop(session: LLMSession, ctx: ToolContext, *, max_iterations: int = 3):  # type: ignore[no-untyped-def]
    def executor(name: str, arguments: dict[str, object]) -> dict[str, object]:
        return run_tool(name=name, arguments=arguments, ctx=ctx).to_public()

    return run_sync(
        run_agentic_loop(
            session=session,
            agent="technical",
            role=Role.TECHNICAL,
            system_prompt="You are a technical (chart) analyst.",
            user_message="Analyze AAPL.",
            tools=[get_tool("calculator").openai_schema()],
            executor=executor,
            max_iterations=max_iterations,
        )
    )


def test_a_tool_call_runs_through_the_registry_then_the_final_json_is_parsed(llm_server: ScriptedLLM) -> None:
    llm_server.script(
        "m", [chat(tool_calls=[("calculator", {"expression": "2 * 3"})]), chat(json.dumps(VIEW))]
    )
    session, ctx = _session(llm_server), _ctx()

    result = _loop(session, ctx)
    view = run_sync(
        structured_answer(
            session=session, agent="technical", role=Role.TECHNICAL, result=result, model=TechnicalView
        )
    )

    assert result.tool_calls_made == 1 and result.llm_calls == 2 and view.trend_direction == "up"
    assert [row["tool"] for row in ctx.rows] == ["calculator"] and ctx.rows[0]["status"] == "success"
    tool_message = next(m for m in result.messages if m["role"] == "tool")
    assert json.loads(tool_message["content"])["data"]["result"] == 6
    assert llm_server.requests[0]["tools"][0]["function"]["name"] == "calculator"  # schema from pydantic
    assert len(session.rows) == 2 and len(session.heartbeats) == 3  # type: ignore[attr-defined]


def test_a_tool_error_goes_back_to_the_model_as_json(llm_server: ScriptedLLM) -> None:
    llm_server.script("m", [chat(tool_calls=[("calculator", {"expression": "1 / 0"})]), chat("{}")])
    session, ctx = _session(llm_server), _ctx()

    result = _loop(session, ctx)

    tool_message = json.loads(next(m for m in result.messages if m["role"] == "tool")["content"])
    assert tool_message["error"]["code"] == "INVALID_INPUT" and ctx.rows[0]["status"] == "error"
    assert llm_server.requests[1]["messages"][-1]["role"] == "tool"


def test_max_iterations_forces_a_final_answer_without_tools(llm_server: ScriptedLLM) -> None:
    always_tools = chat(tool_calls=[("calculator", {"expression": "1 + 1"})])
    llm_server.script("m", [always_tools, always_tools, chat(json.dumps(VIEW))])
    session, ctx = _session(llm_server), _ctx()

    result = _loop(session, ctx, max_iterations=2)

    assert result.llm_calls == 3 and result.tool_calls_made == 2
    assert (
        "tools" not in llm_server.requests[2]
        and "final answer" in llm_server.requests[2]["messages"][-1]["content"]
    )


def test_malformed_json_gets_one_repair_round_then_fails_loudly(llm_server: ScriptedLLM) -> None:
    llm_server.script("m", [chat('{"recommendation": "up"'), chat('{"recommendation": "sideways"}')])
    session = _session(llm_server)
    result = _loop(session, _ctx())

    with pytest.raises(StructuredFailure) as info:
        run_sync(
            structured_answer(
                session=session, agent="technical", role=Role.TECHNICAL, result=result, model=TechnicalView
            )
        )

    assert "after one repair round" in info.value.detail
    assert "Your answer is invalid" in llm_server.requests[1]["messages"][-1]["content"]
    assert [r["agent"] for r in session.rows] == ["technical", "technical.repair"]


def test_a_repair_that_fixes_the_answer_is_accepted(llm_server: ScriptedLLM) -> None:
    llm_server.script("m", [chat("not json at all"), chat(json.dumps(VIEW))])
    session = _session(llm_server)
    result = _loop(session, _ctx())
    view = run_sync(
        structured_answer(
            session=session, agent="technical", role=Role.TECHNICAL, result=result, model=TechnicalView
        )
    )
    assert view.notes == VIEW["notes"]


def test_extract_json_reads_plain_fenced_and_embedded_objects() -> None:
    assert extract_json('{"a": 1}') == {"a": 1}
    assert extract_json('Here:\n```json\n{"a": 2}\n```') == {"a": 2}
    assert extract_json('The answer is {"a": 3}.') == {"a": 3}
    with pytest.raises(ValueError, match="expected a JSON object"):
        extract_json("[1, 2]")
